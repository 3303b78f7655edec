"""An independent brute-force oracle for small planning instances, written from docs/model.md alone.

It shares no search-space or placement code with the package: it does not import `planner.solve` (no divisor,
factorisation, level-filling or space helper) and builds every layout from the rules as docs/model.md states them
in "The search space" (docs/model.md, "The search space"):

* divisibility: N_TP,ff | d_ff, N_TP,model | d_model, N_PP * i | L, N_EP | E, N_DP * m | b / E;
* schedules: ZB-H2 only with i = 1 and m >= 2 N_PP - 1 ('auto' offers both 1F1B and ZB-H2);
* placement: each degree is one factor per network level, a bounded level's factor within its capacity
  size(h) / size(h-1), and the levels fill bottom-up: for every bounded level h of cumulative size s_h the
  factors of all degrees at levels 1..h multiply to min(N_GPU, s_h); a lowest level with `unit` / `usable` is
  used c GPUs per group instead, c a multiple of the unit (or N_GPU below one unit), c | N_GPU, c <= usable (its
  capacity), the largest c for which every level h above reaches min(N_GPU, s_h / s_1 x c) in whole steps;
* memory within HBM, and in deadline mode a run time within the deadline.

Only the *price* of a layout comes from the package, through one function, `_price` (the public cost model,
`planner.cost.step.evaluate`, or `planner.api.evaluate` if that path disappears). The optimum is lexicographic:
deadline mode (fewest GPUs, least step time, least network time), fixed-cluster mode (least step, least network),
compared as exact floats.

In deadline mode the degree tuples are priced in increasing GPU count and the enumeration stops after the first
count that has a feasible layout: every smaller count was priced in full and had none, so no larger count can win
stage one. Nothing else is pruned. The instances this is meant for have at most a few tens of thousands of layouts.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache

from planner.schema import Hardware, Layout, Workload

DEGREE_NAMES = ("dp", "tp_ff", "tp_model", "pp", "ep", "cp")
"""Placement keys, in the order used for layout keys here."""

try:  # the one place that knows where the package's pricing lives
    from planner.cost.step import evaluate as _step_evaluate

    def _price(hw: Hardware, wl: Workload, layout: Layout, dp_overlap: bool):
        return _step_evaluate(hw, wl, layout, dp_overlap=dp_overlap)
except ImportError:  # pragma: no cover - only after a refactor moves the module
    from planner.api import evaluate as _api_evaluate

    def _price(hw: Hardware, wl: Workload, layout: Layout, dp_overlap: bool):
        return _api_evaluate(layout, hw, wl, dp_overlap=dp_overlap)


# --------------------------------------------------------------------------------------------------
# The search space, from the rules in docs/model.md
# --------------------------------------------------------------------------------------------------


@cache
def divisors(n: int) -> tuple[int, ...]:
    """Every positive divisor of n, ascending (trial division; n is small here)."""
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def level_sizes(hw: Hardware) -> list[int | None]:
    """Cumulative group size of each level, bottom-up; None for an unbounded (top) level."""
    return [lvl.size for lvl in hw.levels]


def level_capacities(hw: Hardware) -> list[int | None]:
    """size(h) / size(h-1) per bounded level (size(0) = 1), the lowest level's `usable` if it has one; None for an
    unbounded level."""
    caps, prev = [], 1
    for size in level_sizes(hw):
        if size is None:
            caps.append(None)
        else:
            assert size % prev == 0, "level sizes must be multiples of the one below"
            caps.append(size // prev)
            prev = size
    first = hw.levels[0]
    if first.usable is not None or first.unit is not None:
        caps[0] = first.usable if first.usable is not None else caps[0]
    return caps


def level_targets(hw: Hardware, n_gpu: int) -> list[int] | None:
    """GPUs of the cluster in one group of each level (the product the factors at levels 1..h must reach), or None
    when n_gpu cannot fill the levels."""
    sizes = level_sizes(hw)
    first = hw.levels[0]
    if first.unit is None and first.usable is None:
        return [n_gpu if s is None else min(n_gpu, s) for s in sizes]
    unit = first.unit or 1
    usable = first.usable if first.usable is not None else sizes[0]
    for c in range(min(n_gpu, usable), 0, -1):  # largest first: fewest groups
        if n_gpu % c or (c % unit and not c == n_gpu < unit):
            continue
        targets = [c] + [n_gpu if s is None else min(n_gpu, s // sizes[0] * c) for s in sizes[1:]]
        chain = [1, *targets]
        if all(hi % lo == 0 for lo, hi in zip(chain, chain[1:])) and targets[-1] == n_gpu:
            return targets
    return None


def factor_vectors(value: int, caps: list[int | None]) -> list[tuple[int, ...]]:
    """Every way to write `value` as an ordered product of one factor per level, each within its capacity."""
    if not caps:
        return [()] if value == 1 else []
    out = []
    for f in divisors(value):
        if caps[0] is not None and f > caps[0]:
            continue
        for rest in factor_vectors(value // f, caps[1:]):
            out.append((f, *rest))
    return out


def placements(hw: Hardware, degrees: dict[str, int]) -> list[dict[str, tuple[int, ...]]]:
    """Every placement of a degree tuple that fills the levels bottom-up (docs/model.md, "The search space")."""
    sizes, caps = level_sizes(hw), level_capacities(hw)
    degrees = {d: degrees.get(d, 1) for d in DEGREE_NAMES}  # a degree left out is 1
    n_gpu = math.prod(degrees.values())
    targets = level_targets(hw, n_gpu)
    if targets is None:
        return []
    options = [factor_vectors(degrees[d], caps) for d in DEGREE_NAMES]
    out = []
    for combo in itertools.product(*options):
        cumulative = 1
        ok = True
        for h, size in enumerate(sizes):
            cumulative *= math.prod(vec[h] for vec in combo)
            if size is not None and cumulative != targets[h]:
                ok = False
                break
        if ok:
            out.append(dict(zip(DEGREE_NAMES, combo, strict=True)))
    return out


@dataclass(frozen=True)
class DegreeTuple:
    dp: int
    tp_ff: int
    tp_model: int
    pp: int
    interleave: int
    ep: int
    microbatches: int
    schedule: str
    cp: int = 1
    sp: int = 0
    recompute: int = 0
    zero: int = 1

    @property
    def gpus(self) -> int:
        return self.dp * self.tp_ff * self.tp_model * self.pp * self.ep * self.cp

    def degrees(self) -> dict[str, int]:
        return {d: getattr(self, d) for d in DEGREE_NAMES}


def degree_tuples(wl: Workload, schedule: str = "auto") -> list[DegreeTuple]:
    """Every degree tuple the divisibility and schedule rules allow."""
    if schedule not in ("auto", "1f1b", "zb-h2"):
        raise ValueError(f"unknown schedule {schedule!r}")
    schedules = ("1f1b", "zb-h2") if schedule == "auto" else (schedule,)
    if wl.transformer is not None:
        return _transformer_tuples(wl, schedules)
    if wl.batch_tokens % wl.experts:
        return []
    per_expert = wl.batch_tokens // wl.experts
    out = []
    for tp_ff, tp_model, ep in itertools.product(divisors(wl.d_ff), divisors(wl.d_model), divisors(wl.experts)):
        for pp in divisors(wl.layers):
            for interleave in divisors(wl.layers // pp):
                for dp in divisors(per_expert):
                    for m in divisors(per_expert // dp):
                        for sched in schedules:
                            if sched == "zb-h2" and (interleave != 1 or m < 2 * pp - 1):
                                continue
                            out.append(DegreeTuple(dp, tp_ff, tp_model, pp, interleave, ep, m, sched))
    return out


def _transformer_tuples(wl: Workload, schedules: tuple[str, ...]) -> list[DegreeTuple]:
    """A transformer's rules (docs/model.md §1b, §7b, "The search space"): N_TP,ff divides the query heads and every
    MLP width and divides kv_heads or is a multiple of it (GQA); N_TP,model | d_model; N_EP | E; N_CP | seq_len / 2;
    N_DP N_EP m divides the batch in sequences; the ends of the pipeline may hold fewer layers but at least one per
    virtual stage (c = ceil(L / (N_PP i)), N_PP i c - L <= 2 (c - 1)), and no interleaving without pipelining;
    sequence parallelism only with N_TP,ff > 1; recomputation 0-2, ZeRO stage 1-3."""
    tr = wl.transformer
    assert tr is not None
    widths = [tr.heads]
    if wl.experts == 1 or tr.dense_layers:
        widths.append(wl.d_ff)
    if wl.experts > 1:
        widths.append(tr.expert_d_ff or wl.d_ff)
    tp_ffs = [t for t in range(1, tr.heads + 1) if all(w % t == 0 for w in widths)
              and (tr.attention == "mla" or tr.kv_heads % t == 0 or t % tr.kv_heads == 0)]
    seqs = wl.batch_tokens // wl.seq_len
    stages = []
    for pp in range(1, wl.layers + 1):
        for i in range(1, wl.layers + 1):
            if pp == 1 and i > 1:
                continue
            c = -(-wl.layers // (pp * i))
            if pp * i <= wl.layers and pp * i * c - wl.layers <= 2 * (c - 1):
                stages.append((pp, i))
    out = []
    for tp_ff, tp_model, ep, cp in itertools.product(tp_ffs, divisors(wl.d_model), divisors(wl.experts),
                                                     divisors(wl.seq_len // 2)):
        for (pp, i), dp in itertools.product(stages, divisors(seqs)):
            for m in divisors(seqs // dp):
                if seqs % (dp * ep * m):
                    continue
                for sched, sp, recompute, zero in itertools.product(schedules, (0, 1), (0, 1, 2), (1, 2, 3)):
                    if sched == "zb-h2" and (i != 1 or m < 2 * pp - 1):
                        continue
                    if sp and tp_ff == 1:
                        continue
                    out.append(DegreeTuple(dp, tp_ff, tp_model, pp, i, ep, m, sched, cp, sp, recompute, zero))
    return out


def layout_key(layout: Layout) -> tuple:
    """A hashable identity of a layout (degrees, schedule, placement in DEGREE_NAMES order)."""
    return (layout.dp, layout.tp_ff, layout.tp_model, layout.pp, layout.interleave, layout.ep, layout.microbatches,
            layout.schedule, layout.cp, layout.sp, layout.recompute, layout.zero,
            tuple(tuple(layout.placement[d]) for d in DEGREE_NAMES))


def tuples_by_count(wl: Workload, schedule: str = "auto", gpus: int | None = None) -> dict[int, list[DegreeTuple]]:
    """Degree tuples grouped by GPU count (only `gpus` if given)."""
    out: dict[int, list[DegreeTuple]] = defaultdict(list)
    for t in degree_tuples(wl, schedule):
        if gpus is None or t.gpus == gpus:
            out[t.gpus].append(t)
    return dict(out)


def layouts_of(hw: Hardware, t: DegreeTuple):
    """Every layout (placement) of one degree tuple."""
    for pl in placements(hw, t.degrees()):
        yield Layout(dp=t.dp, tp_ff=t.tp_ff, tp_model=t.tp_model, pp=t.pp, interleave=t.interleave, ep=t.ep,
                     microbatches=t.microbatches, schedule=t.schedule, cp=t.cp, sp=t.sp, recompute=t.recompute,
                     zero=t.zero, placement=pl)


def all_layouts(hw: Hardware, wl: Workload, schedule: str = "auto", gpus: int | None = None,
                max_gpus: int | None = None):
    """Yield every layout of the space (optionally only `gpus` GPUs, or at most `max_gpus`), by GPU count."""
    groups = tuples_by_count(wl, schedule, gpus)
    for count in sorted(groups):
        if max_gpus is not None and count > max_gpus:
            return
        for t in groups[count]:
            yield from layouts_of(hw, t)


# --------------------------------------------------------------------------------------------------
# The optimum
# --------------------------------------------------------------------------------------------------


@dataclass
class Priced:
    layout: Layout
    gpus: int
    step_s: float
    network_s: float
    training_s: float


@dataclass
class OracleResult:
    best: Priced | None
    """The lexicographic optimum (the first one enumerated among exact ties), or None if nothing is feasible."""
    priced: int
    """Layouts priced."""
    feasible: dict[tuple, Priced] = field(default_factory=dict)
    """Every feasible layout priced, by layout_key."""
    optima: list[Priced] = field(default_factory=list)
    """Every feasible layout whose objective equals the optimum's exactly."""
    deadline_margin_s: float | None = None
    """Least |training time - deadline| over every priced layout that fits in memory (deadline mode)."""

    def price_of(self, layout: Layout) -> Priced | None:
        return self.feasible.get(layout_key(layout))


