"""Cost tables shared by both searches: every number comes from planner.cost, tabulated once per shape.

Both the exhaustive enumerator and the CP-SAT model price layouts through these functions, so they cannot
disagree about the physics; they differ only in how they search.
"""

from __future__ import annotations

import numpy as np

from planner.cost import memory as mem
from planner.cost.pipeline import bubble_fraction, microbatches_in_flight
from planner.cost.step import block_matmul_s, nanobatch_tokens
from planner.schema import Hardware, Workload
from planner.solve.space import Tuples


def block_times(hw: Hardware, wl: Workload, t: Tuples) -> tuple[np.ndarray, np.ndarray]:
    """block_matmul_s for every tuple, computed once per distinct (N_TP,ff, N_TP,model, nanobatch) shape."""
    per_expert = wl.batch_tokens // wl.experts
    u = t.dp * t.microbatches  # the nanobatch is per_expert / u
    ranks = [np.unique(col, return_inverse=True)[1].ravel() for col in (t.tp_ff, t.tp_model, u)]
    key = (ranks[0] * (ranks[1].max() + 1) + ranks[1]) * (ranks[2].max() + 1) + ranks[2]
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    bn = per_expert / u[first].astype(np.float64)
    blk, crit = block_matmul_s(hw, wl, t.tp_ff[first], t.tp_model[first], bn)
    inv = inv.ravel()
    return blk[inv], crit[inv]


def tuple_terms(hw: Hardware, wl: Workload, t: Tuples) -> dict[str, np.ndarray]:
    """Placement-independent quantities of each degree tuple (SPEC §5): matmul, bubble, critical path, memory."""
    dp, tf, tm = (t.dp.astype(np.float64), t.tp_ff.astype(np.float64), t.tp_model.astype(np.float64))
    pp, ep, m = t.pp.astype(np.float64), t.ep.astype(np.float64), t.microbatches.astype(np.float64)
    blk, crit = block_times(hw, wl, t)
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
