"""CP-SAT search: the exact optimum of the cost model over the space of planner.parallel.space.

Numpy presolves; CP-SAT decides (docs/model.md, "The CP-SAT model", says the same at more length):

1. Windows. Degree tuples are visited in windows of increasing GPU count, from the compute bound
   N >= T / (sustained FLOP/s * deadline) upward (fixed-cluster mode: one window, N = --gpus).
2. Presolve (planner.search.presolve). Hard rules (level filling, memory) and the bound reading of the step formula
   remove tuples that cannot meet the deadline on their own. Nothing is priced whole.
   At a fixed GPU count (no deadline) the tuples are expanded from their (model-parallel row, N_DP) pairs
   best-first by the pairs' bound, only as far as the probe of step 3 and its cut need (`_LazyCount`): the same
   candidates, in the same order, as pricing every tuple.
3. CP-SAT decides, one GPU count at a time in increasing order (deadline mode) or on the one count (fixed mode).
   Each model holds degree tuples and, per tuple and placement group, every factor vector of the group; the levels
   fill bottom-up through integer prime-exponent equalities; every branch of the step formula is a linear
   expression over tabulated, linearised terms (planner.cost.terms, CP-SAT reading) in integer quanta.
   a. Incumbent: CP-SAT over the tuples with the best bounds, a batch at a time, until one batch has a layout that
      meets the deadline (a count none of whose batches has one is proven infeasible, batch by batch: the batches
      partition the count's tuples, and exactly one tuple is chosen). While many tuples remain within the
      incumbent's step, a few more batches (in bound order, each asked for a strictly shorter step) improve it.
   b. Decision: every tuple of the count whose bound does not exceed the incumbent's integer step goes into one
      model, which minimises the step time, then (step fixed) the network time. Tuples left out have a bound, hence
      a step, above the incumbent's: the optimum over the model is the optimum over the count.
4. The chosen layout is read back and re-priced by the caller with the float model.

When the time limit stops the search, the best layout so far is returned with the proven bound and the gap.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import operator
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from planner import recent
from planner.cost import terms as T
from planner.cost.memory import usable_bytes
from planner.parallel.dimensions import DEGREES, GROUPS, OPTIONS
from planner.parallel.space import (
    SearchOptions,
    Space,
    Tuples,
    batch_allows,
    build_space,
    divisors,
    layout_from,
    level_products,
    model_parallel_rows_within,
    mp_size,
    rank_order_factors,
    schedule_allows,
    space_size,
)
from planner.schema import Hardware, Layout, Workload
from planner.schema.profile import ExecutionProfile
from planner.search import satmodel as sat
from planner.search.presolve import (
    LeastFeatures,
    LeastWork,
    ShapeTable,
    dominated_options,
    feature_key,
    group_factor_rows,
    pair_step_lower_bound,
    step_lower_bound,
    tuple_memory,
    tuple_terms,
    unique_rows,
)
from planner.search.result import SearchResult

OPTION_KEYS: tuple[str, ...] = tuple(c for c in Tuples.COLUMNS if c not in ("zero", "recompute"))
"""The columns that identify a tuple apart from its ZeRO stage and recomputation (presolve.dominated_options)."""

QUANTUM_S = 1e-9
"""Integer time unit of the CP-SAT model: one nanosecond."""

INT_MAX = 2**60
"""Largest coefficient or bound the model accepts (CP-SAT works in 64-bit integers)."""


def to_quanta(seconds) -> np.ndarray:
    """Seconds -> integer quanta, rounded up (an integer time never understates the float time)."""
    q = np.ceil(np.asarray(seconds, dtype=np.float64) / QUANTUM_S - 1e-9)
    return np.minimum(q, INT_MAX).astype(np.int64)


def to_quanta_floor(seconds) -> np.ndarray:
    """Seconds -> integer quanta, rounded down (for lower bounds: never above the integer time they bound)."""
    return np.floor(np.asarray(seconds, dtype=np.float64) / QUANTUM_S * (1 - 1e-12)).astype(np.int64)


def from_quanta(q) -> float:
    return float(q) * QUANTUM_S


def _primes_upto(n: int) -> list[int]:
    return [p for p in range(2, n + 1) if all(p % q for q in range(2, int(p ** 0.5) + 1))]


def _vp(x: np.ndarray, p: int) -> np.ndarray:
    """Exponent of the prime p in each entry of x."""
    x = np.asarray(x, dtype=np.int64).copy()
    e = np.zeros_like(x)
    while True:
        m = (x % p == 0) & (x > 0)
        if not m.any():
            return e
        e[m] += 1
        x[m] //= p


# --------------------------------------------------------------------------------------------------
# 1-2. Windows and presolve
# --------------------------------------------------------------------------------------------------


@dataclass
class PairIndex:
    """Model-parallel rows sorted by their size (every degree but N_DP), and the N_DP values with the number of
    microbatch counts each allows and their least and largest. Built once per search, so that each N_DP value
    selects the rows of a window of GPU counts by binary search instead of a scan."""

    mp: dict[str, np.ndarray]
    order: np.ndarray
    mp_sorted: np.ndarray
    dps: np.ndarray
    m_counts: np.ndarray
    m_min: np.ndarray
    m_max: np.ndarray

    @classmethod
    def build(cls, space: Space, mp: dict[str, np.ndarray]) -> PairIndex:
        n_mp = mp_size(mp)
        order = np.argsort(n_mp, kind="stable")
        dp, m = space.dp_m["dp"], space.dp_m["microbatches"]
        dps = np.unique(dp)
        ms = [m[dp == d] for d in dps]
        return cls(mp, order, n_mp[order], dps, np.array([len(x) for x in ms]),
                   np.array([x.min() for x in ms], dtype=np.float64), np.array([x.max() for x in ms], dtype=np.float64))

    def pairs(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        """(model-parallel row, N_DP value index) pairs whose GPU count lies in [lo, hi] (floats: no overflow)."""
        ii_parts, jj_parts = [], []
        for j, d in enumerate(self.dps.astype(np.float64)):
            a = np.searchsorted(self.mp_sorted, lo / d * (1 - 1e-12), side="left")
            b = np.searchsorted(self.mp_sorted, hi / d * (1 + 1e-12), side="right")
            if b > a:
                n = self.mp_sorted[a:b] * d
                keep = (n >= lo) & (n <= hi)
                ii_parts.append(self.order[a:b][keep])
                jj_parts.append(np.full(int(keep.sum()), j))
        if not ii_parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(ii_parts), np.concatenate(jj_parts)

    def rows(self, ii: np.ndarray, jj: np.ndarray) -> dict[str, np.ndarray]:
        cols = {k: v[ii] for k, v in self.mp.items()}
        cols["dp"] = self.dps[jj]
        return cols


def windows(index: PairIndex, lo: float, n_max: float, budget: int, scan_ratio: float = 4.0):
    """Consecutive windows of GPU counts from `lo` upward, each holding about `budget` degree tuples.

    Yields (ii, jj, n_lo, n_hi): the (model-parallel row, N_DP value index) pairs of the window, sorted by GPU count.
    A window always holds whole GPU-count groups; empty ranges are skipped without cost.
    """
    n_mp = mp_size(index.mp)
    while lo <= n_max:
        hi = min(n_max, max(lo * scan_ratio, lo + 1))
        ii, jj = index.pairs(lo, hi)
        if len(ii) == 0:
            lo = math.floor(hi) + 1
            continue
        n = n_mp[ii] * index.dps[jj]
        order = np.argsort(n, kind="stable")
        ii, jj, n = ii[order], jj[order], n[order]
        cum = np.cumsum(index.m_counts[jj])
        start = 0
        while start < len(n):
            base = cum[start - 1] if start else 0
            end = int(np.searchsorted(cum, base + budget, side="right"))
            end = max(end, start + 1)
            end = int(np.searchsorted(n, n[end - 1], side="right"))  # keep whole GPU-count groups
            yield ii[start:end], jj[start:end], float(n[start]), float(n[end - 1])
            start = end
        lo = math.floor(hi) + 1


def tuples_from_pairs(space: Space, index: PairIndex, ii: np.ndarray, jj: np.ndarray, source: bool = False):
    """Expand (model-parallel row, N_DP value) pairs by every compatible microbatch count (schedule rule applied).

    The tuples come N_DP value by N_DP value (ascending), then in the pairs' order, then by microbatch count.
    `source`: also return each tuple's pair (its position in `ii`)."""
    parts, srcs = [], []
    dp_all, m_all = space.dp_m["dp"], space.dp_m["microbatches"]
    for j in np.unique(jj):
        sel = np.nonzero(jj == j)[0]
        rows = {k: v[ii[sel]] for k, v in index.mp.items()}
        ms = m_all[dp_all == index.dps[j]]
        n = len(rows["pp"])
        cols = {k: np.repeat(v, len(ms)) for k, v in rows.items()}
        cols["microbatches"] = np.tile(ms, n)
        cols["dp"] = np.full(n * len(ms), index.dps[j])
        keep = schedule_allows(space.options, cols) & batch_allows(space.wl, cols)
        parts.append(Tuples({k: v[keep] for k, v in cols.items()}))
        if source:
            srcs.append(np.repeat(sel, len(ms))[keep])
    t = Tuples.concat(parts) if parts else Tuples.empty()
    if source:
        return t, (np.concatenate(srcs) if srcs else np.zeros(0, dtype=np.int64))
    return t


