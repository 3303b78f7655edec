"""CP-SAT search: the exact optimum of the float cost model over the space of planner.solve.space.

The encoding (docs/model.md, "The CP-SAT model", says the same at more length):

1. Data. Degree tuples (N_DP, N_TP,ff, N_TP,model, N_PP, i, N_EP, m, schedule) are generated in windows of GPU
   count. Everything that does not depend on placement (GEMM time, bubble, critical-path GEMMs, memory, N) is
   tabulated per tuple with planner.cost; every placement-dependent term is tabulated per *pair* (tuple, one
   degree's factor vector): DP all-reduce time and latency; the TP all-reduces over the model group (depends on
   N_TP,model's factors) and over the ff group (N_TP,ff's); pipeline/expert point-to-point time and latency
   (the joint factor vectors of N_PP and N_EP). That separation is exact: Eq. 21 and the floor are maxima of
   sums in which each placement-dependent term involves one degree's placement and tuple constants only.
2. Model. One boolean per tuple (exactly one is chosen) and one per (tuple, factor vector) pair, linked so the
   chosen tuple has exactly one vector per degree. Levels fill bottom-up: for every bounded level and every
   prime, the exponents of the chosen factors add up to those of the level's required product (integer
   equalities, so no rounding). Times are integers in QUANTUM_S, each table entry rounded up, so an integer
   time is never below the float time it stands for and exceeds it by under one quantum per summed term.
   The step time S is bounded below by the three linear expressions whose maximum is Eq. 21 / the floor.
3. Solve, lexicographically: (1) fewest GPUs subject to S <= deadline / steps (deadline mode); (2) with that
   GPU count fixed, least S; (3) with S fixed, least network time. Windows of GPU count grow geometrically
   from the compute lower bound N >= T / (sustained FLOP/s * deadline); the first window with a feasible
   layout contains the optimum, since every smaller count was in an earlier window and was infeasible.
4. Read the solution back into a Layout; the caller re-prices it with the float model.

Tuples are dropped before the model only by exact rules (memory, level filling) and by lower bounds that
cannot exclude a feasible layout (placement-free step-time bounds against the deadline).
"""

from __future__ import annotations

import math
import time

import numpy as np
from ortools.sat.python import cp_model

from planner.cost import network as net
from planner.cost.step import nanobatch_tokens
from planner.schema import DEGREES, Hardware, Layout, Workload
from planner.solve.result import SearchResult
from planner.solve.space import (
    SearchOptions, Space, Tuples, build_space, factor_options, layout_from, level_products, model_parallel_rows,
    space_size,
)
from planner.solve.tables import tuple_terms

QUANTUM_S = 1e-9
"""Integer time unit of the CP-SAT model: one nanosecond."""

WINDOW_RATIO = 1.25
"""Each window of GPU counts spans a factor of 1.25."""


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


def tuples_in_window(space: Space, mp: np.ndarray, lo: float, hi: float) -> Tuples:
    """Degree tuples with lo <= N <= hi (vectorised; mp = model_parallel_rows)."""
    n_mp = mp[:, 0] * mp[:, 1] * mp[:, 2] * mp[:, 5]
    dps = np.unique(space.dp_m[:, 0])
    n = n_mp[:, None] * dps[None, :]
    ii, jj = np.nonzero((n >= lo) & (n <= hi))
    if len(ii) == 0:
        return Tuples(*[np.zeros(0, dtype=np.int64)] * 7, zero_bubble=np.zeros(0, dtype=bool))
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


def step_lower_bound(n: int, terms, tables, dp_overlap: bool) -> np.ndarray:
    """Per tuple, a lower bound of its best step time: each group's cheapest factor vector taken independently
    (the real choice must also fill the levels jointly, so it can only be dearer)."""
    best = np.zeros(n)
    for tuple_col, cols in _step_columns(dp_overlap):
        val = np.zeros(n) if tuple_col is None else terms[tuple_col].copy()
        for g, cs in cols.items():
            tab = tables[g]
            mins = np.full(n, np.inf)
            np.minimum.at(mins, tab.tup, sum(tab.cols[c] for c in cs))
            val += mins
        best = np.maximum(best, val)
    return best


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


