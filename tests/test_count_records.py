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


def test_a_slowing_step_move_filtered_from_the_plans_survivors_gives_the_same_answer(monkeypatch):
    """A re-plan whose step input moves the slowing way, given the plan's hardware as its base (SkipProof.base):
    the counts the plan's search filtered are filtered from the plan's survivors only, and the answer is the
    re-plan's without the base, the re-plan's searched from the compute bound, and the enumerator's."""
    _check_narrowing(("profile.gemm.sustained_factor", "levels.*.bw_bidir_GBps"), (2.0,), monkeypatch)


@pytest.mark.slow
def test_every_slowing_step_move_filtered_from_the_plans_survivors_gives_the_same_answer(monkeypatch):
    """The same for every step-family input, moved the slowing way by 1.05x, 1.25x and 2x."""
    from test_monotone import STEP_FIELDS

    _check_narrowing(STEP_FIELDS, (1.05, 1.25, 2.0), monkeypatch)


def _check_narrowing(fields, factors, monkeypatch):
    from test_monotone import _current, _slower

    from planner import sensitivity as sens
    from planner.cost.step import evaluate
    from planner.goodput import get_failure_model, goodput_fraction
    from planner.overrides import parse_overrides
    from planner.parallel.space import SearchOptions
    from planner.search.exhaustive import solve_exhaustive

    cpsat.clear_records()
    plan = api.plan(**KW)
    req = PlanRequest(**KW)
    n0, layout = plan.gpus, layout_of(plan)
    assert n0 is not None
    base = api.request_hardware(req)
    narrowed = []
    real = cpsat._filter

    def spy(hw, wl, t, *a):
        narrowed.append(not t["dp"].flags.writeable)  # a base record's tuples are read-only
        return real(hw, wl, t, *a)

    monkeypatch.setattr(cpsat, "_filter", spy)
    for field in fields:
        name, value = _current(field, "h100", "realistic")
        for factor in factors:
            text = f"{name}={sens._fmt(_slower(field, value, factor))}"
            moved = req.model_copy(update={"overrides": [text]})
            with_base = api.replan_answer(moved, n0, api.SkipProof(layout, 1, base))  # runner-up 1: never skips
            assert with_base == api.replan_answer(moved, n0, api.SkipProof(layout, 1)), text
            assert with_base == api.replan_answer(moved, None), text
            sets = parse_overrides([text])
            hw = api.resolve("h100", "realistic", sets)
            g = goodput_fraction(get_failure_model("default"), WL.params)
            truth = solve_exhaustive(hw, WL, SearchOptions(dp_overlap=plan.dp_overlap, min_gpus=n0,
                                                           max_gpus=8 * n0), 10.0 * 86400, goodput=g)
            assert truth.layout is not None
            ev = evaluate(hw, WL, truth.layout, dp_overlap=plan.dp_overlap)
            assert with_base[0] == ev.gpus, text
            assert with_base[1] is not None and abs(with_base[1] / (ev.training_days / float(g(float(ev.gpus)))) - 1) \
                < 1e-8, text
    assert any(narrowed) and not all(narrowed)
    cpsat.clear_records()


# Requests that differ from KW in one input each that changes which tuples a count's filters keep (memory: the
# headroom flag, a --set of the profile's headroom, a hardware file variant; a GEMM rate; the overlap
# option; the schedule; a buyer's limit).
VARIANTS = (
    dict(memory_headroom_GB=75.0),
    dict(overrides=["profile.memory.headroom_GB=70"]),
    dict(gpu="h100-96gb"),
    dict(overrides=["profile.gemm.sustained_factor=0.5"]),
    dict(dp_overlap=False),
    dict(schedule="1f1b"),
    dict(max_gpus=24),
)


def _answer(**update) -> tuple:
    plan = api.plan(PlanRequest(**{**KW, **update}))
    return plan.gpus, plan.wall_clock_days, plan.layout


