"""CP-SAT search: the exact optimum of the float cost model over the space of planner.parallel.space.

How the work is divided (docs/model.md, "The CP-SAT model", says the same at more length):

1. Windows. Degree tuples (N_DP, N_TP,ff, N_TP,model, N_PP, i, N_EP, m, schedule) are visited in windows of
   increasing GPU count, from the compute bound N >= T / (sustained FLOP/s * deadline) upward, each window holding
   about WINDOW_TUPLES tuples (whole GPU-count groups). In fixed-cluster mode there is one window: N = --gpus.
2. Exact rules and sound bounds. In deadline mode, (model-parallel row, N_DP) pairs whose bound over every
   microbatch count misses the deadline go before they are expanded (tables.pair_step_lower_bound). Tuples that
   break the level-filling rule or do not fit in memory go; so do, in deadline mode, tuples whose placement-free
   step bound (tables.step_lower_bound_free: GEMMs, and every communication term at its least over the placements
   of its degree) already misses the deadline. tests/test_bounds.py checks both bounds against full pricing.
3. Best-first exact pricing. Remaining tuples are priced, every placement, with planner.cost.step.step_arrays (the
   function the enumerator uses) in order of GPU count (deadline mode) or of their step bound (fixed mode), and
   pricing stops once nothing unpriced can beat the incumbent. Survivors are the tuples that tie the incumbent's
   GPU count and come within the model's rounding of its step time.
4. CP-SAT proves the lexicographic optimum over the survivors and all their placements: (1) fewest GPUs subject to
   step <= deadline / steps, (2) least step time, (3) least network time. One boolean per tuple and one per (tuple,
   factor vector) pair; levels fill bottom-up via integer prime-exponent equalities; every cost term tabulated per
   tuple or per pair (each placement-dependent term of Eq. 21 and of the floor involves one degree group's factors
   and tuple constants only, so the sums are exact); times in integer QUANTUM_S, each entry rounded up.
5. The chosen layout is read back and re-priced by the caller with the float model.

When the time limit stops the search, the incumbent is returned with the proven bound (the smallest GPU count, or
step-time bound, not yet ruled out) and the gap. Most of the work in large instances is step 3; CP-SAT's part is
the final proof over the survivors (see docs/benchmarks.md for how the time splits).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from planner.cost import network as net
from planner.schema import DEGREES, Hardware, Layout, Workload
from planner.search.result import SearchResult
from planner.parallel.space import (
    SearchOptions, Space, Tuples, build_space, factor_options, layout_from, level_products, model_parallel_rows,
    space_size,
)
from planner.search.presolve import (
    CommTable, ShapeTable, pair_step_lower_bound, price_placements, step_lower_bound_free, tuple_terms,
)

QUANTUM_S = 1e-9
"""Integer time unit of the CP-SAT model: one nanosecond."""



def to_quanta(seconds) -> np.ndarray:
    """Seconds -> integer quanta, rounded up (an integer time never understates the float time)."""
    return np.ceil(np.asarray(seconds, dtype=np.float64) / QUANTUM_S - 1e-9).astype(np.int64)


def from_quanta(q) -> float:
    return float(q) * QUANTUM_S


def _primes_upto(n: int) -> list[int]:
    return [p for p in range(2, n + 1) if all(p % q for q in range(2, int(p ** 0.5) + 1))]


def _vp(x: np.ndarray, p: int) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64).copy()
    e = np.zeros_like(x)
    while True:
        m = (x % p == 0) & (x > 0)
        if not m.any():
            return e
        e[m] += 1
        x[m] //= p


# --------------------------------------------------------------------------------------------------
# 1. Data
# --------------------------------------------------------------------------------------------------


@dataclass
class PairIndex:
    """Model-parallel rows sorted by their size N_TP,ff N_TP,model N_PP N_EP, and the N_DP values with the number
    of microbatch counts each allows and their least and largest. Built once per search, so that each N_DP value
    selects the rows of a window of GPU counts by binary search instead of a scan."""

    mp: np.ndarray
    order: np.ndarray
    mp_sorted: np.ndarray
    dps: np.ndarray
    m_counts: np.ndarray
    m_min: np.ndarray
    m_max: np.ndarray

    @classmethod
    def build(cls, space: Space, mp: np.ndarray) -> "PairIndex":
        n_mp = mp[:, 0].astype(np.float64) * mp[:, 1] * mp[:, 2] * mp[:, 5]
        order = np.argsort(n_mp, kind="stable")
        dps = np.unique(space.dp_m[:, 0])
        ms = [space.dp_m[space.dp_m[:, 0] == d, 1] for d in dps]
        return cls(mp, order, n_mp[order], dps, np.array([len(m) for m in ms]),
                   np.array([m.min() for m in ms], dtype=np.float64), np.array([m.max() for m in ms], dtype=np.float64))

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


def windows(index: PairIndex, lo: float, n_max: float, budget: int, scan_ratio: float = 4.0):
    """Consecutive windows of GPU counts from `lo` upward, each holding about `budget` degree tuples.

    Yields (ii, jj, n_lo, n_hi): the (model-parallel row, N_DP value index) pairs of the window, sorted by GPU count.
    A window always holds whole GPU-count groups (one count may exceed the budget on its own); empty ranges are
    skipped without cost.
    """
    mp, dps = index.mp, index.dps
    while lo <= n_max:
        hi = min(n_max, max(lo * scan_ratio, lo + 1))
        ii, jj = index.pairs(lo, hi)
        if len(ii) == 0:
            lo = math.floor(hi) + 1
            continue
        n = mp[ii, 0].astype(np.float64) * mp[ii, 1] * mp[ii, 2] * mp[ii, 5] * dps[jj]
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


def tuples_from_pairs(space: Space, mp: np.ndarray, ii: np.ndarray, jj: np.ndarray, dps: np.ndarray) -> Tuples:
    """Expand (model-parallel row, N_DP value) pairs by every compatible microbatch count (schedule rule applied)."""
    parts = []
    for j in np.unique(jj):
        rows = mp[ii[jj == j]]
        ms = space.dp_m[space.dp_m[:, 0] == dps[j], 1]
        a = np.repeat(rows, len(ms), axis=0)
        m = np.tile(ms, len(rows))
        keep = (a[:, 4] == 0) | (m >= 2 * a[:, 2] - 1)
        a, m = a[keep], m[keep]
        parts.append(Tuples(dp=np.full(len(a), dps[j]), tp_ff=a[:, 0], tp_model=a[:, 1], pp=a[:, 2],
                            interleave=a[:, 3], ep=a[:, 5], microbatches=m, zero_bubble=a[:, 4].astype(bool)))
    if not parts:
        return Tuples(*[np.zeros(0, dtype=np.int64)] * 7, zero_bubble=np.zeros(0, dtype=bool))
    return Tuples.concat(parts)


class PairTable:
    """(tuple, factor vector) pairs of one degree (or the joint pp/ep vectors) with their cost columns."""

    def __init__(self, tup: np.ndarray, factors: list[np.ndarray], cols: dict[str, np.ndarray]):
        self.tup = tup  # (k,) tuple index
        self.factors = factors  # list of (k, H) arrays, one per degree the table places
        self.cols = cols  # name -> (k,) seconds


def _pairs(hw: Hardware, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row's degree value, every factor vector: returns (row index, factors (k, H))."""
    rows, fac = [], []
    for v in np.unique(values):
        opts = factor_options(hw, int(v))
        idx = np.nonzero(values == v)[0]
        rows.append(np.repeat(idx, len(opts)))
        fac.append(np.tile(opts, (len(idx), 1)))
    return np.concatenate(rows), np.concatenate(fac)


