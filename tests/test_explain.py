"""`planner.explain`: the bounded scans behind the infeasibility explanations.

* `min_memory_on` prices at most `max_rows` degree tuples and stops every loop there; its least memory is checked
  against the formula of docs/model.md §7, written out here;
* `fit_search` (the fewest GPUs on which some layout fits) walks only the counts `can_form` allows, in increasing
  order, under a count cap, never a clock: the same request gets the same explanation on any machine;
* `planner.explain` does not import `planner.api` (the explanation used to call back into the search).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from planner import explain
from planner.explain import FitSearch, ascending_divisors, explain_infeasible, fit_search, gpus_to_fit, min_memory_on
from planner.hardware import get_hardware
from planner.parallel.space import SearchOptions
from planner.search.result import SearchResult
from planner.workload import infer_workload, workload_from_shape

ROOT = Path(__file__).resolve().parents[1]
INFEASIBLE = SearchResult("cpsat", "infeasible", None, 0.5, 10)

# d_model 1024, d_ff 4096, L 16, E 1, b 2^20: N_p = 2 L E d_model d_ff = 134,217,728.
SHAPE = (1024, 4096, 16, 1, 2**20)


# --------------------------------------------------------------------------------------------------
# min_memory_on and its row cap
# --------------------------------------------------------------------------------------------------


def _memory_oracle(n: int) -> tuple[int, float, tuple[int, int, int, int]]:
    """(tuples, least bytes, its (dp, tp_ff, tp_model, pp)) of SHAPE on n H100s, from docs/model.md §7 by hand.

    E = 1, so ep = 1; the most microbatches m = (b/E) / dp make the nanobatch b' = 1 token; 1F1B holds
    min(pp, m) = pp microbatches in flight. Per GPU, P = N_p / (tp pp) parameters:
    2P weights + 2P gradients + 12P/dp optimizer + (d_model/tp_model + d_ff/tp_ff) b' (L/pp) pp 2 activations
    + 2e9 reserve."""
    d_model, d_ff, layers, _, b = SHAPE
    n_p = 2 * layers * d_model * d_ff
    count, best, arg = 0, float("inf"), (0, 0, 0, 0)
    for tf, tm, pp in itertools.product(range(1, n + 1), repeat=3):
        if n % (tf * tm * pp) or d_ff % tf or d_model % tm or layers % pp:
            continue
        dp = n // (tf * tm * pp)
        if b % dp:
            continue
        count += 1
        p = n_p / (tf * tm * pp)
        total = 4 * p + 12 * p / dp + (d_model / tm + d_ff / tf) * 1 * (layers / pp) * pp * 2 + 2e9
        if total < best:
            best, arg = total, (dp, tf, tm, pp)
    return count, best, arg


def test_min_memory_on_is_exact_against_the_formula():
    count, best, (dp, tf, tm, pp) = _memory_oracle(64)
    assert count == 80 and best == 2_033_570_816.0 and (dp, tf, tm, pp) == (1, 16, 4, 1)
    fit = min_memory_on(get_hardware("h100"), workload_from_shape(*SHAPE), SearchOptions(), 64)
    assert fit is not None
    assert fit.rows == 80 and fit.complete
    assert fit.total_bytes == best
    assert fit.tuple_text == "dp=1, tp_ff=16, tp_model=4, pp=1, ep=1, microbatches=1048576, 1f1b"


def test_min_memory_on_cap_stops_every_loop(monkeypatch):
    """max_rows = 3 prices 3 tuples and returns: the divisor lists of the outer loops are built once each.

    The tuples come tp_ff = 1, tp_model = 1, ep = 1, then pp = 1, 2, 4, 8, 16 (dp = 64, 32, 16, ...): three rows
    and a fourth peeked (to know that more exist) all come from the first pp list, so `divisors` runs 4 times. The
    old `break` left only the innermost loop, and every other (tp_ff, tp_model, ep) was still enumerated."""
    calls = []
    real = explain.divisors

    def counting(k: int) -> tuple[int, ...]:
        calls.append(k)
        return real(k)

    monkeypatch.setattr(explain, "divisors", counting)
    hw, wl = get_hardware("h100"), workload_from_shape(*SHAPE)
    fit = min_memory_on(hw, wl, SearchOptions(), 64, max_rows=3)
    assert fit is not None
    assert fit.rows == 3 and not fit.complete
    assert calls == [64, 64, 1, 16]  # gcd(d_ff, 64), gcd(d_model, 64), gcd(E, 64), gcd(L, 64)
    assert fit.tuple_text == "dp=16, tp_ff=1, tp_model=1, pp=4, ep=1, microbatches=65536, 1f1b"
    assert fit.total_bytes == 2_159_547_392.0  # the least of the three priced, above the true least

    calls.clear()
    full = min_memory_on(hw, wl, SearchOptions(), 64)
    assert full is not None and full.rows == 80 and full.complete and len(calls) > 4
    exact = min_memory_on(hw, wl, SearchOptions(), 64, max_rows=80)  # exactly as many rows as there are
    assert exact is not None and exact.rows == 80 and exact.complete
    capped = min_memory_on(hw, wl, SearchOptions(), 64, max_rows=79)
    assert capped is not None and capped.rows == 79 and not capped.complete


# --------------------------------------------------------------------------------------------------
# fit_search: deterministic, over usable counts only
# --------------------------------------------------------------------------------------------------


def test_ascending_divisors_in_order_each_once():
    got = list(ascending_divisors({2: 3, 3: 2, 7: 1}))
    assert got == sorted(d for d in range(1, 505) if 504 % d == 0)
    assert len(got) == 24
    assert list(ascending_divisors({})) == [1]


@pytest.mark.parametrize("compute, start, gpus", [
    (1e24, 18, 32), (1e26, 199, 200), (1e28, 2030, 2048), (1e30, 22104, 25088), (1e32, 202085, 229376)])
def test_fit_search_h100_dense(compute, start, gpus):
    """start = ceil(16 N_p / (80 GB - 2 GB)); e.g. 1e26: N_p = 966,367,641,600 -> 198.23 -> 199."""
    got = fit_search(get_hardware("h100"), infer_workload(compute), SearchOptions())
    assert got == FitSearch(gpus, start, gpus, True)
    assert gpus_to_fit(get_hardware("h100"), infer_workload(compute), SearchOptions()) == gpus


def test_fit_search_caps_are_counts():
    hw, wl = get_hardware("h100"), infer_workload(1e30)
    # 24,576 = 3 x 2^13 is the first usable count from 22,104 up; it does not fit, 25,088 = 2^9 x 7^2 does.
    assert fit_search(hw, wl, SearchOptions(), max_priced=1) == FitSearch(None, 22104, 24576, False)
    assert fit_search(hw, wl, SearchOptions(), max_priced=2) == FitSearch(25088, 22104, 25088, True)
    assert fit_search(hw, wl, SearchOptions(), max_divisors=10) == FitSearch(None, 22104, None, False)


def _gb200_whole_racks():
    """GB200 NVL72 used in whole 72-GPU racks (no unit / usable: the level is filled exactly, as `--set
    levels.0.usable=72` but without trays): the shipped file's jobs take 4-GPU trays, 64 per rack."""
    hw = get_hardware("gb200-nvl72")
    return hw.model_copy(update={"levels": (hw.levels[0].model_copy(update={"unit": None, "usable": None}),
                                            *hw.levels[1:])})


