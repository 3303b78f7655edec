"""The direction claims of planner.monotone, and the re-plan bound built on them.

Each input declared slower-when-higher (or -lower) is moved in that direction, as `plan --sensitivity` moves it (the
same --set text), and every layout of small spaces is priced whole by the exhaustive enumerator's pricing before and
after: no step time may drop, no memory need may drop, no layout may start to fit; failure inputs: Daly's goodput may
not rise on any count. Then the bound itself: a search that starts at the unmoved plan's count returns what a search
from the compute bound returns (the exhaustive enumerator and CP-SAT), and `plan --sensitivity` gives the same rows
with and without it.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest

from planner import api
from planner import sensitivity as sens
from planner.cost.memory import usable_bytes
from planner.goodput import get_failure_model, goodput_fraction
from planner.monotone import SLOWER_WHEN_HIGHER, SLOWER_WHEN_LOWER, slowing_direction, slows
from planner.overrides import parse_overrides
from planner.parallel.space import SearchOptions, build_space, model_parallel_rows, tuples_for_model_parallel
from planner.schema import Workload
from planner.schema.request import PlanRequest
from planner.search.exhaustive import price_placements, solve_exhaustive
from planner.search.presolve import ShapeTable, tuple_memory, tuple_terms
from planner.workload.scaling import transformer_workload

TOY_DENSE = Workload(d_model=256, d_ff=1024, layers=4, experts=1, batch_tokens=4096, tokens=1e9)
TOY_MOE = Workload(d_model=128, d_ff=512, layers=2, experts=4, batch_tokens=1024, tokens=1e9)
TINY_GPT = transformer_workload(64, 128, 4, 1, 64, 16 * 64, 1e9, {"heads": 4, "kv_heads": 2, "vocab": 256}, "tiny")
TINY_MOE = transformer_workload(64, 64, 2, 8, 32, 16 * 32, 1e9,
                                {"heads": 4, "kv_heads": 2, "vocab": 256, "ffn": "swiglu", "top_k": 2,
                                 "expert_d_ff": 64, "shared_experts": 0, "dense_layers": 0}, "tiny-moe")
WORKLOADS = {"toy-dense": TOY_DENSE, "toy-moe": TOY_MOE, "tiny-gpt": TINY_GPT, "tiny-moe": TINY_MOE}

PROFILE_FIELDS = [f for f in SLOWER_WHEN_HIGHER + SLOWER_WHEN_LOWER if not f.startswith("goodput.")]
FAILURE_FIELDS = [f for f in SLOWER_WHEN_HIGHER + SLOWER_WHEN_LOWER if f.startswith("goodput.")]


def _current(field: str, gpu: str, profile: str):
    """The field's value in the shipped files, as `plan --sensitivity` reads it (levels.* on the top level)."""
    from planner.hardware import _spec_dir, hardware_names
    from planner.profile import profile_dir, profile_names
    from planner.sourced import file_of, load_toml

    def raw(doc, keys):
        node = doc
        for k in keys:
            node = node[k]
        return node["value"] if isinstance(node, dict) and "value" in node else node

    hw_doc = load_toml(file_of(gpu, hardware_names(), _spec_dir(), "hardware")[0], "hardware file")
    prof_doc = load_toml(file_of(profile, profile_names(), profile_dir(), "profile")[0], "profile file")
    if field.startswith("levels.*."):
        top = hw_doc["levels"][-1]
        return f"levels.{top['name']}.{field.split('.', 2)[2]}", raw(top, [field.split(".", 2)[2]])
    if field.startswith("profile."):
        return field, raw(prof_doc, field.split(".")[1:])
    if field.startswith("goodput."):
        from planner.goodput import failures_dir

        return field, raw(load_toml(failures_dir() / "default.toml", "failure model file"), field.split(".")[1:])
    return field, raw(hw_doc, field.split("."))


def _slower(field: str, value, factor: float):
    """`value` moved by `factor` (> 1) in the field's slowing direction, fractions capped at 1 as --sensitivity
    caps them."""
    cap = 1.0 if sens._fraction(field.removeprefix("profile.")) else None
    f = factor if slowing_direction(field) > 0 else 1.0 / factor
    return sens._move(field, value, f, cap)


def _layouts(hw, wl, dp_overlap: bool, limit: int = 1500):
    """Every placement of `limit` degree tuples drawn at random (a fixed seed) from the whole space, priced whole:
    (step_s per layout, memory bytes per tuple, tuple row of each layout, the tuples)."""
    space = build_space(hw, wl, SearchOptions())
    t = tuples_for_model_parallel(space, model_parallel_rows(space), space.dp_m)
    if len(t) > limit:
        t = t.take(np.sort(np.random.default_rng(0).choice(len(t), limit, replace=False)))
    q = tuple_terms(hw, wl, t, ShapeTable.for_space(hw, wl, space))
    rows, _pl, arr = price_placements(hw, wl, t, dp_overlap, q)
    return arr["step_s"], tuple_memory(hw, wl, t), rows, t


@functools.cache
def _base(wl_name: str, dp_overlap: bool):
    return _layouts(api.resolve("h100", "realistic"), WORKLOADS[wl_name], dp_overlap)


