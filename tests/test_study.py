"""`planner study` (issue 27 parts 3-4): a study file's scenarios in a stated order, rows that are the same bytes
whatever planned them, a journal that loses nothing finished when the study is killed, hostile input refused in one
line. The Ray engine's tests are marked `ray` (tests/test_study_ray.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import invoke, journal_ids

from planner import study as st
from planner.errors import InvalidInput
from planner.render.study import csv_text
from planner.schema.request import PlanRequest
from planner.schema.study import MAX_SCENARIOS

GRID = """
[study]
name = "order"

[base]
days = 3

[grid]
gpu = ["h100", "a100"]
compute_flop = [1e18, 1e19, 1e20]
set = [[], ["gpu.hbm_GB=40"]]
"""


def write(tmp_path: Path, text: str, name: str = "study.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def run_rows(scenarios, jobs: int = 1, **kw) -> str:
    results: dict[str, dict] = {}
    st.run(scenarios, lambda b: results.update(b), jobs=jobs, **kw)
    return csv_text([st.row(sc, results[sc.id]) for sc in scenarios], st.columns(scenarios))


def test_grid_expands_in_file_order_first_field_slowest(tmp_path):
    scenarios = st.expand(st.load_study(write(tmp_path, GRID)))
    # 2 x 3 x 2 = 12, written out by hand: gpu slowest, then compute, then set
    want = [(g, c, s) for g in ("h100", "a100") for c in (1e18, 1e19, 1e20) for s in ("[]", '["gpu.hbm_GB=40"]')]
    assert len(scenarios) == 12
    assert [tuple(v for _, v in sc.inputs) for sc in scenarios] == want
    assert [sc.index for sc in scenarios] == list(range(12))
    first, second = scenarios[0].request, scenarios[1].request
    assert (first.gpu, first.compute_flop, first.days, first.overrides, first.workers) == ("h100", 1e18, 3.0, (), 1)
    assert second.overrides == ("gpu.hbm_GB=40",)
    assert scenarios[0].inputs[0][0] == "in_gpu" and st.columns(scenarios)[:6] == [
        "scenario", "id", "in_gpu", "in_compute_flop", "in_set", "status"]


def test_ids_are_stable_hashes_of_the_request(tmp_path):
    scenarios = st.expand(st.load_study(write(tmp_path, GRID)))
    assert len({sc.id for sc in scenarios}) == 12 and all(len(sc.id) == 16 for sc in scenarios)
    # the same request spelt another way (keyword order, an int for a float) has the same id
    r = PlanRequest(workers=1, why_smaller=False, overrides=[], compute_flop=1e18, days=3, gpu="h100")
    assert st.scenario_id(r) == scenarios[0].id
    assert st.scenario_id(r.model_copy(update={"days": 4})) != scenarios[0].id


def test_base_set_comes_before_the_grids(tmp_path):
    text = GRID.replace("days = 3", 'days = 3\nset = ["profile.overlap.tp=0.5"]')
    sc = st.expand(st.load_study(write(tmp_path, text)))[1]
    assert sc.request.overrides == ("profile.overlap.tp=0.5", "gpu.hbm_GB=40")


def test_sample_is_seeded_spread_and_in_range(tmp_path):
    text = """
[study]
name = "s"
mode = "sample"
seed = 7