def test_fit_search_proves_no_count_fits_gb200():
    """1e30 dense: d_model = 7 x 2^14, d_ff = 7 x 2^16, L = 2^10, b = 3 x 2^24, so usable counts divide
    3 x 7^2 x 2^64. Above one 72-GPU NVLink domain a count must be a multiple of 72 = 2^3 x 3^2, which no divisor is;
    at most 72 GPUs hold far less than the 9,370 the weights, gradients and optimizer state need. The old 3 s
    wall-clock scan gave up here without saying why; the divisor walk proves it (390 divisors)."""
    hw, wl = _gb200_whole_racks(), infer_workload(1e30)
    assert (wl.d_model, wl.d_ff, wl.layers, wl.experts, wl.batch_tokens) == (114688, 458752, 1024, 1, 50331648)
    assert fit_search(hw, wl, SearchOptions()) == FitSearch(None, 9370, None, True)


def test_fit_search_on_gb200_trays_finds_whole_trays():
    """The shipped GB200 NVL72 takes 4-GPU trays, up to 64 GPUs per rack: 2^k x 7^2 counts from 9,370 up fill racks
    of 64 (e.g. 9,408 = 147 x 64), so a count that fits exists."""
    got = fit_search(get_hardware("gb200-nvl72"), infer_workload(1e30), SearchOptions())
    assert got.gpus is not None and got.gpus >= 9370 and got.gpus % 64 == 0 and got.exhaustive


