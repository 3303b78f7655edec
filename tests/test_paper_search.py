"""The replay of the paper's simulator at its final commit (benchmarks/paper_search.py): its rules, checked against
an enumeration written here from the rules as the simulator's notebook states them, its shapes against the
notebook's printed rows, and its step rule against the simulator's formula written out by hand."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from paper_search import (  # noqa: E402
    OURS,
    REPLAY,
    SIM_DEADLINE_DAYS,
    WATERFALL,
    candidate_tuples,
    first_crossing,
    plan_rules,
    price_notebook_row,
    read_notebook_rows,
    rules_at,
    sim_curve,
    sim_round,
    sim_workload,
    threshold_mfu,
)
from paper_search import _best_at_least_gpus as best_at_least_gpus  # noqa: E402
from paper_search import _step_under as step_under  # noqa: E402

from planner.hardware import get_hardware  # noqa: E402
from planner.parallel.dimensions import DEGREES  # noqa: E402
from planner.parallel.space import Tuples  # noqa: E402
from planner.schema import Layout, Workload  # noqa: E402
from planner.search.exhaustive import price_placements  # noqa: E402


def _divs(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _simulator_space(wl: Workload, lo: int, hi: int) -> set[tuple]:
    """The notebook's optimal_parallelism loops, restated: for N = E 2^k, N_EP = gcd(N, E), N / N_EP = N_TP N_DP N_PP,
    N_TP,ff within [isqrt, 4 isqrt] of N_TP, then per schedule its microbatch candidates and interleaving."""
    out = set()
    per_expert = wl.batch_tokens // wl.experts
    for k in range(0, 40):
        n = wl.experts * 2**k
        if not lo <= n < hi:
            continue
        ep = math.gcd(n, wl.experts)
        for tp, dp, pp in itertools.product(_divs(n // ep), repeat=3):
            if tp * dp * pp != n // ep or wl.layers % pp or per_expert % dp:
                continue
            for tf in _divs(tp):
                tm = tp // tf
                if not math.isqrt(tp) <= tf <= 4 * math.isqrt(tp) or wl.d_model % tm or wl.d_ff % tf:
                    continue
                ms = _divs(per_expert // dp)
                for m in [d for d in ms if d >= pp][:4]:
                    out.add((dp, tf, tm, pp, wl.layers // pp if pp > 1 else 1, ep, m, False))
                for m in [d for d in ms if d >= 2 * pp][:1]:
                    out.add((dp, tf, tm, pp, 1, ep, m, True))
    return out


def _our_space(wl: Workload, lo: int, hi: int) -> set[tuple]:
    """Every layout our planner searches (docs/model.md, "The search space") with lo <= N < hi."""
    out = set()
    per_expert = wl.batch_tokens // wl.experts
    for tf, tm, ep, dp in itertools.product(_divs(wl.d_ff), _divs(wl.d_model), _divs(wl.experts), _divs(per_expert)):
        for pp, i in itertools.product(_divs(wl.layers), repeat=2):
            if wl.layers % (pp * i) or not lo <= dp * tf * tm * pp * ep < hi:
                continue
            for m in _divs(per_expert // dp):
                out.add((dp, tf, tm, pp, i, ep, m, False))
                if i == 1 and m >= 2 * pp - 1:
                    out.add((dp, tf, tm, pp, 1, ep, m, True))
    return out


def _rows(t) -> set[tuple]:
    return {(*(int(x) for x in row[:7]), bool(row[7])) for row in zip(
        t["dp"], t["tp_ff"], t["tp_model"], t["pp"], t["interleave"], t["ep"], t["microbatches"], t["zero_bubble"])}


@pytest.mark.parametrize("experts", [1, 4])
def test_replay_space_is_exactly_the_simulators_rules(experts):
    wl = Workload(d_model=48, d_ff=192, layers=12, experts=experts, batch_tokens=96 * experts, tokens=1e9)
    t = candidate_tuples(get_hardware("h100"), wl, REPLAY, 1, 2**20)
    assert _rows(t) == _simulator_space(wl, 1, 2**20)
    assert len(_rows(t)) == len(t)  # no duplicates
    assert t["zero_bubble"].any() and (~t["zero_bubble"]).any()  # both schedules


@pytest.mark.parametrize("experts", [1, 4])
def test_fully_relaxed_space_is_ours(experts):
    wl = Workload(d_model=24, d_ff=96, layers=8, experts=experts, batch_tokens=48 * experts, tokens=1e9)
    t = candidate_tuples(get_hardware("h100"), wl, OURS, 5, 64)
    assert _rows(t) == _our_space(wl, 5, 64)


def test_waterfall_relaxes_one_rule_at_a_time_toward_ours():
    assert rules_at(0) == rules_at(1) == REPLAY  # 'crossing' re-reads the replay's points
    changed = []
    for k in range(2, len(WATERFALL) - 1):
        before, after = rules_at(k - 1), rules_at(k)
        diff = [f for f in REPLAY.__dataclass_fields__ if getattr(before, f) != getattr(after, f)]
        assert diff == [WATERFALL[k][0]]
        changed += diff
    assert rules_at(len(WATERFALL) - 2) == OURS
    assert sorted(changed) == sorted(f for f in REPLAY.__dataclass_fields__)


def test_simulator_shapes_match_its_printed_rows():
    assert sim_round(13.2) == 14 and sim_round(12.8) == 12  # 12 = 3 x 4 and 14 = 7 x 2 are neighbours
    assert sim_round(13.0) == 12  # a tie (linear midpoint) goes to the smaller
    rows = read_notebook_rows()
    assert len(rows) >= 30
    for r in rows:
        wl = sim_workload(r["d_model"], False)
        assert (wl.layers, wl.batch_tokens) == (r["layers"], r["batch_tokens"])
        assert wl.compute_flop == pytest.approx(r["compute_flop"], rel=0.005)  # printed to 3 digits
    assert SIM_DEADLINE_DAYS == pytest.approx(0.25 * 3.154e7 / 86400)


def test_replay_step_rule_is_the_simulators_formula():
    """1F1B: max(GEMMs, overlapped traffic) / (1 - bubble) + one microbatch's TP/PP latency path + DP phase;
    ZB-H2: the same without bubble and without that latency."""
    hw = get_hardware("h100")
    wl = Workload(d_model=4096, d_ff=16384, layers=32, experts=1, batch_tokens=2**20, tokens=1e11)
    place = {"dp": (1, 4), "tp_ff": (2, 1), "tp_model": (4, 1), "pp": (1, 8), "ep": (1, 1), "cp": (1, 1)}
    for sched, i, m in (("1f1b", 4, 16), ("zb-h2", 1, 16)):
        lay = Layout(dp=4, tp_ff=2, tp_model=4, pp=8, interleave=i, ep=1, microbatches=m, schedule=sched,
                     placement=place)
        t = Tuples.from_layouts([lay])
        q = _shape(hw, wl, t)
        rows, pl, arr = price_placements(hw, wl, t, False, q)
        k = next(j for j in range(len(rows)) if all(tuple(pl[j][x]) == place[d] for x, d in enumerate(DEGREES)))
        st = {key: float(np.broadcast_to(v, (len(rows),))[k]) for key, v in arr.items()}
        busy = max(st["matmul_s"], st["tp_s"] + st["pp_ep_s"])
        path = (st["latency_s"] - st["latency_dp_s"]) * lay.pp / m  # our 1F1B charges m / N_PP paths
        dp_phase = st["dp_s"] + st["latency_dp_s"]
        if sched == "1f1b":
            z = (i - 1) * max(0, lay.pp - m)
            f_b = (lay.pp - 1 + z) / (lay.pp - 1 + z + i * m)
            want = busy / (1 - f_b) + path + dp_phase
        else:
            want = busy + dp_phase
        one = {key: np.broadcast_to(v, (len(rows),))[k:k + 1] for key, v in arr.items()}
        got = step_under(REPLAY, one, q["critical_mm_s"][rows[k:k + 1]],
                         t["zero_bubble"][rows[k:k + 1]].astype(bool))[0]
        assert got == pytest.approx(want, rel=1e-12)


def _shape(hw, wl, t):
    from planner.search.presolve import ShapeTable, tuple_terms

    return tuple_terms(hw, wl, t, ShapeTable(hw, wl, t["tp_ff"], t["tp_model"], t["dp"] * t["microbatches"]))


def test_replay_takes_the_first_power_of_two_cluster_that_meets_the_deadline():
    hw = get_hardware("h100")
    wl = Workload(d_model=4096, d_ff=16384, layers=8, experts=1, batch_tokens=65536, tokens=1e9)
    one = plan_rules(hw, wl, REPLAY, days=1e6)
    assert one is not None and one.gpus == 1
    tight = plan_rules(hw, wl, REPLAY, days=one.training_days / 3)
    assert tight is not None and tight.gpus >= 4 and tight.gpus & (tight.gpus - 1) == 0
    assert tight.training_days <= one.training_days / 3
    half = tight.gpus // 2  # on half that cluster no layout of the replay's space meets the deadline
    t = candidate_tuples(hw, wl, REPLAY, half, half + 1)
    assert best_at_least_gpus(hw, wl, REPLAY, one.training_days / 3 * 86400, t) is None
    fewest = plan_rules(hw, wl, OURS, days=one.training_days / 3)
    assert fewest is not None and fewest.gpus <= tight.gpus


def test_replay_of_dense_h100_ends_where_the_final_notebook_does():
    """The notebook at b1f771c prints its dense H100 rows (paper batch law) and ends linear scaling at the first
    that reaches 0.8 x 0.7; the replay on our cost model reaches it at the same shape."""
    hw = get_hardware("h100")
    printed = first_crossing(read_notebook_rows(), threshold_mfu(hw))
    rows = sim_curve(hw, False, REPLAY, below_to_stop=1)
    assert first_crossing(rows, threshold_mfu(hw)) == pytest.approx(printed, rel=0.005)


def test_notebook_row_priced_on_its_own_layout():
    row = read_notebook_rows()[0]
    got = price_notebook_row(get_hardware("h100"), row)
    assert got["schedule"] == "zb-h2" and got["layers_match"] and got["batch_match"]
    assert got["mfu"] == pytest.approx(row["mfu"], rel=0.01)