@pytest.mark.parametrize("wl_name", [pytest.param(w, marks=[pytest.mark.slow] if "moe" in w else [])
                                     for w in WORKLOADS])
@pytest.mark.parametrize("field", PROFILE_FIELDS)
def test_a_slowing_move_never_speeds_a_layout_up_nor_lets_one_fit(field, wl_name):
    """Mixture-of-experts workloads (the routing imbalance, all-to-all terms) are in the slow set (-m slow)."""
    wl = WORKLOADS[wl_name]
    name, value = _current(field, "h100", "realistic")
    hw = api.resolve("h100", "realistic")
    for factor in (1.25, 2.0):
        moved = _slower(field, value, factor)
        assert slows(name, value, moved)
        hw2 = api.resolve("h100", "realistic", parse_overrides([f"{name}={sens._fmt(moved)}"]))
        for dp_overlap in (False, True):
            step, mem, rows, t = _base(wl_name, dp_overlap)
            step2, mem2, rows2, t2 = _layouts(hw2, wl, dp_overlap)
            assert len(rows) > 100 and np.array_equal(rows, rows2) and len(t) == len(t2)
            # no layout faster (float pricing: an ulp of slack)
            assert np.all(step2 >= step * (1 - 1e-12)), (name, moved, float(np.min(step2 / step)))
            fits, fits2 = mem <= usable_bytes(hw), mem2 <= usable_bytes(hw2)
            assert np.all(mem2 >= mem * (1 - 1e-12)) and not np.any(fits2 & ~fits), (name, moved)


def test_some_declared_moves_do_slow_layouts_down():
    """The check above is not vacuous: the step-time inputs it covers change step times."""
    step, *_ = _base("toy-dense", True)
    for field in ("profile.gemm.sustained_factor", "levels.*.bw_bidir_GBps", "profile.overlap.pp",
                  "profile.network.latency_us"):
        name, value = _current(field, "h100", "realistic")
        hw2 = api.resolve("h100", "realistic", parse_overrides([f"{name}={sens._fmt(_slower(field, value, 2.0))}"]))
        step2, *_ = _layouts(hw2, TOY_DENSE, True)
        assert np.any(step2 > step * (1 + 1e-6)), field


@pytest.mark.parametrize("field", FAILURE_FIELDS)
def test_a_slowing_failure_move_never_raises_goodput(field):
    fm = get_failure_model("default")
    value = {"goodput.interruptions_per_gpu_hour": fm.interruptions_per_gpu_hour,
             "goodput.restart_minutes": fm.restart_s / 60.0,
             "goodput.storage_GBps_per_gpu": fm.storage_Bps_per_gpu / 1e9}[field]
    n = np.geomspace(1, 1e8, 2000)
    for params in (1e9, 4e11, 1e13):
        g = goodput_fraction(fm, params)(n)
        for factor in (1.25, 2.0, 10.0):
            moved = _slower(field, value, factor)
            g2 = goodput_fraction(get_failure_model("default", parse_overrides([f"{field}={moved!r}"])), params)(n)
            assert np.all(g2 <= g + 1e-15), (field, moved, params)
            assert np.any(g2 < g - 1e-6)


def test_slows_reads_the_declared_direction():
    assert slowing_direction("levels.InfiniBand.bw_bidir_GBps") == -1
    assert slowing_direction("levels.NVLink.lat_us") == 1
    assert slowing_direction("profile.memory.device_MiB.H100") == 0  # more device memory is faster: no claim
    assert slows("profile.network.latency_us", [10.0, 15.0], [20.0, 30.0])
    assert not slows("profile.network.latency_us", [10.0, 15.0], [5.0, 7.5])
    assert not slows("profile.network.bus_bw_fraction", [0.8, 0.9], [0.7, 1.0])  # both ways: no claim
    assert slows("profile.overlap.pp", 0.75, 0.6) and not slows("profile.overlap.pp", 0.75, 0.9)
    assert not slows("profile.gemm.tile", [128, 256], [128, 256, 1])
    assert not slows("gpu.hbm_GBps", 3350, 3000)  # undeclared


@pytest.mark.parametrize("field,factor,expect", [
    pytest.param("profile.network.latency_us", 4.0, 8, marks=pytest.mark.slow),  # about 5 s each
    pytest.param("profile.gemm.sustained_factor", 1.6, 16, marks=pytest.mark.slow),
    pytest.param("levels.*.bw_bidir_GBps", 4.0, 4, marks=pytest.mark.slow),
    pytest.param("profile.overlap.pp", 4.0, 4, marks=pytest.mark.slow)])
