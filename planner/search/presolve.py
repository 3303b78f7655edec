"""Cost tables shared by both searches: every number comes from planner.cost, tabulated once per shape.

Both the exhaustive enumerator and the CP-SAT model price layouts through these functions, so they cannot
disagree about the physics; they differ only in how they search.
"""

from __future__ import annotations

import math

import numpy as np

from planner.cost import memory as mem
from planner.cost import network as net
from planner.cost.pipeline import bubble_fraction, microbatches_in_flight
from planner.cost.step import block_matmul_s, nanobatch_tokens
from planner.schema import Hardware, Workload
from planner.parallel.space import Tuples, factor_options


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

    def least_work(self, dp_m: np.ndarray) -> "LeastWork":
        """min over m of m * block_s(N_TP,ff, N_TP,model, N_DP m) for every (N_TP,ff, N_TP,model, N_DP)."""
        return LeastWork(self, dp_m)

    def lookup(self, t: Tuples) -> tuple[np.ndarray, np.ndarray]:
        return self.lookup_arrays(t.tp_ff, t.tp_model, t.dp * t.microbatches)

    def lookup_arrays(self, tp_ff, tp_model, u) -> tuple[np.ndarray, np.ndarray]:
        i = np.searchsorted(self.tp_ff, tp_ff)
        j = np.searchsorted(self.tp_model, tp_model)
        k = np.searchsorted(self.u, u)
        flat = (i * len(self.tp_model) + j) * len(self.u) + k
        return self.blk[flat], self.crit[flat]


class LeastWork:
    """A stage's least matmul time per layer and expert over the microbatch count, per (N_TP,ff, N_TP,model, N_DP).

    A tuple's pipelined matmul time is m (L / N_PP) (E / N_EP) block_s(N_DP m) / (1 - f_b) with f_b >= 0, so
    (L / N_PP) (E / N_EP) times this table bounds it from below for every microbatch count the batch allows: a
    bound on a whole (model-parallel row, N_DP) pair, before its microbatch counts are expanded.
    """

    def __init__(self, shapes: ShapeTable, dp_m: np.ndarray):
        self.dps = np.unique(dp_m[:, 0])
        blk = shapes.blk.reshape(len(shapes.tp_ff), len(shapes.tp_model), len(shapes.u))
        self.table = np.empty((len(shapes.tp_ff), len(shapes.tp_model), len(self.dps)))
        for j, d in enumerate(self.dps):
            ms = dp_m[dp_m[:, 0] == d, 1]
            k = np.searchsorted(shapes.u, d * ms)
            self.table[:, :, j] = (blk[:, :, k] * ms.astype(np.float64)).min(axis=2)
        self.tp_ff, self.tp_model = shapes.tp_ff, shapes.tp_model

    def lookup(self, tp_ff, tp_model, dp) -> np.ndarray:
        return self.table[np.searchsorted(self.tp_ff, tp_ff), np.searchsorted(self.tp_model, tp_model),
                          np.searchsorted(self.dps, dp)]


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


def _least_over_placements(hw: Hardware, degree: int, cost) -> float:
    """min over every placement (factor vector) of `degree` of cost(factor vectors (k, H)) -> (k,) seconds;
    0 for degree 1 (no communication), inf when the degree cannot be placed on the levels."""
    if degree == 1:
        return 0.0
    opts = factor_options(hw, degree)
    if len(opts) == 0:
        return math.inf
    return float(cost(opts).min())


def min_allreduce_latency_s(hw: Hardware, degree: int) -> float:
    """Least latency of one all-reduce over `degree` ranks, over every placement of the degree on the levels."""
    return _least_over_placements(hw, degree, lambda opts: net.allreduce_latency_s(opts, _lat_array(hw)))


def min_routing_latency_s(hw: Hardware, ep: int) -> float:
    """Least one-way latency of an expert-routing hop (at or above the top level N_EP spans)."""
    lat = _lat_array(hw)
    suffix_min = np.minimum.accumulate(lat[::-1])[::-1]  # min latency at or above each level
    return _least_over_placements(hw, ep, lambda opts: suffix_min[net.top_level(opts) - 1])


def min_allreduce_s_per_word(hw: Hardware, degree: int) -> float:
    """Least bandwidth time of an all-reduce of one word over `degree` ranks, over every placement of the degree
    (planner.cost.network.allreduce_time_s is linear in the word count)."""
    bw = np.array([lvl.bw_unidir_Bps for lvl in hw.levels], dtype=np.float64)
    return _least_over_placements(
        hw, degree, lambda opts: net.allreduce_time_s(np.ones(len(opts)), opts, bw, hw.gpu.word_bytes))