def _pair_filter(hw, wl, index: PairIndex, ii, jj, shapes, work, least, deadline_s, dp_overlap):
    """Drop (model-parallel row, N_DP) pairs that miss the deadline for every microbatch count and placement
    (presolve.pair_step_lower_bound), or whose GPU count cannot fill the levels, before expanding them."""
    rows = index.rows(ii, jj)
    n = mp_size(rows) * rows["dp"]
    small = n < 2.0**62  # beyond this no cluster is meaningful and int64 products would overflow
    _, valid = level_products(hw, np.where(small, n, 1).astype(np.int64))
    valid &= small
    ii, jj = ii[valid], jj[valid]
    if len(ii) == 0:
        return ii, jj
    rows = index.rows(ii, jj)
    bound = pair_step_lower_bound(hw, wl, rows, index.m_min[jj], index.m_max[jj], shapes, work, least, dp_overlap)
    keep = wl.steps * bound <= deadline_s
    return ii[keep], jj[keep]


def _filter(hw: Hardware, wl: Workload, t: Tuples, deadline_s: float | None, shapes, least, dp_overlap: bool
            ) -> tuple[Tuples, dict]:
    """Hard rules (level filling, memory) and the sound placement-free bound against the deadline."""
    kept, q = _filter_index(hw, wl, t, deadline_s, shapes, least, dp_overlap)
    return t.take(kept), q


def _filter_index(hw: Hardware, wl: Workload, t: Tuples, deadline_s: float | None, shapes, least, dp_overlap: bool
                  ) -> tuple[np.ndarray, dict]:
    """`_filter` as the indices of the rows of `t` it keeps (ascending) and their tuple quantities."""
    _, valid = level_products(hw, t.gpus)
    kept = np.nonzero(valid)[0]
    if len(kept) == 0:
        return kept, {}
    t = t.take(kept)
    # The hard memory rule and the dominated (ZeRO stage, recomputation) options first: they read the tuple's
    # columns and its memory only, so the tuple quantities are priced for the rows that remain.
    mem = tuple_memory(hw, wl, t)
    idx = np.nonzero(mem <= usable_bytes(hw))[0]
    t, mem, kept = t.take(idx), mem[idx], kept[idx]
    if wl.transformer is not None and len(t):
        idx = np.nonzero(~dominated_options(t, OPTION_KEYS))[0]
        t, mem, kept = t.take(idx), mem[idx], kept[idx]
    if len(t) == 0:
        return kept, {}
    q = tuple_terms(hw, wl, t, shapes, memory_bytes=mem)
    q["step_lb"] = step_lower_bound(hw, wl, t, q, least, dp_overlap)
    if deadline_s is not None:
        idx = np.nonzero(wl.steps * q["step_lb"] <= deadline_s)[0]
        kept, q = kept[idx], {k: v[idx] for k, v in q.items()}
    return kept, q


LAZY_FIXED = True
"""A fixed cluster's tuples are expanded best-first (`_LazyCount`, the default). False expands and prices every
tuple of the count first, as a search with a deadline does (kept for tests/test_lazy_fixed.py and benchmarks)."""

LAZY_FIRST_PAIRS = 1024
"""Pairs in the first best-first expansion of a fixed cluster; each later one doubles."""

BOUND_SLACK = 1e-9
"""Relative margin between a pair's bound and the tuple bound of each of its tuples: the two are computed in
different orders of floating-point operations, so the inequality between them is read with this slack."""


class _LazyCount:
    """The tuples of one fixed GPU count, expanded from their (model-parallel row, N_DP) pairs best-first.

    A fixed cluster has no deadline to prune with: the search prices every tuple of the count (memory, tuple
    quantities, the placement-free bound `step_lb`) and then keeps those whose bound does not exceed the probe's
    step (`_decide_count`). Here a pair's bound (presolve.pair_step_lower_bound: each term at its least over the
    microbatch counts the pair's N_DP allows) is computed first, and pairs are expanded and priced in increasing
    order of it, only as far as the probe and its cut need:

    * the probe takes the INCUMBENT_BATCH tuples of least `step_lb` (ties in the count's order). Every tuple's
      `step_lb` is at least its pair's bound (each term of the bound reading at the tuple's microbatch count is no
      less than at the least over the counts), so once that many priced tuples have a bound below the least pair
      bound not yet expanded, they are the probe's tuples;
    * the probe's cut keeps the tuples whose integer bound is at most the probe's step; every tuple of a pair whose
      bound lies above that step is cut, so those pairs are never expanded (`expand`).

    The rules that act across tuples are kept exact: the dominated (ZeRO stage, recomputation) options compare rows
    that differ in those two columns only, within the slices of `slice_pairs` pairs in which the search prices a
    count (`_filter`), so pairs are expanded by whole groups of such siblings of one slice (a group's bound: the
    least of its pairs'). The tuples are returned in the order of the full expansion. The result is the same
    candidate set, in the same order, as pricing every tuple; tests/test_lazy_fixed.py compares the two.
    """

    def __init__(self, hw: Hardware, wl: Workload, space: Space, index: PairIndex, ii: np.ndarray, jj: np.ndarray,
                 shapes: ShapeTable, least: LeastFeatures, options: SearchOptions, slice_pairs: int, clock: _Clock):
        self.hw, self.wl, self.space, self.index, self.ii, self.jj = hw, wl, space, index, ii, jj
        self.shapes, self.least, self.options, self.clock = shapes, least, options, clock
        rows = index.rows(ii, jj)
        pair_lb = pair_step_lower_bound(hw, wl, rows, index.m_min[jj], index.m_max[jj], shapes,
                                        shapes.least_work(space), least, options.dp_overlap)
        self.slice = np.arange(len(ii)) // slice_pairs
        # The full expansion's order: slice by slice, within a slice N_DP value by value, then pair, then m.
        self.rank = np.empty(len(ii), dtype=np.int64)
        self.rank[np.lexsort((np.arange(len(ii)), jj, self.slice))] = np.arange(len(ii))
        siblings = [self.slice, jj] + [np.asarray(rows[k], dtype=np.int64) for k in OPTION_KEYS
                                       if k not in ("dp", "microbatches")]
        _, group = unique_rows(siblings)
        group_lb = np.full(int(group.max()) + 1, np.inf)
        np.minimum.at(group_lb, group, pair_lb)
        self.group_order = np.argsort(group_lb, kind="stable")
        self.group_lb = group_lb[self.group_order]  # ascending
        self.pairs_of = np.argsort(np.argsort(self.group_order)[group], kind="stable")  # pairs, group by group
        self.group_end = np.cumsum(np.bincount(group, minlength=len(group_lb))[self.group_order])
        self.done = 0  # groups expanded (a prefix of group_order)
        self.t: list[Tuples] = []
        self.q: list[dict[str, np.ndarray]] = []
        self.order: list[np.ndarray] = []

    def _expand_to(self, groups: int) -> None:
        """Expand and price the groups up to `groups` (exclusive) in bound order."""
        if groups <= self.done:
            return
        start = int(self.group_end[self.done - 1]) if self.done else 0
        pairs = np.sort(self.pairs_of[start:int(self.group_end[groups - 1])])
        self.done = groups
        for s in np.unique(self.slice[pairs]):
            if self.clock.out:
                raise _TimeUp(None)
            p = pairs[self.slice[pairs] == s]
            t, src = tuples_from_pairs(self.space, self.index, self.ii[p], self.jj[p], source=True)
            if self.options.rank_order:
                ok = np.nonzero(rank_order_factors(self.hw, t, self.options.rank_order)[1])[0]
                t, src = t.take(ok), src[ok]
            kept, q = _filter_index(self.hw, self.wl, t, None, self.shapes, self.least, self.options.dp_overlap)
            if len(kept):
                self.t.append(t.take(kept))
                self.q.append(q)
                self.order.append(self.rank[p[src[kept]]])

    def _collected(self) -> tuple[Tuples, dict[str, np.ndarray]]:
        if not self.t:
            return Tuples.empty(), {}
        order = np.argsort(np.concatenate(self.order), kind="stable")  # a pair's tuples keep their m order
        t = Tuples.concat(self.t).take(order)
        return t, {k: np.concatenate([d[k] for d in self.q])[order] for k in self.q[0]}

    def probe_tuples(self) -> tuple[Tuples, dict[str, np.ndarray]]:
        """The priced tuples once they include the probe's (every tuple of the count if it has fewer)."""
        n_groups = len(self.group_lb)
        pairs = LAZY_FIRST_PAIRS
        while self.done < n_groups:
            self._expand_to(min(n_groups, max(self.done + 1,
                                              int(np.searchsorted(self.group_end, pairs, side="left")) + 1)))
            pairs *= 2
            nxt = self.group_lb[self.done] if self.done < n_groups else np.inf
            lbs = [q["step_lb"] for q in self.q]
            if lbs and int((np.concatenate(lbs) < nxt * (1 - BOUND_SLACK)).sum()) >= INCUMBENT_BATCH:
                break
        return self._collected()

    def expand(self, probe_q: float | None) -> tuple[Tuples, dict[str, np.ndarray]]:
        """Every priced tuple that the probe's cut (integer bound <= probe_q) may keep; all of them for None."""
        if probe_q is None:
            self._expand_to(len(self.group_lb))
        else:
            # A tuple of a pair whose bound exceeds this has a bound whose quanta (rounded down) exceed probe_q.
            cut = (probe_q + 1) * QUANTUM_S * (1 + 10 * BOUND_SLACK)
            self._expand_to(int(np.searchsorted(self.group_lb, cut, side="right")))
        return self._collected()