def test_a_search_from_the_plans_count_finds_the_full_searchs_answer(field, factor, expect):
    """Exhaustive enumerator: the moved instance's optimum, searched from the compute bound, is at or above the
    unmoved optimum's count, and the search started at that count returns the same layout; CP-SAT from that count
    returns the same count and step time. The unmoved optimum (500 s deadline) is 4 GPUs; `expect` is the moved
    one's, as the enumerator found it when the cases were chosen."""
    from planner.search.cpsat import solve_cpsat

    wl = TOY_DENSE
    hw = api.resolve("h100", "realistic")
    name, value = _current(field, "h100", "realistic")
    hw2 = api.resolve("h100", "realistic", parse_overrides([f"{name}={sens._fmt(_slower(field, value, factor))}"]))
    deadline_s = 500.0
    base = solve_exhaustive(hw, wl, SearchOptions(dp_overlap=True), deadline_s)
    assert base.status == "optimal" and base.layout is not None
    n0 = base.layout.gpus
    assert n0 == 4
    full = solve_exhaustive(hw2, wl, SearchOptions(dp_overlap=True), deadline_s)
    bounded = solve_exhaustive(hw2, wl, SearchOptions(dp_overlap=True, min_gpus=n0), deadline_s)
    assert full.status == bounded.status == "optimal" and full.layout is not None
    assert full.layout.gpus == expect >= n0
    assert bounded.layout == full.layout
    cp = solve_cpsat(hw2, wl, SearchOptions(dp_overlap=True, min_gpus=n0), deadline_s, workers=1)
    assert cp.status == "optimal" and cp.layout is not None and cp.layout.gpus == full.layout.gpus
    from planner.cost.step import evaluate

    a = evaluate(hw2, wl, cp.layout, dp_overlap=True).step.step_s
    b = evaluate(hw2, wl, full.layout, dp_overlap=True).step.step_s
    assert math.isclose(a, b, rel_tol=1e-8)


@pytest.mark.parametrize("text", ["profile.gemm.sustained_factor=0.64", "profile.network.latency_us=[20, 30]",
                                  "goodput.interruptions_per_gpu_hour=3.94e-05", "profile.overlap.pp=0.6"])
def test_a_bounded_replan_is_the_full_replan(text):
    """A realistic-profile plan of 224 GPUs, one input moved the slowing way: api.replan from the plan's count gives
    the plan api.plan gives (the same GPUs, days and layout)."""
    kw = dict(compute_flop=1e23, gpu="h100", days=10.0, profile="realistic", why_smaller=False)
    plan = api.plan(**kw)
    assert plan.status == "optimal" and plan.gpus == 224
    req = PlanRequest(**kw, overrides=[text])
    field = text.split("=")[0]
    assert sens.least_gpus(plan, PlanRequest(**kw), field, _current(field, "h100", "realistic")[1],
                           parse_overrides([text])[0].value) == 224
    full, bounded = api.plan(req), api.replan(req, 224)
    assert (bounded.gpus, bounded.wall_clock_days, bounded.layout) == (full.gpus, full.wall_clock_days, full.layout)
    assert full.gpus >= 224


@pytest.mark.slow
def test_sensitivity_rows_are_the_same_with_and_without_the_bound(monkeypatch):
    """`plan --sensitivity` of a small realistic-profile plan: the bounded re-plans (the plan's count for slowing
    moves, the family certificates for speeding ones, with their re-priced answers) give the same rows as re-plans
    searched from the compute bound, and some re-plans were bounded, some certified."""
    kw = dict(compute_flop=1e23, gpu="h100", days=10.0, profile="realistic")
    plan = api.plan(**kw)
    request = PlanRequest(**kw)
    bounded = []
    real = sens.least_gpus

    def spy(*a):
        out = real(*a)
        bounded.append(out)
        return out

    monkeypatch.setattr(sens, "least_gpus", spy)
    stats: dict[str, int] = {}
    with_bound = sens.sensitivity(plan, request, jobs=1, stats=stats)
    assert any(b == plan.gpus for b in bounded) and any(b is None for b in bounded)
    assert stats["certificates"] >= 2 and stats["certified_repriced"] >= 2 and stats["skip_proofs"] >= 2
    monkeypatch.setattr(sens, "least_gpus", lambda *a: None)
    monkeypatch.setattr(sens, "CERTIFY_MIN_MOVES", 10**9)
    bare: dict[str, int] = {}
    without = sens.sensitivity(plan, request, jobs=1, stats=bare)
    assert bare["bounded"] == bare["certificates"] == bare["skip_proofs"] == 0
    assert with_bound == without


def test_no_bound_when_the_request_sets_the_field_itself():
    kw = dict(compute_flop=1e25, gpu="h100", days=30.0, profile="realistic")
    plan = api.plan(**kw)
    assert plan.status == "optimal"
    req = PlanRequest(**kw)
    assert sens.least_gpus(plan, req, "profile.overlap.pp", 0.75, 0.6) == plan.gpus
    assert sens.least_gpus(plan, req, "profile.overlap.pp", 0.75, 0.9) is None  # speeds up: no lower bound
    mine = PlanRequest(**kw, overrides=["profile.overlap.pp=0.3"])
    assert sens.least_gpus(plan, mine, "profile.overlap.pp", 0.75, 0.6) is None
    capped = PlanRequest(**kw, max_gpus=10**6)
    assert sens.least_gpus(plan, capped, "profile.overlap.pp", 0.75, 0.6) is None
    # `levels.*.lat_us=X` sets every level to X, compared with the top level's value only: no claim about the rest
    assert sens.least_gpus(plan, req, "levels.*.lat_us", 5.0, 10.0) is None
    headroom = PlanRequest(**kw, memory_headroom_GB=4.0)
    assert sens.least_gpus(plan, headroom, "profile.memory.headroom_GB", 2.0, 2.4) is None