def _filter(hw: Hardware, wl: Workload, t: Tuples, deadline_s: float | None) -> tuple[Tuples, dict]:
    """Exact rules (level filling, memory) and sound placement-free bounds against the deadline."""
    _, valid = level_products(hw, t.gpus)
    t = t.take(np.nonzero(valid)[0])
    if len(t) == 0:
        return t, {}
    terms = tuple_terms(hw, wl, t)
    terms["pipelined_mm"] = terms["matmul_s"] / (1.0 - terms["bubble_fraction"])
    ok = terms["memory_bytes"] <= hw.gpu.hbm_bytes
    if deadline_s is not None:
        # Network terms are >= 0, so max(pipelined GEMMs, critical-path GEMMs) bounds the step from below.
        lb = np.maximum(terms["pipelined_mm"], terms["critical_mm_s"])
        ok &= wl.steps * lb <= deadline_s
    idx = np.nonzero(ok)[0]
    return t.take(idx), {k: v[idx] for k, v in terms.items()}


INCUMBENT_CANDIDATES = 256
"""Tuples priced in full (every placement) to find an incumbent before the model is built."""


EXACT_PRICING_ROWS = 4_000_000
"""Above this many (tuple x placement) rows in a window, pruning uses bounds only (no exact per-tuple pricing)."""


def _price_tuples(hw: Hardware, wl: Workload, t: Tuples, dp_overlap: bool, block_s, block_critical_s):
    """Every placement of every tuple priced by the float model; returns per-tuple best step (inf if none)."""
    from planner.cost.step import LayoutBatch, step_arrays
    from planner.solve.exhaustive import expand_placements

    best = np.full(len(t), np.inf)
    rows, pl = expand_placements(hw, t)
    if len(rows) == 0:
        return best, rows, pl, None
    arr = step_arrays(hw, wl, LayoutBatch(
        dp=t.dp[rows], tp_ff=t.tp_ff[rows], tp_model=t.tp_model[rows], pp=t.pp[rows],
        interleave=t.interleave[rows], ep=t.ep[rows], microbatches=t.microbatches[rows],
        zero_bubble=t.zero_bubble[rows], placement={d: pl[:, k, :] for k, d in enumerate(DEGREES)}),
        dp_overlap=dp_overlap, block_s=block_s[rows], block_critical_s=block_critical_s[rows])
    np.minimum.at(best, rows, arr["step_s"])
    order = np.lexsort((arr["step_s"], rows))  # per tuple, its cheapest placement first
    first = order[np.r_[True, rows[order][1:] != rows[order][:-1]]]
    best_pl = {int(rows[k]): pl[k] for k in first}
    return best, rows, best_pl, arr