class CommTable:
    """Least all-reduce latency, routing latency and all-reduce bandwidth time per word, per candidate degree
    value, each over every placement of that value on the levels; computed once per search."""

    def __init__(self, hw: Hardware, values: np.ndarray):
        self.values = np.unique(values)
        self.allreduce = np.array([min_allreduce_latency_s(hw, int(v)) for v in self.values])
        self.routing = np.array([min_routing_latency_s(hw, int(v)) for v in self.values])
        self.per_word = np.array([min_allreduce_s_per_word(hw, int(v)) for v in self.values])

    def allreduce_of(self, x: np.ndarray) -> np.ndarray:
        return self.allreduce[np.searchsorted(self.values, x)]

    def routing_of(self, x: np.ndarray) -> np.ndarray:
        return self.routing[np.searchsorted(self.values, x)]

    def per_word_of(self, x: np.ndarray) -> np.ndarray:
        return self.per_word[np.searchsorted(self.values, x)]


def latency_path_lower_bound(hw: Hardware, wl: Workload, comm: CommTable, tp_ff, tp_model, pp, interleave, ep
                             ) -> np.ndarray:
    """Least serial latency of one microbatch through all L blocks, both passes, over every placement."""
    L = wl.layers
    lat_min = float(_lat_array(hw).min())
    lat_tp = comm.allreduce_of(tp_ff) + comm.allreduce_of(tp_model)
    pp_bound = (interleave * pp - 1).astype(np.float64) * np.where(pp > 1, lat_min, 0.0)
    p2p = np.where(ep > 1, max(L - 1, 0) * comm.routing_of(ep), pp_bound)
    return 2.0 * (L * lat_tp + p2p)