# --------------------------------------------------------------------------------------------------
# 3. The CP-SAT model: tables (CP-SAT reading of the terms), variables, constraints
# --------------------------------------------------------------------------------------------------


class PairTable:
    """(tuple, factor vectors) pairs of one placement group, with each branch's coefficient x term sum."""

    def __init__(self, tup: np.ndarray, factors: dict[str, np.ndarray], forms: dict[str, np.ndarray]):
        self.tup = tup  # (k,) tuple index
        self.factors = factors  # degree -> (k, H) factor vectors
        self.forms = forms  # branch or network form name -> (k,) seconds

    def subset(self, idx: np.ndarray, n: int) -> PairTable:
        """The pairs of tuples `idx` (of `n`), renumbered 0..len(idx)-1 in that order."""
        new = np.full(n, -1)
        new[idx] = np.arange(len(idx))
        keep = np.nonzero(new[self.tup] >= 0)[0]
        return PairTable(new[self.tup[keep]], {d: v[keep] for d, v in self.factors.items()},
                         {k: v[keep] for k, v in self.forms.items()})


def branch_bounds_q(hw: Hardware, wl: Workload, gpus: int, tables: dict[str, PairTable],
                    per_tuple: Mapping[str, np.ndarray], n: int, dp_overlap: bool) -> np.ndarray:
    """A lower bound, in quanta, of each tuple's integer step in the CP-SAT model: the largest over the branches of
    the branch's least value over every placement that fills the levels (the max of minima never exceeds the minimum
    of the max, so it is sound; each branch's minimum is exact).

    Each branch is a sum of one part per placement group, and the levels only see each group's product of factors
    per bounded level, so the minimum is a shortest path over the groups whose states are the partial products
    (divisors of the products the GPU count requires): a few vectorised steps per group.
    """
    forms = [b.name for b in T.branches(wl, dp_overlap, hw.profile)]
    prods, _ = level_products(hw, np.array([gpus]))
    bounded = [h for h, cap in enumerate(hw.level_caps) if cap is not None]
    req = np.array([int(prods[0][h]) for h in bounded], dtype=np.int64)
    combos = list(itertools.product(*[divisors(int(r)) for r in req]))
    states = np.array(combos, dtype=np.int64).reshape(len(combos), len(req))  # [()] when no level is bounded
    radix = int(req.max(initial=1)) + 1
    weights = radix ** np.arange(len(req), dtype=np.int64)
    codes = states @ weights if len(req) else np.zeros(len(states), dtype=np.int64)
    order = np.argsort(codes)
    codes_sorted = codes[order]
    big = np.iinfo(np.int64).max // 4
    val = np.full((n, len(states), len(forms)), big, dtype=np.int64)
    start = int(np.nonzero((states == 1).all(axis=1))[0][0])
    val[:, start, :] = 0
    for g, tab in tables.items():
        sig = np.ones((len(tab.tup), len(req)), dtype=np.int64)
        for d in GROUPS[g]:
            sig = sig * tab.factors[d][:, bounded]
        usig, sig_of = unique_rows([sig[:, j] for j in range(len(req))] or [np.zeros(len(sig), dtype=np.int64)])
        usig = usig[:, :len(req)]
        # trans[s, j]: the state after a pair of signature j from state s, or -1 if it overshoots a level.
        target = states[:, None, :] * usig[None, :, :]
        fits = (req[None, None, :] % target == 0).all(axis=2)
        trans = np.where(fits, order[np.minimum(np.searchsorted(codes_sorted, target @ weights),
                                                len(codes_sorted) - 1)], -1)
        fq = np.stack([to_quanta(tab.forms[f]) for f in forms], axis=1)
        new = np.full_like(val, big)
        for si in range(len(states)):
            ti = trans[si, sig_of]
            k = np.nonzero(ti >= 0)[0]
            if len(k) == 0:
                continue
            np.minimum.at(new, (tab.tup[k], ti[k]), np.minimum(val[tab.tup[k], si, :] + fq[k], big))
        val = new
    end = int(np.nonzero((states == req[None, :]).all(axis=1))[0][0])
    tuple_q = np.stack([to_quanta(per_tuple[f]) for f in forms], axis=1)
    return np.minimum(val[:, end, :] + tuple_q, big).max(axis=1)


def _pareto(features: np.ndarray, signature: np.ndarray) -> np.ndarray:
    """Indices of the combinations no other combination with the same signature dominates (no larger in every
    feature; exact ties keep the first)."""
    n = len(features)
    same = (signature[:, None, :] == signature[None, :, :]).all(axis=2)
    le = (features[:, None, :] <= features[None, :, :]).all(axis=2)  # le[j, i]: j no larger than i everywhere
    lt = (features[:, None, :] < features[None, :, :]).any(axis=2)
    earlier = np.arange(n)[:, None] < np.arange(n)[None, :]
    dominated = (same & le & (lt | earlier)).any(axis=0)
    return np.nonzero(~dominated)[0]


def _group_pairs(hw: Hardware, wl: Workload, t: Tuples, group: str, prune: bool = True
                 ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every tuple with every combination of its group's factor vectors: (tuple index, degree -> factors, group term
    name -> its feature), the features computed once per distinct key, not per pair.

    With `prune`, a combination is left out when another one with the same signature (the product of the group's
    factors on each level, all the level-filling constraints see of it) has no larger feature of any group term:
    every branch and the network form weigh those features with non-negative tuple coefficients, so the other one
    is never worse at any stage of the objective. This is exact dominance, not a heuristic.
    """
    degrees = GROUPS[group]
    gterms = [g for g in T.group_terms(wl, hw.profile) if g.group == group]
    extra = tuple(dict.fromkeys(k for g in gterms for k in g.keys))
    names = (*degrees, *extra)
    uniq, inv = unique_rows([np.asarray(t[d], dtype=np.int64) for d in names])
    by_key = np.argsort(inv, kind="stable")
    cuts = np.searchsorted(inv[by_key], np.arange(len(uniq) + 1))
    rows: list[np.ndarray] = []
    fac: dict[str, list[np.ndarray]] = {d: [] for d in degrees}
    feat: dict[str, list[np.ndarray]] = {g.name: [] for g in gterms}
    known = _key_combos(hw, wl, group, tuple(g.name for g in gterms), prune)
    for j, vals in enumerate(uniq):
        key = vals.tobytes()
        found = known.get(key)
        if found is None:
            found = known[key] = _combos(hw, wl, group, names, gterms, vals, prune)
        combo, feats = found
        k = len(feats)
        idx = by_key[cuts[j]:cuts[j + 1]]
        rows.append(np.repeat(idx, k))
        for d in degrees:
            fac[d].append(np.tile(combo[d], (len(idx), 1)))
        for n, g in enumerate(gterms):
            feat[g.name].append(np.tile(feats[:, n], len(idx)))
    H = len(hw.levels)
    return (np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64),
            {d: np.concatenate(v) if v else np.zeros((0, H), dtype=np.int64) for d, v in fac.items()},
            {n: np.concatenate(v) if v else np.zeros(0) for n, v in feat.items()})


def _combos(hw: Hardware, wl: Workload, group: str, names: tuple[str, ...], gterms: list[T.GroupTerm],
            vals: np.ndarray, prune: bool) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One key of `_group_pairs` (the group's degrees, then the extra columns its terms read): every combination of
    the degrees' factor vectors (presolve.group_factor_rows; the dominated ones left out with `prune`) and each group
    term's feature of each."""
    degrees = GROUPS[group]
    combo = group_factor_rows(hw, group, dict(zip(degrees, vals.tolist())))
    k = len(combo[degrees[0]])
    cols = {name: np.full(k, v) for name, v in zip(names, vals)}
    feats = (np.stack([g.feature(hw, wl, cols, combo) for g in gterms], axis=1) if k and gterms
             else np.zeros((k, len(gterms))))
    if prune and k > 1:
        signature = np.prod(np.stack([combo[d] for d in degrees]), axis=0)
        keep = _pareto(feats, signature)
        combo = {d: v[keep] for d, v in combo.items()}
        feats = feats[keep]
    for arr in (*combo.values(), feats):
        arr.setflags(write=False)
    return combo, feats


_KEY_COMBOS: dict[tuple, dict[bytes, tuple[dict[str, np.ndarray], np.ndarray]]] = {}
KEY_COMBO_ENTRIES = 128
"""Stores kept (the least recently used dropped): one per placement group for the plan's hardware and for each
network input a sensitivity moves."""


def _key_combos(hw: Hardware, wl: Workload, group: str, terms: tuple[str, ...], prune: bool
                ) -> dict[bytes, tuple[dict[str, np.ndarray], np.ndarray]]:
    """`_combos` of the keys seen so far, by the key's bytes, for searches in this process whose group, group terms,
    pruning and hardware and workload as the features read them (presolve.feature_key: the levels, their collective
    rates and latencies, the word size, the switches that pick a feature) agree: the counts of one search share most
    keys, and so do the re-plans of `plan --sensitivity` that move a compute, overlap or memory input.
    tests/test_pair_keys.py moves every profile and GPU field and checks that a move that keeps the key keeps every
    feature, and that the workload and the levels change both."""
    key = (feature_key(hw, wl), group, terms, prune)
    store = recent.recall(_KEY_COMBOS, key)
    return recent.keep(_KEY_COMBOS, key, {}, KEY_COMBO_ENTRIES) if store is None else store


