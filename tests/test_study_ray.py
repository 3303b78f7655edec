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