def _family_moves(family: str, speeding: bool, factor: float = 1.25) -> list[str]:
    """--set texts moving every declared input of one certificate family (planner.sensitivity._family) by `factor`,
    the speeding way or the slowing way."""
    out = []
    for field in SLOWER_WHEN_HIGHER + SLOWER_WHEN_LOWER:
        if sens._family(field) != family:
            continue
        name, value = _current(field, "h100", "realistic")
        out.append(f"{name}={sens._fmt(_slower(field, value, 1.0 / factor if speeding else factor))}")
    return out


TOY_LONG = Workload(d_model=256, d_ff=1024, layers=4, experts=1, batch_tokens=4096, tokens=1e12)
"""The toy dense workload trained on 10^3 times the tokens: a job of days, where failures matter."""


def _instance(sets):
    hw = api.resolve("h100", "realistic", parse_overrides(sets))
    fm = get_failure_model("default", parse_overrides([s for s in sets if s.startswith("goodput.")]))
    return hw, goodput_fraction(fm, TOY_LONG.params)


def _step(hw, layout) -> float:
    from planner.cost.step import evaluate

    return evaluate(hw, TOY_LONG, layout, dp_overlap=True).step.step_s


@pytest.mark.parametrize("family", [pytest.param("step", marks=pytest.mark.slow),
                                    pytest.param("memory", marks=pytest.mark.slow), "goodput"])
def test_a_family_certificate_bounds_every_move_of_the_family(family):
    """The certificate of planner.sensitivity._certify on the enumerator's ground truth (the toy dense workload on
    10^12 tokens, a 5e5 s deadline, goodput on, clusters of at most 64 GPUs).

    The corner (every declared input of the family moved the speeding way at once), searched below the unmoved
    optimum's count by CP-SAT and by the enumerator, gives the same answer. For every input of the family moved
    alone, either way, the enumerator's fewest GPUs are at least the corner's, and CP-SAT started at that bound (the
    slowing way: at the unmoved count) returns the enumerator's count and step time (the toy's failure inputs barely
    move its goodput: that family checks the search paths only). Where the family re-prices (memory, failure inputs)
    and the bound is the unmoved count, the enumerator's layout on that count has the unmoved layout's step time."""
    from planner.search.cpsat import solve_cpsat

    deadline_s = 5e5
    opts = SearchOptions(dp_overlap=True, max_gpus=64)
    hw0, g0 = _instance([])
    base = solve_exhaustive(hw0, TOY_LONG, opts, deadline_s, goodput=g0)
    assert base.status == "optimal" and base.layout is not None
    n0 = base.layout.gpus
    fast = _family_moves(family, speeding=True)
    assert len(fast) >= 2
    hw_c, g_c = _instance(fast)
    below = SearchOptions(dp_overlap=True, max_gpus=64, below_gpus=n0)
    c_enum = solve_exhaustive(hw_c, TOY_LONG, below, deadline_s, goodput=g_c)
    c_cp = solve_cpsat(hw_c, TOY_LONG, below, deadline_s, workers=1, goodput=g_c)
    assert c_enum.status == c_cp.status and c_enum.status in ("optimal", "infeasible")
    bound = n0 if c_enum.layout is None else c_enum.layout.gpus
    assert (n0 if c_cp.layout is None else c_cp.layout.gpus) == bound <= n0
    # A corner of fewer moves (the next try of sensitivity._certify) searched from this corner's count: the
    # enumerator's answer over every count below n0.
    hw_s, g_s = _instance(fast[1:])
    s_enum = solve_exhaustive(hw_s, TOY_LONG, below, deadline_s, goodput=g_s)
    s_cp = solve_cpsat(hw_s, TOY_LONG, dataclasses.replace(below, min_gpus=bound), deadline_s, workers=1, goodput=g_s)
    assert s_enum.status == s_cp.status and s_enum.status in ("optimal", "infeasible")
    s_count = n0 if s_enum.layout is None else s_enum.layout.gpus
    assert s_count >= bound and (n0 if s_cp.layout is None else s_cp.layout.gpus) == s_count
    changed = 0
    for speeding in (True, False):
        for text in _family_moves(family, speeding):
            hw1, g1 = _instance([text])
            full = solve_exhaustive(hw1, TOY_LONG, opts, deadline_s, goodput=g1)
            assert full.status in ("optimal", "infeasible"), text
            start = bound if speeding else n0
            cp = solve_cpsat(hw1, TOY_LONG, dataclasses.replace(opts, min_gpus=start), deadline_s, workers=1,
                             goodput=g1)
            if full.layout is None:  # no cluster within the 64 GPUs: none from the bound either
                assert not speeding and cp.status == "infeasible", text
                changed += 1
                continue
            assert full.layout.gpus >= start, text
            assert cp.status == "optimal" and cp.layout is not None and cp.layout.gpus == full.layout.gpus, text
            assert math.isclose(_step(hw1, cp.layout), _step(hw1, full.layout), rel_tol=1e-8), text
            changed += full.layout.gpus != n0 or not math.isclose(_step(hw1, full.layout), _step(hw0, base.layout))
            if speeding and family in ("memory", "goodput") and bound == n0 and full.layout.gpus == n0:
                assert math.isclose(_step(hw1, full.layout), _step(hw0, base.layout), rel_tol=1e-8), text
    if family == "step":
        assert changed and bound < n0  # the moves do move the answer, the corner's too: the checks are not vacuous