def clear_key_combos() -> None:
    """Forget every key's combinations (`_key_combos`): a measurement of one plan from cold tables
    (benchmarks/replan_speed.py)."""
    _KEY_COMBOS.clear()


def build_pair_tables(hw: Hardware, wl: Workload, t: Tuples, q: Mapping[str, np.ndarray], dp_overlap: bool,
                      prune: bool = True, rank_order: tuple[str, ...] = ()) -> dict[str, PairTable]:
    """The CP-SAT reading of planner.cost.terms: per group and pair, each form's sum of coefficient x group term
    (tuple-only parts are per tuple; see `tuple_forms`). `prune` drops dominated factor combinations
    (`_group_pairs`); a `rank_order` keeps only the factor vectors that order gives each tuple."""
    forms = (*T.branches(wl, dp_overlap, hw.profile), T.network_form(wl, hw.profile))
    gterms = {g.name: g for g in T.group_terms(wl, hw.profile)}
    fixed = rank_order_factors(hw, t, rank_order)[0] if rank_order else None
    tables = {}
    for group in GROUPS:
        if not any(g.group == group for g in gterms.values()) and all((t[d] == 1).all() for d in GROUPS[group]):
            continue  # a group that is 1 everywhere and costs nothing (the toy's N_CP) has one placement: all ones
        r, fac, feat = _group_pairs(hw, wl, t, group, prune=prune and fixed is None)
        if fixed is not None:
            keep = np.ones(len(r), dtype=bool)
            for d in GROUPS[group]:
                keep &= (fac[d] == fixed[d][r]).all(axis=1)
            r, fac, feat = r[keep], {d: v[keep] for d, v in fac.items()}, {k: v[keep] for k, v in feat.items()}
        scales = {name: g.scale(hw, wl, t) for name, g in gterms.items() if g.group == group}
        vals = {name: scale[r] * feat[name] for name, scale in scales.items()}
        out = {}
        for f in forms:
            total = np.zeros(len(r))
            for coef, term in f.parts:
                if term in vals:
                    total = total + q[coef][r] * vals[term]
            out[f.name] = total
        tables[group] = PairTable(r, fac, out)
    return tables


def tuple_forms(hw: Hardware, wl: Workload, q: Mapping[str, np.ndarray], dp_overlap: bool) -> dict[str, np.ndarray]:
    """Each form's tuple-only part (coefficient x tuple quantity), per tuple."""
    out = {}
    for f in (*T.branches(wl, dp_overlap, hw.profile), T.network_form(wl, hw.profile)):
        total = np.zeros(len(q["one"]))
        for coef, term in f.parts:
            if term in q:
                total = total + q[coef] * q[term]
        out[f.name] = total
    return out


class Model:
    """The CP-SAT model of one set of candidate tuples (all with one GPU count, or a fixed cluster)."""

    def __init__(self, hw: Hardware, wl: Workload, t: Tuples, q: Mapping[str, np.ndarray], dp_overlap: bool,
                 tables: dict[str, PairTable] | None = None, rank_order: tuple[str, ...] = ()):
        self.hw, self.t = hw, t
        self.tables = tables if tables is not None else build_pair_tables(hw, wl, t, q, dp_overlap,
                                                                          rank_order=rank_order)
        per_tuple = tuple_forms(hw, wl, q, dp_overlap)
        n = len(t)
        m = sat.SatModel()
        self.m = m
        # x[i]: degree tuple i is the chosen one.
        self.x = [m.new_bool_var(f"x{i}") for i in range(n)]
        m.add_exactly_one(self.x)
        # y[g][k]: tuple tables[g].tup[k] places group g's degrees by the factor vectors of pair k.
        self.y: dict[str, list] = {}
        for g, tab in self.tables.items():
            ys = [m.new_bool_var(f"y_{g}_{k}") for k in range(len(tab.tup))]
            self.y[g] = ys
            order = np.argsort(tab.tup, kind="stable")
            bounds = np.searchsorted(tab.tup[order], np.arange(n + 1))
            for i in range(n):
                ks = order[bounds[i]:bounds[i + 1]]
                m.add(sat.LinearExpr.sum([ys[k] for k in ks]) == self.x[i])

        # Levels fill bottom-up: at every bounded level, the prime exponents of the chosen factors add up to those
        # of the required product (equal exponents for every prime = equal products; integer arithmetic only).
        prods, _ = level_products(hw, t.gpus)
        caps = [c for c in hw.level_caps if c is not None]
        primes = _primes_upto(max(caps)) if caps else []
        for h, cap in enumerate(hw.level_caps):
            if cap is None:
                continue
            for p in primes:
                need = _vp(prods[:, h], p)
                lhs_vars, lhs_coef = [], []
                for g, tab in self.tables.items():
                    e = functools.reduce(operator.add, (_vp(fac[:, h], p) for fac in tab.factors.values()))
                    nz = np.nonzero(e)[0]
                    lhs_vars += [self.y[g][k] for k in nz]
                    lhs_coef += [int(v) for v in e[nz]]
                nzx = np.nonzero(need)[0]
                m.add(sat.LinearExpr.weighted_sum(lhs_vars, lhs_coef)
                      == sat.LinearExpr.weighted_sum([self.x[i] for i in nzx], [int(v) for v in need[nzx]]))

        def expr(name: str):
            """One form as a linear expression: its tuple part on x, each group's part on y, rounded up."""
            vs, cs = [], []
            qt = to_quanta(per_tuple[name])
            nz = np.nonzero(qt)[0]
            vs += [self.x[i] for i in nz]
            cs += [int(v) for v in qt[nz]]
            for g, tab in self.tables.items():
                qg = to_quanta(tab.forms[name])
                nz = np.nonzero(qg)[0]
                vs += [self.y[g][k] for k in nz]
                cs += [int(v) for v in qg[nz]]
            return sat.LinearExpr.weighted_sum(vs, cs)

        # S: the step time in quanta, at least every branch (Eq. 21's and the floor).
        self.S = m.new_int_var(0, INT_MAX, "step_q")
        for b in T.branches(wl, dp_overlap, hw.profile):
            m.add(self.S >= expr(b.name))
        self.net_expr = expr(T.network_form(wl, hw.profile).name)
        # Exact ties in step and network time (e.g. interleaving a single pipeline stage changes nothing) go to the
        # least interleaving: the network objective is scaled and this rank added, so it only decides among ties.
        rank = np.asarray(t["interleave"], dtype=np.int64) - 1
        net_name = T.network_form(wl, hw.profile).name
        net_max = int(to_quanta(per_tuple[net_name]).max(initial=0))
        net_max += sum(int(to_quanta(tab.forms[net_name]).max(initial=0)) for tab in self.tables.values())
        scale = int(rank.max(initial=0)) + 1
        if scale > 1 and (net_max + 1) * scale < INT_MAX:
            self.tie_expr = self.net_expr * scale + sat.LinearExpr.weighted_sum(self.x, [int(r) for r in rank])
        else:
            self.tie_expr = self.net_expr
        # A redundant cut: the step is at least the chosen tuple's bound (branch_bounds_q, or the placement-free one).
        if "lb_q" in q:
            m.add(self.S >= sat.LinearExpr.weighted_sum(self.x, [int(v) for v in q["lb_q"]]))
        elif "step_lb" in q:
            lb = to_quanta_floor(q["step_lb"])
            m.add(self.S >= sat.LinearExpr.weighted_sum(self.x, [int(v) for v in lb]))
        self.pairs = sum(len(tab.tup) for tab in self.tables.values())

    def hint_layout(self, layout: Layout) -> None:
        """Warm start from a layout (a previous model's answer)."""
        i = _row_of(self.t, layout)
        if i is None:
            return
        self.m.clear_hints()
        self.m.add_hint(self.x[i], True)  # a partial hint: the chosen tuple and its factor vectors
        for g, tab in self.tables.items():
            for k in _placement_rows(tab, i, layout):
                self.m.add_hint(self.y[g][k], True)

    def exclude(self, layout: Layout) -> None:
        """A no-good: the model may choose any layout but `layout` (its tuple with its factor vectors in every
        group). Nothing is added when the tuple is not in the model; a group whose factor vectors of that layout are
        not in the table (left out as dominated by an equal-signature one, `_group_pairs`) already excludes it."""
        i = _row_of(self.t, layout)
        if i is None:
            return
        picks = [self.x[i]]
        for g, tab in self.tables.items():
            ks = _placement_rows(tab, i, layout)
            if len(ks) == 0:
                return
            picks.append(self.y[g][int(ks[0])])
        self.m.add(sat.LinearExpr.sum(picks) <= len(picks) - 1)

    def solve(self, objective, time_limit_s: float, workers: int):
        self.m.minimize(objective)
        s = sat.solve(self.m, time_limit_s=max(time_limit_s, 0.05), workers=workers)
        return s, s.status

    def decode(self, s: sat.Solution) -> Layout:
        i = next(k for k, v in enumerate(self.x) if s.boolean_value(v))
        placement: dict[str, np.ndarray] = {d: np.ones(len(self.hw.levels), dtype=np.int64) for d in DEGREES}
        for g, tab in self.tables.items():
            k = next(k for k in np.nonzero(tab.tup == i)[0] if s.boolean_value(self.y[g][k]))
            for d, fac in tab.factors.items():
                placement[d] = fac[k]
        return layout_from(self.t, i, placement)


