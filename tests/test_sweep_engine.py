"""Sweeps and --sensitivity on the study engine (issue 27 part 3): `planner.workers.execute` / `map_tasks` plan a
sweep's grid and the sensitivity re-plans; the answers are those of a direct `api.plan` per point, in order, and a
sweep killed midway (SIGKILL) resumes without losing a finished point. The Ray runs are in tests/test_study_ray.py.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import BIN, invoke, journal_ids

from planner import api
from planner import study as st
from planner.errors import Infeasible, InvalidInput
from planner.schema.request import PlanRequest
from planner.sweep import compute_grid, point_id, sweep


def _direct(gpu: str, compute: float, days: float):
    """The plan of one grid point, by api.plan here (no engine, no worker): the reference for the sweep's rows."""
    request = PlanRequest(compute_flop=compute, gpu=gpu, days=days, workers=1, why_smaller=False, dp_overlap=False,
                          time_limit_s=30.0)
    try:
        return api.plan(request)
    except Infeasible as exc:
        return exc.plan


def test_sweep_on_the_engine_matches_a_direct_plan_per_point():
    grid = compute_grid(1e20, 1e22, 3)
    res = sweep(["h100", "a100"], 1e20, 1e22, 3, days=30, jobs=2)
    assert [(p.hardware, p.workload.requested_compute_flop) for p in res.plans] == [
        (g, c) for g in ("h100", "a100") for c in grid]  # hardware-major, compute ascending, whatever finished first
    for p in res.plans:
        q = _direct(p.hardware, p.workload.requested_compute_flop, 30)
        assert (p.status, p.gpus, p.mfu, p.step_time_s, p.wall_clock_days) == (
            q.status, q.gpus, q.mfu, q.step_time_s, q.wall_clock_days)
        assert st.outcome_of(p).layout == st.outcome_of(q).layout


def test_map_tasks_keeps_the_order_and_reports_each_item_once():
    items = [float(k * k) for k in range(9)]
    seen: list[int] = []
    got = st.map_tasks(math.sqrt, items, jobs=2, finished=lambda k, _v: seen.append(k))
    assert got == [float(k) for k in range(9)]  # sqrt of k^2, by hand
    assert sorted(seen) == list(range(9))
    assert st.map_tasks(math.sqrt, [], jobs=2) == []
    with pytest.raises(InvalidInput, match="--jobs"):
        st.map_tasks(math.sqrt, items, jobs=0)


def test_sensitivity_moves_run_on_the_engine_as_here():
    """The scheduling side (run_moves) gives what the per-move work (_replan) gives in this process, in order."""
    from planner.sensitivity import _replan, run_moves

    base = PlanRequest(compute_flop=1e21, gpu="h100", days=30, workers=1, why_smaller=False)
    tasks = [(base.model_copy(update={"overrides": (s,)}), None, None, None)
             for s in ("gpu.hbm_GB=40", "levels.*.lat_us=20", "gpu.hbm_GB=160")]
    assert run_moves(tasks, jobs=2) == [_replan(t) for t in tasks]


def test_sensitivity_starts_workers_only_when_the_searches_outlast_them(monkeypatch):
    """default_jobs, by hand with WORKER_START_S = 1.5 s on 4 cores: 5 searching tasks of 0.2 s each are 1.0 s alone,
    0.75 s won back by 3 more cores: here; 10 of 1.0 s are 10 s, 7.5 s won back: every core. A task with a skip
    proof (its third item) counts for nothing; without the plan's search time, every core (the old default)."""
    from planner import sensitivity as sens

    monkeypatch.setattr(sens.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(sens, "WORKER_START_S", 1.5)
    searching, proven = (None, None, None, None), (None, None, object(), None)
    assert sens.default_jobs([searching] * 5 + [proven] * 30, 0.2) == 1
    assert sens.default_jobs([searching] * 10, 1.0) == 4
    assert sens.default_jobs([proven] * 40, 1.0) == 1
    assert sens.default_jobs([searching] * 2, None) == 4
    monkeypatch.setattr(sens.os, "cpu_count", lambda: 1)
    assert sens.default_jobs([searching] * 10, 1.0) == 1



@pytest.mark.slow
def test_killed_sweep_resumes_without_losing_a_finished_point(tmp_path, capsys):
    """SIGKILL (no handler runs) midway, then --resume: every point journalled before the kill is kept as it was and
    not planned again; the journal ends with every point exactly once."""
    csv = tmp_path / "s.csv"
    journal = Path(str(csv) + ".plans.jsonl")
    args = ["sweep", "--from", "1e19", "--to", "1e23", "--points", "12", "--csv", str(csv), "--quiet"]
    proc = subprocess.Popen([str(BIN / "planner"), *args, "--jobs", "1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while len(journal_ids(journal)) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lines = journal.read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "planner-study-journal"  # the study journal's header
    before = [line for line in lines[1:] if line.endswith("}")]
    assert 3 <= len(before) < 12
    code, _, err = invoke(capsys, [*args, "--jobs", "2", "--resume"])
    assert code == 0, err
    assert f"{len(before)} finished point(s) kept" in err and f"solving the other {12 - len(before)}" in err
    after = journal.read_text().splitlines()
    assert after[1:len(before) + 1] == before  # kept as it was
    ids = journal_ids(journal)
    assert len(ids) == len(set(ids)) == 12  # nothing planned twice, nothing missing
    settings = json.loads(lines[0])["settings"]
    assert set(ids) == {point_id("h100", c, settings) for c in compute_grid(1e19, 1e23, 12)}
    assert csv.read_text().count("\n") == 13


def test_ray_flag_needs_sensitivity_and_checks_the_address(capsys):
    from planner.cli import plan_app

    code, _, err = invoke(capsys, ["--compute", "1e21", "--ray", "local"], plan_app, "plan")
    assert code == 2 and "add --sensitivity" in err and "Traceback" not in err
    code, _, err = invoke(capsys, ["sweep", "--from", "1e20", "--to", "1e21", "--points", "2", "--ray", "nohost"])
    import importlib.util

    # without the optional extra the flag says how to install it; with it, the bad address is named
    want = "--ray 'nohost'" if importlib.util.find_spec("ray") is not None else "pip install 'planner[ray]'"
    assert code == 2 and want in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