def test_fewest_below_proves_the_plans_count_or_finds_the_moved_one():
    """api.fewest_below on a realistic-profile plan of 224 GPUs: it proves that no smaller cluster meets the
    deadline; with a speeding move (a 1e26 FLOP plan of 30,720 GPUs) it returns that move's plan's count."""
    kw = dict(compute_flop=1e23, gpu="h100", days=10.0, profile="realistic")
    plan = api.plan(**kw)
    assert plan.status == "optimal" and plan.gpus == 224
    req = PlanRequest(**kw, why_smaller=False)
    assert api.fewest_below(req, 224) == 224
    big = dict(compute_flop=1e26, gpu="h100", days=90.0, profile="realistic", why_smaller=False)
    assert api.plan(**big).gpus == 30720
    fast = PlanRequest(**big, overrides=["profile.gemm.sustained_factor=0.96"])
    moved = api.plan(fast)
    assert moved.gpus is not None and moved.gpus < 30720
    assert api.fewest_below(fast, 30720) == moved.gpus
    assert api.fewest_below(fast, moved.gpus) == moved.gpus
    # A corner of two speeding moves needs no more GPUs; the GEMM move alone, searched from that corner's count (the
    # next certificate try, sensitivity._certify's `least`), finds its own count again.
    corner = PlanRequest(**big, overrides=["profile.gemm.sustained_factor=0.96", "gpu.l2_GBps=7729"])
    least = api.fewest_below(corner, 30720)
    assert least is not None and least <= moved.gpus
    assert api.fewest_below(fast, 30720, least) == moved.gpus


STEP_FIELDS = [f for f in PROFILE_FIELDS if sens._family(f) == "step"]
"""The declared inputs whose slowing moves may skip their re-plan's search (planner.sensitivity._skip_proof)."""


@functools.cache
def _integer_parts(wl_name: str, sets: tuple[str, ...], dp_overlap: bool, limit: int = 300):
    """CP-SAT's integer reading of `limit` random degree tuples (a fixed seed) of a small workload's space, every
    factor vector of every group kept (no pruning): each form's tuple part and group parts in quanta, as cpsat.Model
    writes them, with the tables' rows (tuple, factor vectors) to compare like with like."""
    from planner.search.cpsat import build_pair_tables, to_quanta, tuple_forms

    wl = WORKLOADS[wl_name]
    hw = api.resolve("h100", "realistic", parse_overrides(list(sets)))
    space = build_space(hw, wl, SearchOptions())
    t = tuples_for_model_parallel(space, model_parallel_rows(space), space.dp_m)
    if len(t) > limit:
        t = t.take(np.sort(np.random.default_rng(1).choice(len(t), limit, replace=False)))
    q = tuple_terms(hw, wl, t, ShapeTable.for_space(hw, wl, space))
    tables = build_pair_tables(hw, wl, t, q, dp_overlap, prune=False)
    parts = {f"tuple:{k}": to_quanta(v) for k, v in tuple_forms(hw, wl, q, dp_overlap).items()}
    keys = {}
    for g, tab in tables.items():
        keys[g] = (tab.tup, {d: v.copy() for d, v in tab.factors.items()})
        parts.update({f"{g}:{k}": to_quanta(v) for k, v in tab.forms.items()})
    return parts, keys, tuple_memory(hw, wl, t)


QUICK_STEP_FIELDS = ("profile.gemm.sustained_factor", "levels.*.bw_bidir_GBps", "profile.network.latency_us",
                     "profile.overlap.pp")
"""The step inputs whose integer-reading check runs in the default suite on the toy dense workload; every other
(input, workload) pair is in the slow set, which .ci/run runs."""


@pytest.mark.parametrize("field,wl_name", [
    pytest.param(f, w, marks=[] if w == "toy-dense" and f in QUICK_STEP_FIELDS else [pytest.mark.slow])
    for f in STEP_FIELDS for w in WORKLOADS])
def test_a_slowing_step_move_never_lowers_an_integer_part_nor_a_memory_need(field, wl_name):
    """The premise of the skip proof (planner.sensitivity._skip_proof) in CP-SAT's own reading: every part of every
    form (the tuple part, each group's part of every factor vector), rounded up to quanta as the model writes it,
    is no smaller after a step-family input is moved the slowing way; so no layout's integer step (the largest
    branch of sums of parts) drops. And the move changes no tuple's memory need (the step family reads no memory
    term), so the same layouts fit."""
    name, value = _current(field, "h100", "realistic")
    for dp_overlap in (False, True):
        parts, keys, mem = _integer_parts(wl_name, (), dp_overlap)
        for factor in (1.25, 2.0):
            text = f"{name}={sens._fmt(_slower(field, value, factor))}"
            parts2, keys2, mem2 = _integer_parts(wl_name, (text,), dp_overlap)
            assert np.array_equal(mem, mem2), text
            assert parts.keys() == parts2.keys() and keys.keys() == keys2.keys()
            for g, (tup, fac) in keys.items():
                assert np.array_equal(tup, keys2[g][0])
                assert all(np.array_equal(v, keys2[g][1][d]) for d, v in fac.items())
            for k, v in parts.items():
                assert np.all(parts2[k] >= v), (text, k, int(np.min(parts2[k] - v)))