def _row_of(t: Tuples, layout: Layout) -> int | None:
    """The row of `t` that is `layout`'s degree tuple (None when it is not there exactly once)."""
    hit_t = np.ones(len(t), dtype=bool)
    for d in (*DEGREES, *OPTIONS):
        hit_t &= t[d] == layout.degree(d)
    hit_t &= t["zero_bubble"] == (layout.schedule == "zb-h2")
    match = np.nonzero(hit_t)[0]
    return int(match[0]) if len(match) == 1 else None


def _placement_rows(tab: PairTable, i: int, layout: Layout) -> np.ndarray:
    """The rows of one group's pair table that pair tuple row `i` with `layout`'s factor vectors of that group."""
    hit = tab.tup == i
    for d, fac in tab.factors.items():
        hit &= (fac == np.array(layout.placement[d])[None, :]).all(axis=1)
    return np.nonzero(hit)[0]


def layout_quanta(hw: Hardware, wl: Workload, layout: Layout, dp_overlap: bool) -> int:
    """CP-SAT's integer step of one layout: the model's S with that layout chosen, i.e. the largest branch, each
    branch the sum of its tuple part and its group parts, each rounded up to quanta as `Model` writes them. Its
    tables are built for this one tuple, unpruned, from a shape table of its one shape.

    The sensitivity's skip proof (planner.sensitivity) compares it with a runner-up's step; tests check it against
    CP-SAT's own objective."""
    cols = {d: np.array([layout.degree(d)], dtype=np.int64) for d in (*DEGREES, *OPTIONS)}
    t = Tuples({**cols, "zero_bubble": np.array([layout.schedule == "zb-h2"])})
    u = cols["dp"] * cols["microbatches"] * cols["cp"]
    shapes = ShapeTable(hw, wl, cols["tp_ff"], cols["tp_model"], u, cols["ep"], cols["sp"])
    q = tuple_terms(hw, wl, t, shapes)
    tables = build_pair_tables(hw, wl, t, q, dp_overlap, prune=False)
    per_tuple = tuple_forms(hw, wl, q, dp_overlap)
    rows = {}
    for g, tab in tables.items():
        ks = _placement_rows(tab, 0, layout)  # the tables' one tuple
        if len(ks) != 1:
            raise ValueError(f"the layout's factor vectors of group {g} are not a placement of its tuple")
        rows[g] = int(ks[0])
    best = 0
    for b in T.branches(wl, dp_overlap, hw.profile):
        total = int(to_quanta(per_tuple[b.name])[0])
        total += sum(int(to_quanta(tab.forms[b.name][rows[g]:rows[g] + 1])[0]) for g, tab in tables.items())
        best = max(best, total)
    return best


def deadline_quanta(deadline_s: float, goodput: float, steps: float) -> int | None:
    """The largest integer step (quanta) that meets `deadline_s` at goodput `goodput`: the cap of a count's models;
    None when beyond the model's integer range (a deadline that constrains nothing)."""
    quanta = deadline_s * goodput / steps / QUANTUM_S
    return None if not math.isfinite(quanta) or quanta > INT_MAX else math.floor(quanta)


_STATUS = {sat.OPTIMAL: "OPTIMAL", sat.FEASIBLE: "FEASIBLE", sat.INFEASIBLE: "INFEASIBLE",
           sat.MODEL_INVALID: "MODEL_INVALID", sat.UNKNOWN: "UNKNOWN"}


def _status_name(status) -> str:
    return _STATUS.get(status, str(status))


# --------------------------------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------------------------------

WINDOW_TUPLES = 300_000
"""Windows of GPU count hold about this many degree tuples (whole GPU-count groups; memory stays bounded)."""

BOUNDED_WINDOW_TUPLES = 30_000
"""Windows past a proven bound's count (a re-plan, `solve_cpsat`) hold about this many tuples: 0.6x the CPU of
WINDOW_TUPLES for the re-plans of `plan --sensitivity` whose count moves up (docs/benchmarks.md, fifth pass)."""

INCUMBENT_BATCH = 8
"""Tuples in the first incumbent model (step 3a): the best-bound tuples of a GPU count; later batches grow."""

DECIDE_TUPLES = 32
"""While more tuples than this are within the incumbent's step, the incumbent is improved first (IMPROVE_ROUNDS)."""

IMPROVE_ROUNDS = 4

BRANCH_BOUNDS = True
"""Presolve with branch_bounds_q (the default). False keeps only the placement-free bound, so that CP-SAT's models
hold every tuple that bound leaves: slower on large instances, kept for benchmarks/cpsat_decides.py."""


class _Clock:
    def __init__(self, limit_s: float):
        self.t0 = time.perf_counter()
        self.limit = limit_s

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def remaining(self) -> float:
        return self.limit - self.elapsed

    @property
    def out(self) -> bool:
        return self.elapsed > self.limit


@dataclass
class _Stats:
    """What CP-SAT saw: for the report (docs/benchmarks.md) and the solver table."""

    cpsat_s: float = 0.0
    models: int = 0
    tuples: int = 0  # candidate tuples in the deciding model
    pairs: int = 0  # (tuple, factor vector) pairs in the deciding model
    modelled: int = 0  # pairs over every model built
    bound_rank: int = -1  # tuples of the deciding model with a smaller bound than the chosen one
    step_q: int | None = None  # the deciding model's proven least integer step (quanta)
    statuses: list[str] | None = None

    def note(self, tag: str, status) -> None:
        if self.statuses is None:
            self.statuses = []
        self.statuses.append(f"{tag}:{_status_name(status)}")

    @property
    def detail(self) -> str:
        """Raw CP-SAT statuses per stage, runs of the same one counted ('incumbent:INFEASIBLE x3')."""
        out: list[str] = []
        for s in self.statuses or []:
            if out and out[-1].split(" x")[0] == s:
                head, _, n = out[-1].partition(" x")
                out[-1] = f"{head} x{int(n or 1) + 1}"
            else:
                out.append(s)
        return " ".join(out)


class _TimeUp(Exception):
    pass


