"""Cost tables shared by both searches: every number comes from planner.cost, tabulated once per shape.

Both the exhaustive enumerator and the CP-SAT model price layouts through these functions, so they cannot
disagree about the physics; they differ only in how they search.
"""

from __future__ import annotations

import math

import numpy as np

from planner.cost import memory as mem
from planner.cost.pipeline import bubble_fraction, microbatches_in_flight
from planner.cost.step import block_matmul_s, nanobatch_tokens
from planner.schema import Hardware, Workload
from planner.solve.space import Tuples, factor_options


class ShapeTable:
    """block_matmul_s over every (N_TP,ff, N_TP,model, N_DP m) of a space, computed once per search.

    Lookups are by binary search in the sorted candidate values, so pricing millions of tuples costs no sorting.
    """

    def __init__(self, hw: Hardware, wl: Workload, tp_ff: np.ndarray, tp_model: np.ndarray, u: np.ndarray):
        self.tp_ff, self.tp_model, self.u = np.sort(tp_ff), np.sort(tp_model), np.sort(u)
        g = np.meshgrid(self.tp_ff, self.tp_model, self.u, indexing="ij")
        per_expert = wl.batch_tokens // wl.experts
        blk, crit = block_matmul_s(hw, wl, g[0].ravel(), g[1].ravel(), per_expert / g[2].ravel().astype(np.float64))
        self.blk, self.crit = blk, crit

    @classmethod
    def for_space(cls, hw: Hardware, wl: Workload, space) -> "ShapeTable":
        """Every shape the space can produce: its N_TP,ff and N_TP,model candidates and every N_DP m product."""
        return cls(hw, wl, space.tp_ff, space.tp_model, np.unique(space.dp_m[:, 0] * space.dp_m[:, 1]))

    def lookup(self, t: Tuples) -> tuple[np.ndarray, np.ndarray]:
        return self.lookup_arrays(t.tp_ff, t.tp_model, t.dp * t.microbatches)

    def lookup_arrays(self, tp_ff, tp_model, u) -> tuple[np.ndarray, np.ndarray]:
        i = np.searchsorted(self.tp_ff, tp_ff)
        j = np.searchsorted(self.tp_model, tp_model)
        k = np.searchsorted(self.u, u)
        flat = (i * len(self.tp_model) + j) * len(self.u) + k
        return self.blk[flat], self.crit[flat]


def tuple_terms(hw: Hardware, wl: Workload, t: Tuples, shapes: ShapeTable) -> dict[str, np.ndarray]:
    """Placement-independent quantities of each degree tuple (SPEC §5): matmul, bubble, critical path, memory."""
    dp, tf, tm = (t.dp.astype(np.float64), t.tp_ff.astype(np.float64), t.tp_model.astype(np.float64))
    pp, ep, m = t.pp.astype(np.float64), t.ep.astype(np.float64), t.microbatches.astype(np.float64)
    blk, crit = shapes.lookup(t)
    f_b = bubble_fraction(pp, t.interleave, m, t.zero_bubble)
    bn = nanobatch_tokens(wl, dp, m)
    in_flight = microbatches_in_flight(pp, t.interleave, m, t.zero_bubble)
    memc = mem.memory_components(wl.params, wl.d_model, wl.d_ff, wl.layers, wl.experts, hw.gpu.word_bytes,
                                 dp, tf, tm, pp, ep, bn, in_flight)
    return {
        "block_s": blk, "block_critical_s": crit,
        "matmul_s": m * (wl.layers / pp) * (wl.experts / ep) * blk,
        "critical_mm_s": wl.layers * (wl.experts / ep) * crit,
        "bubble_fraction": f_b,
        "memory_bytes": memc["total_bytes"],
    }


def _lat_array(hw: Hardware) -> np.ndarray:
    return np.array([lvl.lat_s for lvl in hw.levels], dtype=np.float64)


def min_allreduce_latency_s(hw: Hardware, degree: int) -> float:
    """Least latency of one all-reduce over `degree` ranks, over every placement of the degree on the levels."""
    if degree == 1:
        return 0.0
    opts = factor_options(hw, degree)
    if len(opts) == 0:
        return math.inf
    return float((2.0 * (opts > 1) * _lat_array(hw)[None, :]).sum(axis=1).min())