def build_pair_tables(hw: Hardware, wl: Workload, t: Tuples, terms: dict[str, np.ndarray]) -> dict[str, PairTable]:
    """Placement-dependent cost terms, one table per degree group (see module docstring)."""
    bw = np.array([lvl.bw_unidir_Bps for lvl in hw.levels])
    lat = np.array([lvl.lat_s for lvl in hw.levels])
    wb = hw.gpu.word_bytes
    L, b = wl.layers, wl.batch_tokens
    f = {k: getattr(t, k).astype(np.float64) for k in ("dp", "tp_ff", "tp_model", "pp", "ep", "microbatches")}
    one_f1b = np.where(t.zero_bubble, 0.0, 1.0)
    lat_share = one_f1b * f["microbatches"] / f["pp"]  # serial-latency multiplicity per step under 1F1B
    m_over_pp = f["microbatches"] / f["pp"]
    stretch = 1.0 / (1.0 - terms["bubble_fraction"])
    layers_here = L / f["pp"]
    tokens_here = b / (f["dp"] * f["ep"])
    shard_words = wl.params / (f["tp_ff"] * f["tp_model"] * f["pp"] * f["ep"])
    tp_words_ff = 2.0 * layers_here * tokens_here * wl.d_ff / f["tp_ff"]
    tp_words_model = 2.0 * layers_here * tokens_here * wl.d_model / f["tp_model"]
    tables = {}

    r, fac = _pairs(hw, t.dp)
    tables["dp"] = PairTable(r, [fac], {
        "bw": net.allreduce_time_s(shard_words[r], fac, bw, wb), "lat": net.allreduce_latency_s(fac, lat)})

    for name, words in (("tp_model", tp_words_ff), ("tp_ff", tp_words_model)):
        r, fac = _pairs(hw, getattr(t, name))
        lat_ar = net.allreduce_latency_s(fac, lat)
        tables[name] = PairTable(r, [fac], {
            "bw": net.allreduce_time_s(words[r], fac, bw, wb),
            "lat_path": 2.0 * L * lat_ar,  # this group's share of one microbatch's serial latency, both passes
        })

    # Joint pipeline / expert factor vectors: every pp vector with every ep vector, per (pp, ep) value pair.
    rows, fpp, fep = [], [], []
    pairs = np.stack([t.pp, t.ep], axis=1)
    uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
    inv = inv.ravel()
    for j, (vp, ve) in enumerate(uniq):
        a, c = factor_options(hw, int(vp)), factor_options(hw, int(ve))
        idx = np.nonzero(inv == j)[0]
        k = len(a) * len(c)
        rows.append(np.repeat(idx, k))
        fpp.append(np.tile(np.repeat(a, len(c), axis=0), (len(idx), 1)))
        fep.append(np.tile(np.tile(c, (len(a), 1)), (len(idx), 1)))
    r, fpp, fep = np.concatenate(rows), np.concatenate(fpp), np.concatenate(fep)
    p_joint = net.p2p_frequencies(net.pp_frequencies(fpp, t.interleave[r], L), net.ep_frequencies(fep))[:, 1:]
    n_gpu = t.gpus[r].astype(np.float64)
    p2p_words = 2.0 * b * max(L - 1, 0) * wl.d_model * p_joint / n_gpu[:, None]
    tables["pp_ep"] = PairTable(r, [fpp, fep], {
        "bw": (p2p_words * wb / bw[None, :]).max(axis=1),
        "lat_path": 2.0 * net.p2p_latency_per_pass_s(fpp, t.interleave[r], fep, L, lat),
    })

    # Multiply tuple constants in so that every model coefficient is a single tabulated number.
    for name, tab in tables.items():
        rr = tab.tup
        if name == "dp":
            continue
        tab.cols["lat_step"] = lat_share[rr] * tab.cols["lat_path"]
        tab.cols["lat_net"] = m_over_pp[rr] * tab.cols["lat_path"]
        tab.cols["bw_stretched"] = tab.cols["bw"] * stretch[rr]
    return tables