[sample]
n = 64
compute_flop = {min = 1e18, max = 1e22, scale = "log"}
days = {min = 1, max = 30}
gpu = ["h100", "a100", "b200"]
"""
    a = st.expand(st.load_study(write(tmp_path, text)))
    b = st.expand(st.load_study(write(tmp_path, text, "again.toml")))
    c = st.expand(st.load_study(write(tmp_path, text.replace("seed = 7", "seed = 8"), "other.toml")))
    assert [s.id for s in a] == [s.id for s in b] and [s.id for s in a] != [s.id for s in c]
    assert len(a) == 64
    computes = [s.request.compute_flop for s in a]
    assert all(1e18 <= x <= 1e22 for x in computes)
    # low discrepancy: each of the 4 decades of compute and each GPU gets a quarter / a third, give or take 2
    decades = [sum(10 ** (18 + k) <= x < 10 ** (19 + k) for x in computes) for k in range(4)]
    assert all(abs(n - 16) <= 2 for n in decades), decades
    gpus = [s.request.gpu for s in a]
    assert all(abs(gpus.count(g) - 64 / 3) <= 2 for g in ("h100", "a100", "b200"))
    assert all(1 <= s.request.days <= 30 for s in a)


def test_halton_first_points_by_hand():
    """Base 2 and 3 radical inverses of 1, 2, 3: (1/2, 1/3), (1/4, 2/3), (3/4, 1/9), then shifted by the seed's
    offset modulo 1."""
    import numpy as np

    shift = np.random.default_rng(0).random(2)
    got = st.scrambled_halton(3, 2, 0)
    for row, (x, y) in zip(got, [(1 / 2, 1 / 3), (1 / 4, 2 / 3), (3 / 4, 1 / 9)]):
        assert row == pytest.approx([(x + shift[0]) % 1, (y + shift[1]) % 1], abs=1e-15)


@pytest.mark.parametrize("text, words", [
    ('[study]\nname = "x"\n[grid]\ngpu_name = ["h100"]', "unknown field 'gpu_name' (did you mean 'gpu'?)"),
    ('[study]\nname = "x"\n[grid]\nworkers = [1, 2]', "workers = 1"),
    ('[study]\nname = "x"\n[grid]\nconfidence = [1.5]', "(confidence=1.5): --confidence must be a probability"),
    ('[study]\nname = "x"\n[base]\ncompute_flop = 1e18\ngpus = 8\n[grid]\nconfidence = [0.9]', "drop --gpus"),
    ('[study]\nname = "x"\n[grid]\ndays = []', "list 1 to"),
    ('[study]\nname = "x"\n[grid]\ndays = [1, 1]', "lists 1 twice"),
    ('[study]\nname = "x"\n[grid]\ndays = [1, 1.0]', "same request"),
    ('[study]\nname = "x"\n[base]\ndays = 2\n[grid]\ndays = [1]', "both in [base] and varied"),
    ('[study]\nname = "x"\nmode = "sample"', "give a [sample] table"),
    ('[study]\nname = "x"\n[grid]\ndays = [-1]', "--days must be a positive finite number"),
    ('[study]\nname = "a\\u0007b"', "control character"),
    ('[study]\nname = "x"\nmode = "sample"\n[sample]\nn = 1000000', "100000"),
    ('[study]\nname = "x"\nmode = "sample"\n[sample]\nn = 2\ndays = {min = 5, max = 1}', "below its min"),
    ('[study]\nname = "x"\n[grid]\ngpu = ["h100", "nosuchgpu"]', "scenario 2 (gpu=nosuchgpu)"),
    ('[study]\nname = "x"\n[grid]\nset = [["gpu.bogus=1"]]', "scenario 1"),
    ('[study]\nname = "x"\n[grid]\nset = ["gpu.hbm_GB=1"]', "each value is a list"),
    ("[study\n", "malformed TOML in study file"),
])
def test_bad_study_files_are_one_line_errors(tmp_path, capsys, text, words):
    if "[grid]" in text and "[base]" not in text:
        text = text.replace("[grid]", "[base]\ncompute_flop = 1e18\n[grid]")
    path = write(tmp_path, text)
    with pytest.raises(InvalidInput) as err:
        scenarios = st.expand(st.load_study(path))
        st.check_inputs(scenarios)
    assert words in str(err.value) and "\n" not in str(err.value)
    code, _, stderr = invoke(capsys, ["study", str(path)])
    assert code == 2 and stderr.count("\n") == 1 and stderr.startswith("error: ")


def test_scenario_count_is_bounded_before_expanding(tmp_path):
    """A grid of 400 x 400 x 400 (6.4e7) is refused from the lengths alone, not after building 6.4e7 requests."""
    values = ", ".join(str(k) for k in range(1, 401))
    text = f'[study]\nname = "big"\n[grid]\ndays = [{values}]\ngpus = [{values}]\ntime_limit_s = [{values}]\n'
    t0 = time.perf_counter()
    with pytest.raises(InvalidInput, match=f"at most {MAX_SCENARIOS:,}"):
        st.expand(st.load_study(write(tmp_path, text)))
    assert time.perf_counter() - t0 < 2


def test_rows_against_hand_bounds(tmp_path):
    """Peak H100 dense BF16 is 989.4 TFLOP/s: 1e18 FLOP take 1e18 / 989.4e12 = 1011 s on one GPU at peak, far inside
    3 days, so the fewest GPUs is 1. 1e20 FLOP in 0.1 days (8640 s) need at least 1e20 / (989.4e12 x 8640) = 11.7,
    so 12 or more GPUs."""
    text = GRID.replace("days = 3", "").replace('gpu = ["h100", "a100"]', 'gpu = ["h100"]')
    text = text.replace("set = [[], [\"gpu.hbm_GB=40\"]]", "days = [3, 0.1]")
    scenarios = st.expand(st.load_study(write(tmp_path, text)))
    results: dict[str, dict] = {}
    st.run(scenarios, lambda b: results.update(b), jobs=1)
    got = {(sc.request.compute_flop, sc.request.days): results[sc.id] for sc in scenarios}
    assert got[(1e18, 3.0)]["gpus"] == 1 and got[(1e18, 3.0)]["status"] == "optimal"
    assert got[(1e20, 0.1)]["gpus"] >= 12 and got[(1e20, 0.1)]["training_days"] <= 0.1


@pytest.mark.slow  # two spawned workers: 8 s on the shared machine
def test_one_and_two_workers_give_the_same_bytes(tmp_path):
    scenarios = st.expand(st.load_study(write(tmp_path, GRID)))
    one = run_rows(scenarios, jobs=1)
    two = run_rows(scenarios, jobs=2, batch=2)
    assert one == two
    assert one.count("\n") == 13 and ",optimal," in one


@pytest.mark.slow  # 64 samples per scenario: 12 s on the shared machine
def test_confidence_axis_plans_through_planner_confidence(tmp_path):
    """`confidence` P is a study field beside the request: the row's gpus is the cluster that meets the deadline in at
    least P of planner.confidence's samples, point_gpus the point estimate's (never more), met >= P, and the days'
    percentiles are ordered and within the deadline."""
    text = '[study]\nname = "c"\n[base]\ncompute_flop = 1e20\ndays = 0.5\n[grid]\nconfidence = [0.5, 0.9]\n'
    scenarios = st.expand(st.load_study(write(tmp_path, text)))
    assert [sc.confidence for sc in scenarios] == [0.5, 0.9] and scenarios[0].id != scenarios[1].id
    assert scenarios[0].request == scenarios[1].request
    results: dict[str, dict] = {}
    st.run(scenarios, lambda b: results.update(b), jobs=1)
    for sc in scenarios:
        r = results[sc.id]
        assert r["status"] == "optimal" and r["met"] >= sc.confidence and r["gpus"] >= r["point_gpus"] >= 1
        assert r["days_p10"] <= r["days_p50"] <= r["days_p90"] <= 0.5


def test_error_scenario_is_a_row_not_a_failed_study():
    """A scenario that only the plan finds bad (context parallelism pinned on the paper's toy model, which has no
    sequences) gives an 'error' row; the rest of its batch is planned."""
    ok = PlanRequest(compute_flop=1e18, days=3, workers=1)
    bad = PlanRequest(compute_flop=1e18, days=3, workers=1, fixed={"cp": 2})
    out = st.solve_batch([("a", bad.model_dump_json(), None), ("b", ok.model_dump_json(), None)])
    assert out[0][1]["status"] == "error" and "--cp 2 needs a transformer" in out[0][1]["error"]
    assert out[1][1]["status"] == "optimal" and out[1][1]["gpus"] == 1


def test_cli_writes_csv_parquet_and_figures(tmp_path, capsys):
    path = write(tmp_path, GRID)
    out = tmp_path / "out"
    code, _, stderr = invoke(capsys, ["study", str(path), "--out", str(out), "--jobs", "1", "--quiet"])
    assert code == 0, stderr
    names = sorted(p.name for p in out.iterdir())
    assert {"journal.jsonl", "results.csv", "gpus-cost-vs-compute.png", "tornado-gpu_h100.png",
            "tornado-gpu_a100.png"} <= set(names)
    text = (out / "results.csv").read_text()
    assert text.count("\n") == 13
    if "results.parquet" in names:
        import pyarrow.parquet as pq

        table = pq.read_table(out / "results.parquet")
        assert table.num_rows == 12 and table.column("gpus").to_pylist()[0] == 1
    # a second run on the same --out without --resume is refused: it would mix two runs
    code, _, stderr = invoke(capsys, ["study", str(path), "--out", str(out), "--jobs", "1", "--quiet"])
    assert code == 2 and "--resume" in stderr


def test_resume_refuses_another_studys_journal(tmp_path, capsys):
    out = tmp_path / "out"
    small = GRID.replace('["h100", "a100"]', '["h100"]').replace("[1e18, 1e19, 1e20]", "[1e18]")
    assert invoke(capsys, ["study", str(write(tmp_path, small)), "--out", str(out), "--quiet", "--no-plots"])[0] == 0
    other = write(tmp_path, small.replace("days = 3", "days = 4"), "other.toml")
    code, _, stderr = invoke(capsys, ["study", str(other), "--out", str(out), "--resume", "--quiet"])
    assert code == 2 and "journal of another study" in stderr


def test_out_is_never_a_symlink(tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    code, _, stderr = invoke(capsys, ["study", str(write(tmp_path, GRID)), "--out", str(tmp_path / "link"), "--quiet"])
    assert code == 2 and "not a directory" in stderr and not list(real.iterdir())


def test_journal_ignores_cut_and_foreign_lines(tmp_path):
    study = st.load_study(write(tmp_path, GRID))
    scenarios = st.expand(study)
    head = st.header(study, scenarios)
    good = st.solve_batch(st.batches(scenarios[:1], 1)[0])[0]
    path = tmp_path / "journal.jsonl"
    path.write_text(head.model_dump_json() + "\n" + st.journal_line(*good)
                    + st.journal_line("0123456789abcdef", good[1])  # not a scenario of this study
                    + '{"id": "' + scenarios[1].id + '", "outcome": {"status": "optimal", "gpus": "many"}}\n'
                    + st.journal_line(scenarios[2].id, good[1])[:40])  # cut by a kill
    assert list(st.read_journal(path, head, scenarios)) == [scenarios[0].id]


@pytest.mark.parametrize("change", [{"gpus": -5}, {"gpus": 0}, {"nodes": 0}, {"mfu": 1.5}, {"mfu": 0.0},
                                    {"training_days": -1.0}, {"cost_usd": -3.0}, {"gap": -0.1}, {"met": -1.0}])
def test_journal_drops_outcomes_no_plan_can_have(tmp_path, change):
    """A journal line is a file anyone with write access to --out could edit: an outcome with a negative or zero GPU
    count, an MFU outside (0, 1] or a negative amount was kept on --resume and written into results.csv (task qa3's
    review); it is now planned again like any line that does not validate."""
    study = st.load_study(write(tmp_path, GRID))
    scenarios = st.expand(study)
    head = st.header(study, scenarios)
    sid, outcome = st.solve_batch(st.batches(scenarios[:1], 1)[0])[0]
    assert outcome["gpus"] >= 1 and 0 < outcome["mfu"] <= 1
    path = tmp_path / "journal.jsonl"
    path.write_text(head.model_dump_json() + "\n" + st.journal_line(sid, {**outcome, **change}))
    assert st.read_journal(path, head, scenarios) == {}
    path.write_text(head.model_dump_json() + "\n" + st.journal_line(sid, outcome))
    assert list(st.read_journal(path, head, scenarios)) == [sid]


def _planner_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("planner")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from planner.cli import main; main()"]



@pytest.mark.slow
def test_killed_study_resumes_without_losing_a_finished_scenario(tmp_path, capsys):
    """SIGKILL (no handler runs) midway, then --resume: every scenario finished before the kill is kept as it was,
    none is planned twice, and the rows are those of an uninterrupted run."""
    path = write(tmp_path, GRID.replace('["h100", "a100"]', '["h100", "a100", "b200"]'))
    out = tmp_path / "out"
    journal = out / "journal.jsonl"
    proc = subprocess.Popen(_planner_cmd() + ["study", str(path), "--out", str(out), "--jobs", "1", "--batch", "1",
                                              "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(journal_ids(journal)) < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the study finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {json.loads(line)["id"]: line for line in journal.read_text().splitlines()[1:] if line.endswith("}")}
    assert 4 <= len(before) < 18
    code, _, stderr = invoke(capsys, ["study", str(path), "--out", str(out), "--resume", "--jobs", "2", "--quiet"])
    assert code == 0, stderr
    assert f"{len(before)} finished scenario(s) kept" in stderr
    after = journal.read_text().splitlines()[1:]
    ids = [json.loads(line)["id"] for line in after if line.endswith("}")]
    assert len(ids) == len(set(ids)) == 18  # nothing planned twice, nothing missing
    assert all(line in after for line in before.values())  # what finished before the kill is kept as it was
    scenarios = st.expand(st.load_study(path))
    assert (out / "results.csv").read_text() == run_rows(scenarios, jobs=2)


def test_missing_ray_is_one_line(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(st.InvalidInput, match=r"pip install 'planner\[ray\]'"):
        st._import_ray()


def test_help_shows_the_tables_and_the_extra(capsys):
    code, out, _ = invoke(capsys, ["study", "--help"])
    assert code == 0 and "[study], [base] and [grid] or [sample]" in " ".join(out.split())
    assert "'planner[ray]'" in out and "<bool>" not in out


@pytest.mark.parametrize("address, words", [("127.0.0.1:1", "nothing answers at 127.0.0.1:1"),
                                            ("nonsense", "give auto, local, HOST:PORT"),
                                            ("ray://127.0.0.1:99999", "give auto")])
def test_a_bad_ray_address_is_one_line_in_seconds(address, words):
    """ray.init retries an address where nothing listens for minutes; the study probes it first."""
    t0 = time.perf_counter()
    with pytest.raises(InvalidInput, match=words):
        st._probe(address)
    assert time.perf_counter() - t0 < 6


def test_a_sweep_is_the_study_gpu_by_compute():
    """planner.sweep.sweep and the study of the same grid (sweep_study) give the same clusters, layouts and MFU point
    by point: a sweep is a special case of a study."""
    from planner.sweep import compute_grid, sweep

    grid = compute_grid(1e18, 1e20, 3)
    res = sweep(["h100", "a100"], 1e18, 1e20, 3, days=1, jobs=1)
    scenarios = st.expand(st.sweep_study(["h100", "a100"], grid, days=1, dp_overlap=False))
    results: dict[str, dict] = {}
    st.run(scenarios, lambda b: results.update(b), jobs=1)
    assert len(scenarios) == len(res.plans) == 6
    for sc, p in zip(scenarios, res.plans):  # both hardware-major, compute ascending
        r = results[sc.id]
        assert (r["hardware"], r["gpus"], r["mfu"], r["status"]) == (p.hardware, p.gpus, p.mfu, p.status)
        assert r["layout"] == st.outcome_of(p).layout