def min_routing_latency_s(hw: Hardware, ep: int) -> float:
    """Least one-way latency of an expert-routing hop (at or above the top level N_EP spans)."""
    if ep == 1:
        return 0.0
    opts = factor_options(hw, ep)
    if len(opts) == 0:
        return math.inf
    lat = _lat_array(hw)
    suffix_min = np.minimum.accumulate(lat[::-1])[::-1]  # min latency at or above each level
    top = len(lat) - 1 - np.argmax((opts > 1)[:, ::-1], axis=1)  # 0-based top level of each placement
    return float(suffix_min[top].min())


class LatencyTable:
    """Least all-reduce and routing latencies per candidate degree value, computed once per search."""

    def __init__(self, hw: Hardware, values: np.ndarray):
        self.values = np.unique(values)
        self.allreduce = np.array([min_allreduce_latency_s(hw, int(v)) for v in self.values])
        self.routing = np.array([min_routing_latency_s(hw, int(v)) for v in self.values])

    def allreduce_of(self, x: np.ndarray) -> np.ndarray:
        return self.allreduce[np.searchsorted(self.values, x)]

    def routing_of(self, x: np.ndarray) -> np.ndarray:
        return self.routing[np.searchsorted(self.values, x)]


def latency_path_lower_bound(hw: Hardware, wl: Workload, lats: LatencyTable, tp_ff, tp_model, pp, interleave, ep
                             ) -> np.ndarray:
    """Least serial latency of one microbatch through all L blocks, both passes, over every placement."""
    L = wl.layers
    lat_min = float(_lat_array(hw).min())
    lat_tp = lats.allreduce_of(tp_ff) + lats.allreduce_of(tp_model)
    pp_bound = (interleave * pp - 1).astype(np.float64) * np.where(pp > 1, lat_min, 0.0)
    p2p = np.where(ep > 1, max(L - 1, 0) * lats.routing_of(ep), pp_bound)
    return 2.0 * (L * lat_tp + p2p)


def step_lower_bound_free(hw: Hardware, wl: Workload, t: Tuples, terms: dict[str, np.ndarray],
                          lats: LatencyTable | None = None) -> np.ndarray:
    """A placement-free lower bound of each tuple's step time (valid for every placement).

    Network bandwidth terms are dropped (>= 0) and every latency is replaced by its least value over the degree's
    placements, in both the floor (DP + critical path) and Eq. 21 (whose 1F1B latency term is m / N_PP times the
    per-microbatch path).
    """
    lat_path = latency_path_lower_bound(hw, wl, lats, t.tp_ff, t.tp_model, t.pp, t.interleave, t.ep)
    lat_dp = lats.allreduce_of(t.dp)
    lat_step = np.where(t.zero_bubble, 0.0, t.microbatches / t.pp.astype(np.float64) * lat_path)
    floor = lat_dp + terms["critical_mm_s"] + lat_path
    eq21 = lat_dp + lat_step + terms["matmul_s"] / (1.0 - terms["bubble_fraction"])
    return np.maximum(floor, eq21)


def price_placements(hw: Hardware, wl: Workload, t: Tuples, dp_overlap: bool, block_s: np.ndarray,
                     block_critical_s: np.ndarray):
    """Every valid placement of every tuple, priced by planner.cost.step.step_arrays.

    Returns (tuple row of each priced layout, placements (k, 5, H), the step_arrays columns).
    """
    from planner.cost.step import LayoutBatch, step_arrays
    from planner.schema import DEGREES
    from planner.solve.exhaustive import expand_placements

    rows, pl = expand_placements(hw, t)
    if len(rows) == 0:
        return rows, pl, {}
    arr = step_arrays(hw, wl, LayoutBatch(
        dp=t.dp[rows], tp_ff=t.tp_ff[rows], tp_model=t.tp_model[rows], pp=t.pp[rows],
        interleave=t.interleave[rows], ep=t.ep[rows], microbatches=t.microbatches[rows],
        zero_bubble=t.zero_bubble[rows], placement={d: pl[:, k, :] for k, d in enumerate(DEGREES)}),
        dp_overlap=dp_overlap, block_s=block_s[rows], block_critical_s=block_critical_s[rows])
    return rows, pl, arr