# --------------------------------------------------------------------------------------------------
# 2-4. Model, solve, decode
# --------------------------------------------------------------------------------------------------


def _step_columns(dp_overlap: bool) -> list[tuple[str | None, dict[str, list[str]]]]:
    """The linear expressions whose maximum is the step time: (tuple term, pair columns per group).

    Without DP overlap: Eq. 21 = t_lat + t_DP + max(t_matmul, t_TP + t_P2P) / (1 - f_b), written as its two
    branches, and the floor = DP + critical path. With DP overlap the DP bandwidth moves inside the max.
    """
    lat = {"tp_ff": ["lat_step"], "tp_model": ["lat_step"], "pp_ep": ["lat_step"]}
    path = {"tp_ff": ["lat_path"], "tp_model": ["lat_path"], "pp_ep": ["lat_path"]}
    net_branch = {g: ["lat_step", "bw_stretched"] for g in ("tp_ff", "tp_model", "pp_ep")}
    if dp_overlap:
        return [("pipelined_mm", {"dp": ["lat"], **lat}), (None, {"dp": ["lat", "bw"], **lat}),
                (None, {"dp": ["lat"], **net_branch}), ("critical_mm_s", {"dp": ["lat"], **path})]
    return [("pipelined_mm", {"dp": ["lat", "bw"], **lat}), (None, {"dp": ["lat", "bw"], **net_branch}),
            ("critical_mm_s", {"dp": ["lat", "bw"], **path})]