def _decide_count(hw: Hardware, wl: Workload, t: Tuples, q: dict[str, np.ndarray], cap_q: int | None,
                  dp_overlap: bool, clock: _Clock, workers: int, stats: _Stats, rank_order: tuple[str, ...] = (),
                  expand: Callable[[float | None], tuple[Tuples, dict[str, np.ndarray]]] | None = None,
                  exclude: Layout | None = None):
    """CP-SAT's decision over the candidate tuples of one GPU count: None if no layout has step <= cap_q, else
    (layout, status, bound_s, stage). Raises _TimeUp with the best layout so far when the clock runs out.

    `expand` (a fixed cluster's best-first candidates, `_LazyCount`): `t` then holds only the tuples needed for the
    probe (every tuple among the INCUMBENT_BATCH least bounds, in the count's order), and expand(probe's integer
    step, or None when the probe found no layout) returns the count's tuples that the probe's cut keeps (a superset
    of them, in the count's order): the same tuples, in the same order, as the probe's cut of the whole count.

    `exclude`: every model leaves that one layout out (`Model.exclude`): the decision is then the best of the rest, a
    runner-up for planner.sensitivity's skip proof."""
    q = dict(q)
    incumbent: Layout | None = None
    if cap_q is not None and expand is None:
        # The count's own cap first: the windows' filters read the deadline at goodput 1 (or a seed's step), the cap
        # the count's goodput too. A tuple whose placement-free bound lies above the cap has every layout's integer
        # step above it (the bound, floored, is at most the step): no model needs it, and a count with none left
        # has no layout within its deadline, proven without a model.
        live = np.nonzero(to_quanta_floor(q["step_lb"]) <= cap_q)[0]
        if len(live) == 0:
            return None
        if len(live) < len(t):
            t, q = t.take(live), {k: v[live] for k, v in q.items()}

    def counted(mdl: Model, n: int) -> Model:
        if exclude is not None:
            mdl.exclude(exclude)
        stats.models += 1
        stats.modelled += mdl.pairs + n
        return mdl

    def run(mdl: Model, objective, tag: str):
        if clock.out:
            raise _TimeUp(incumbent)
        a = time.perf_counter()
        s, st = mdl.solve(objective, clock.remaining, workers)
        stats.cpsat_s += time.perf_counter() - a
        stats.note(tag, st)
        return s, st

    # A first incumbent from the few tuples with the least placement-free bound, so that tuples whose bound is above
    # it go before any table is built for them (this matters at a fixed GPU count, where no deadline prunes).
    first = np.argsort(q["step_lb"], kind="stable")[:INCUMBENT_BATCH]
    probe = counted(Model(hw, wl, t.take(first), {k: v[first] for k, v in q.items()}, dp_overlap,
                          rank_order=rank_order), len(first))
    if cap_q is not None:
        probe.m.add(probe.S <= cap_q)
    s0, st0 = run(probe, probe.S, "probe")
    if expand is not None:
        t, q = expand(s0.objective_value if st0 in (sat.OPTIMAL, sat.FEASIBLE) else None)
        q = dict(q)
    if st0 in (sat.OPTIMAL, sat.FEASIBLE):
        live = np.nonzero(to_quanta_floor(q["step_lb"]) <= s0.objective_value)[0]
        t, q = t.take(live), {k: v[live] for k, v in q.items()}
    tables = build_pair_tables(hw, wl, t, q, dp_overlap, rank_order=rank_order)
    if BRANCH_BOUNDS:
        q["lb_q"] = branch_bounds_q(hw, wl, int(t.gpus[0]), tables, tuple_forms(hw, wl, q, dp_overlap), len(t),
                                    dp_overlap)
    else:
        q["lb_q"] = to_quanta_floor(q["step_lb"])
    live = np.nonzero(q["lb_q"] <= (cap_q if cap_q is not None else INT_MAX))[0]
    if len(live) == 0:
        return None  # every branch bound misses the deadline: no layout on this count
    if len(live) < len(t):
        tables = {g: tab.subset(live, len(t)) for g, tab in tables.items()}
        t, q = t.take(live), {k: v[live] for k, v in q.items()}
    order = np.lexsort((q["step_lb"], q["lb_q"]))

    def model_of(idx):
        mdl = Model(hw, wl, t.take(idx), {k: v[idx] for k, v in q.items()}, dp_overlap,
                    tables={g: tab.subset(idx, len(t)) for g, tab in tables.items()})
        return counted(mdl, len(idx))

    # a. An incumbent from the best-bound tuples, a batch at a time.
    inc_q = 0
    pos, batch = 0, INCUMBENT_BATCH
    while pos < len(order):
        idx = order[pos:pos + batch]
        pos += len(idx)
        batch = min(256, 4 * batch)  # a count with no layout is proven batch by batch
        mdl = model_of(idx)
        if cap_q is not None:
            mdl.m.add(mdl.S <= cap_q)
        s, st = run(mdl, mdl.S, "incumbent")
        if st in (sat.OPTIMAL, sat.FEASIBLE):
            incumbent, inc_q = mdl.decode(s), int(round(s.objective_value))
            break
        if st != sat.INFEASIBLE:
            raise _TimeUp(None)
    if incumbent is None or clock.out:
        if incumbent is not None:
            raise _TimeUp(incumbent)
        return None
    # Improve it while the tuples a decision would need are many: the next best-bound tuples, a growing batch at a
    # time, each model asked for a strictly shorter step (a few rounds at most).
    lb_q = q["lb_q"]
    rounds = 0
    while rounds < IMPROVE_ROUNDS and pos < len(order) and int((lb_q <= inc_q).sum()) > DECIDE_TUPLES:
        rounds += 1
        idx = order[pos:pos + batch]
        pos += len(idx)
        batch = 4 * batch
        idx = idx[lb_q[idx] <= inc_q]
        if len(idx) == 0:
            break
        mdl = model_of(idx)
        mdl.m.add(mdl.S <= inc_q - 1)
        s, st = run(mdl, mdl.S, "improve")
        if st in (sat.OPTIMAL, sat.FEASIBLE):
            incumbent, inc_q = mdl.decode(s), int(round(s.objective_value))
    # b. The decision: every tuple whose bound does not exceed the incumbent's integer step.
    idx = np.nonzero(lb_q <= inc_q)[0]
    mdl = model_of(idx)
    stats.tuples, stats.pairs = len(idx), mdl.pairs
    mdl.m.add(mdl.S <= inc_q)
    mdl.hint_layout(incumbent)
    s, st = run(mdl, mdl.S, "step")
    if st != sat.OPTIMAL:
        if st == sat.FEASIBLE:
            return mdl.decode(s), "feasible", from_quanta(s.best_objective_bound), "step"
        return incumbent, "feasible", None, "step"
    best = mdl.decode(s)
    stats.step_q = int(round(s.objective_value))
    mdl.m.add(mdl.S == stats.step_q)
    mdl.hint_layout(best)
    s3, st3 = run(mdl, mdl.tie_expr, "network")
    if st3 == sat.OPTIMAL:
        # How far down the bound order CP-SAT's choice lies (0: the tuple with the least bound), for the report.
        chosen = next(k for k, v in enumerate(mdl.x) if s3.boolean_value(v))
        stats.bound_rank = int((lb_q[idx] < lb_q[idx][chosen]).sum())
        return mdl.decode(s3), "optimal", None, ""
    return (mdl.decode(s3) if st3 == sat.FEASIBLE else best), "feasible", None, "network"