def solve(hw: Hardware, wl: Workload, *, deadline_s: float | None = None, gpus: int | None = None,
          schedule: str = "auto", dp_overlap: bool = False) -> OracleResult:
    """Lexicographic optimum by enumeration. Exactly one of `deadline_s` (deadline mode) or `gpus` (fixed)."""
    if (deadline_s is None) == (gpus is None):
        raise ValueError("give exactly one of deadline_s and gpus")
    groups = tuples_by_count(wl, schedule, gpus)

    def objective(p: Priced) -> tuple:
        return (p.gpus, p.step_s, p.network_s) if deadline_s is not None else (p.step_s, p.network_s)

    res = OracleResult(best=None, priced=0)
    for count in sorted(groups):
        for lay in (lay for t in groups[count] for lay in layouts_of(hw, t)):
            ev = _price(hw, wl, lay, dp_overlap)
            res.priced += 1
            assert ev.gpus == count == lay.gpus
            if not ev.memory.total_bytes <= ev.memory.capacity_bytes:
                continue
            if deadline_s is not None:
                margin = abs(ev.training_s - deadline_s)
                res.deadline_margin_s = margin if res.deadline_margin_s is None else min(res.deadline_margin_s, margin)
                if not ev.training_s <= deadline_s:
                    continue
            p = Priced(lay, ev.gpus, ev.step.step_s, ev.step.network_s, ev.training_s)
            res.feasible[layout_key(lay)] = p
            if res.best is None or objective(p) < objective(res.best):
                res.best, res.optima = p, [p]
            elif objective(p) == objective(res.best):
                res.optima.append(p)
        if deadline_s is not None and res.best is not None:
            break  # every smaller count was priced in full and had no feasible layout
    return res


def count_layouts(hw: Hardware, wl: Workload, schedule: str = "auto", gpus: int | None = None,
                  max_gpus: int | None = None) -> int:
    """Size of the layout space (no pricing): for sizing instances and for hand-counted checks."""
    return sum(1 for _ in all_layouts(hw, wl, schedule, gpus, max_gpus))