NET_COLUMNS = {"dp": ["lat", "bw"], "tp_ff": ["bw", "lat_net"], "tp_model": ["bw", "lat_net"],
               "pp_ep": ["bw", "lat_net"]}


class _Model:
    """The CP-SAT model of one window of tuples."""

    def __init__(self, hw: Hardware, wl: Workload, t: Tuples, terms, tables, dp_overlap: bool):
        self.hw, self.t, self.tables = hw, t, tables
        n = len(t)
        m = cp_model.CpModel()
        self.m = m
        # x[t]: tuple t is the chosen degree tuple.
        self.x = [m.new_bool_var(f"x{i}") for i in range(n)]
        m.add_exactly_one(self.x)
        # y[g][k]: tuple tables[g].tup[k] uses factor vector k for degree group g.
        self.y = {}
        for g, tab in tables.items():
            ys = [m.new_bool_var(f"y_{g}_{k}") for k in range(len(tab.tup))]
            self.y[g] = ys
            order = np.argsort(tab.tup, kind="stable")
            bounds = np.searchsorted(tab.tup[order], np.arange(n + 1))
            for i in range(n):
                ks = order[bounds[i]:bounds[i + 1]]
                m.add(sum(ys[k] for k in ks) == self.x[i])

        # Levels fill bottom-up: prime exponents of the chosen factors equal those of the required products.
        prods, _ = level_products(hw, t.gpus)
        caps = [c for c in hw.level_caps if c is not None]
        primes = _primes_upto(max(caps)) if caps else []
        for h, cap in enumerate(hw.level_caps):
            if cap is None:
                continue
            for p in primes:
                need = _vp(prods[:, h], p)
                lhs_vars, lhs_coef = [], []
                for g, tab in tables.items():
                    e = sum(_vp(fac[:, h], p) for fac in tab.factors)
                    nz = np.nonzero(e)[0]
                    lhs_vars += [self.y[g][k] for k in nz]
                    lhs_coef += [int(v) for v in e[nz]]
                nzx = np.nonzero(need)[0]
                m.add(cp_model.LinearExpr.weighted_sum(lhs_vars, lhs_coef)
                      == cp_model.LinearExpr.weighted_sum([self.x[i] for i in nzx], [int(v) for v in need[nzx]]))

        def expr(tuple_col, pair_cols: dict[str, list[str]]):
            vs, cs = [], []
            if tuple_col is not None:
                q = to_quanta(tuple_col)
                vs += self.x
                cs += [int(v) for v in q]
            for g, cols in pair_cols.items():
                tab = tables[g]
                q = to_quanta(sum(tab.cols[c] for c in cols)) if cols else None
                if q is None:
                    continue
                nz = np.nonzero(q)[0]
                vs += [self.y[g][k] for k in nz]
                cs += [int(v) for v in q[nz]]
            return cp_model.LinearExpr.weighted_sum(vs, cs)

        self.step_exprs = [expr(None if c is None else terms[c], cols) for c, cols in _step_columns(dp_overlap)]
        self.net_expr = expr(None, NET_COLUMNS)
        self.gpus_expr = cp_model.LinearExpr.weighted_sum(self.x, [int(v) for v in t.gpus])
        self.S = m.new_int_var(0, 2**60, "step_q")
        for e in self.step_exprs:
            m.add(self.S >= e)

    def hint_layout(self, layout: Layout) -> None:
        """Warm start from a layout the float model has priced (the incumbent)."""
        t = self.t
        match = np.nonzero((t.dp == layout.dp) & (t.tp_ff == layout.tp_ff) & (t.tp_model == layout.tp_model)
                           & (t.pp == layout.pp) & (t.interleave == layout.interleave) & (t.ep == layout.ep)
                           & (t.microbatches == layout.microbatches)
                           & (t.zero_bubble == (layout.schedule == "zb-h2")))[0]
        if len(match) != 1:
            return
        i = int(match[0])
        self.m.clear_hints()
        for k, v in enumerate(self.x):
            self.m.add_hint(v, k == i)
        for g, tab in self.tables.items():
            names = ["pp", "ep"] if g == "pp_ep" else [g]
            want = [np.array(layout.placement[n]) for n in names]
            hit = (tab.tup == i)
            for fac, w in zip(tab.factors, want):
                hit &= (fac == w[None, :]).all(axis=1)
            for k, v in enumerate(self.y[g]):
                self.m.add_hint(v, bool(hit[k]))

    def solve(self, objective, time_limit_s: float, workers: int, hint: cp_model.CpSolver | None = None):
        self.m.minimize(objective)
        if hint is not None:
            self.m.clear_hints()
            for v in self.x + [y for ys in self.y.values() for y in ys]:
                self.m.add_hint(v, hint.boolean_value(v))
        s = cp_model.CpSolver()
        s.parameters.num_workers = workers
        s.parameters.max_time_in_seconds = max(time_limit_s, 0.05)
        s.parameters.random_seed = 0
        status = s.solve(self.m)
        return s, status

    def decode(self, s: cp_model.CpSolver) -> Layout:
        i = next(k for k, v in enumerate(self.x) if s.boolean_value(v))
        placement = {}
        for g, tab in self.tables.items():
            k = next(k for k in np.nonzero(tab.tup == i)[0] if s.boolean_value(self.y[g][k]))
            if g == "pp_ep":
                placement["pp"], placement["ep"] = tab.factors[0][k], tab.factors[1][k]
            else:
                placement[g] = tab.factors[0][k]
        t = self.t
        return Layout(
            dp=int(t.dp[i]), tp_ff=int(t.tp_ff[i]), tp_model=int(t.tp_model[i]), pp=int(t.pp[i]),
            interleave=int(t.interleave[i]), ep=int(t.ep[i]), microbatches=int(t.microbatches[i]),
            schedule="zb-h2" if t.zero_bubble[i] else "1f1b",
            placement={d: tuple(int(v) for v in placement[d]) for d in DEGREES},
        )


