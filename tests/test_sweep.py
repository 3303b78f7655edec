"""`planner.sweep` and `planner sweep`: order, JSON keys, the end-of-linear-scaling interpolation, CSV, plots.

Real sweeps stay at 1e21-1e23 FLOP on h100, where each CP-SAT plan takes well under a second.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import sys

import pytest
from cli_helpers import invoke

from planner.errors import InvalidInput
from planner.hardware import get_hardware
from planner.render.sweep import write_csv, write_plots
from planner.schema import Plan
from planner.sweep import SweepResult, compute_grid, crossing_below, non_increasing_fit, summarise, sweep


@pytest.fixture(scope="module")
def small() -> SweepResult:
    return sweep(["h100"], 1e21, 1e23, 3, days=90.0, time_limit_s=20.0, jobs=1)


def test_grid_is_log_spaced_and_inclusive():
    assert compute_grid(1e21, 1e23, 3) == [1e21, 1e22, 1e23]
    assert compute_grid(1e24, 1e24, 1) == [1e24]
    g = compute_grid(1e24, 1e32, 30)
    assert len(g) == 30 and g[0] == 1e24 and g[-1] == 1e32
    assert all(b > a for a, b in itertools.pairwise(g))


@pytest.mark.parametrize("args", [(0, 1e22, 3), (1e22, math.inf, 3), (1e23, 1e22, 3), (1e21, 1e22, 0),
                                  (1e21, 1e22, 1)])
def test_grid_rejects_bad_input(args):
    with pytest.raises(InvalidInput):
        compute_grid(*args)


def test_small_sweep_in_order_with_required_keys(small):
    assert small.compute_flop == [1e21, 1e22, 1e23]
    assert [p.workload.requested_compute_flop for p in small.plans] == [1e21, 1e22, 1e23]
    assert all(p.hardware == "h100" and p.status == "optimal" for p in small.plans)
    doc = json.loads(small.model_dump_json())
    for key in ("plans", "end_of_linear_scaling_flop", "last_feasible_flop"):
        assert key in doc
    assert doc["last_feasible_flop"] == {"h100": 1e23}
    assert doc["end_of_linear_scaling_flop"] == {"h100": None}  # a single GPU's MFU, far from the 80 % line
    for key in ("status", "gpus", "nodes", "mfu", "training_days", "step_time_s", "hardware", "workload", "layout",
                "breakdown", "memory", "solver"):
        assert key in doc["plans"][0]


def test_crossing_interpolates_in_log_compute():
    xs = [1e26, 1e27, 1e28, 1e29]
    ys = [0.70, 0.66, 0.46, 0.20]
    # threshold 0.56 is half way from 0.66 to 0.46, so half way in log10 between 1e27 and 1e28: 10^27.5
    assert crossing_below(xs, ys, 0.56) == pytest.approx(10 ** 27.5, rel=1e-12)
    # 0.61: a quarter of the way -> 10^27.25
    assert crossing_below(xs, ys, 0.61) == pytest.approx(10 ** 27.25, rel=1e-12)
    assert crossing_below(xs, ys, 0.1) is None
    assert crossing_below(xs, ys, 0.9) == 1e26  # already below at the first point


def test_non_increasing_fit_by_hand():
    # pool-adjacent-violators: 0.50 < 0.68 pools to 0.59; 0.59 < 0.60 pools the three to (0.50+0.68+0.60)/3
    assert non_increasing_fit([0.70, 0.50, 0.68, 0.60, 0.40]) == pytest.approx([0.70, 0.5933333, 0.5933333,
                                                                                0.5933333, 0.40], abs=1e-7)
    assert non_increasing_fit([0.9, 0.8, 0.7]) == [0.9, 0.8, 0.7]  # already non-increasing: unchanged
    assert non_increasing_fit([0.1, 0.3]) == pytest.approx([0.2, 0.2])


def _fake(mfu: float | None, compute: float, template: Plan) -> Plan:
    if mfu is None:
        return template.model_copy(update={"status": "infeasible", "mfu": None})
    return template.model_copy(update={"mfu": mfu})


def test_summary_end_and_last_feasible_on_synthetic_mfu(small):
    hw = get_hardware("h100")  # ceiling 0.70, threshold 0.56
    grid = [1e27, 1e28, 1e29, 1e30]
    tpl = small.plans[0]
    plans = [_fake(0.70, 1e27, tpl), _fake(0.60, 1e28, tpl), _fake(0.40, 1e29, tpl), _fake(None, 1e30, tpl)]
    s = summarise(hw, grid, plans)
    assert s.threshold_mfu == pytest.approx(0.56)
    # 0.60 -> 0.40 crosses 0.56 a fifth of the way: 10^(28 + 0.2)
    assert s.end_of_linear_scaling_flop == pytest.approx(10 ** 28.2, rel=1e-9)
    assert s.last_feasible_flop == 1e29
    assert s.feasible_points == 3 and s.infeasible_points == 1
    assert s.first_dip_flop is None

    # a dip at 1e28 that recovers at 1e29: the fit pools 0.50 and 0.66 to 0.58 (above 0.56), so the trend crosses
    # between 1e29 (0.58) and 1e30 (0.46), a sixth of the way in log10; the raw dip is reported apart
    grid = [1e27, 1e28, 1e29, 1e30]
    plans = [_fake(0.70, 1e27, tpl), _fake(0.50, 1e28, tpl), _fake(0.66, 1e29, tpl), _fake(0.46, 1e30, tpl)]
    s = summarise(hw, grid, plans)
    assert s.end_of_linear_scaling_flop == pytest.approx(10 ** (29 + 1 / 6), rel=1e-9)
    assert s.first_dip_flop == pytest.approx(10 ** 27.7, rel=1e-9)  # 0.70 -> 0.50 crosses 0.56 at 0.7 of the way
    assert any("first dip" in n for n in s.notes)


def test_csv_and_plots_written(small, tmp_path):
    path = tmp_path / "s.csv"
    write_csv(small, path)
    rows = list(csv.DictReader(path.open()))
    assert [float(r["requested_compute_flop"]) for r in rows] == [1e21, 1e22, 1e23]
    assert {"mfu", "gpus", "dp", "tp_ff", "tp_model", "pp", "ep", "schedule", "status"} <= set(rows[0])
    files = write_plots(small, tmp_path / "fig")
    assert [f.name for f in files] == ["fig-mfu.png", "fig-parallelism-h100.png"]
    for f in files:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.stat().st_size > 10_000


def test_cli_sweep_json_and_errors(capsys):
    code, out, err = invoke(capsys, ["sweep", "--gpu", "h100", "--from", "1e21", "--to", "1e21", "--points", "1",
                                     "--jobs", "1", "--json"])
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert set(doc["end_of_linear_scaling_flop"]) == {"h100"} and doc["last_feasible_flop"]["h100"] == 1e21
    code, _, err = invoke(capsys, ["sweep", "--from", "-1"])
    assert code == 2 and err.startswith("error: --from")
    code, _, err = invoke(capsys, ["sweep", "--gpu", "nope"])
    assert code == 2 and "nope" in err


def test_cli_sweep_checks_output_paths_before_solving(capsys, monkeypatch, tmp_path):
    import planner.sweep

    def no_solving(*args, **kwargs):
        raise AssertionError("the sweep ran before its output paths were checked")

    monkeypatch.setattr(planner.sweep, "sweep", no_solving)  # the command imports it when it runs
    missing = tmp_path / "missing-dir"
    for argv, flag in ((["--csv", str(missing / "s.csv")], "--csv"), (["--plot", str(missing / "fig")], "--plot")):
        code, _, err = invoke(capsys, ["sweep", "--points", "30", *argv])
        assert code == 2 and err.startswith(f"error: {flag} ") and "does not exist" in err


def test_cli_sweep_dp_overlap_and_price_reach_every_plan(capsys, tmp_path):
    path = tmp_path / "s.csv"
    code, out, err = invoke(capsys, ["sweep", "--gpu", "h100", "--from", "1e22", "--to", "1e22", "--points", "1",
                                     "--jobs", "1", "--dp-overlap", "--price-per-gpu-hour", "2.5", "--json",
                                     "--csv", str(path)])
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["dp_overlap"] is True and doc["price_per_gpu_hour"] == 2.5
    (p,) = doc["plans"]
    assert p["dp_overlap"] is True
    # Cost by hand: GPUs x hours of training x USD per GPU-hour.
    assert p["cost_usd"] == pytest.approx(p["gpus"] * p["training_days"] * 24.0 * 2.5, rel=1e-12)
    (row,) = list(csv.DictReader(path.open()))
    assert float(row["cost_usd"]) == pytest.approx(p["cost_usd"], rel=1e-12)
    # The same point planned directly with DP overlapped gives the same plan.
    from planner import api

    direct = api.plan(1e22, "h100", 90.0, dp_overlap=True, time_limit_s=20.0)
    assert (direct.gpus, direct.step_time_s) == (p["gpus"], p["step_time_s"])
    code, _, err = invoke(capsys, ["sweep", "--points", "2", "--price-per-gpu-hour", "0"])
    assert code == 2 and err.startswith("error: --price-per-gpu-hour")


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc for the workers' parent")
def test_workers_exit_when_the_sweep_is_killed():
    """A caller's timeout sends SIGKILL, which the sweep cannot catch: its worker processes must not live on."""
    import os
    import signal
    import subprocess
    import time
    from pathlib import Path

    planner_exe = Path(sys.executable).with_name("planner")
    cmd = [str(planner_exe)] if planner_exe.exists() else [sys.executable, "-c", "from planner.cli import main; main()"]
    proc = subprocess.Popen(cmd + ["sweep", "--gpu", "h100", "--from", "1e24", "--to", "1e32", "--points", "80",
                                   "--jobs", "2", "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def children() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == proc.pid:
                    found.append(int(entry.name))
        return found

    deadline = time.monotonic() + 30
    while len(children()) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    workers = children()
    assert proc.poll() is None and len(workers) >= 2, "the sweep ended or never started its workers"
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    def alive(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    deadline = time.monotonic() + 15
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [p for p in workers if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"worker processes {left} outlived the killed sweep"


def test_ceiling_is_the_profiles_large_gemm_share():
    """The curve's ceiling is what the cost model grants one GPU's large GEMMs (planner.cost.terms): the paper's
    roofline runs them at the sustained clock; the realistic profile at its measured large-GEMM fraction times its
    sustained factor (profiles/realistic.toml: H100 0.801 x 0.80)."""
    from planner.hardware import with_profile

    paper = get_hardware("h100")
    s = summarise(paper, [], [])
    assert s.ceiling_mfu == paper.gpu.sustained_clock_factor == 0.70
    real = with_profile(paper, "realistic")
    s = summarise(real, [], [])
    assert s.ceiling_mfu == pytest.approx(0.801 * 0.80, rel=1e-12)
    assert s.threshold_mfu == pytest.approx(0.8 * 0.801 * 0.80, rel=1e-12)
