"""Which way each estimated input moves every layout: the direction claims behind a re-plan's lower bound.

An input is *slower when higher* when raising it never shortens any layout's step time, never lowers any layout's
memory need and never raises the goodput on any GPU count (and *slower when lower* the other way round). Moved in that
direction, it can only take (layout, count) pairs away from the set that meets a deadline, so the fewest GPUs of the
re-plan is at least the fewest GPUs of the plan it moves: the re-plan's search may start at that count
(SearchOptions.min_gpus) instead of proving every smaller count infeasible again.

Each claim was read off the cost model (the section named) and is checked by tests/test_monotone.py: every listed
input moved in its slowing direction, priced on every layout of small spaces (and the goodput on a grid of counts),
never gets faster, smaller or better; and a search bounded this way returns what the unbounded search does. An input
not listed has no claim: its re-plans search from the compute bound as before.

Names are the --set fields (planner.overrides); `*` stands for one level name.
"""

from __future__ import annotations

import fnmatch
from typing import Any

SLOWER_WHEN_HIGHER: tuple[str, ...] = (
    # a per-layer cost added to every layer's time (planner.cost.terms, the element-wise overhead)
    "profile.elementwise.layer_overhead_us",
    # latencies: each is a non-negative coefficient times the latency in a path or latency term (docs/model.md §5)
    "profile.network.latency_us",
    "profile.network.ring_step_latency_us",
    "levels.*.lat_us",
    # the exposed share of an overlapped DP phase: a coefficient of the DP bandwidth term
    "profile.overlap.dp_exposed",
    # expert-routing imbalance: the busiest expert's share of tokens scales its GEMMs and all-to-all words
    "profile.moe.imbalance",
    # ring attention's element-wise merges: bytes per step at HBM bandwidth on every layer (docs/model.md §7b)
    "profile.context.merge_fwd_bytes",
    "profile.context.merge_bwd_bytes",
    # memory set aside: each adds bytes to every layout's need or removes bytes from the usable memory (§7b);
    # none of them changes a step time
    "profile.memory.reserve_GB",
    "profile.memory.cuda_context_GB",
    "profile.memory.workspace_GB",
    "profile.memory.nccl_buffsize_MiB",
    "profile.memory.nccl_channels",
    "profile.memory.nccl_buffers_per_channel",
    "profile.memory.fragmentation",
    "profile.memory.driver_reserved_GB",
    "profile.memory.headroom_GB",
    # failures: more interruptions or a longer restart lower Daly's goodput on every count (§9)
    "goodput.interruptions_per_gpu_hour",
    "goodput.restart_minutes",
)
"""--set fields whose increase never speeds any layout up, never lets more layouts fit and never raises goodput."""

SLOWER_WHEN_LOWER: tuple[str, ...] = (
    # rates: GEMM and element-wise times are data or FLOP over a rate (planner.cost.matmul: the max of the roofline
    # times, each a quantity over a rate, minimised over tiles)
    "gpu.l2_GBps",
    "profile.gemm.sustained_factor",
    "profile.elementwise.hbm_fraction",
    # bandwidths: every bandwidth term is words x a per-word cost 1 / (bandwidth x bus fraction) on some level
    "levels.*.bw_bidir_GBps",
    "profile.network.bus_bw_fraction",
    # overlap shares: the exposed copy of a transfer is (1 - overlap) x its time
    "profile.overlap.tp",
    "profile.overlap.pp",
    "profile.overlap.ep",
    "profile.overlap.cp",
    "profile.overlap.zero",
    # checkpoint storage bandwidth: a slower write lengthens every checkpoint and restart (§9)
    "goodput.storage_GBps_per_gpu",
)
"""--set fields whose decrease never speeds any layout up, never lets more layouts fit and never raises goodput."""


def slowing_direction(field: str) -> int:
    """+1 when a higher value of `field` is slower (SLOWER_WHEN_HIGHER), -1 when a lower one is, 0 when no claim is
    made."""
    if any(fnmatch.fnmatchcase(field, p) for p in SLOWER_WHEN_HIGHER):
        return 1
    if any(fnmatch.fnmatchcase(field, p) for p in SLOWER_WHEN_LOWER):
        return -1
    return 0


def _numbers(value: Any) -> list[float] | None:
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        return None
    return [float(v) for v in items]


def slows(field: str, before: Any, after: Any) -> bool:
    """Whether moving `field` from `before` to `after` (a number or a list moved element by element) is a move in
    its slowing direction: every element no faster, by the declared claim. False when there is no claim, when the
    shapes differ or when the elements move both ways."""
    sign = slowing_direction(field)
    a, b = _numbers(before), _numbers(after)
    if sign == 0 or a is None or b is None or len(a) != len(b):
        return False
    return all((y - x) * sign >= 0.0 for x, y in zip(a, b))


__all__ = ["SLOWER_WHEN_HIGHER", "SLOWER_WHEN_LOWER", "slowing_direction", "slows"]