GB200_FIXED = (
    "no layout can split this model over exactly 72 GPUs: the degrees must divide d_ff=458752, d_model=114688, "
    "L=1024, E=1 and b/E=50331648, and together they lack the factor 3 of 72\n"
    "the nearest usable counts are 64 (too little memory for this model); no GPU count of gb200-nvl72 that this "
    "model can be split over fits it in memory; weights, gradients and optimizer state alone need at least 9,370 "
    "GPUs (16 bytes per parameter)")
GB200_DEADLINE = (
    "the model does not fit in memory on any cluster of gb200-nvl72 it can be split over (every usable GPU count "
    "from 9,370 up was checked; fewer GPUs cannot hold the weights, gradients and optimizer state, 16 bytes per "
    "parameter)\n"
    "use hardware with more HBM, or a shape whose dimensions have more small factors")
H100_MEMORY = (
    "the model does not fit in memory on 8 GPUs of h100: the best-fitting layout (dp=1, tp_ff=4, tp_model=2, pp=1, "
    "ep=1, microbatches=10485760, 1f1b) needs 1,934.8 GB per GPU but the H100 SXM5 has 80 GB of HBM (24.2x as much "
    "is needed)\n"
    "the fewest GPUs on which some layout fits is 200 (use --gpus 200 or more; to meet a deadline as well, drop "
    "--gpus and give --days, and the planner sizes the cluster)")


def _explanations() -> list[str]:
    gb200, wl = _gb200_whole_racks(), infer_workload(1e30)
    return [
        explain_infeasible(gb200, wl, SearchOptions(gpus=72), None, INFEASIBLE),
        explain_infeasible(gb200, wl, SearchOptions(), 90.0, INFEASIBLE),
        explain_infeasible(get_hardware("h100"), infer_workload(1e26), SearchOptions(gpus=8), None, INFEASIBLE),
    ]


def test_explanations_exact_text():
    assert _explanations() == [GB200_FIXED, GB200_DEADLINE, H100_MEMORY]


def test_explanations_never_read_the_clock(monkeypatch):
    """With every clock made to fail, the texts are unchanged (explain_infeasible would otherwise turn the error
    into 'the explanation failed: ...')."""

    def no_clock() -> float:
        raise AssertionError("an explanation read the clock")

    for name in ("monotonic", "perf_counter", "time", "process_time"):
        monkeypatch.setattr(time, name, no_clock)
    assert _explanations() == [GB200_FIXED, GB200_DEADLINE, H100_MEMORY]