def bandwidth_lower_bounds(hw: Hardware, wl: Workload, comm: CommTable, dp, tp_ff, tp_model, pp, interleave, ep
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Least DP all-reduce time and least TP + pipeline/expert point-to-point time of one step, over every placement.

    None depends on the microbatch count. The all-reduces are linear in their word counts, so each is its words
    times CommTable.per_word. The point-to-point time is max_h(P_P2P(h) words / bw_h) >= sum_h P_P2P(h) words /
    sum_h bw_h, and sum_h P_P2P(h) = 1 - P_PP(0) P_EP(0) = 1 - (1 - (i N_PP - 1) / (L - 1)) / N_EP does not depend
    on the placement (Eqs. 19-20 telescope).
    """
    f = [np.asarray(x, dtype=np.float64) for x in (dp, tp_ff, tp_model, pp, interleave, ep)]
    dp_, tf, tm, pp_, i, ep_ = f
    L, b, wb = wl.layers, wl.batch_tokens, hw.gpu.word_bytes
    shard_words = wl.params / (tf * tm * pp_ * ep_)
    t_dp = shard_words * comm.per_word_of(dp)
    layers_here, tokens_here = L / pp_, b / (dp_ * ep_)
    t_tp = (2.0 * layers_here * tokens_here * wl.d_ff / tf * comm.per_word_of(tp_model)
            + 2.0 * layers_here * tokens_here * wl.d_model / tm * comm.per_word_of(tp_ff))
    if L > 1:
        p_pp0 = np.where(pp_ > 1, 1.0 - (i * pp_ - 1.0) / (L - 1), 1.0)
        crossing = 1.0 - p_pp0 / ep_
        bw_sum = sum(lvl.bw_unidir_Bps for lvl in hw.levels)
        n_gpu = dp_ * tf * tm * pp_ * ep_
        t_p2p = 2.0 * b * (L - 1) * wl.d_model * crossing / n_gpu * wb / bw_sum
    else:
        t_p2p = np.zeros_like(dp_)
    return t_dp, t_tp + t_p2p


def step_lower_bound_free(hw: Hardware, wl: Workload, t: Tuples, terms: dict[str, np.ndarray], comm: CommTable,
                          dp_overlap: bool = False) -> np.ndarray:
    """A placement-free lower bound of each tuple's step time (valid for every placement).

    Every placement-dependent term is replaced by its least value over the placements of the degree(s) it depends
    on, each chosen independently (which can only lower the sum): latencies in the floor (DP + critical path) and
    in Eq. 21 (whose 1F1B latency term is m / N_PP times the per-microbatch path), and the bandwidth terms of
    bandwidth_lower_bounds.
    """
    lat_path = latency_path_lower_bound(hw, wl, comm, t.tp_ff, t.tp_model, t.pp, t.interleave, t.ep)
    lat_dp = comm.allreduce_of(t.dp)
    t_dp, t_net = bandwidth_lower_bounds(hw, wl, comm, t.dp, t.tp_ff, t.tp_model, t.pp, t.interleave, t.ep)
    lat_step = np.where(t.zero_bubble, 0.0, t.microbatches / t.pp.astype(np.float64) * lat_path)
    pipelined = np.maximum(terms["matmul_s"], t_net) / (1.0 - terms["bubble_fraction"])
    if dp_overlap:
        floor = lat_dp + terms["critical_mm_s"] + lat_path
        eq21 = lat_dp + lat_step + np.maximum(t_dp, pipelined)
    else:
        floor = lat_dp + t_dp + terms["critical_mm_s"] + lat_path
        eq21 = lat_dp + lat_step + t_dp + pipelined
    return np.maximum(floor, eq21)


def pair_step_lower_bound(hw: Hardware, wl: Workload, rows: np.ndarray, dp: np.ndarray, m_min: np.ndarray,
                          m_max: np.ndarray, shapes: ShapeTable, work: LeastWork, comm: CommTable,
                          dp_overlap: bool = False) -> np.ndarray:
    """A lower bound of the step time of every tuple a (model-parallel row, N_DP) pair expands to, over every
    microbatch count in [m_min, m_max] the batch allows and every placement.

    `rows` are model-parallel rows (N_TP,ff, N_TP,model, N_PP, i, zero_bubble, N_EP). The placement-dependent terms
    are at their least, as in step_lower_bound_free; for the microbatch count:
    - the floor (DP + critical path) is smallest at the largest m (GEMM time never falls as its nanobatch grows),
      and its latency part does not depend on m;
    - Eq. 21 is at least the DP latency, plus the 1F1B serial latency at the fewest microbatches, plus the larger
      of the stage's least matmul time over m (LeastWork) and its least TP + point-to-point time (the bubble
      stretch 1 / (1 - f_b) is >= 1);
    - the DP bandwidth term does not depend on m.
    """
    tf, tm, pp, il, zb, ep = (rows[:, k] for k in range(6))
    _, crit = shapes.lookup_arrays(tf, tm, dp * m_max)
    lat_dp = comm.allreduce_of(dp)
    lat_path = latency_path_lower_bound(hw, wl, comm, tf, tm, pp, il, ep)
    t_dp, t_net = bandwidth_lower_bounds(hw, wl, comm, dp, tf, tm, pp, il, ep)
    experts_here = wl.experts / ep
    ppf = pp.astype(np.float64)
    lat_1f1b = np.where(zb == 0, m_min / ppf * lat_path, 0.0)
    busy = np.maximum((wl.layers / ppf) * experts_here * work.lookup(tf, tm, dp), t_net)
    critical = wl.layers * experts_here * crit + lat_path
    if dp_overlap:
        return np.maximum(lat_dp + critical, lat_dp + lat_1f1b + np.maximum(busy, t_dp))
    return np.maximum(lat_dp + t_dp + critical, lat_dp + lat_1f1b + t_dp + busy)


def price_placements(hw: Hardware, wl: Workload, t: Tuples, dp_overlap: bool, block_s: np.ndarray,
                     block_critical_s: np.ndarray):
    """Every valid placement of every tuple, priced by planner.cost.step.step_arrays.

    Returns (tuple row of each priced layout, placements (k, 5, H), the step_arrays columns).
    """
    from planner.cost.step import LayoutBatch, step_arrays
    from planner.schema import DEGREES
    from planner.search.exhaustive import expand_placements

    rows, pl = expand_placements(hw, t)
    if len(rows) == 0:
        return rows, pl, {}
    arr = step_arrays(hw, wl, LayoutBatch(
        dp=t.dp[rows], tp_ff=t.tp_ff[rows], tp_model=t.tp_model[rows], pp=t.pp[rows],
        interleave=t.interleave[rows], ep=t.ep[rows], microbatches=t.microbatches[rows],
        zero_bubble=t.zero_bubble[rows], placement={d: pl[:, k, :] for k, d in enumerate(DEGREES)}),
        dp_overlap=dp_overlap, block_s=block_s[rows], block_critical_s=block_critical_s[rows])
    return rows, pl, arr