RAISED_ON_TOY_DENSE = {"profile.elementwise.layer_overhead_us", "profile.network.latency_us",
                       "profile.overlap.dp_exposed", "profile.gemm.sustained_factor",
                       "profile.elementwise.hbm_fraction", "levels.*.bw_bidir_GBps",
                       "profile.network.bus_bw_fraction", "profile.overlap.pp"}
"""The step inputs a toy dense workload's layouts read (GEMMs, element-wise work, data- and pipeline-parallel
traffic); the MoE, context-parallel, expert, ZeRO and tensor-overlap inputs it has no term for."""


def test_some_slowing_step_moves_raise_integer_parts():
    """The check above is not vacuous: each step input the toy dense workload reads raises parts of CP-SAT's
    reading when moved the slowing way."""
    parts, *_ = _integer_parts("toy-dense", (), True)
    raised = set()
    for field in STEP_FIELDS:
        name, value = _current(field, "h100", "realistic")
        parts2, *_ = _integer_parts("toy-dense", (f"{name}={sens._fmt(_slower(field, value, 2.0))}",), True)
        if any(np.any(parts2[k] > v) for k, v in parts.items()):
            raised.add(field)
    assert RAISED_ON_TOY_DENSE <= set(STEP_FIELDS)
    assert raised >= RAISED_ON_TOY_DENSE, sorted(RAISED_ON_TOY_DENSE - raised)


SKIP_WL = Workload(d_model=8192, d_ff=32768, layers=16, experts=1, batch_tokens=65536, tokens=1e11)
"""A toy dense workload whose 10-day plan (16 GPUs, 16 pipeline stages, ZB-H2, goodput on) has no exact tie on its
count: its runner-up's integer step is 0.6 % above the plan's, so the skip proof can act (the small workloads
above tie on their counts: a single pipeline stage with either schedule or any interleaving is the same step)."""


def _skip_case():
    from planner.export import layout_of
    from planner.search.cpsat import layout_quanta

    kw = dict(workload=SKIP_WL, gpu="h100", days=10.0, profile="realistic", why_smaller=False)
    plan = api.plan(**kw)
    assert plan.status == "optimal" and plan.gpus == 16 and plan.goodput is not None
    req = PlanRequest(**kw)
    layout = layout_of(plan)
    runner_up = api.runner_up_quanta(req, layout)
    s0 = layout_quanta(api.resolve("h100", "realistic"), SKIP_WL, layout, plan.dp_overlap)
    assert runner_up is not None and runner_up > s0  # no tie: the proof can act
    return plan, req, api.SkipProof(layout, runner_up)


def _record_answers(monkeypatch, name: str) -> list[bool]:
    """api.NAME patched to record, call by call, whether it gave an answer (not None): the list it appends to."""
    used: list[bool] = []
    real = getattr(api, name)

    def spy(*a):
        out = real(*a)
        used.append(out is not None)
        return out

    monkeypatch.setattr(api, name, spy)
    return used


def _assert_the_enumerators_answer(plan, text: str, answer: tuple, min_gpus: int | None) -> None:
    """`answer` (GPUs, days) of the skip case's request under the --set `text` is the exhaustive enumerator's over
    the counts from `min_gpus` (None: from the compute bound) up to 8x the plan's, with the request's goodput."""
    from planner.cost.step import evaluate

    assert plan.gpus is not None
    sets = parse_overrides([text])
    hw = api.resolve("h100", "realistic", sets)
    g = goodput_fraction(api.failure_model("default", sets), SKIP_WL.params)
    truth = solve_exhaustive(hw, SKIP_WL, SearchOptions(dp_overlap=plan.dp_overlap, min_gpus=min_gpus,
                                                        max_gpus=8 * plan.gpus), 10.0 * 86400, goodput=g)
    assert truth.status == "optimal" and truth.layout is not None, text
    ev = evaluate(hw, SKIP_WL, truth.layout, dp_overlap=plan.dp_overlap)
    days = ev.training_days / float(g(float(ev.gpus)))
    assert answer[0] == ev.gpus and answer[1] is not None, text
    assert math.isclose(answer[1], days, rel_tol=1e-8), (text, answer[1], days)


def _check_skip_proofs(fields, factors, monkeypatch) -> tuple[int, int]:
    """Each field moved the slowing way by each factor: the re-plan with the skip proof, the re-plan searched from
    the compute bound and the exhaustive enumerator (from the plan's count: the monotone bound, checked above against
    the enumerator from the compute bound) give the same GPUs and days. Returns (skipped, searched)."""

    plan, req, proof = _skip_case()
    n0 = plan.gpus
    assert n0 is not None
    used = _record_answers(monkeypatch, "_skip_search")
    for field in fields:
        name, value = _current(field, "h100", "realistic")
        for factor in factors:
            text = f"{name}={sens._fmt(_slower(field, value, factor))}"
            moved = req.model_copy(update={"overrides": [text], "workers": 1})
            skipped = api.replan_answer(moved, n0, proof)
            searched = api.replan_answer(moved, None)
            assert skipped == searched, text
            _assert_the_enumerators_answer(plan, text, skipped, n0)
    return sum(used), len(used) - sum(used)


