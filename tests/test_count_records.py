"""Count records (planner.search.cpsat._CountRecord): searches in one process with the same hardware, workload,
options and deadline decide the counts one of them filtered from the same tuples. Every answer with records must be
the answer without them: plans, re-plans that move a failure input, certificate and runner-up searches, and searches
whose windows start and end elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from planner import api
from planner.export import layout_of
from planner.schema import Workload
from planner.schema.request import PlanRequest
from planner.search import cpsat

WL = Workload(d_model=8192, d_ff=32768, layers=16, experts=1, batch_tokens=65536, tokens=1e11)
KW = dict(workload=WL, gpu="h100", days=10.0, profile="realistic", why_smaller=False, workers=1)


def _answers() -> list:
    """The plan, then searches that share its hardware (failure moves, a runner-up, certificates below the plan's
    count, a re-plan bounded above it) and one that does not (a moved GEMM factor)."""
    plan = api.plan(**KW)
    req = PlanRequest(**KW)
    n0 = plan.gpus
    assert n0 is not None
    out: list = [(plan.gpus, plan.wall_clock_days, plan.layout)]
    for text in ("goodput.restart_minutes=40", "goodput.restart_minutes=2.5", "profile.gemm.sustained_factor=0.6"):
        moved = req.model_copy(update={"overrides": [text]})
        out.append(api.replan_answer(moved, None))
        out.append(api.replan_answer(moved, n0 + 1))
        out.append(api.fewest_below(moved, n0))
        out.append(api.fewest_below(moved, 2 * n0, n0 // 2))
    out.append(api.runner_up_quanta(req, layout_of(plan)))
    return out


def test_searches_answer_the_same_with_and_without_count_records(monkeypatch):
    monkeypatch.setattr(cpsat, "COUNT_RECORDS", False)
    cpsat.clear_records()
    without = _answers()
    assert not cpsat._COUNT_RECORDS
    monkeypatch.setattr(cpsat, "COUNT_RECORDS", True)
    cpsat.clear_records()
    used = []
    real = cpsat._CountRecord.covered

    def spy(self, n):
        out = real(self, n)
        used.append(int(out.sum()))
        return out

    monkeypatch.setattr(cpsat._CountRecord, "covered", spy)
    with_records = _answers()
    assert with_records == without
    assert sum(used) > 0  # some pairs were read from a record, not filtered again
    assert len(cpsat._COUNT_RECORDS) == 2  # one per hardware: the plan's and the moved GEMM factor's
    cpsat.clear_records()


def test_a_record_covers_whole_filtered_counts_only():
    rec = cpsat._CountRecord()
    assert not rec.covered(np.array([1.0, 5.0])).any()
    rec.cover(10, 20)
    rec.cover(30, 40)
    rec.cover(21, 25)  # touches [10, 20]: merged
    assert (rec.lo, rec.hi) == ([10, 30], [25, 40])
    n = np.array([9.0, 10.0, 15.0, 25.0, 26.0, 29.0, 30.0, 40.0, 41.0])
    assert rec.covered(n).tolist() == [False, True, True, True, False, False, True, True, False]


def test_a_full_record_keeps_and_covers_nothing_more(monkeypatch):
    from planner.parallel.space import Tuples

    monkeypatch.setattr(cpsat, "COUNT_RECORD_TUPLES", 3)
    rec = cpsat._CountRecord()
    t = Tuples.empty()
    cols = {k: np.ones(2, dtype=bool if k == "zero_bubble" else np.int64) for k in Tuples.COLUMNS}
    rec.keep(2, Tuples(cols), {"step_lb": np.zeros(2)})
    rec.cover(1, 2)
    rec.keep(4, Tuples(cols), {"step_lb": np.zeros(2)})  # 4 tuples > 3: full
    rec.cover(3, 4)
    assert list(rec.counts) == [2] and (rec.lo, rec.hi) == ([1], [2]) and rec.full
    assert len(t) == 0
    with pytest.raises(ValueError):
        rec.counts[2][1]["step_lb"][0] = 1.0  # kept arrays are read-only: a search that wrote into them fails