def _prune(hw: Hardware, wl: Workload, t: Tuples, terms, tables, deadline_s, dp_overlap):
    """Drop tuples that provably cannot be optimal (sound: nothing dropped could beat what is kept).

    1. lb = step_lower_bound never exceeds a tuple's best step time: in deadline mode, tuples whose lb misses
       the deadline go.
    2. When the window is small enough, each remaining tuple's placements are priced with the float model
       (the same step_arrays the enumerator uses): tuples none of whose placements meets the deadline go, and
       the best priced layout is an incumbent: tuples with more GPUs (deadline mode) or a step-time bound above
       its step time (fixed-cluster mode) go. Otherwise an incumbent is sought among the most promising tuples.
    CP-SAT then proves the lexicographic optimum over the survivors and all their placements.
    """
    lb = step_lower_bound(len(t), terms, tables, dp_overlap)
    keep = np.ones(len(t), dtype=bool) if deadline_s is None else wl.steps * lb <= deadline_s
    cand = np.nonzero(keep)[0]
    per_tuple_placements = max(1, sum(len(tab.tup) for tab in tables.values()) // max(len(t), 1))
    exact = len(cand) * per_tuple_placements * 4 <= EXACT_PRICING_ROWS
    if not exact:
        order = np.lexsort((lb[cand], t.gpus[cand] if deadline_s is not None else np.zeros(len(cand))))
        cand = cand[order][:INCUMBENT_CANDIDATES]
    incumbent = None
    if len(cand):
        sub = t.take(cand)
        best, _, best_pl, _ = _price_tuples(hw, wl, sub, dp_overlap, terms["block_s"][cand],
                                            terms["block_critical_s"][cand])
        ok = np.isfinite(best) if deadline_s is None else wl.steps * best <= deadline_s
        if exact:
            keep[cand[~ok]] = False
        if ok.any():
            idx = np.nonzero(ok)[0]
            k = idx[np.lexsort((best[idx], sub.gpus[idx] if deadline_s is not None else np.zeros(len(idx))))[0]]
            incumbent = (float(sub.gpus[k]), float(best[k]), layout_from(sub, int(k), best_pl[int(k)]))
    if incumbent is not None:
        if deadline_s is not None:
            keep &= t.gpus <= incumbent[0]
        else:
            keep &= lb <= incumbent[1] * (1 + 1e-9)
        if exact:
            # Every candidate was priced exactly: only tuples that tie the incumbent's GPU count and come within
            # the integer rounding of its step time can still win (stages 2 and 3).
            priced = np.full(len(t), np.inf)
            priced[cand] = best
            slack = 8 * QUANTUM_S
            keep &= priced <= incumbent[1] + slack
            if deadline_s is not None:
                keep &= t.gpus == incumbent[0]
    idx = np.nonzero(keep)[0]
    if len(idx) == len(t) or len(idx) == 0:
        return t.take(idx), {k: v[idx] for k, v in terms.items()}, tables, incumbent
    t = t.take(idx)
    terms = {k: v[idx] for k, v in terms.items()}
    return t, terms, build_pair_tables(hw, wl, t, terms), incumbent


_STATUS = {cp_model.OPTIMAL: "OPTIMAL", cp_model.FEASIBLE: "FEASIBLE", cp_model.INFEASIBLE: "INFEASIBLE",
           cp_model.MODEL_INVALID: "MODEL_INVALID", cp_model.UNKNOWN: "UNKNOWN"}


def _status_name(status) -> str:
    return _STATUS.get(status, str(status))


def solve_cpsat(hw: Hardware, wl: Workload, options: SearchOptions, deadline_s: float | None,
                time_limit_s: float | None = 60.0, workers: int = 2) -> SearchResult:
    t0 = time.perf_counter()
    limit = float("inf") if time_limit_s is None else time_limit_s
    space = build_space(hw, wl, options)
    size = space_size(space)
    mp = model_parallel_rows(space)
    if len(mp) == 0 or len(space.dp_m) == 0:
        return SearchResult("cpsat", "infeasible", None, time.perf_counter() - t0, size)
    n_max = float((mp[:, 0].astype(float) * mp[:, 1] * mp[:, 2] * mp[:, 5]).max()) * float(space.dp_m[:, 0].max())
    if hw.max_gpus is not None:
        n_max = min(n_max, hw.max_gpus)
    if options.gpus is not None:
        windows = [(options.gpus, options.gpus)]
    else:
        lo = max(1.0, math.floor(wl.compute_flop / (hw.gpu.sustained_flops * deadline_s)))
        windows = []
        while lo <= n_max:
            hi = math.floor(lo * WINDOW_RATIO)
            windows.append((lo, hi))
            lo = hi + 1
    evaluated, statuses = 0, []
    for lo, hi in windows:
        elapsed = time.perf_counter() - t0
        if elapsed > limit:
            return SearchResult("cpsat", "unknown", None, elapsed, size, evaluated, gap=None,
                                notes=[f"time limit reached while searching GPU counts from {lo:g}"],
                                cpsat_status=" ".join(statuses))
        t = tuples_in_window(space, mp, lo, hi)
        if len(t) == 0:
            continue
        t, terms = _filter(hw, wl, t, deadline_s)
        if len(t) == 0:
            continue
        tables = build_pair_tables(hw, wl, t, terms)
        t, terms, tables, incumbent = _prune(hw, wl, t, terms, tables, deadline_s, options.dp_overlap)
        if len(t) == 0:
            continue
        evaluated += sum(len(tab.tup) for tab in tables.values())
        model = _Model(hw, wl, t, terms, tables, options.dp_overlap)
        if incumbent is not None:
            model.hint_layout(incumbent[2])
        remaining = limit - (time.perf_counter() - t0)
        if deadline_s is not None:
            r_q = int(math.floor(deadline_s / wl.steps / QUANTUM_S))
            model.m.add(model.S <= r_q)
            s1, st1 = model.solve(model.gpus_expr, remaining, workers)
            statuses.append(f"gpus:{_status_name(st1)}")
            if st1 == cp_model.INFEASIBLE:
                continue
            if st1 not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                return SearchResult("cpsat", "unknown", None, time.perf_counter() - t0, size, evaluated, gap=None,
                                    stage="gpus", cpsat_status=" ".join(statuses),
                                    notes=[f"time limit reached in GPU window {lo:g}-{hi:g}"])
            n_best = int(round(s1.objective_value))
            if st1 == cp_model.FEASIBLE:
                layout = model.decode(s1)
                gap = (s1.objective_value - s1.best_objective_bound) / max(s1.objective_value, 1)
                return SearchResult("cpsat", "feasible", layout, time.perf_counter() - t0, size, evaluated,
                                    gap=gap, bound=s1.best_objective_bound, stage="gpus",
                                    cpsat_status=" ".join(statuses))
            model.m.add(model.gpus_expr == n_best)
            hint = s1
        else:
            hint = None
        remaining = limit - (time.perf_counter() - t0)
        s2, st2 = model.solve(model.S, remaining, workers, hint=hint)
        statuses.append(f"step:{_status_name(st2)}")
        if st2 == cp_model.INFEASIBLE:
            continue
        if st2 not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            layout = model.decode(hint) if hint is not None else None
            return SearchResult("cpsat", "feasible" if layout else "unknown", layout, time.perf_counter() - t0,
                                size, evaluated, gap=None, stage="step", cpsat_status=" ".join(statuses))
        if st2 == cp_model.FEASIBLE:
            gap = (s2.objective_value - s2.best_objective_bound) / max(s2.objective_value, 1)
            return SearchResult("cpsat", "feasible", model.decode(s2), time.perf_counter() - t0, size, evaluated,
                                gap=gap, bound=from_quanta(s2.best_objective_bound), stage="step",
                                cpsat_status=" ".join(statuses))
        model.m.add(model.S == int(round(s2.objective_value)))
        remaining = limit - (time.perf_counter() - t0)
        s3, st3 = model.solve(model.net_expr, remaining, workers, hint=s2)
        statuses.append(f"network:{_status_name(st3)}")
        if st3 == cp_model.OPTIMAL:
            return SearchResult("cpsat", "optimal", model.decode(s3), time.perf_counter() - t0, size, evaluated,
                                cpsat_status=" ".join(statuses))
        # The tie-break stage was cut short: GPUs and step time are proven, the network tie-break is not.
        best = s3 if st3 == cp_model.FEASIBLE else s2
        return SearchResult("cpsat", "feasible", model.decode(best), time.perf_counter() - t0, size, evaluated,
                            gap=None, stage="network", cpsat_status=" ".join(statuses),
                            notes=["GPU count and step time proven optimal; network-time tie-break not proven"])
    return SearchResult("cpsat", "infeasible", None, time.perf_counter() - t0, size, evaluated,
                        cpsat_status=" ".join(statuses))