@pytest.mark.slow
@pytest.mark.parametrize("entries, tuples", [(8, 100_000), (2, 40)])
def test_requests_that_differ_in_one_filter_input_answer_as_from_a_cold_process(monkeypatch, entries, tuples):
    """Plan A, then a request that differs in one input, then A again, all in one process with the count records
    kept: each answer equals the same request's answer with every record cleared first (a fresh process). Also with
    a store of 2 records of at most 40 tuples (records evicted and filled up mid-search): the same answers, and the
    store within its bounds."""
    monkeypatch.setattr(cpsat, "COUNT_RECORD_ENTRIES", entries)
    monkeypatch.setattr(cpsat, "COUNT_RECORD_TUPLES", tuples)
    cpsat.clear_records()
    a_cold = _answer()
    cold = []
    for v in VARIANTS:
        cpsat.clear_records()
        cold.append(_answer(**v))
    # the variants' inputs matter: most move the answer (a record shared between them would show)
    assert sum(c != a_cold for c in cold) >= 5, (a_cold, cold)
    cpsat.clear_records()
    assert _answer() == a_cold
    for v, c in zip(VARIANTS, cold):
        assert _answer(**v) == c, v
        assert _answer() == a_cold, v
    for v, c in zip(VARIANTS, cold):  # each variant again, its record now warm
        assert _answer(**v) == c, v
    assert len(cpsat._COUNT_RECORDS) == min(entries, 1 + len(VARIANTS))  # one a key; never past the bound
    assert all(r.size <= tuples and r.size == sum(len(t) for t, _ in r.counts.values())
               for r in cpsat._COUNT_RECORDS.values())
    if tuples < 100:
        assert any(r.full for r in cpsat._COUNT_RECORDS.values())
    cpsat.clear_records()


@pytest.mark.slow
def test_a_seeded_replan_of_a_memory_move_is_the_enumerators_answer(monkeypatch):
    """A re-plan seeded with the plan's layout (cpsat.solve_cpsat's `seed_q`) whose move also changes which layouts
    fit (more headroom: the plan's own layout may no longer fit, or fit with a step that is no longer the best): the
    answer is the unseeded re-plan's from the compute bound, and the exhaustive enumerator's, with records kept."""
    from planner.cost.step import evaluate
    from planner.goodput import get_failure_model, goodput_fraction
    from planner.parallel.space import SearchOptions
    from planner.search.exhaustive import solve_exhaustive

    seeds: list = []
    real = api._seed_quanta

    def spy(*a):
        seeds.append(real(*a))
        return seeds[-1]

    monkeypatch.setattr(api, "_seed_quanta", spy)
    cpsat.clear_records()
    plan = api.plan(**KW)
    req = PlanRequest(**KW)
    n0, layout = plan.gpus, layout_of(plan)
    assert n0 is not None
    g = goodput_fraction(get_failure_model("default"), WL.params)
    moved_answers = set()
    for headroom in (40.0, 68.0, 70.0, 72.0, 75.0):
        moved = req.model_copy(update={"memory_headroom_GB": headroom})
        seeded = api.replan_answer(moved, n0, seed=layout)
        assert seeded == api.replan_answer(moved, None), headroom
        hw = api.request_hardware(moved)
        truth = solve_exhaustive(hw, WL, SearchOptions(dp_overlap=plan.dp_overlap, min_gpus=n0, max_gpus=8 * n0),
                                 10.0 * 86400, goodput=g)
        assert truth.layout is not None
        ev = evaluate(hw, WL, truth.layout, dp_overlap=plan.dp_overlap)
        assert seeded[0] == ev.gpus, headroom
        assert seeded[1] is not None and abs(seeded[1] / (ev.training_days / float(g(float(ev.gpus)))) - 1) < 1e-8
        moved_answers.add(seeded)
    assert len(moved_answers) >= 2  # the moves change the answer: the memory rule acts
    assert any(q is not None for q in seeds) and None in seeds, seeds  # seeded where the layout still fits only
    cpsat.clear_records()