def test_a_skip_proof_gives_the_searched_and_the_enumerators_answer(monkeypatch):
    """Two step inputs moved the slowing way a little: the proof skips some searches, and every answer is the
    search's and the enumerator's."""
    skipped, searched = _check_skip_proofs(["profile.network.latency_us", "profile.overlap.pp"],
                                           (1.05,), monkeypatch)
    assert skipped >= 1


@pytest.mark.slow
def test_a_skip_proof_gives_the_searched_and_the_enumerators_answer_for_every_step_input(monkeypatch):
    """Every step-family input, moved the slowing way by 1.05x, 1.25x and 2x: some searches skipped, some not (the
    move changed the answer or left the plan's layout at or above the runner-up), every answer the same."""
    skipped, searched = _check_skip_proofs(STEP_FIELDS, (1.05, 1.25, 2.0), monkeypatch)
    assert skipped >= 3 and searched >= 3, (skipped, searched)


def test_no_skip_without_a_strict_margin():
    """A proof whose runner-up ties the plan's layout (its integer step exactly) skips nothing: a tie is left to the
    search's own rule."""
    from planner.search.cpsat import layout_quanta

    plan, req, proof = _skip_case()
    s0 = layout_quanta(api.resolve("h100", "realistic"), SKIP_WL, proof.layout, plan.dp_overlap)
    hw = api.resolve("h100", "realistic")
    opts = SearchOptions(dp_overlap=plan.dp_overlap, min_gpus=plan.gpus)
    fm = get_failure_model("default")
    assert api._skip_search(hw, SKIP_WL, opts, 10.0 * 86400, "cpsat", fm, proof) is not None
    assert api._skip_search(hw, SKIP_WL, opts, 10.0 * 86400, "cpsat", fm, api.SkipProof(proof.layout, s0)) is None
    assert api._skip_search(hw, SKIP_WL, dataclasses.replace(opts, min_gpus=plan.gpus - 1), 10.0 * 86400, "cpsat", fm,
                            proof) is None  # the count is not the proven one
    assert api._skip_search(hw, SKIP_WL, opts, 1.0 * 86400, "cpsat", fm, proof) is None  # misses a shorter deadline


def test_layout_quanta_is_cpsats_own_step():
    """cpsat.layout_quanta (the skip proof's pricing of one layout) equals the integer step CP-SAT proved for the
    layout it chose, on the toy plan and on a realistic-profile plan of 224 GPUs."""
    from planner.export import layout_of
    from planner.search.cpsat import layout_quanta, solve_cpsat

    hw = api.resolve("h100", "realistic")
    res = solve_cpsat(hw, SKIP_WL, SearchOptions(dp_overlap=True), 10.0 * 86400, workers=1)
    assert res.status == "optimal" and res.layout is not None and res.step_q is not None
    assert layout_quanta(hw, SKIP_WL, res.layout, True) == res.step_q
    kw = dict(compute_flop=1e23, gpu="h100", days=10.0, profile="realistic", why_smaller=False)
    plan = api.plan(**kw)
    assert plan.gpus == 224
    from planner.workload import infer_workload

    wl = infer_workload(1e23)
    s = layout_quanta(hw, wl, layout_of(plan), plan.dp_overlap)
    assert api.runner_up_quanta(PlanRequest(**kw), layout_of(plan)) >= s  # CP-SAT's best of the rest: no better


@pytest.mark.slow
def test_a_failure_chain_bound_is_the_searched_answer():
    """sensitivity._failure_chain on the 1e26 FLOP H100 plan (30,720 GPUs, 90 days, realistic): the restart time and
    the interruption rate doubled both miss the deadline on the plan's count; the first re-plan's count bounds the
    second (its goodput is no higher on any count between), and that bounded re-plan gives what a re-plan searched
    from the compute bound gives."""
    kw = dict(compute_flop=1e26, gpu="h100", days=90.0, profile="realistic")
    plan = api.plan(**kw)
    assert plan.gpus == 30720
    request = PlanRequest(**kw)
    stats: dict[str, int] = {}
    rows = {r.input: r for r in sens.sensitivity(plan, request, jobs=1, stats=stats).rows}
    assert stats["chained"] == 1
    for field in ("goodput.restart_minutes", "goodput.interruptions_per_gpu_hour"):
        row = rows[field]
        moved = request.model_copy(update={"overrides": [f"{field}={row.high}"], "workers": 1, "why_smaller": False})
        assert api.replan_answer(moved, None) == (row.gpus_high, row.days_high)
        assert row.gpus_high is not None and row.gpus_high > 30720


def _check_seeds(fields, factors, monkeypatch) -> tuple[int, int]:
    """Each field moved by each factor (above 1: the slowing way, below: the speeding way), the re-plan bounded at
    the plan's count N: seeded with the plan's layout (api.replan_answer's `seed`), unseeded, and the exhaustive
    enumerator over the counts from N give the same GPUs and days. Returns (seeded, not seeded: the plan's layout
    no longer fit or missed the deadline under the move)."""

    plan, req, proof = _skip_case()
    n0 = plan.gpus
    assert n0 is not None
    used = _record_answers(monkeypatch, "_seed_quanta")
    for field in fields:
        name, value = _current(field, "h100", "realistic")
        for factor in factors:
            text = f"{name}={sens._fmt(_slower(field, value, factor))}"
            moved = req.model_copy(update={"overrides": [text], "workers": 1})
            seeded = api.replan_answer(moved, n0, None, proof.layout)
            plain = api.replan_answer(moved, n0)
            assert seeded == plain, text
            _assert_the_enumerators_answer(plan, text, seeded, n0)
    return sum(used), len(used) - sum(used)