def solve_cpsat(hw: Hardware, wl: Workload, options: SearchOptions, deadline_s: float | None,
                time_limit_s: float | None = 60.0, workers: int = 2,
                goodput: Callable[[float], float] | None = None, exclude: Layout | None = None,
                seed_q: int | None = None, base_hw: Hardware | None = None) -> SearchResult:
    """Fewest GPUs (deadline mode) or least step time (`options.gpus`), decided by CP-SAT count by count.

    `goodput` g(N) (planner.goodput) scales the deadline of every count N: compute time <= deadline x g(N). The
    counts whose N g(N) cannot hold the workload's compute at peak are left out before any table is built.
    `exclude`: a layout no model may choose (`_decide_count`): the search's answer is then the best of the rest.

    `seed_q` (with a proven `options.min_gpus` N, deadline mode): the integer step (quanta) of a layout of N GPUs that
    the caller has priced under this hardware and found within N's deadline cap (a re-plan's seed: the plan's own
    layout, planner.api.replan_answer). Count N is then decided first with its cap lowered to `seed_q` (the windows'
    deadline filters too): CP-SAT's least step there is at most the seed's, so no tuple whose bound lies above it can
    be chosen. Should the lowered count find no layout (a seed that no layout of the search matches), N is decided
    again with its own cap: the answer is always the search's own.

    `base_hw` (deadline mode): a hardware under which, the caller has proven, no layout is slower than under `hw`
    and the same layouts fit (the plan's, for a re-plan that moves a step input the slowing way: planner.monotone,
    tests/test_monotone.py). A count that the base's searches filtered whole (its count record, `_CountRecord`) is
    filtered here from the base's survivors only: a tuple whose bound missed the deadline under the base has a
    step above it under `hw` too, so it cannot be chosen."""
    clock = _Clock(float("inf") if time_limit_s is None else time_limit_s)
    space = build_space(hw, wl, options)
    size = space_size(space)
    stats = _Stats()

    def result(status, layout, **kw) -> SearchResult:
        presolve_s = clock.elapsed - stats.cpsat_s
        return SearchResult("cpsat", status, layout, clock.elapsed, size, stats.modelled,
                            cpsat_status=stats.detail, cpsat_s=stats.cpsat_s, presolve_s=presolve_s,
                            cpsat_tuples=stats.tuples, cpsat_pairs=stats.pairs, cpsat_models=stats.models,
                            cpsat_bound_rank=stats.bound_rank, step_q=stats.step_q, **kw)

    # The largest cluster the search may look at, from the space's largest degrees and the limits, before any row
    # is built: rows bigger than it pair with no N_DP inside [lo, n_max], so they are never built (the same windows,
    # pairs and tuples as building them all).
    if min(len(space.dp_m["dp"]), len(space.pp_i_zb["pp"]), *(len(v) for v in space.values.values())) == 0:
        return result("infeasible", None)
    n_max = float(space.pp_i_zb["pp"].max()) * float(space.dp_m["dp"].max())
    for d in DEGREES:
        if d not in ("dp", "pp"):
            n_max *= float(space.values[d].max())
    if hw.max_gpus is not None:
        n_max = min(n_max, hw.max_gpus)
    if options.max_gpus is not None:
        n_max = min(n_max, options.max_gpus)
    if options.gpus is not None:
        lo, n_max = float(options.gpus), float(options.gpus)
    else:
        assert deadline_s is not None
        lo = max(1.0, math.floor(wl.compute_flop / (hw.gpu.sustained_flops * deadline_s)))
    if goodput is not None and deadline_s is not None:
        from planner.cost.step import peak_flops
        from planner.goodput import useful_gpu_range

        useful = useful_gpu_range(goodput, wl.compute_flop / peak_flops(hw, wl), deadline_s, n_max)
        if useful is None or useful[0] > n_max:
            return result("infeasible", None, gap=0.0, notes=[
                "proven without a search: on no GPU count does N x goodput(N) x peak FLOP/s x deadline reach the "
                "training compute"])
        lo, n_max = max(lo, math.floor(useful[0])), min(n_max, math.ceil(useful[1]))

    sp_on = 1 in space.values["sp"]
    dp_values = np.unique(space.dp_m["dp"])

    def keep_rows(cols: dict[str, np.ndarray]) -> np.ndarray:
        keep = np.ones(len(cols["pp"]), dtype=bool)
        if sp_on:
            # Sequence parallelism moves the same words as TP's all-reduces (reduce-scatter + all-gather) and shards
            # element-wise work and activations: with N_TP,ff > 1, sp on is never worse than off (sound exclusion).
            keep &= ~((cols["sp"] == 0) & (cols["tp_ff"] > 1))
        if options.gpus is not None:
            # A fixed cluster: a row is used only with N_DP = gpus / (its size), an N_DP value of the space (the one
            # window, [gpus, gpus], would find no pair for any other row).
            n_mp = mp_size(cols)
            fits = n_mp <= options.gpus
            n_int = np.where(fits, n_mp, 1).astype(np.int64)
            keep &= fits & (options.gpus % n_int == 0) & np.isin(options.gpus // n_int, dp_values)
        return keep

    # Rows read the workload, the options and n_max only (a proven min_gpus only moves where the windows start, and
    # below_gpus where they end).
    key = (wl, dataclasses.replace(options, min_gpus=None, below_gpus=None), n_max)
    shared = recent.recall(_SHARED, key)
    if shared is None:
        rows = model_parallel_rows_within(space, lambda: clock.out, keep_rows, max_size=n_max, divides=options.gpus)
        if rows is None:
            return _presolve_out(result, clock)
        if len(rows["pp"]) == 0 or len(space.dp_m["dp"]) == 0:
            return result("infeasible", None)
        shared = _share(key, rows, PairIndex.build(space, rows))
    mp, index = shared
    if clock.out:  # the limit covers presolve: building the space may already have spent it
        return _presolve_out(result, clock)
    shapes = _shape_table(hw, wl, space)
    if clock.out:
        return _presolve_out(result, clock)
    least = LeastFeatures(hw, wl)
    recording = COUNT_RECORDS and deadline_s is not None and options.gpus is None
    base = None
    if recording and base_hw is not None:
        assert deadline_s is not None
        base = _count_record(base_hw, wl, options, deadline_s, create=False)  # the re-plans that read it keep it
    record = _count_record(hw, wl, options, deadline_s) if recording and deadline_s is not None else None
    if base is record:
        base = None
    n_mp = np.asarray(mp_size(index.mp), dtype=np.float64) if record is not None else None

    def decided(found: tuple) -> SearchResult:
        """The answer from the first count whose `_decide_count` found a layout: optimal, or the time limit's best."""
        layout, status, bound, stage = found
        if status == "optimal":
            return result("optimal", layout)
        gap = None if bound is None else max(0.0, 1.0 - bound / max(_step_of(hw, wl, layout, options), 1e-300))
        return result("feasible", layout, gap=gap, bound=bound, stage=stage,
                      notes=[f"time limit {clock.limit:g} s reached before CP-SAT proved the {stage} stage"])

    def cap_for(n: float) -> int | None:
        if deadline_s is None:
            return None
        # beyond the model's integer range (or past a float's, --days 1e300) a deadline constrains nothing
        return deadline_quanta(deadline_s, goodput(n) if goodput is not None else 1.0, wl.steps)

    if options.min_gpus is not None and deadline_s is not None:
        # Counts below a proven bound are not visited. The tuples of each count, and their order, do not depend on
        # where the windows start (each window holds whole counts, each in N_DP-then-row order), so every count
        # from the bound up is decided exactly as in a search from the compute bound.
        lo = max(lo, float(options.min_gpus))
    if options.below_gpus is not None and deadline_s is not None:
        # A certificate search: only the counts below `below_gpus`, each decided as in a full search (a count's
        # tuples and their order do not depend on where the windows end).
        n_max = min(n_max, float(options.below_gpus) - 1.0)
    work: LeastWork | None = shapes.least_work(space) if deadline_s is not None else None
    slice_pairs = max(1, WINDOW_TUPLES // max(1, int(index.m_counts.mean())))
    spans = windows(index, lo, n_max, WINDOW_TUPLES)
    if options.min_gpus is not None and deadline_s is not None and lo == float(options.min_gpus) and lo <= n_max:
        # A proven bound is usually the answer of a re-plan (its move rarely changes the count): its count alone
        # first, so that no tuple of a larger count is filtered before it is decided; past it, smaller windows (a
        # re-plan whose count moves up usually moves by a few counts: a large window filters many counts beyond
        # its answer). Each count is still filtered whole and decided in order, so the answer is the same.
        spans = itertools.chain(windows(index, lo, lo, WINDOW_TUPLES),
                                windows(index, lo + 1, n_max, BOUNDED_WINDOW_TUPLES))
    seed_s = deadline_s
    if seed_q is not None and options.min_gpus is not None and deadline_s is not None and options.gpus is None \
            and lo == float(options.min_gpus) and lo <= n_max:
        # Count N alone with its filters and cap at the seed's step (a hair of slack on the float filters: keeping
        # more tuples is always sound); then, only if that found nothing, N again with its own cap, and on.
        seed_s = min(deadline_s, wl.steps * (seed_q + 1) * QUANTUM_S * (1.0 + 1e-9))
        spans = itertools.chain(((*w, True) for w in windows(index, lo, lo, WINDOW_TUPLES)),
                                ((*w, False) for w in spans))
    else:
        spans = ((*w, False) for w in spans)
    for ii, jj, n_lo, _n_hi, lowered in spans:
        if clock.out:
            return _timed_out(result, clock, None, n_lo, deadline_s)
        window_deadline = seed_s if lowered else deadline_s
        recorded: dict[int, tuple[Tuples, dict[str, np.ndarray]]] = {}
        use_record = record is not None and not lowered
        if use_record:
            assert record is not None
            assert n_mp is not None
            pair_n = n_mp[ii] * index.dps[jj].astype(np.float64)
            known = record.covered(pair_n)
            if known.any():
                recorded = {n: record.counts[n] for n in np.unique(pair_n[known]).astype(np.int64).tolist()
                            if n in record.counts}
                ii, jj = ii[~known], jj[~known]
                pair_n = pair_n[~known]
            if base is not None and len(ii):
                # Counts the base hardware's searches filtered whole: under this hardware no tuple is faster and
                # the same tuples fit, so only the base's survivors can meet the deadline; they are filtered again
                # here (priced under this hardware), the other pairs of those counts never.
                from_base = base.covered(pair_n)
                for n in np.unique(pair_n[from_base]).astype(np.int64).tolist():
                    if n in base.counts:
                        t_b, _ = base.counts[n]
                        t_n, q_n = _filter(hw, wl, t_b, deadline_s, shapes, least, options.dp_overlap)
                        if len(t_n):
                            recorded[n] = (t_n, q_n)
                            record.keep(n, t_n, q_n)
                ii, jj = ii[~from_base], jj[~from_base]
        if window_deadline is not None and len(ii):
            ii, jj = _pair_filter(hw, wl, index, ii, jj, shapes, work, least, window_deadline, options.dp_overlap)
        if window_deadline is not None and len(ii) == 0 and not recorded:
            if use_record:
                assert record is not None
                record.cover(n_lo, _n_hi)
            continue
        if deadline_s is None and LAZY_FIXED and len(ii) > LAZY_FIRST_PAIRS:  # fewer: all in the first step anyway
            lazy = _LazyCount(hw, wl, space, index, ii, jj, shapes, least, options, slice_pairs, clock)
            try:  # the first groups are expanded here, slice by slice with the clock checked between slices
                t, q = lazy.probe_tuples()
            except _TimeUp:
                return _timed_out(result, clock, None, n_lo, deadline_s)
            if len(t) == 0:
                continue
            n = int(t.gpus[0])
            try:
                found = _decide_count(hw, wl, t, q, None, options.dp_overlap, clock, workers, stats,
                                      options.rank_order, expand=lazy.expand, exclude=exclude)
            except _TimeUp as stop:
                return _timed_out(result, clock, stop.args[0], float(n), deadline_s)
            if found is None:
                continue
            return decided(found)
        kept_t, kept_q = [], []
        for s0 in range(0, len(ii), slice_pairs):
            if clock.out:
                return _timed_out(result, clock, None, n_lo, deadline_s)
            t = tuples_from_pairs(space, index, ii[s0:s0 + slice_pairs], jj[s0:s0 + slice_pairs])
            if options.rank_order:
                t = t.take(np.nonzero(rank_order_factors(hw, t, options.rank_order)[1])[0])
            t, q = _filter(hw, wl, t, window_deadline, shapes, least, options.dp_overlap)
            if len(t):
                kept_t.append(t)
                kept_q.append(q)
        by_count = dict(recorded)
        if kept_t:
            t = Tuples.concat(kept_t)
            q = {k: np.concatenate([d[k] for d in kept_q]) for k in kept_q[0]}
            gpus = t.gpus
            for n in np.unique(gpus).tolist():
                idx = np.nonzero(gpus == n)[0]
                by_count[n] = (t.take(idx), {k: v[idx] for k, v in q.items()})
                if use_record:
                    assert record is not None
                    record.keep(n, *by_count[n])
        if use_record:
            assert record is not None
            record.cover(n_lo, _n_hi)  # every pair of these counts filtered: what survived is kept above
        for n in sorted(by_count):
            t_n, q_n = by_count[n]
            try:
                cap = cap_for(n)
                if lowered:
                    assert seed_q is not None
                    cap = seed_q if cap is None else min(cap, seed_q)
                found = _decide_count(hw, wl, t_n, q_n, cap, options.dp_overlap, clock, workers, stats,
                                      options.rank_order, exclude=exclude)
            except _TimeUp as stop:
                return _timed_out(result, clock, stop.args[0], float(n), deadline_s)
            if found is None:
                continue  # CP-SAT proved that no layout on n GPUs meets the deadline
            return decided(found)
    if clock.out:
        return _timed_out(result, clock, None, n_max, deadline_s)
    return result("infeasible", None)


COUNT_RECORDS = True
"""Searches in one process keep what their windows' filters left of each GPU count (`_CountRecord`), for later
searches with the same hardware, workload, options and deadline; False only to measure what that saves."""
COUNT_RECORD_ENTRIES = 8
"""Records kept (the least recently used dropped): the plan's, and those of the re-plans' moved hardware."""
COUNT_RECORD_TUPLES = 100_000
"""Most tuples one record keeps; past it, later counts are filtered again by every search (memory stays bounded:
28 columns, 217 bytes a tuple, measured on dense and MoE plans under the realistic profile: about 22 MB a record,
170 MB for all COUNT_RECORD_ENTRIES records of a process at most; a study worker keeps at most that)."""


@dataclass
class _CountRecord:
    """What the deadline filters of the searches with one key (`_count_record`) left of each GPU count: `counts`
    holds each count's surviving tuples and their quantities (in the count's order), for every count within the
    intervals [lo[k], hi[k]] that some search filtered whole (a covered count absent from `counts` kept nothing).

    The filters (`_pair_filter`, `_filter`: level filling, memory, dominated options, the placement-free bound
    against the deadline at goodput 1) read the hardware, the workload, the options and the deadline only, never the
    goodput, a proven bound, a runner-up's excluded layout or a seed; and each count's pairs are the same in every
    search that reaches it (rows larger than a search's largest cluster pair with no count it visits). So a search
    of the plan, its runner-up, a certificate and the re-plans that move only a failure input (the same hardware)
    decide the counts one of them filtered from the same tuples, without filtering them again."""

    lo: list[float] = dataclasses.field(default_factory=list)
    hi: list[float] = dataclasses.field(default_factory=list)
    counts: dict[int, tuple[Tuples, dict[str, np.ndarray]]] = dataclasses.field(default_factory=dict)
    size: int = 0
    full: bool = False

    def covered(self, n: np.ndarray) -> np.ndarray:
        """Whether each count in `n` lies in a covered interval."""
        if not self.lo:
            return np.zeros(len(n), dtype=bool)
        lo, hi = np.array(self.lo), np.array(self.hi)
        k = np.searchsorted(lo, n, side="right") - 1
        return (k >= 0) & (n <= hi[np.maximum(k, 0)])

    def keep(self, n: int, t: Tuples, q: dict[str, np.ndarray]) -> None:
        if self.full or self.size + len(t) > COUNT_RECORD_TUPLES:
            self.full = True  # nothing more is covered either (`cover`)
            return
        for arr in [*t.cols.values(), *q.values()]:
            arr.setflags(write=False)
        self.counts[n] = (t, q)
        self.size += len(t)

    def cover(self, a: float, b: float) -> None:
        """Counts a..b were filtered whole (their survivors kept); intervals merged where they touch."""
        if self.full:
            return
        spans = sorted([*zip(self.lo, self.hi), (a, b)])
        lo: list[float] = []
        hi: list[float] = []
        for x, y in spans:
            if lo and x <= hi[-1] + 1:
                hi[-1] = max(hi[-1], y)
            else:
                lo.append(x)
                hi.append(y)
        self.lo, self.hi = lo, hi


_COUNT_RECORDS: dict[tuple, _CountRecord] = {}


def _count_record(hw: Hardware, wl: Workload, options: SearchOptions, deadline_s: float, create: bool = True
                  ) -> _CountRecord | None:
    """The record of searches with this hardware, workload, options (but for where the windows start and end) and
    deadline, made the most recently used; a new one when none is kept and `create` (the least recently used
    dropped). None when COUNT_RECORDS is off, or none is kept and not `create`."""
    if not COUNT_RECORDS:
        return None
    key = _record_key(hw, wl, options, deadline_s)
    record = recent.recall(_COUNT_RECORDS, key)
    if record is None and create:
        record = recent.keep(_COUNT_RECORDS, key, _CountRecord(), COUNT_RECORD_ENTRIES)
    return record


def _record_key(hw: Hardware, wl: Workload, options: SearchOptions, deadline_s: float) -> tuple:
    return (hardware_repr(hw), wl, dataclasses.replace(options, min_gpus=None, below_gpus=None), deadline_s)


_REPRS: dict[int, tuple[object, str]] = {}


def hardware_repr(hw: Hardware) -> str:
    """repr(hw), computed once per hardware object among the 64 most recent (a frozen document): the key of its
    count record here and of its layout steps (planner.api.layout_quanta_shared)."""
    return recent.of_object(_REPRS, hw, repr, 64)


def clear_records() -> None:
    """Forget every count record (`_CountRecord`): a measurement of one plan from cold filters
    (benchmarks/replan_speed.py)."""
    _COUNT_RECORDS.clear()


_SHARED: dict[tuple[Workload, SearchOptions, float], tuple[dict[str, np.ndarray], PairIndex]] = {}
"""The model-parallel rows of recent searches and their index, keyed by all they are built from: the workload, the
options and the largest cluster the search looks at (the space's candidate values and the rows a search keeps read
nothing else; a proven min_gpus only moves where the windows start). Re-plans in one process that move a hardware,
profile or failure input and keep that cluster share them (`plan --sensitivity`, `--confidence`). Read-only arrays:
a search that wrote into them would fail loudly."""
SHARED_ENTRIES = 4


def _share(key: tuple[Workload, SearchOptions, float], rows: dict[str, np.ndarray], index: PairIndex
           ) -> tuple[dict[str, np.ndarray], PairIndex]:
    for arr in [*rows.values(), index.order, index.mp_sorted, index.dps, index.m_counts, index.m_min, index.m_max]:
        arr.setflags(write=False)
    return recent.keep(_SHARED, key, (rows, index), SHARED_ENTRIES)


NOT_IN_SHAPES: tuple[str, ...] = (
    "collective_bw_fraction", "collective_latency_s", "ring_step_latency_s", "overlap_tp", "overlap_tp_comm",
    "overlap_cp", "overlap_pp", "overlap_ep", "overlap_zero", "dp_exposed", "memory_reserve_bytes",
    "memory_context_bytes", "memory_workspace_bytes", "nccl_buffer_bytes", "nccl_channels", "nccl_buffers_per_channel",
    "memory_fragmentation", "memory_driver_reserved_bytes", "memory_headroom_bytes", "sources", "spreads")
"""Execution-profile fields the GEMM and element-wise shape times (planner.cost.terms.shape_times) never read: the
collectives' rates and latencies and their overlaps (group and tuple terms only) and the memory reserves (the
memory model only). Searches whose hardware differs only in these share one ShapeTable (`_shape_table`)."""

_SHAPES: dict[tuple, ShapeTable] = {}
SHAPE_ENTRIES = 4


def _shape_table(hw: Hardware, wl: Workload, space: Space) -> ShapeTable:
    """ShapeTable.for_space, shared by re-plans in one process whose GPU, workload, candidate shapes and
    execution profile (but for NOT_IN_SHAPES) agree: a re-plan that moves a network, overlap or memory input. The
    hardware's levels do not enter shape times. The exhaustive enumerator builds its own table (an independent
    check)."""
    neutral = recent.of_object(_NEUTRAL, hw.profile, _neutral_repr, 64)
    key = (wl, hw.gpu, neutral, *(space.values[d].tobytes() for d in ("tp_ff", "tp_model", "ep", "sp", "cp")),
           space.dp_m["dp"].tobytes(), space.dp_m["microbatches"].tobytes())
    table = recent.recall(_SHAPES, key)
    return recent.keep(_SHAPES, key, ShapeTable.for_space(hw, wl, space), SHAPE_ENTRIES) if table is None else table


_NEUTRAL: dict[int, tuple[object, str]] = {}


def _neutral_repr(profile: ExecutionProfile) -> str:
    """The repr of an execution profile with the fields shape times never read (NOT_IN_SHAPES) blanked."""
    return repr(profile.model_copy(update={f: None for f in NOT_IN_SHAPES}))


def _step_of(hw: Hardware, wl: Workload, layout: Layout, options: SearchOptions) -> float:
    from planner.cost.step import evaluate

    return evaluate(hw, wl, layout, dp_overlap=options.dp_overlap).step.step_s


def _presolve_out(result, clock: _Clock) -> SearchResult:
    """The clock ran out before any CP-SAT model was built: nothing was ruled out."""
    note = f"time limit {clock.limit:g} s reached while building the search space and its tables, before CP-SAT ran"
    return result("unknown", None, gap=None, stage="gpus", notes=[note])


def _timed_out(result, clock: _Clock, incumbent: Layout | None, cut: float, deadline_s) -> SearchResult:
    """The clock ran out: the best layout so far (if any) with what was ruled out."""
    note = f"time limit {clock.limit:g} s reached before the search settled"
    if incumbent is not None:
        # Every GPU count below `cut` was proven infeasible; the incumbent has `cut` GPUs in deadline mode.
        return result("feasible", incumbent, gap=0.0 if deadline_s is not None else None,
                      bound=cut if deadline_s is not None else None, stage="step", notes=[note])
    if deadline_s is not None:
        note += f"; no layout found yet (all GPU counts below {cut:g} ruled out)"
    return result("unknown", None, gap=None, stage="gpus" if deadline_s is not None else "step", notes=[note])