def _pair_filter(hw, wl, index: PairIndex, ii, jj, shapes, work, comm, deadline_s, dp_overlap):
    """Drop (model-parallel row, N_DP) pairs that miss the deadline for every microbatch count and placement
    (tables.pair_step_lower_bound), or whose GPU count cannot fill the levels, before expanding them into tuples."""
    rows = index.mp[ii]
    dp = index.dps[jj]
    n = rows[:, 0].astype(np.float64) * rows[:, 1] * rows[:, 2] * rows[:, 5] * dp
    small = n < 2.0**62  # beyond this no cluster is meaningful and int64 products would overflow
    _, valid = level_products(hw, np.where(small, n, 1).astype(np.int64))
    valid &= small
    bound = pair_step_lower_bound(hw, wl, rows, dp, index.m_min[jj], index.m_max[jj], shapes, work, comm, dp_overlap)
    keep = valid & (wl.steps * bound <= deadline_s)
    return ii[keep], jj[keep]


def _filter(hw: Hardware, wl: Workload, t: Tuples, deadline_s: float | None, shapes, comm, dp_overlap: bool
            ) -> tuple[Tuples, dict]:
    """Exact rules (level filling, memory) and sound placement-free bounds against the deadline."""
    _, valid = level_products(hw, t.gpus)
    t = t.take(np.nonzero(valid)[0])
    if len(t) == 0:
        return t, {}
    terms = tuple_terms(hw, wl, t, shapes)
    terms["pipelined_mm"] = terms["matmul_s"] / (1.0 - terms["bubble_fraction"])
    terms["step_lb"] = step_lower_bound_free(hw, wl, t, terms, comm, dp_overlap)
    ok = terms["memory_bytes"] <= hw.gpu.hbm_bytes
    if deadline_s is not None:
        ok &= wl.steps * terms["step_lb"] <= deadline_s
    idx = np.nonzero(ok)[0]
    return t.take(idx), {k: v[idx] for k, v in terms.items()}


WINDOW_TUPLES = 300_000
"""Windows of GPU count hold about this many degree tuples (whole GPU-count groups; memory stays bounded)."""

PRICING_ROWS = 400_000
"""(tuple x placement) rows priced per batch; the clock is checked between batches."""


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