SEED_QUICK = ["profile.network.latency_us", "profile.memory.headroom_GB"]


def test_a_seeded_replan_gives_the_unseeded_and_the_enumerators_answer(monkeypatch):
    """A latency and a memory reserve moved both ways by 1.25x: every seeded re-plan is the unseeded one and the
    enumerator's (the slow set moves every declared input)."""
    seeded, not_seeded = _check_seeds(SEED_QUICK, (1 / 1.25, 1.25), monkeypatch)
    assert seeded >= 3, (seeded, not_seeded)


@pytest.mark.slow
def test_a_seeded_replan_gives_the_unseeded_and_the_enumerators_answer_for_every_input(monkeypatch):
    """Every declared input (step, memory and failure families), moved both ways by 1.25x and 2x: seeded and
    unseeded re-plans and the enumerator agree; some moves leave the plan's layout unusable as a seed."""
    seeded, not_seeded = _check_seeds(PROFILE_FIELDS + FAILURE_FIELDS, (0.5, 1 / 1.25, 1.25, 2.0), monkeypatch)
    assert seeded >= 10 and not_seeded >= 1, (seeded, not_seeded)


def test_a_seed_below_the_counts_best_changes_nothing():
    """cpsat.solve_cpsat with a seed step below the count's true best (a seed no layout matches): the lowered count
    finds nothing, the count is decided again with its own cap, and the answer is the unseeded search's; with the
    true best as the seed, the same answer too."""
    from planner.search.cpsat import layout_quanta, solve_cpsat

    plan, _req, proof = _skip_case()
    hw = api.resolve("h100", "realistic")
    g = goodput_fraction(get_failure_model("default"), SKIP_WL.params)
    opts = SearchOptions(dp_overlap=plan.dp_overlap, min_gpus=plan.gpus)
    s0 = layout_quanta(hw, SKIP_WL, proof.layout, plan.dp_overlap)
    base = solve_cpsat(hw, SKIP_WL, opts, 10.0 * 86400, workers=1, goodput=g)
    assert base.status == "optimal" and base.layout == proof.layout and base.step_q == s0
    for seed_q in (s0 - 1, s0 // 2, s0):
        res = solve_cpsat(hw, SKIP_WL, opts, 10.0 * 86400, workers=1, goodput=g, seed_q=seed_q)
        assert (res.status, res.layout, res.step_q) == (base.status, base.layout, base.step_q), seed_q


def _check_corner_proofs(fields, factors, monkeypatch) -> tuple[int, int]:
    """Step inputs moved the speeding way by each factor (below 1): the certificate (the corner of all of them,
    searched below the plan's count) proves the plan's count; sensitivity._speeding_skip_proofs then covers some
    moves with a corner's runner-up, and each re-plan with its proof gives what the re-plan searched from the
    compute bound and the exhaustive enumerator give. Returns (skipped, searched)."""

    plan, req, _proof = _skip_case()
    n0 = plan.gpus
    assert n0 is not None
    used = _record_answers(monkeypatch, "_skip_search")
    for factor in factors:
        members = []
        for field in fields:
            name, value = _current(field, "h100", "realistic")
            text = f"{name}={sens._fmt(_slower(field, value, factor))}"
            members.append({"request": req.model_copy(update={"overrides": [text], "workers": 1}), "text": text,
                            "proof": None})
        corner = req.model_copy(update={"overrides": [m["text"] for m in members], "workers": 1})
        assert api.fewest_below(corner, n0) == n0  # the family certificate: the premise of the corner proofs
        covered = sens._speeding_skip_proofs(plan, req, members)
        assert covered == sum(m["proof"] is not None for m in members)
        for m in members:
            text = m["text"]
            got = api.replan_answer(m["request"], n0, m["proof"])
            assert got == api.replan_answer(m["request"], None), text
            _assert_the_enumerators_answer(plan, text, got, None)
    return sum(used), len(used) - sum(used)


def test_a_corner_skip_proof_gives_the_searched_and_the_enumerators_answer(monkeypatch):
    """Four step inputs moved the speeding way by 1.05x: the corner proofs skip some searches, and every answer is
    the search's from the compute bound and the enumerator's."""
    skipped, _ = _check_corner_proofs(["profile.network.latency_us", "profile.overlap.pp",
                                       "profile.elementwise.layer_overhead_us", "profile.elementwise.hbm_fraction"],
                                      (1 / 1.05,), monkeypatch)
    assert skipped >= 2


@pytest.mark.slow
def test_a_corner_skip_proof_gives_the_searched_and_the_enumerators_answer_for_every_step_input(monkeypatch):
    """Every step-family input moved the speeding way by 1.01x, 1.05x and 1.25x: every answer the same."""
    skipped, searched = _check_corner_proofs(STEP_FIELDS, (1 / 1.01, 1 / 1.05, 1 / 1.25), monkeypatch)
    assert skipped >= 20, (skipped, searched)
