"""`planner study --ray` on a local Ray cluster of two CPUs (issue 27 part 4): the same rows, byte for byte, as the
local engine, and a 10,000-scenario study to completion. Marked `ray` (deselected by default; needs
pip install -e '.[test,ray]'; .ci/run runs them)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from planner import study as st
from planner.render.study import csv_text

pytestmark = pytest.mark.ray

STUDY = Path(__file__).resolve().parent.parent / "benchmarks" / "study_10k.toml"


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _rows(scenarios, **kw) -> str:
    results: dict[str, dict] = {}
    st.run(scenarios, lambda b: results.update(b), **kw)
    assert len(results) == len(scenarios)
    return csv_text([st.row(sc, results[sc.id]) for sc in scenarios], st.columns(scenarios))


def test_200_scenarios_same_bytes_locally_and_on_ray(ray_cluster):
    scenarios = st.expand(st.load_study(STUDY))[::49][:200]  # every 49th: every value of every field
    assert len(scenarios) == 200
    assert [len({getattr(sc.request, f) for sc in scenarios}) for f in ("gpu", "compute_flop", "days", "overrides")
            ] == [5, 10, 10, 20]
    on_ray = _rows(scenarios, ray="auto", batch=20)
    local = _rows(scenarios, jobs=2, batch=7)  # other batches: a row must not depend on its batch
    assert on_ray == local
    assert on_ray.count("\n") == 201 and on_ray.count(",optimal,") >= 150


def test_10000_scenarios_run_to_completion_on_ray(ray_cluster):
    scenarios = st.expand(st.load_study(STUDY))
    assert len(scenarios) == 10_000
    results: dict[str, dict] = {}
    t0 = time.perf_counter()
    st.run(scenarios, lambda b: results.update(b), ray="auto")
    elapsed = time.perf_counter() - t0
    assert set(results) == {sc.id for sc in scenarios}
    statuses = {r["status"] for r in results.values()}
    assert statuses <= {"optimal", "infeasible"}, statuses
    print(f"10,000 scenarios on a 2-CPU local Ray cluster: {elapsed:.0f} s ({10_000 / elapsed:.1f} scenarios/s)")



def _untimed(doc):
    """A JSON document without the solver's wall-clock timings (the only values that differ between two runs)."""
    if isinstance(doc, dict):
        return {k: _untimed(v) for k, v in doc.items() if k not in ("wall_s", "cpsat_s")}
    if isinstance(doc, list):
        return [_untimed(v) for v in doc]
    return doc


def test_sweep_and_sensitivity_on_ray_give_the_local_rows(ray_cluster, capsys, tmp_path):
    """`sweep --ray local` and `plan --sensitivity --ray local` (the session the fixture started is used as it is)
    give the same plans, rows and sensitivity table as the local engine."""
    import json

    from cli_helpers import invoke

    sweep = ["sweep", "--from", "1e20", "--to", "1e22", "--points", "3", "--gpu", "h100", "--gpu", "a100", "--json",
             "--quiet"]
    code, local, err = invoke(capsys, [*sweep, "--jobs", "1", "--csv", str(tmp_path / "a.csv")])
    assert code == 0, err
    code, on_ray, err = invoke(capsys, [*sweep, "--ray", "local", "--csv", str(tmp_path / "b.csv")])
    assert code == 0, err
    assert _untimed(json.loads(on_ray)) == _untimed(json.loads(local))
    assert len(json.loads(on_ray)["plans"]) == 6

    def rows(name: str) -> list[str]:  # the CSV without its solver_wall_s column
        lines = (tmp_path / name).read_text().splitlines()
        k = lines[0].split(",").index("solver_wall_s")
        return [",".join(c for j, c in enumerate(line.split(",")) if j != k) for line in lines]
    assert rows("a.csv") == rows("b.csv")

    plan = ["--compute", "1e21", "--gpu", "h100", "--days", "30", "--sensitivity", "--json"]
    from planner.cli.app import plan_app

    code, local, err = invoke(capsys, plan, plan_app, "plan")
    assert code == 0, err
    code, on_ray, err = invoke(capsys, [*plan, "--ray", "local"], plan_app, "plan")
    assert code == 0, err
    sens = json.loads(on_ray)["sensitivity"]
    assert sens == json.loads(local)["sensitivity"] and len(sens["rows"]) >= 2