def test_explain_does_not_import_api():
    """planner.explain's own imports do not reach planner.api (api imports explain; the reverse made a cycle).

    The package's __init__ imports planner.api for `from planner import plan`, so the check loads planner.explain
    under an empty `planner` package to see the module's own import graph."""
    code = ("import sys, types\n"
            "pkg = types.ModuleType('planner'); pkg.__path__ = ['planner']; sys.modules['planner'] = pkg\n"
            "import planner.explain\n"
            "print(sorted(m for m in sys.modules if m.startswith('planner.api')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert "planner.api" not in (ROOT / "planner" / "explain.py").read_text()
    assert "import api" not in (ROOT / "planner" / "explain.py").read_text()


@pytest.mark.parametrize("experts", [1, 4])
def test_floor_bound_is_the_cost_models_floor_of_the_layout_it_names(experts):
    """The latency wall reads the floor from the cost terms: the layout it names (N_PP = N_DP = 1, its TP and EP
    degrees, the microbatches of its nanobatch), priced in full by planner.cost.step.evaluate, has exactly that
    critical path (one node here: every placement of it is the same)."""
    from planner.cost.step import evaluate
    from planner.parallel.placement import greedy_placement
    from planner.schema import Layout, Workload

    hw = get_hardware("h100")
    wl = Workload(d_model=1024, d_ff=4096, layers=8, experts=experts, batch_tokens=2**16, tokens=1e9)
    fb = explain.floor_bound(hw, wl)
    degrees = {"dp": 1, "tp_ff": fb.tp_ff, "tp_model": fb.tp_model, "pp": 1, "ep": fb.ep}
    m = round(wl.batch_tokens / wl.experts / fb.nanobatch)
    lay = Layout(**degrees, interleave=1, microbatches=m, placement=greedy_placement(hw, degrees))
    assert fb.tp_ff * fb.tp_model * fb.ep <= 8
    assert evaluate(hw, wl, lay).step.critical_path_s == pytest.approx(fb.step_s, rel=1e-12)


def test_floor_bound_where_a_level_is_faster_than_the_one_below():
    """A pipeline boundary above the expert ranks could then cost less than the routing hop the N_PP = 1 rows
    price: the bound takes that point-to-point term at its least over every (N_PP, i) too, and stays below every
    layout of a small toy space on 16 GPUs (two nodes), priced whole by the enumerator's pricing."""
    from planner.parallel.space import SearchOptions, build_space, model_parallel_rows, tuples_for_model_parallel
    from planner.schema import Workload
    from planner.search.exhaustive import price_placements
    from planner.search.presolve import ShapeTable, tuple_terms

    hw = get_hardware("h100")
    slow_bottom = hw.model_copy(update={"levels": (hw.levels[0].model_copy(update={"lat_s": 1e-4}), *hw.levels[1:])})
    wl = Workload(d_model=1024, d_ff=4096, layers=8, experts=4, batch_tokens=2**14, tokens=1e9)
    options = SearchOptions(gpus=16)
    fb = explain.floor_bound(slow_bottom, wl, options)
    space = build_space(slow_bottom, wl, options)
    t = tuples_for_model_parallel(space, model_parallel_rows(space), space.dp_m)
    t = t.take(np.nonzero(t.gpus == 16)[0])
    rows, _, arr = price_placements(slow_bottom, wl, t, False,
                                    tuple_terms(slow_bottom, wl, t, ShapeTable.for_space(slow_bottom, wl, space)))
    assert len(rows) > 0
    assert np.all(arr["step_s"] >= fb.step_s * (1 - 1e-12))
    assert np.all(arr["critical_path_s"] >= fb.step_s * (1 - 1e-12))
    # with every level that slow, the N_PP = 1 rows bound it again, and no lower
    wl = infer_workload(1e26, sparse=True)
    fb = explain.floor_bound(slow_bottom, wl)
    all_slow = hw.model_copy(update={"levels": tuple(lv.model_copy(update={"lat_s": 1e-4}) for lv in hw.levels)})
    assert explain.floor_bound(all_slow, wl).step_s >= fb.step_s


@pytest.mark.parametrize("shape", [
    dict(d_model=256, d_ff=1024, layers=4, experts=1, batch_tokens=4096),
    dict(d_model=96, d_ff=360, layers=6, experts=1, batch_tokens=3000),  # factors 2, 3 and 5
    dict(d_model=128, d_ff=512, layers=2, experts=4, batch_tokens=1024),  # MoE: E and b / E
    dict(d_model=70, d_ff=210, layers=7, experts=1, batch_tokens=49),  # factors 2, 3, 5 and 7
])
@pytest.mark.parametrize("system", ["h100", "gb200-nvl72"])
def test_nearby_counts_are_the_nearest_found_by_brute_force(shape, system):
    """The counts the degrees can split are the divisors of the split dimensions' product (split_divisors, checked
    here against divisors_allow count by count up to 100,000); the nearest usable counts from that list equal the
    nearest of every count tried one by one with can_form, for every n up to 1,000 (the brute force reaches 4,000)."""
    hw = get_hardware(system)
    wl = workload_from_shape(tokens=1e9, **shape)
    splits = explain.split_divisors(wl)
    assert splits is not None
    assert all(explain.divisors_allow(wl, k) for k in splits)
    assert [k for k in range(1, 100_001) if explain.divisors_allow(wl, k)] == [k for k in splits if k <= 100_000]
    usable = [k for k in range(1, 4001) if explain.can_form(hw, wl, k)]
    for n in range(1, 1001):
        if explain.can_form(hw, wl, n):
            continue
        below, above = explain.nearby_counts(hw, wl, n)
        assert below == max((k for k in usable if k < n), default=None), n
        ref_above = min((k for k in usable if k > n), default=None)
        assert above == ref_above if ref_above is not None else (above is None or above > 4000), n


def test_a_count_far_past_every_usable_one_is_answered_without_a_scan():
    """999,999,999,999 GPUs of h100 for a 1e26-FLOP model: the counts the degrees can split divide b d_ff d_model L =
    (2^21 x 5)(2^14 x 5)(2^12 x 5)(2^5 x 9) = 2^52 x 3^2 x 5^3, and the two such divisors nearest 1e12 are
    2^32 x 3^2 x 5^2 = 966,367,641,600 and 2^36 x 3 x 5 = 1,030,792,151,040 (listed by hand: the next are 2^33 x 5^3
    and 2^40), both multiples of 8. A scan of a million counts each way found neither and took seconds."""
    wl = infer_workload(1e26)
    hw = get_hardware("h100")
    below, above = explain.nearby_counts(hw, wl, 999_999_999_999)
    assert (below, above) == (2**32 * 3**2 * 5**2, 2**36 * 3 * 5)
    assert explain.can_form(hw, wl, below) and explain.can_form(hw, wl, above)



def test_a_cluster_that_fits_only_inside_the_headroom_says_so_and_what_headroom_admits_it(capsys):
    # Llama 3 8B on 4 H100 under the realistic profile: the least any layout needs (38.12 GB per GPU) is within the
    # 85.07 GB the device offers but not with 62 GB kept free. The explanation calls it what it is (inside the
    # headroom, not "does not fit"), with the GB free; the headroom it names (floored to 0.01 GB) admits the plan.
    import json
    import re

    from cli_helpers import invoke

    def plan(headroom: str) -> dict:
        code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "4",
                                         "--memory-headroom", headroom, "--json"])
        assert code in (0, 1), err
        return json.loads(out)

    tight = plan("62")
    why = tight["explanation"]
    assert tight["status"] == "infeasible" and "does not fit" not in why
    m = re.match(r"the model fits the memory of 4 GPUs of h100 only inside the headroom: the least any layout needs "
                 r"is ([\d.]+) GB per GPU \(.*\) of ([\d.]+) GB usable HBM, which leaves ([\d.]+) GB free, less than "
                 r"the 62\.00 GB of headroom .*; --memory-headroom ([\d.]+) accepts it", why)
    assert m, why
    need, cap, free, admit = map(float, m.groups())
    assert free == pytest.approx(cap - need, abs=0.011) and admit <= free < 62
    fits = plan(m[4])
    assert fits["status"] == "optimal" and fits["memory"]["verdict"] == "fits"
    assert fits["memory"]["total_bytes"] / 1e9 == pytest.approx(need, abs=0.005)