def _price_tuples(hw: Hardware, wl: Workload, t: Tuples, dp_overlap: bool, block_s, block_critical_s):
    """Every placement of every tuple priced by the float model (planner.cost.step.step_arrays, the function the
    enumerator uses). Returns (per-tuple best step or inf, per-tuple best placement, rows priced)."""
    best = np.full(len(t), np.inf)
    rows, pl, arr = price_placements(hw, wl, t, dp_overlap, block_s, block_critical_s)
    if len(rows) == 0:
        return best, {}, 0
    np.minimum.at(best, rows, arr["step_s"])
    order = np.lexsort((arr["step_s"], rows))  # per tuple, its cheapest placement first
    first = order[np.r_[True, rows[order][1:] != rows[order][:-1]]]
    return best, {int(rows[k]): pl[k] for k in first}, len(rows)


def _price_window(hw: Hardware, wl: Workload, t: Tuples, terms, deadline_s, dp_overlap, clock: _Clock):
    """Best-first exact pricing of a window's tuples; returns (survivor indices, incumbent, rows priced, cut).

    Deadline mode: tuples are priced in order of GPU count; once some tuple meets the deadline with N* GPUs, the
    rest of the N* group is priced in order of step bound until the bound exceeds the incumbent's step time, and
    nothing larger is needed (every smaller count was priced and missed the deadline). Fixed-cluster mode: tuples
    are priced in order of their placement-free step bound, stopping when the bound exceeds the incumbent's step
    time. No batch reaches past the first tuple that can no longer win. Survivors tie the incumbent's GPU count
    and come within the integer rounding of its step time; CP-SAT proves the optimum over them and all their
    placements.
    `cut` is the smallest GPU count (deadline mode) or step bound (fixed mode) not yet ruled out, if the clock ran
    out first; None when the window was settled.
    """
    lb = terms["step_lb"]
    gpus = t.gpus.astype(np.float64)
    order = np.lexsort((lb, gpus)) if deadline_s is not None else np.argsort(lb, kind="stable")
    priced = np.full(len(t), np.inf)
    best_pl: dict[int, np.ndarray] = {}
    batch = 16  # first batch; later ones are sized from the rows it produced
    incumbent, rows_priced, pos = None, 0, 0
    margin = 8 * QUANTUM_S  # survivors come within the model's integer rounding of the incumbent

    def can_win(idx: np.ndarray) -> np.ndarray:
        """Whether each tuple could still beat or tie the incumbent. In the pricing order this holds for a prefix:
        deadline mode sorts by GPU count, then bound; fixed mode by bound."""
        if incumbent is None:
            return np.ones(len(idx), dtype=bool)
        ok = lb[idx] <= incumbent[1] + margin
        return ok & (gpus[idx] <= incumbent[0]) if deadline_s is not None else ok

    while pos < len(order):
        if not can_win(order[pos:pos + 1])[0]:
            break
        if clock.out:
            cut = gpus[order[pos]] if deadline_s is not None else lb[order[pos]]
            return None, incumbent, rows_priced, float(cut)
        idx = order[pos:pos + batch]
        win = can_win(idx)
        if not win.all():
            idx = idx[:int(np.argmin(win))]  # only the prefix that can still win
        pos += len(idx)
        best, pls, n_rows = _price_tuples(hw, wl, t.take(idx), dp_overlap, terms["block_s"][idx],
                                          terms["block_critical_s"][idx])
        rows_priced += n_rows
        # Size the next batch from what this one cost (placements per tuple vary from a few to thousands), growing
        # at most 4x so that a better incumbent can stop the search early.
        batch = int(min(max(16, PRICING_ROWS * len(idx) // max(n_rows, 1)), 4 * len(idx), 50_000))
        priced[idx] = best
        for k, v in pls.items():
            best_pl[int(idx[k])] = v
        ok = np.isfinite(best) if deadline_s is None else wl.steps * best <= deadline_s
        if ok.any():
            cand = idx[ok]
            k = cand[np.lexsort((priced[cand], gpus[cand] if deadline_s is not None else np.zeros(len(cand))))[0]]
            key = (gpus[k], priced[k]) if deadline_s is not None else (0.0, priced[k])
            if incumbent is None or key < ((incumbent[0], incumbent[1]) if deadline_s is not None
                                           else (0.0, incumbent[1])):
                incumbent = (float(gpus[k]), float(priced[k]), layout_from(t, int(k), best_pl[int(k)]))
    if incumbent is None:
        return np.zeros(0, dtype=np.int64), None, rows_priced, None
    keep = priced <= incumbent[1] + margin
    if deadline_s is not None:
        keep &= (gpus == incumbent[0]) & (wl.steps * priced <= deadline_s)
    return np.nonzero(keep)[0], incumbent, rows_priced, None


_STATUS = {cp_model.OPTIMAL: "OPTIMAL", cp_model.FEASIBLE: "FEASIBLE", cp_model.INFEASIBLE: "INFEASIBLE",
           cp_model.MODEL_INVALID: "MODEL_INVALID", cp_model.UNKNOWN: "UNKNOWN"}


def _status_name(status) -> str:
    return _STATUS.get(status, str(status))


def solve_cpsat(hw: Hardware, wl: Workload, options: SearchOptions, deadline_s: float | None,
                time_limit_s: float | None = 60.0, workers: int = 2) -> SearchResult:
    clock = _Clock(float("inf") if time_limit_s is None else time_limit_s)
    space = build_space(hw, wl, options)
    size = space_size(space)
    mp = model_parallel_rows(space)
    if len(mp) == 0 or len(space.dp_m) == 0:
        return SearchResult("cpsat", "infeasible", None, clock.elapsed, size)
    n_max = float((mp[:, 0].astype(float) * mp[:, 1] * mp[:, 2] * mp[:, 5]).max()) * float(space.dp_m[:, 0].max())
    if hw.max_gpus is not None:
        n_max = min(n_max, hw.max_gpus)
    shapes = ShapeTable.for_space(hw, wl, space)
    comm = CommTable(hw, np.concatenate([space.tp_ff, space.tp_model, space.ep, np.unique(space.dp_m[:, 0])]))
    evaluated, statuses = 0, []
    if options.gpus is not None:
        lo, n_max = float(options.gpus), float(options.gpus)
    else:
        lo = max(1.0, math.floor(wl.compute_flop / (hw.gpu.sustained_flops * deadline_s)))
    index = PairIndex.build(space, mp)
    dps = index.dps
    work = shapes.least_work(space.dp_m) if deadline_s is not None else None
    slice_pairs = max(1, WINDOW_TUPLES // max(1, int(index.m_counts.mean())))
    for ii, jj, n_lo, n_hi in windows(index, lo, n_max, WINDOW_TUPLES):
        if clock.out:
            return _timed_out(clock, size, evaluated, statuses, None, n_lo, deadline_s)
        if deadline_s is not None:
            ii, jj = _pair_filter(hw, wl, index, ii, jj, shapes, work, comm, deadline_s, options.dp_overlap)
            if len(ii) == 0:
                continue
        # Generate and filter the window in slices so that memory stays bounded however many tuples it holds.
        kept_t, kept_terms = [], []
        for s0 in range(0, len(ii), slice_pairs):
            if clock.out:
                return _timed_out(clock, size, evaluated, statuses, None, n_lo, deadline_s)
            t = tuples_from_pairs(space, mp, ii[s0:s0 + slice_pairs], jj[s0:s0 + slice_pairs], dps)
            t, terms = _filter(hw, wl, t, deadline_s, shapes, comm, options.dp_overlap)
            if len(t):
                kept_t.append(t)
                kept_terms.append(terms)
        if not kept_t:
            continue
        t = Tuples.concat(kept_t)
        terms = {k: np.concatenate([d[k] for d in kept_terms]) for k in kept_terms[0]}
        keep, incumbent, n_rows, cut = _price_window(hw, wl, t, terms, deadline_s, options.dp_overlap, clock)
        evaluated += n_rows
        if cut is not None:
            return _timed_out(clock, size, evaluated, statuses, incumbent, cut, deadline_s)
        if incumbent is None:
            continue  # every tuple in this window was priced and none meets the deadline (or fits)
        if clock.out:
            # Pricing settled the window, but no time is left for CP-SAT's proof: report the priced incumbent
            # without claiming optimality.
            return SearchResult("cpsat", "feasible", incumbent[2], clock.elapsed, size, evaluated, gap=None,
                                stage="proof", cpsat_status=" ".join(statuses),
                                notes=["time limit reached after pricing; the CP-SAT proof did not run"])
        t = t.take(keep)
        terms = {k: v[keep] for k, v in terms.items()}
        tables = build_pair_tables(hw, wl, t, terms)
        evaluated += sum(len(tab.tup) for tab in tables.values())
        return _prove(hw, wl, t, terms, tables, incumbent, deadline_s, options, clock, size, evaluated, statuses,
                      workers, (n_lo, n_hi))
    if clock.out:
        return _timed_out(clock, size, evaluated, statuses, None, n_max, deadline_s)
    return SearchResult("cpsat", "infeasible", None, clock.elapsed, size, evaluated, cpsat_status=" ".join(statuses))


def _timed_out(clock: _Clock, size: int, evaluated: int, statuses: list[str], incumbent, cut: float,
               deadline_s) -> SearchResult:
    """The clock ran out: return the incumbent (if any) with the proven bound and the gap."""
    note = f"time limit {clock.limit:g} s reached before the search settled"
    if incumbent is None:
        return SearchResult("cpsat", "unknown", None, clock.elapsed, size, evaluated, gap=None,
                            stage="gpus" if deadline_s is not None else "step", cpsat_status=" ".join(statuses),
                            notes=[note + f"; no layout found yet (all GPU counts below {cut:g} ruled out)"
                                   if deadline_s is not None else note])
    value = incumbent[0] if deadline_s is not None else incumbent[1]
    bound = min(cut, value)
    return SearchResult("cpsat", "feasible", incumbent[2], clock.elapsed, size, evaluated,
                        gap=(value - bound) / value if value else 0.0, bound=bound,
                        stage="gpus" if deadline_s is not None else "step", cpsat_status=" ".join(statuses),
                        notes=[note])


def _prove(hw, wl, t, terms, tables, incumbent, deadline_s, options, clock, size, evaluated, statuses, workers,
           window) -> SearchResult:
    """CP-SAT over the survivors: (1) fewest GPUs, (2) least step time, (3) least network time."""
    model = _Model(hw, wl, t, terms, tables, options.dp_overlap)
    model.hint_layout(incumbent[2])

    def result(status, solver, **kw):
        layout = model.decode(solver) if solver is not None else incumbent[2]
        return SearchResult("cpsat", status, layout, clock.elapsed, size, evaluated,
                            cpsat_status=" ".join(statuses), **kw)

    hint = None
    if deadline_s is not None:
        model.m.add(model.S <= int(math.floor(deadline_s / wl.steps / QUANTUM_S)))
        s1, st1 = model.solve(model.gpus_expr, clock.remaining, workers)
        statuses.append(f"gpus:{_status_name(st1)}")
        if st1 == cp_model.INFEASIBLE:
            # Only a layout within the integer rounding of the deadline can do this; report the priced incumbent.
            return result("feasible", None, gap=None, stage="gpus",
                          notes=["the incumbent meets the deadline only within the model's nanosecond rounding"])
        if st1 != cp_model.OPTIMAL:
            return result("feasible", s1 if st1 == cp_model.FEASIBLE else None, gap=None, stage="gpus",
                          notes=[f"time limit reached proving the GPU count in window {window[0]:g}-{window[1]:g}"])
        model.m.add(model.gpus_expr == int(round(s1.objective_value)))
        hint = s1
    s2, st2 = model.solve(model.S, clock.remaining, workers, hint=hint)
    statuses.append(f"step:{_status_name(st2)}")
    if st2 != cp_model.OPTIMAL:
        solver = s2 if st2 == cp_model.FEASIBLE else hint
        gap = None
        if st2 == cp_model.FEASIBLE:
            gap = (s2.objective_value - s2.best_objective_bound) / max(s2.objective_value, 1)
        return result("feasible", solver, gap=gap, stage="step",
                      bound=from_quanta(s2.best_objective_bound) if st2 == cp_model.FEASIBLE else None)
    model.m.add(model.S == int(round(s2.objective_value)))
    s3, st3 = model.solve(model.net_expr, clock.remaining, workers, hint=s2)
    statuses.append(f"network:{_status_name(st3)}")
    if st3 == cp_model.OPTIMAL:
        return result("optimal", s3)
    # The tie-break stage was cut short: GPUs and step time are proven, the network tie-break is not.
    return result("feasible", s3 if st3 == cp_model.FEASIBLE else s2, gap=None, stage="network",
                  notes=["GPU count and step time proven optimal; network-time tie-break not proven"])
