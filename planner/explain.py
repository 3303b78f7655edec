"""Why a request is infeasible, and what would be feasible (exit code 1, README.md "Commands").

Every number here comes from cheap, *sound* bounds on the cost model of planner.cost, never from a search, so an
explanation never claims more than it proved:

* `floor_bound`: no layout's step can be shorter than the critical path of one microbatch through all L layers
  (docs/model.md §6, the critical-path floor: step >= floor = DP phase + critical GEMMs + latency path), read
  from the cost model's own terms (planner.cost.terms). The bound minimises that floor over the degrees it
  depends on, each term separately (so it can only be lower than the true floor of any layout): the GEMM term
  over (N_TP,ff, N_TP,model, N_EP, nanobatch) (a transformer's also over N_CP and sp, at one sequence per
  microbatch), each latency-path term over its group's placements; N_PP = 1 and N_DP = 1 add nothing. Times D / b
  steps it is a lower bound on the training time: if it exceeds the deadline,
  the request is proven infeasible without any search (the latency wall).
* `min_memory_on`: the least per-GPU memory (docs/model.md §7) of any layout on exactly N GPUs, exact over the
  search space up to a cap on the degree tuples priced (memory depends on the degree tuple only; interleaving and
  more microbatches in flight never reduce it, so i = 1 and the largest microbatch count suffice).
* `can_form`: whether N GPUs can be formed at all: N must fill the network levels bottom-up (whole nodes once
  the cluster spans nodes) and split into degrees dividing d_ff, d_model, L, E and b / E (prime by prime), i.e.
  N must divide the product d_ff d_model L E (b / E) (docs/model.md, "The search space").
* `fit_search`: the fewest GPUs on which some layout fits in memory, walking only the counts `can_form` allows.

Every scan here is bounded by a count, never by the clock, so the same request gets the same explanation on any
machine.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from planner import recent
from planner.cost import memory as mem
from planner.cost import terms as T
from planner.cost.pipeline import microbatches_in_flight
from planner.cost.step import SECONDS_PER_DAY
from planner.economics import fmt_pct
from planner.goodput import FailureModel
from planner.parallel.dimensions import BY_NAME
from planner.parallel.space import SearchOptions, Space, Tuples, divisors, fill_levels, level_rule
from planner.schema import STATE_BYTES_PER_PARAM, ClusterSize, Hardware, Infeasibility, Workload, headroom_shortfall
from planner.search.presolve import LeastFeatures, ShapeTable
from planner.search.result import SearchResult

GB = 1e9


# --------------------------------------------------------------------------------------------------
# The critical-path lower bound (the latency wall)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloorBound:
    """A lower bound on the step time of every layout of one workload on one hardware."""

    step_s: float
    days: float  # step_s * D / b / 86400: no layout trains faster
    tp_ff: int
    tp_model: int
    ep: int
    nanobatch: float
    cp: int = 1


def floor_bound(hw: Hardware, wl: Workload, options: SearchOptions | None = None) -> FloorBound:
    """No layout of `wl` on `hw` has a shorter step than `step_s` (see the module docstring).

    The paper's toy model is read off the cost model's own floor (planner.cost.terms): the critical path's GEMMs
    (`tuple_quantities`' critical_mm_s) plus every latency-path group term (kind 'path') at its least over the
    placements (planner.search.presolve.LeastFeatures), at N_PP = N_DP = 1. Neither degree shortens the path: the
    GEMMs see the tokens of N_DP m through the nanobatch, which takes every value the batch allows; a pipeline adds
    no interface the layers do not already cross."""
    per_expert = wl.batch_tokens // wl.experts if wl.batch_tokens % wl.experts == 0 else None
    if per_expert is None:  # no layout at all; the workload validator normally prevents this
        return FloorBound(math.inf, math.inf, 1, 1, 1, math.nan)
    if wl.transformer is not None:
        return _transformer_floor_bound(hw, wl, options)
    cap = hw.max_gpus if options is None or options.gpus is None else options.gpus
    tf = np.array(divisors(wl.d_ff), dtype=np.int64)
    tm = np.array(divisors(wl.d_model), dtype=np.int64)
    u = np.array(divisors(per_expert), dtype=np.int64)  # N_DP * m
    ep = np.array(divisors(wl.experts), dtype=np.int64)
    # The toy block's GEMM time depends on (N_TP,ff, N_TP,model, N_DP m) only, and the critical path grows with it:
    # its least over N_DP m first, for each TP pair (ShapeTable: the search's own table of shape_times).
    shapes = ShapeTable(hw, wl, tf, tm, u)
    crit = shapes.times["block_critical_s"].reshape(len(tf), len(tm), len(u))
    best_u = u[crit.argmin(axis=2)]  # (tf, tm)
    g = np.meshgrid(np.arange(len(tf)), np.arange(len(tm)), np.arange(len(ep)), indexing="ij")
    n = g[0].size
    ones = np.ones(n, dtype=np.int64)
    rows = {"tp_ff": tf[g[0].ravel()], "tp_model": tm[g[1].ravel()], "ep": ep[g[2].ravel()],
            "microbatches": best_u[g[0].ravel(), g[1].ravel()], "dp": ones, "pp": ones, "interleave": ones,
            "cp": ones, "sp": 0 * ones, "recompute": 0 * ones, "zero": ones, "zero_bubble": np.zeros(n, dtype=bool)}
    q = T.tuple_quantities(hw, wl, rows, shapes.lookup(rows))
    least = LeastFeatures(hw, wl)
    # Where a level is faster than the one below it, a pipeline boundary placed above the expert ranks could cost
    # less than the routing hop at N_PP = 1 (the toy's two share one point-to-point term): that term is then taken
    # at its least over every (N_PP, i) as well.
    stages = bool(np.any(np.diff(T.level_latencies(hw)) < 0))
    step = q["critical_mm_s"] + sum((t.scale(hw, wl, rows) * (_least_over_stages(wl, least, t, rows)
                                                             if stages and t.group == "pp_ep" else least.least(t, rows))
                                     for t in least.terms if t.kind == "path"), np.zeros(n))
    if cap is not None:
        step = np.where(rows["tp_ff"] * rows["tp_model"] * rows["ep"] <= cap, step, np.inf)
    k = int(np.argmin(step))
    step_s = float(step[k])
    return FloorBound(step_s, step_s * wl.steps / SECONDS_PER_DAY, int(rows["tp_ff"][k]), int(rows["tp_model"][k]),
                      int(rows["ep"][k]), float(q["nanobatch"][k]))


def _least_over_stages(wl: Workload, least: LeastFeatures, term: T.GroupTerm, rows: dict[str, np.ndarray]
                       ) -> np.ndarray:
    """A toy pp_ep term's feature at its least over the placements and over every (N_PP, i) with N_PP i | L, per
    row's N_EP (the toy's other terms on the floor do not read N_PP)."""
    pairs = np.array([(a, u // a) for u in divisors(wl.layers) for a in divisors(u)], dtype=np.int64)
    eps = np.unique(rows["ep"])
    g = np.meshgrid(np.arange(len(eps)), np.arange(len(pairs)), indexing="ij")
    cols = {"ep": eps[g[0].ravel()], "pp": pairs[g[1].ravel(), 0], "interleave": pairs[g[1].ravel(), 1]}
    best = least.least(term, cols).reshape(len(eps), len(pairs)).min(axis=1)
    return best[np.searchsorted(eps, rows["ep"])]


def _transformer_floor_bound(hw: Hardware, wl: Workload, options: SearchOptions | None) -> FloorBound:
    """A transformer's floor, read from the terms: the floor branch's critical GEMMs (`tuple_quantities`'
    critical_mm_s: every layer's GEMMs, attention kernel and element-wise work on the critical path, both ends) plus
    each latency-path term (kind 'path') at its least over its group's placements, minimised over (N_TP,ff,
    N_TP,model, N_EP, N_CP, sp) of the search space with N_TP,ff N_TP,model N_EP N_CP GPUs at most the cap.

    With a cluster cap it adds the least optimizer step (`_least_optimizer_s`). What it leaves out only lowers it:
    the floor's DP phase (non-negative), recomputation beyond
    the least the options allow (it adds to the critical GEMMs and multiplies the hops by 1.5), the pipeline's
    point-to-point hops (non-negative; none at N_PP = 1). Each path term is at its least over its own group's
    placements, chosen independently (one layout may not reach them all at once: then the bound is below its
    floor). The tokens a GPU runs per microbatch are b / (N_DP N_EP N_CP m) = k s / N_CP for a whole
    number k >= 1 of sequences (the batch rule: N_DP N_EP m divides the batch in sequences), and every operation's
    time on the path grows with its tokens (a GEMM's tiles and waves, its bytes, its FLOPs; attention and
    element-wise work are linear), so k = 1 (N_DP m = b / (s N_EP)) is the least over the microbatch counts: one
    shape per (N_TP,ff, N_TP,model, N_EP, N_CP, sp) instead of the search's table over every N_DP m."""
    from planner.parallel.space import build_space, sp_allows

    opts = options if options is not None else SearchOptions()
    space = build_space(hw, wl, opts)
    cap = hw.max_gpus if opts.gpus is None else opts.gpus
    seqs = wl.batch_tokens // wl.seq_len
    v = space.values
    ep = np.array([e for e in v["ep"] if seqs % int(e) == 0], dtype=np.int64)
    tf, tm, cp, sp = v["tp_ff"], v["tp_model"], v["cp"], v["sp"]
    if not (len(tf) and len(tm) and len(cp) and len(sp) and len(ep)):
        return FloorBound(math.inf, math.inf, 1, 1, 1, math.nan)
    # The shape table at k = 1 with the five candidates as broadcasting axes (ShapeTable's convention: the tokens
    # follow from v = N_DP m N_CP and N_EP, with N_CP = 1 in the columns), so each weight shard is tiled once per
    # token count it meets.
    ax = {"tp_ff": tf[:, None, None, None, None], "tp_model": tm[None, :, None, None, None],
          "cp": cp[None, None, :, None, None], "ep": ep[None, None, None, :, None], "sp": sp[None, None, None, None, :]}
    shape_cols = {**ax, "dp": (seqs // ax["ep"]) * ax["cp"], "microbatches": np.ones((1,) * 5, dtype=np.int64),
                  "cp": np.ones((1,) * 5, dtype=np.int64)}
    grid = (len(tf), len(tm), len(cp), len(ep), len(sp))
    times = {k: np.broadcast_to(t, grid) for k, t in T.shape_times(hw, wl, shape_cols).items()}
    recompute = int(v["recompute"].min())
    extra = T.recompute_extra({"fwd": times["block_fwd_s"], "core_fwd": times["block_core_fwd_s"]}, recompute)
    crit = wl.layers * (times["block_critical_s"] + extra) + times["embed_critical_s"] + times["head_critical_s"]
    crit = np.where(sp_allows(ax["tp_ff"], ax["sp"]), crit, np.inf)
    best_sp = crit.argmin(axis=4)  # sp moves only critical_mm_s (no path term reads it): its best value per shape
    g = [a.ravel() for a in np.meshgrid(*(np.arange(n) for n in grid[:4]), indexing="ij")]
    k_sp = best_sp[g[0], g[1], g[2], g[3]]
    n = len(g[0])
    ones = np.ones(n, dtype=np.int64)
    rows = {"tp_ff": tf[g[0]], "tp_model": tm[g[1]], "cp": cp[g[2]], "ep": ep[g[3]], "sp": sp[k_sp],
            "dp": seqs // ep[g[3]], "microbatches": ones, "pp": ones, "interleave": ones,
            "recompute": recompute * ones,
            "zero": ones, "zero_bubble": np.zeros(n, dtype=bool)}
    shape = {k: t[g[0], g[1], g[2], g[3], k_sp] for k, t in times.items()}
    q = T.tuple_quantities(hw, wl, rows, shape)
    least = LeastFeatures(hw, wl)
    # Every latency-path term but the pipeline's hops (p2p_path: none at N_PP = 1, and never negative).
    path = [t for t in least.terms if t.kind == "path" and t.name != "p2p_path"]
    step = q["critical_mm_s"] + sum((t.scale(hw, wl, rows) * least.least(t, rows) for t in path), np.zeros(n))
    if cap is not None:
        step = np.where(rows["tp_ff"] * rows["tp_model"] * rows["ep"] * rows["cp"] <= cap, step, np.inf)
        step = step + _least_optimizer_s(hw, wl, cap)
    k = int(np.argmin(step))
    step_s = float(step[k])
    return FloorBound(step_s, step_s * wl.steps / SECONDS_PER_DAY, int(rows["tp_ff"][k]), int(rows["tp_model"][k]),
                      int(rows["ep"][k]), float(q["nanobatch"][k]), int(rows["cp"][k]))


def _least_optimizer_s(hw: Hardware, wl: Workload, cap: int) -> float:
    """A lower bound on the floor branch's optimizer step (`optimizer_s`) of any transformer layout of at most `cap`
    GPUs: the busiest device updates at least its share of the layers' weights, L (dense + E routed per layer) / N_GPU
    (every GEMM shard is at least its weight over the degrees splitting it, the busiest device holds at least L / N_PP
    layers, and the optimizer shards over N_DP N_EP N_CP, expert weights over N_DP N_CP; the ends are left out), at
    the terms' own seconds per updated parameter (read off `optimizer_s` of the one-GPU layout). 0 where the profile
    does not price the optimizer (the floor branch then has no such part)."""
    if hw.profile.optimizer_bytes_per_param <= 0.0:
        return 0.0
    mo = wl.model_ops
    assert mo is not None
    one = {d: np.ones(1, dtype=np.int64) for d in ("dp", "tp_ff", "tp_model", "pp", "ep", "cp", "interleave",
                                                   "microbatches", "recompute", "sp", "zero")}
    dense, expert = T.split_params_per_gpu(wl, one)
    per_param = float(T.optimizer_s(hw, wl, one)[0]) / float((dense + expert)[0])
    layer_dense, layer_expert = mo.layer.split_params(one, wl.experts)
    return per_param * wl.layers * float((layer_dense + layer_expert)[0]) / cap


def _law_of(wl: Workload) -> tuple[bool, str, str] | None:
    """(sparse, batch law, budget rule) that `infer_workload` used for `wl`, or None for an explicit shape or
    preset."""
    if not wl.requested_compute_flop:
        return None
    from planner.workload import BATCH_LAWS, BUDGETS, infer_workload

    for sparse in (wl.experts > 1, wl.experts == 1):
        for law in BATCH_LAWS:
            for budget in BUDGETS:
                try:
                    candidate: Workload | None = infer_workload(wl.requested_compute_flop, sparse=sparse,
                                                                batch_scaling=law, budget=budget)
                except Exception:  # noqa: BLE001 - only a lookup: a law that cannot rebuild the shape is not its law
                    candidate = None
                if candidate == wl:
                    return sparse, law, budget
    return None


def largest_compute_within(hw: Hardware, days: float, sparse: bool, law: str,
                           options: SearchOptions | None = None, budget: str = "exact") -> float | None:
    """Largest compute (FLOP, inferred shape) whose floor bound fits in `days`: an upper estimate, to ~1%.

    The bracket does not depend on what was asked for: whole decades are tried upward from the smallest accepted
    compute, and the first decade that does not fit is bisected in log compute. So every request past the same
    wall gets the same estimate (shape rounding makes the bound slightly non-monotone in compute, so a bracket
    taken from the request would move the answer by up to a few per cent).

    The last few answers are kept (the explanation and the plan's `infeasibility` facts ask the same question).
    """
    key = (hw.model_dump_json(), days, sparse, law, options, budget)
    if key in _LARGEST:
        return recent.recall(_LARGEST, key)
    return recent.keep(_LARGEST, key, _largest_compute_within(hw, days, sparse, law, options, budget), 8)


_LARGEST: dict[tuple[object, ...], float | None] = {}


@functools.cache
def _decades() -> tuple[float, ...]:
    """The compute the bracket tries first: whole decades from the smallest accepted compute up to the largest,
    each ten times the last (the same floats a walk up by tens reaches)."""
    from planner.workload import MAX_COMPUTE_FLOP, MIN_COMPUTE_FLOP

    out = [MIN_COMPUTE_FLOP]
    while out[-1] * 10.0 <= MAX_COMPUTE_FLOP:
        out.append(out[-1] * 10.0)
    return tuple(out)


def _first_decade_past(fits: Callable[[float], bool], decades: Sequence[float]) -> tuple[float, float] | None:
    """(the last decade that fits, the first that does not) for a `fits` that holds at decades[0] and, from decade
    to decade, holds up to some decade and not after it (the floor bound grows with compute: a decade's step
    outweighs the shape rounding that makes it slightly non-monotone within one); None when the last decade fits.
    A bisection over the decades' indices: about 5 floor bounds where a walk up from the first took up to 14."""
    if fits(decades[-1]):
        return None
    i, j = 0, len(decades) - 1  # fits(decades[i]), not fits(decades[j])
    while j - i > 1:
        mid = (i + j) // 2
        if fits(decades[mid]):
            i = mid
        else:
            j = mid
    return decades[i], decades[j]


def _largest_compute_within(hw: Hardware, days: float, sparse: bool, law: str, options: SearchOptions | None,
                            budget: str) -> float | None:
    from planner.workload import MIN_COMPUTE_FLOP, infer_workload

    def fits(c: float) -> bool:
        return floor_bound(hw, infer_workload(c, sparse=sparse, batch_scaling=law, budget=budget),
                           options).days <= days

    if not fits(MIN_COMPUTE_FLOP):
        return None
    bracket = _first_decade_past(fits, _decades())
    if bracket is None:  # past the accepted range: walk on by tens, as the bracket always did
        lo = _decades()[-1]
        hi = lo * 10.0
        while fits(hi):
            if hi >= 1e60:
                return hi
            lo, hi = hi, hi * 10.0
    else:
        lo, hi = bracket
    a, b = math.log(lo), math.log(hi)
    while b - a > 0.01:
        mid = 0.5 * (a + b)
        if fits(math.exp(mid)):
            a = mid
        else:
            b = mid
    return math.exp(a)


# --------------------------------------------------------------------------------------------------
# GPU counts and memory
# --------------------------------------------------------------------------------------------------


def levels_allow(hw: Hardware, n: int) -> bool:
    """Whether n GPUs fill `hw`'s network levels bottom-up (and do not exceed the top level); as level_products."""
    return fill_levels(hw.levels, n) is not None


def _split_dims(wl: Workload) -> tuple[int, ...]:
    """The numbers the degrees must divide: d_ff, d_model, L, E and b / E (docs/model.md, "The search space")."""
    return wl.d_ff, wl.d_model, wl.layers, wl.experts, wl.batch_tokens // wl.experts


def divisors_allow(wl: Workload, n: int) -> bool:
    """Whether n splits into N_DP | b/E, N_TP,ff | d_ff, N_TP,model | d_model, N_PP | L, N_EP | E (prime by prime)."""
    return not wl.batch_tokens % wl.experts and _missing_factor(n, _split_dims(wl)) == 1


def can_form(hw: Hardware, wl: Workload, n: int) -> bool:
    return levels_allow(hw, n) and divisors_allow(wl, n)


MAX_SPLIT_DIVISORS = 1_000_000
"""Most divisors of the split dimensions' product that `nearby_counts` lists; past it (dimensions with many distinct
prime factors) it scans counts one by one instead, SCAN_REACH each way."""

SCAN_REACH = 1_000_000
"""How many counts each way the fallback scan of `nearby_counts` reaches (a count, not a time: the same answer on
every machine)."""


def split_divisors(wl: Workload) -> list[int] | None:
    """Every GPU count the degrees can split (divisors_allow), ascending: the divisors of the product of the split
    dimensions, since n splits prime by prime exactly when it divides that product. None when b / E is not whole
    (nothing splits) or when there are more than MAX_SPLIT_DIVISORS."""
    if wl.batch_tokens % wl.experts:
        return []
    factors = _split_factors(wl)
    if math.prod(e + 1 for e in factors.values()) > MAX_SPLIT_DIVISORS:
        return None
    return list(ascending_divisors(factors))


def _filling_below(hw: Hardware, counts: Sequence[int], n: int) -> int | None:
    """The largest of the ascending `counts` below n that fills hw's levels (levels_allow); None: none."""
    return next((c for c in reversed(counts[:bisect.bisect_left(counts, n)]) if levels_allow(hw, c)), None)


def _filling_above(hw: Hardware, counts: Sequence[int], n: int) -> int | None:
    """The smallest of the ascending `counts` above n that fills hw's levels (levels_allow, which also keeps it within
    the top level); None: none."""
    return next((c for c in counts[bisect.bisect_right(counts, n):] if levels_allow(hw, c)), None)


def nearby_counts(hw: Hardware, wl: Workload, n: int) -> tuple[int | None, int | None]:
    """The nearest usable GPU counts below and above n (can_form; None when there is none).

    The counts the degrees can split are the divisors of one number (split_divisors), so the nearest usable ones are
    found among those however far from n they lie, in time that does not grow with n. For dimensions with too many
    divisors to list, counts are scanned one by one, SCAN_REACH each way."""
    splits = split_divisors(wl)
    if splits is not None:
        return _filling_below(hw, splits, n), _filling_above(hw, splits, n)
    reach = n + SCAN_REACH if hw.max_gpus is None else min(hw.max_gpus, n + SCAN_REACH)
    below = next((k for k in range(n - 1, max(0, n - SCAN_REACH), -1) if can_form(hw, wl, k)), None)
    return below, next((k for k in range(n + 1, reach + 1) if can_form(hw, wl, k)), None)


@dataclass(frozen=True)
class MemoryFit:
    total_bytes: float
    tuple_text: str  # the best-fitting degree tuple, in words
    rows: int  # degree tuples priced
    complete: bool  # False when `max_rows` stopped the enumeration: then total_bytes is the least of those priced


def _memory_rows(wl: Workload, options: SearchOptions, n: int) -> Iterator[tuple[int, int, int, int, int, int, int]]:
    """(dp, tp_ff, tp_model, pp, ep, microbatches, zb-h2) for every degree tuple with product n, lazily."""
    pe = wl.batch_tokens // wl.experts
    for tf in divisors(math.gcd(wl.d_ff, n)):
        r1 = n // tf
        for tm in divisors(math.gcd(wl.d_model, r1)):
            r2 = r1 // tm
            for ep in divisors(math.gcd(wl.experts, r2)):
                r3 = r2 // ep
                for pp in divisors(math.gcd(wl.layers, r3)):
                    dp = r3 // pp
                    if pe % dp:
                        continue
                    m = pe // dp  # most microbatches: least activation memory (see the module docstring)
                    if options.schedule in ("auto", "1f1b"):
                        yield dp, tf, tm, pp, ep, m, 0
                    elif m >= 2 * pp - 1:
                        yield dp, tf, tm, pp, ep, m, 1


MAX_MEMORY_ROWS = 2_000_000
"""Most degree tuples `min_memory_on` prices for one GPU count (far more than any count with a realistic divisor
structure has; a few thousand is typical)."""


def min_memory_on(hw: Hardware, wl: Workload, options: SearchOptions, n: int,
                  max_rows: int = MAX_MEMORY_ROWS) -> MemoryFit | None:
    """Least per-GPU memory of any layout on exactly n GPUs (None if no degree tuple has product n).

    At most `max_rows` degree tuples are priced; the enumeration stops there (`complete` is then False and the
    result is the least of those priced, an upper bound on the true least)."""
    if wl.batch_tokens % wl.experts or max_rows < 1:
        return None
    gen = _memory_rows(wl, options, n)
    rows = list(itertools.islice(gen, max_rows))
    if not rows:
        return None
    complete = len(rows) < max_rows or next(gen, None) is None
    a = np.array(rows, dtype=np.int64)
    dp, tf, tm, pp, ep, m = (a[:, k].astype(np.float64) for k in range(6))
    zb = a[:, 6].astype(bool)
    in_flight = microbatches_in_flight(pp, np.ones_like(pp), m, zb)
    bn = wl.batch_tokens / (wl.experts * dp * m)
    cols = {"dp": dp, "tp_ff": tf, "tp_model": tm, "pp": pp, "ep": ep}
    total = mem.layout_memory(hw, wl, cols, bn, in_flight)["total_bytes"]
    k = int(np.argmin(total))
    r = rows[k]
    text = (f"dp={r[0]}, tp_ff={r[1]}, tp_model={r[2]}, pp={r[3]}, ep={r[4]}, microbatches={r[5]}, "
            f"{'zb-h2' if r[6] else '1f1b'}")
    return MemoryFit(float(total[k]), text, len(rows), complete)


def fits_memory_on(hw: Hardware, wl: Workload, options: SearchOptions, n: int) -> bool:
    fit = min_memory_on(hw, wl, options, n)
    return fit is not None and fit.total_bytes <= mem.usable_bytes(hw)


def _prime_factors(k: int) -> dict[int, int]:
    """{prime: exponent} of k >= 1, by trial division."""
    out: dict[int, int] = {}
    p = 2
    while p * p <= k:
        while k % p == 0:
            out[p] = out.get(p, 0) + 1
            k //= p
        p += 1 if p == 2 else 2
    if k > 1:
        out[k] = out.get(k, 0) + 1
    return out


def _split_factors(wl: Workload) -> dict[int, int]:
    """{prime: exponent} of Q = d_ff d_model L E (b/E), the number every usable GPU count divides."""
    factors: dict[int, int] = {}
    for k in _split_dims(wl):
        for p, e in _prime_factors(k).items():
            factors[p] = factors.get(p, 0) + e
    return factors


def ascending_divisors(factors: dict[int, int]) -> Iterator[int]:
    """Every divisor of prod p^e over `factors`, each once, in increasing order, lazily.

    A heap walk over divisors built prime by prime in increasing prime order: a divisor whose largest prime is
    p_i (exponent e) has the children d p_i (if e is below its cap) and d p_j for every j > i, so each divisor
    has exactly one parent, and every child is larger than its parent."""
    primes = sorted(factors)
    yield 1
    heap = [(p, i, 1) for i, p in enumerate(primes)]
    heapq.heapify(heap)
    while heap:
        d, i, e = heapq.heappop(heap)
        yield d
        if e < factors[primes[i]]:
            heapq.heappush(heap, (d * primes[i], i, e + 1))
        for j in range(i + 1, len(primes)):
            heapq.heappush(heap, (d * primes[j], j, 1))


MAX_FIT_DIVISORS = 100_000
"""Most candidate GPU counts (divisors of d_ff d_model L E (b/E), in increasing order) `fit_search` walks. Shipped
hardware with inferred shapes has at most a few thousand such divisors in all, so the cap only binds on
pathological explicit shapes (many distinct large primes); it is a count, not a time, so the answer is the same on
every machine."""

MAX_FIT_PRICED = 1_000
"""Most GPU counts whose least memory `fit_search` prices (typically one or two are priced before a fit)."""


@dataclass(frozen=True)
class FitSearch:
    """The fewest GPUs on which some layout fits in memory, as far as `fit_search` looked."""

    gpus: int | None  # the fewest GPUs found, None if none was found
    start: int  # counts below this cannot fit: weights, gradients and optimizer state need 16 N_p bytes in all
    last: int | None  # the largest count priced (None if none was)
    exhaustive: bool  # True when every usable count from `start` up was priced: gpus is then proven the fewest


def fit_search(hw: Hardware, wl: Workload, options: SearchOptions,
               max_divisors: int = MAX_FIT_DIVISORS, max_priced: int = MAX_FIT_PRICED) -> FitSearch:
    """Fewest GPUs on which some layout of `wl` fits in `hw`'s memory, walking only the counts `can_form` allows.

    A usable count n divides Q = d_ff d_model L E (b/E) (`divisors_allow`, prime by prime) and fills the levels
    bottom-up (`levels_allow`), so the walk takes Q's divisors in increasing order from the lower bound
    ceil(16 N_p / (HBM - reserve)) (docs/model.md §7: weights, gradients and optimizer state alone are
    STATE_BYTES_PER_PARAM = 16 bytes per parameter,
    spread over n GPUs) up to the top level's size. It stops at the first count on which some degree tuple fits,
    or after `max_divisors` divisors or `max_priced` priced counts, whichever comes first (a deterministic bound)."""
    room = mem.usable_bytes(hw) - hw.profile.memory_reserve_bytes
    if room <= 0 or wl.batch_tokens % wl.experts:
        return FitSearch(None, 1, None, True)
    start = max(1, math.ceil(STATE_BYTES_PER_PARAM * wl.params / room))
    factors = _split_factors(wl)
    last: int | None = None
    priced = 0
    complete = True  # every count priced so far had all its degree tuples priced
    for n in itertools.islice(ascending_divisors(factors), max_divisors):
        if hw.max_gpus is not None and n > hw.max_gpus:
            return FitSearch(None, start, last, complete)
        if n < start or not levels_allow(hw, n):
            continue
        if priced >= max_priced:
            return FitSearch(None, start, last, False)
        priced += 1
        last = n
        fit = min_memory_on(hw, wl, options, n)
        if fit is not None and fit.total_bytes <= mem.usable_bytes(hw):
            return FitSearch(n, start, n, complete)
        complete = complete and (fit is None or fit.complete)
    walked_all = math.prod(e + 1 for e in factors.values()) <= max_divisors  # Q has no divisor left unwalked
    return FitSearch(None, start, last, complete and walked_all)


def gpus_to_fit(hw: Hardware, wl: Workload, options: SearchOptions) -> int | None:
    """Fewest GPUs on which some layout fits in memory (None if `fit_search` found none)."""
    return fit_search(hw, wl, options).gpus


# --------------------------------------------------------------------------------------------------
# The explanation
# --------------------------------------------------------------------------------------------------


def _fmt_days(d: float) -> str:
    if d >= 1:
        return f"{d:,.1f} days"
    return f"{d:.3g} days ({d * 24:.3g} hours)"


def _level_rule(hw: Hardware) -> str:
    if all(lvl.size is None for lvl in hw.levels):
        return "its network levels"
    return (f"its network levels bottom-up ({level_rule(hw)})"
            + ("" if hw.max_gpus is None else f", and at most {hw.max_gpus} GPUs"))


def _missing_factor(n: int, dims: Iterable[int]) -> int:
    """What of n is left after each of `dims` in turn takes its greatest common divisor with it (1: n splits over
    them, prime by prime)."""
    for k in dims:
        n //= math.gcd(n, k)
    return n


def _fewest_text(gpus: int, exhaustive: bool, fits: str = "fits in memory") -> str:
    """'the fewest GPUs on which some layout fits is N', qualified when smaller counts were not all priced."""
    if exhaustive:
        return f"the fewest GPUs on which some layout {fits} is {gpus:,}"
    return f"some layout {fits} on {gpus:,} GPUs (smaller counts were only partly checked, so fewer may do)"


def _no_fit_text(hw: Hardware, scan: FitSearch) -> str:
    """Why `fit_search` found no count, in words: proven (every usable count checked) or not (a cap stopped it)."""
    alone = (f"weights, gradients and optimizer state alone need at least {scan.start:,} GPUs "
             f"(16 bytes per parameter)")
    if scan.exhaustive:
        return f"no GPU count of {hw.name} that this model can be split over fits it in memory; {alone}"
    upto = "" if scan.last is None else f" from {scan.start:,} to {scan.last:,}"
    return (f"no GPU count of {hw.name}{upto} was found on which it fits (the check stops after "
            f"{MAX_FIT_PRICED:,} counts or {MAX_FIT_DIVISORS:,} candidates; larger clusters were not checked); "
            f"{alone}")


def _nearby_text(hw: Hardware, wl: Workload, options: SearchOptions, n: int) -> str:
    below, above = nearby_counts(hw, wl, n)
    found = [k for k in (below, above) if k is not None]
    if not found:
        return "no nearby GPU count can be formed either"
    parts = []
    for k in found:
        parts.append(f"{k:,}" if fits_memory_on(hw, wl, options, k) else f"{k:,} (too little memory for this model)")
    text = f"the nearest usable counts are {' and '.join(parts)}"
    if all("memory" in p for p in parts):
        scan = fit_search(hw, wl, options)
        need = scan.gpus
        text += "; " + (_fewest_text(need, scan.exhaustive) if need is not None else _no_fit_text(hw, scan))
    return text


def toy_batches_that_split(hw: Hardware, wl: Workload, options: SearchOptions, n: int) -> list[int]:
    """Global batches b in tokens of the toy model, next to its own (at most one below and one above), with which
    some layout uses exactly n GPUs and fits in memory. The model-parallel degrees take what they can of n (each
    prime as far as d_ff, d_model, L and E allow); the rest r must be a factor of N_DP, which divides b / E, so b / E
    must be a multiple of r (and any such multiple lets N_DP = r). Each candidate is checked (divisors_allow,
    fits_memory_on), so only batches that really split and fit are named; at most BATCHES_TRIED are priced."""
    if wl.transformer is not None or not levels_allow(hw, n):
        return []
    rest = _missing_factor(n, (wl.d_ff, wl.d_model, wl.layers, wl.experts))
    per_expert = wl.batch_tokens // wl.experts
    low, high = per_expert // rest, -(-per_expert // rest)
    sides = ([(low - j) * rest for j in range(BATCHES_TRIED // 2) if low - j > 0],
             [(high + j) * rest for j in range(BATCHES_TRIED // 2)])
    found: list[int] = []
    for side in sides:
        for c in side:
            if c == per_expert:
                continue
            try:
                other = Workload(**{**wl.model_dump(), "batch_tokens": c * wl.experts})
            except ValueError:  # pydantic's ValidationError: this batch is not a valid workload
                continue
            if divisors_allow(other, n) and fits_memory_on(hw, other, options, n):
                found.append(c * wl.experts)
                break
    return sorted(found)


def _toy_batch_text(hw: Hardware, wl: Workload, options: SearchOptions, n: int) -> str:
    """'; or keep n GPUs with a batch of ... tokens' and the flags that ask for it (empty: no batch near helps)."""
    batches = toy_batches_that_split(hw, wl, options, n)
    if not batches:
        return ""
    tokens = f"{wl.tokens:.0f}" if float(wl.tokens).is_integer() else repr(float(wl.tokens))
    experts = f" --experts {wl.experts}" if wl.experts > 1 else ""
    return (f"; or keep {n:,} GPUs and make the global batch {' or '.join(f'{b:,}' for b in batches)} tokens, which "
            f"the data-parallel degree of a {n:,}-GPU layout divides (as an explicit shape: --d-model {wl.d_model} "
            f"--d-ff {wl.d_ff} --layers {wl.layers}{experts} --batch-tokens N --tokens {tokens})")


def _memory_line(hw: Hardware, wl: Workload, options: SearchOptions, n: int, fit: MemoryFit) -> str:
    scan = fit_search(hw, wl, options)
    cap = mem.capacity_bytes(hw)
    gpus = f"{n} GPU{'s' if n != 1 else ''} of {hw.name}"
    numbers = (f"needs {fit.total_bytes / GB:,.1f} GB per GPU but the {hw.gpu.name} has {cap / GB:.4g} GB of HBM "
               f"({fit.total_bytes / cap:.3g}x as much is needed)")
    if fit.complete:
        head = f"the model does not fit in memory on {gpus}: the best-fitting layout ({fit.tuple_text}) {numbers}"
    else:
        head = (f"no layout found that fits the model in memory on {gpus} (only the first {fit.rows:,} degree tuples "
                f"were priced): the best of them ({fit.tuple_text}) {numbers}")
    if scan.gpus is not None:
        tail = (f"{_fewest_text(scan.gpus, scan.exhaustive, 'fits')} (use --gpus {scan.gpus} or more; to meet a "
                f"deadline as well, drop --gpus and give --days, and the planner sizes the cluster)")
    else:
        tail = _no_fit_text(hw, scan)
    return head + "\n" + tail


def explain_infeasible(hw: Hardware, wl: Workload, options: SearchOptions, days: float | None,
                       result: SearchResult, failures: FailureModel | None = None) -> str:
    """A first line saying why, then what would be feasible."""
    try:
        if failures is not None and days is not None and options.gpus is None:
            why = _explain_goodput(hw, wl, days, failures)
            if why:
                return why
        if wl.transformer is not None:
            return _explain_transformer(hw, wl, options, days, result)
        if options.gpus is not None:
            return _explain_fixed(hw, wl, options, options.gpus, result)
        return _explain_deadline(hw, wl, options, days, result)
    except Exception as exc:  # noqa: BLE001 - the explanation must never turn an answer into a crash
        return (f"no feasible layout ({result.status}); the explanation failed: {type(exc).__name__}: {exc}")


def _explain_goodput(hw: Hardware, wl: Workload, days: float, failures: FailureModel) -> str:
    """When failures alone rule every cluster out: N g(N) peaks and stays below what the compute needs."""
    import numpy as np

    from planner.cost.step import peak_flops
    from planner.goodput import goodput_at, goodput_fraction, useful_gpu_range

    g = goodput_fraction(failures, wl.params)
    need = wl.compute_flop / peak_flops(hw, wl)
    top = float(hw.max_gpus or 2**53)
    if useful_gpu_range(g, need, days * SECONDS_PER_DAY, top) is not None:
        return ""
    grid = np.unique(np.round(np.geomspace(1, min(top, 1e12), 2000)))
    best = float(grid[int(np.argmax(grid * g(grid)))])
    at = goodput_at(failures, best, wl.params)
    fastest = need / (best * at.goodput) / SECONDS_PER_DAY if at.goodput > 0 else math.inf
    lam = failures.interruptions_per_gpu_hour
    return "\n".join([
        f"failures rule out every cluster: with {lam:.3g} interruptions per GPU-hour, "
        f"{failures.restart_s / 60:.3g}-minute restarts and {failures.storage_Bps_per_gpu / 1e9:.3g} GB/s of "
        f"checkpoint storage per GPU (failure model '{failures.name}'), no cluster of {hw.name} trains this model in "
        f"{days:g} wall-clock days",
        f"the job is interrupted every 1/(lambda N) hours, so goodput falls as the cluster grows: the most useful "
        f"cluster is about {best:,.0f} GPUs (interrupted every {at.mtbf_s / 60:.3g} min, goodput "
        f"{fmt_pct(at.goodput)}), "
        f"where even at peak FLOP/s training takes at least {fastest:,.1f} wall-clock days",
        f"feasible instead: at least {fastest:,.0f} days on that cluster, or a lower interruption rate, faster "
        f"restarts or faster checkpoints (--set goodput.interruptions_per_gpu_hour=..., goodput.restart_minutes=..., "
        f"goodput.storage_GBps_per_gpu=...; --sensitivity ranks them), or --no-goodput for the failure-free answer"])



def time_advice(result: SearchResult) -> str:
    """What more time would do for a search its limit stopped: let CP-SAT start, when the limit ran out while the
    space and its tables were built (more time helps only by that much), or search longer."""
    if result.solver == "cpsat" and result.cpsat_models == 0:  # stopped before its first CP-SAT model
        return (f"the limit ran out in presolve, {result.presolve_s:.1f} s into building the space and its tables, "
                "before CP-SAT ran: raise --time-limit well above that for the search to start")
    return "raise --time-limit to search longer"

def transformer_least_memory(hw: Hardware, wl: Workload, options: SearchOptions, n: int, space: Space | None = None
                             ) -> tuple[Tuples, np.ndarray, int] | None:
    """The degree tuples of a transformer with exactly n GPUs, their memory per GPU and the index of the least (None:
    no tuple has n GPUs)."""
    from planner.parallel.space import build_space, model_parallel_rows
    from planner.search.cpsat import PairIndex, tuples_from_pairs

    space = space if space is not None else build_space(hw, wl, options)
    index = PairIndex.build(space, model_parallel_rows(space))
    t = tuples_from_pairs(space, index, *index.pairs(n, n))  # only the tuples with exactly n GPUs
    t = t.take(np.nonzero(t.gpus == n)[0])
    if len(t) == 0:
        return None
    nanobatch = T.nanobatch_tokens(wl, t["dp"], t["microbatches"], t["ep"], t["cp"])
    in_flight = microbatches_in_flight(t["pp"], t["interleave"], t["microbatches"], t["zero_bubble"])
    total = mem.layout_memory(hw, wl, t, nanobatch, in_flight)["total_bytes"]
    return t, total, int(np.argmin(total))


def _fit_advice(hw: Hardware, wl: Workload, t: Tuples) -> str:
    """What to change when no layout on a fixed cluster fits: a smaller batch only shrinks the activations, so when
    the weights, gradients and optimizer state alone exceed the usable HBM in every layout, only more GPUs help."""
    nanobatch = T.nanobatch_tokens(wl, t["dp"], t["microbatches"], t["ep"], t["cp"])
    in_flight = microbatches_in_flight(t["pp"], t["interleave"], t["microbatches"], t["zero_bubble"])
    comp = mem.layout_memory(hw, wl, t, nanobatch, in_flight)
    states = comp["weights_bytes"] + comp["grads_bytes"] + comp["optimizer_bytes"]
    least = float(np.min(states))
    if least > mem.usable_bytes(hw):
        return (f"use more GPUs: the weights, gradients and optimizer state alone need at least {least / GB:,.1f} GB "
                "per GPU in every layout, whatever the batch")
    return "use more GPUs or a smaller batch (--batch-sequences)"


def _explain_transformer(hw: Hardware, wl: Workload, options: SearchOptions, days: float | None,
                         result: SearchResult) -> str:
    """A transformer's infeasibility, read off the search space itself: on a fixed cluster, whether any degree tuple
    has that many GPUs and the least memory any of them needs; with a deadline, the least critical path of any tuple
    (a lower bound on every layout's step, so on the training time)."""
    from planner.parallel.space import build_space

    if result.status == "unknown":
        return (f"the search stopped at its time limit (after {result.wall_s:.1f} s) before finding a layout; this was "
                f"NOT proven infeasible: {time_advice(result)}")
    space = build_space(hw, wl, options)
    if options.gpus is not None:
        n = options.gpus
        if not levels_allow(hw, n):
            usable = UsableCounts(hw, wl, options)
            near = [f"{k:,}" for k in (usable.below(n), usable.above(n)) if k is not None]
            return (f"{n:,} GPUs cannot form a cluster of {hw.name}: the GPUs must fill {_level_rule(hw)}; "
                    + (f"the nearest GPU counts with a layout are {' and '.join(near)}" if near
                       else "no nearby GPU count has a layout either"))
        least = transformer_least_memory(hw, wl, options, n, space)
        if least is None:
            usable = UsableCounts(hw, wl, options)
            near = [f"{k:,}" for k in (usable.below(n), usable.above(n)) if k is not None]
            counts = (f"the nearest GPU counts with a layout are {' and '.join(near)}" if near
                      else "no nearby GPU count has a layout either")
            batches = batches_that_split(hw, wl, options, n, usable)
            batch = (f"; or keep {n:,} GPUs and make the global batch {' or '.join(f'{b:,}' for b in batches)} "
                     f"sequences (--batch-sequences N), which the data-parallel degree of a {n:,}-GPU layout divides"
                     if batches else "")
            return (f"no layout can split this model over exactly {n:,} GPUs: the degrees must divide the heads and "
                    f"MLP widths (tp_ff), d_model (tp_model), half the sequence (cp), the experts (ep) and the batch "
                    f"of {wl.batch_tokens // wl.seq_len:,} sequences (dp x ep x microbatches), and the pipeline "
                    f"stages (pp) must split the {wl.layers} layers (the end stages may hold fewer)\n{counts}{batch}")
        t, total, k = least
        if total[k] > mem.usable_bytes(hw):
            words = ", ".join(f"{d}={BY_NAME[d].label(int(t[d][k]))}" for d in (
                "dp", "tp_ff", "tp_model", "pp", "interleave", "ep", "cp", "microbatches", "sp", "recompute", "zero"))
            cap = mem.capacity_bytes(hw)
            if total[k] <= cap:  # tight: within the device, inside the headroom (docs/model.md §7b, three verdicts)
                free = math.floor((cap - total[k]) / GB * 100) / 100
                return (f"the model fits the memory of {n:,} GPUs of {hw.name} only inside the headroom: the least "
                        f"any layout needs is {total[k] / GB:,.2f} GB per GPU ({words}) of {cap / GB:,.2f} GB usable "
                        f"HBM, {headroom_shortfall(float(total[k]), hw.profile.memory_headroom_bytes, cap)}; "
                        f"--memory-headroom {free:g} accepts it (predicted to run, without that margin), "
                        f"or {_fit_advice(hw, wl, t)}")
            return (f"the model does not fit in the memory of {n:,} GPUs of {hw.name}: the least any layout needs is "
                    f"{total[k] / GB:,.1f} GB per GPU ({words}) against {cap / GB:,.1f} GB "
                    "usable HBM"
                    + (f" less {hw.profile.memory_headroom_bytes / GB:,.1f} GB of headroom"
                       if hw.profile.memory_headroom_bytes else "") + "; " + _fit_advice(hw, wl, t))
        return (f"no layout of this model on {n:,} GPUs of {hw.name} satisfies every rule of the search space (a "
                "degree tuple fits in memory, but no placement fills the network levels)")
    # The least critical path of any layout, latency path included (floor_bound, read from the cost terms).
    fb = floor_bound(hw, wl, options)
    return (f"no layout trains this model within {_fmt_days(days or 0.0)} on {hw.name}: every step takes at least "
            f"the critical path of one microbatch through all {wl.layers} layers, {fb.step_s * 1e3:.4g} ms at best "
            f"(GEMMs, attention, element-wise work and latencies), times {wl.steps:,.0f} steps\n"
            f"shortest possible duration: at least {_fmt_days(fb.days)} (a lower bound)")


def _explain_fixed(hw: Hardware, wl: Workload, options: SearchOptions, n: int, result: SearchResult) -> str:
    if not levels_allow(hw, n):
        return (f"{n:,} GPUs cannot form a cluster of {hw.name}: the GPUs must fill {_level_rule(hw)}\n"
                f"{_nearby_text(hw, wl, options, n)}")
    if not divisors_allow(wl, n):
        missing = _missing_factor(n, _split_dims(wl))
        return (f"no layout can split this model over exactly {n:,} GPUs: the degrees must divide d_ff={wl.d_ff}, "
                f"d_model={wl.d_model}, L={wl.layers}, E={wl.experts} and b/E={wl.batch_tokens // wl.experts}, and "
                f"together they lack the factor {missing:,} of {n:,}\n{_nearby_text(hw, wl, options, n)}"
                f"{_toy_batch_text(hw, wl, options, n)}")
    fit = min_memory_on(hw, wl, options, n)
    if fit is None:
        return (f"no layout with the {options.schedule} schedule uses exactly {n:,} GPUs (zb-h2 needs microbatches "
                f">= 2 pp - 1)\n{_nearby_text(hw, wl, options, n)}")
    if fit.total_bytes > mem.usable_bytes(hw):
        return _memory_line(hw, wl, options, n, fit)
    if result.status == "unknown":
        return (f"the search stopped at its time limit (after {result.wall_s:.1f} s) before finding any layout on "
                f"{n:,} GPUs; this was NOT proven infeasible: a layout fitting in memory exists ({fit.tuple_text} "
                f"needs {fit.total_bytes / GB:,.1f} GB per GPU); {time_advice(result)}")
    return (f"no layout of this model on {n:,} GPUs of {hw.name} satisfies every rule of the search space, although "
            f"the degree tuple {fit.tuple_text} fits in memory ({fit.total_bytes / GB:,.1f} GB per GPU): no valid "
            f"placement on the network levels\n{_nearby_text(hw, wl, options, n)}")


def _explain_deadline(hw: Hardware, wl: Workload, options: SearchOptions, days: float | None,
                      result: SearchResult) -> str:
    fb = floor_bound(hw, wl, options)
    lines: list[str] = []
    if days is not None and fb.days > days:
        lines.append(
            f"past the latency wall: no layout of {hw.name} trains this model in {days:g} days; no layout can be "
            f"faster than {_fmt_days(fb.days)} (the critical path of one microbatch through all L={wl.layers} "
            f"layers, {fb.step_s * 1e3:.4g} ms per step, times D/b = {wl.steps:,.0f} steps)")
        lines.append(
            f"shortest possible duration: at least {_fmt_days(fb.days)} (a lower bound: {wl.layers} layers x "
            f"{fb.step_s / wl.layers * 1e6:.3g} us of GEMM and network latency per layer at best, with tp_ff="
            f"{fb.tp_ff}, tp_model={fb.tp_model}, ep={fb.ep}" + (f", cp={fb.cp}" if fb.cp > 1 else "")
            + f" and {fb.nanobatch:g}-token nanobatches); the actual "
            f"shortest run can be longer")
        if result.status == "unknown":
            lines.append(f"(proven by this bound; the search itself stopped at its time limit after "
                         f"{result.wall_s:.1f} s)")
        law = _law_of(wl)
        if law is not None:
            sparse, batch_law, budget = law
            est = largest_compute_within(hw, days, sparse, batch_law, options, budget)
            if est is None:
                lines.append(f"even the smallest accepted compute cannot be trained in {days:g} days")
            else:
                lines.append(f"largest compute trainable in {days:g} days: at most about {est:.3g} FLOP (an upper "
                             f"estimate from the same bound, {'sparse' if sparse else 'dense'}, {batch_law} batch "
                             f"law; the real limit can be lower)")
        else:
            tokens = days * SECONDS_PER_DAY / fb.step_s * wl.batch_tokens
            lines.append(f"most tokens trainable with this shape in {days:g} days: at most {tokens:.3g} (an upper "
                         f"estimate from the same bound; requested {wl.tokens:.3g})")
        return "\n".join(lines)

    if result.status == "unknown":
        return (f"the search stopped at its time limit (after {result.wall_s:.1f} s) before finding any layout; the "
                f"request was NOT proven infeasible ({time_advice(result)})\n"
                f"for reference, no layout can be faster than {_fmt_days(fb.days)} (critical-path lower bound), "
                f"which is within the {days:g} days asked")
    scan = fit_search(hw, wl, options)
    if scan.gpus is None and scan.exhaustive:  # proven: no usable count fits, whatever the deadline
        if hw.max_gpus is not None:
            fit = min_memory_on(hw, wl, options, hw.max_gpus)
            got = f"{fit.total_bytes / GB:,.1f} GB" if fit else "no layout"
            return (f"the model does not fit in memory on any cluster of {hw.name} (at most {hw.max_gpus} GPUs; the "
                    f"largest needs {got} per GPU, usable HBM is {mem.capacity_bytes(hw) / GB:.4g} GB"
                    + (f" less {hw.profile.memory_headroom_bytes / GB:.4g} GB of headroom"
                       if hw.profile.memory_headroom_bytes else "") + ")\n"
                    "use hardware with a larger top network level or more HBM")
        return (f"the model does not fit in memory on any cluster of {hw.name} it can be split over (every usable "
                f"GPU count from {scan.start:,} up was checked; fewer GPUs cannot hold the weights, gradients and "
                f"optimizer state, 16 bytes per parameter)\n"
                f"use hardware with more HBM, or a shape whose dimensions have more small factors")
    return (f"no layout of {hw.name} trains this model within {days:g} days (proven by the search)\n"
            f"the critical-path lower bound alone would allow {_fmt_days(fb.days)}, but bubbles, bandwidth and "
            f"memory limits make every layout slower; the shortest possible duration is longer than {days:g} days")



# --------------------------------------------------------------------------------------------------
# The facts behind an explanation, as numbers (issue 26: the contract for scripts)
# --------------------------------------------------------------------------------------------------


MAX_COUNTS_WALKED = 100_000
"""Most GPU counts walked one by one from a plan's (to name the nearest that cannot be formed, and to count those
between two usable sizes): a count, not a time, so the answer is the same on every machine."""


class UsableCounts:
    """Which GPU counts some degree tuple of the search space uses exactly, and that fill the network levels:
    N = (product of the model-parallel degrees) x N_DP over the space's rows (planner.parallel.space). Memory and
    the deadline are not checked here."""

    def __init__(self, hw: Hardware, wl: Workload, options: SearchOptions) -> None:
        from planner.parallel.space import build_space, model_parallel_sizes

        space = build_space(hw, wl, options)
        self.hw = hw
        self.wl = wl
        self.mp_sizes = {int(v) for v in model_parallel_sizes(space)}
        self.dps = sorted({int(v) for v in np.unique(space.dp_m["dp"])})
        self.counts = sorted({m * d for m in self.mp_sizes for d in self.dps})
        """Every GPU count some degree tuple multiplies to, ascending (the levels not yet checked)."""

    def splits(self, n: int) -> bool:
        return any(n % d == 0 and n // d in self.mp_sizes for d in self.dps)

    def __call__(self, n: int) -> bool:
        return levels_allow(self.hw, n) and self.splits(n)

    def why_not(self, n: int) -> str:
        """Why no layout uses exactly n GPUs, in words."""
        if not levels_allow(self.hw, n):
            return f"{n:,} GPUs cannot fill {_level_rule(self.hw)}"
        if self.wl.transformer is None:
            missing = _missing_factor(n, _split_dims(self.wl))
            if missing > 1:
                return (f"{n:,} GPUs cannot be split into degrees dividing d_ff={self.wl.d_ff}, d_model="
                        f"{self.wl.d_model}, L={self.wl.layers}, E={self.wl.experts} and b/E="
                        f"{self.wl.batch_tokens // self.wl.experts}: they lack the factor {missing:,}")
        return (f"no degree tuple of this model multiplies to {n:,} GPUs (tp divides the heads and MLP widths, pp the "
                "layers, ep the experts, dp x microbatches the batch)")

    def below(self, n: int) -> int | None:
        """The largest usable count below n (None: none)."""
        return _filling_below(self.hw, self.counts, n)

    def above(self, n: int) -> int | None:
        """The smallest usable count above n (None: none, or none within the top level)."""
        return _filling_above(self.hw, self.counts, n)


BATCHES_TRIED = 6
"""Candidate global batches `batches_that_split` checks by building their search space (each a few tenths of a
second): the nearest to the workload's on either side."""


def batches_that_split(hw: Hardware, wl: Workload, options: SearchOptions, n: int, usable: UsableCounts) -> list[int]:
    """Global batches, in sequences, next to the transformer's own (at most one below and one above), with which some
    degree tuple uses exactly n GPUs: when the model-parallel degrees can make up part of n, the rest is the
    data-parallel degree, which must divide the batch. Each candidate is a multiple of such a rest and is checked on
    its own search space (UsableCounts), so only batches that really split are named. Empty when the batch is not
    what stands in the way (no model-parallel size divides n, or no candidate splits)."""
    if wl.transformer is None or not levels_allow(hw, n):
        return []
    seqs = wl.batch_tokens // wl.seq_len
    rests = sorted({n // m for m in usable.mp_sizes if n % m == 0})
    candidates = {c for r in rests for c in (seqs // r * r, -(-seqs // r) * r) if c > 0 and c != seqs}
    found: list[int] = []
    for side in (sorted((c for c in candidates if c < seqs), reverse=True), sorted(c for c in candidates if c > seqs)):
        for c in side[:BATCHES_TRIED // 2]:
            try:
                other = Workload(**{**wl.model_dump(), "batch_tokens": c * wl.seq_len})
            except ValueError:  # pydantic's ValidationError: this batch is not a valid workload
                continue
            if UsableCounts(hw, other, options).splits(n):
                found.append(c)
                break
    return sorted(found)


def between_text(usable: UsableCounts, lo: int | None, hi: int) -> str:
    """Why every count strictly between `lo` (a usable count, or None) and `hi` fails, in words."""
    start = 1 if lo is None else lo + 1
    if hi - start > MAX_COUNTS_WALKED:
        nearest = list(itertools.islice(
            (k for k in range(hi - 1, hi - 1 - MAX_COUNTS_WALKED, -1) if levels_allow(usable.hw, k)), 2))
        return (f"no count from {start:,} to {hi - 1:,} has a layout (nearest: "
                f"{'; '.join(usable.why_not(k) for k in nearest) or 'none fills the network levels'})")
    formed = [k for k in range(hi - 1, start - 1, -1) if levels_allow(usable.hw, k)]
    if not formed:
        return (f"no count from {start:,} to {hi - 1:,} fills {_level_rule(usable.hw)}" if hi - 1 >= start
                else "")
    named = "; ".join(usable.why_not(k) for k in formed[:2])
    return (f"the {len(formed):,} count{'s' if len(formed) > 1 else ''} from {start:,} to {hi - 1:,} that fill the "
            f"network levels have no layout (nearest: {named}); the others do not fill the levels")


@dataclass(frozen=True)
class Probe:
    """The fastest layout on a fixed number of GPUs, as a search found it."""

    status: str  # the search's status
    training_days: float | None
    wall_clock_days: float | None


def smaller_clusters(hw: Hardware, wl: Workload, options: SearchOptions, gpus: int, days: float,
                     probe: Callable[[int], Probe], usable: UsableCounts | None = None) -> list[ClusterSize]:
    """Why the sizes just below a plan's `gpus` fail: the nearest ones no layout can use (at most two, named), and
    the nearest one some layout can use, searched on its own by `probe` (one fixed-cluster search)."""
    usable = usable or UsableCounts(hw, wl, options)
    out: list[ClusterSize] = []
    below = usable.below(gpus)
    stop = max(0 if below is None else below, gpus - 1 - MAX_COUNTS_WALKED)
    # the first two found, walking down (not every count down to `stop`: up to 100,000 of them for a big plan)
    for k in itertools.islice((k for k in range(gpus - 1, stop, -1) if levels_allow(hw, k)), 2):
        out.append(ClusterSize(gpus=k, status="no_layout", why=usable.why_not(k)))
    if below is None:
        return out
    p = probe(below)
    wall = p.wall_clock_days if p.wall_clock_days is not None else p.training_days
    if p.status == "unknown":
        status, why = "unknown", f"its search stopped at the time limit before finding a layout on {below:,} GPUs"
    elif wall is None:
        status, why = "no_fit", f"no layout on {below:,} GPUs fits in memory (proven by the search)"
    elif wall > days:
        proven = "proven fastest" if p.status == "optimal" else "fastest found"
        took = (f"{wall:.4g} days" if p.wall_clock_days is None or p.training_days is None
                or abs(p.wall_clock_days - p.training_days) < 1e-12
                else f"{wall:.4g} wall-clock days ({p.training_days:.4g} of compute)")
        status, why = "too_slow", f"the {proven} layout on {below:,} GPUs takes {took}, more than the {days:g} asked"
    else:
        status, why = "feasible", f"a layout on {below:,} GPUs meets the deadline in {wall:.4g} days"
    if gpus - below > MAX_COUNTS_WALKED:
        why += f"; no count between {below:,} and {gpus:,} has a layout"
    elif gap := sum(1 for k in range(below + 1, gpus) if levels_allow(hw, k)):
        why += (f"; the {gap:,} count{'s' if gap > 1 else ''} between {below:,} and {gpus:,} that fill the network "
                "levels have no layout")
    out.append(ClusterSize(gpus=below, status=status, training_days=p.training_days,
                           wall_clock_days=p.wall_clock_days, why=why))
    return out


def infeasibility_facts(hw: Hardware, wl: Workload, options: SearchOptions, days: float | None,
                        result: SearchResult, failures: FailureModel | None = None) -> Infeasibility | None:
    """The numbers behind `explain_infeasible`'s text (the same bounds, never a search)."""
    try:
        return _facts(hw, wl, options, days, result, failures)
    except Exception:  # noqa: BLE001 - like the explanation, the facts never turn an answer into a crash
        return None


def _shortest_days(hw: Hardware, wl: Workload, options: SearchOptions) -> float:
    return floor_bound(hw, wl, options).days


def _facts(hw: Hardware, wl: Workload, options: SearchOptions, days: float | None, result: SearchResult,
           failures: FailureModel | None) -> Infeasibility:
    if result.status == "unknown":
        return Infeasibility(reason="time_limit", shortest_days=_shortest_days(hw, wl, options))
    n = options.gpus
    if n is not None:
        usable = UsableCounts(hw, wl, options)
        below, above = usable.below(n), usable.above(n)
        parts = [t for t in (between_text(usable, below, n),) if t]
        if usable(n):
            if wl.transformer is None:
                fit = min_memory_on(hw, wl, options, n)
                if fit is not None and fit.total_bytes > mem.usable_bytes(hw):
                    return Infeasibility(reason="memory", fewest_gpus_that_fit=fit_search(hw, wl, options).gpus,
                                         nearest_gpus_below=below, nearest_gpus_above=above)
            else:
                least = transformer_least_memory(hw, wl, options, n)
                if least is not None and least[1][least[2]] > mem.usable_bytes(hw):
                    return Infeasibility(reason="memory", nearest_gpus_below=below, nearest_gpus_above=above)
            return Infeasibility(reason="no_layout", nearest_gpus_below=below, nearest_gpus_above=above)
        return Infeasibility(reason="no_layout", nearest_gpus_below=below, nearest_gpus_above=above,
                             between=f"{usable.why_not(n)}" + (f"; {parts[0]}" if parts else ""))
    shortest = _shortest_days(hw, wl, options)
    if failures is not None and days is not None and _explain_goodput(hw, wl, days, failures):
        return Infeasibility(reason="failures", shortest_days=shortest)
    if days is not None and shortest > days:
        largest = None
        law = _law_of(wl)
        if law is not None:
            largest = largest_compute_within(hw, days, law[0], law[1], options, law[2])
        return Infeasibility(reason="latency_wall", shortest_days=shortest, largest_compute_flop=largest)
    if wl.transformer is None:
        scan = fit_search(hw, wl, options)
        if scan.gpus is None and scan.exhaustive:
            return Infeasibility(reason="memory", shortest_days=shortest)
    return Infeasibility(reason="deadline", shortest_days=max(shortest, days or 0.0))
