"""Presolve: tables of placement-free quantities and sound lower bounds, all read off planner.cost.terms.

Nothing here chooses a layout. It tabulates what the CP-SAT model needs (GEMM times per shape) and removes degree
tuples that a hard rule or a sound bound excludes on its own:

* the *bound reading* of the step formula: every group term at its least over that group's factor vectors, each
  group chosen independently (ignoring that the levels must fill jointly), can only lower every branch, because
  every coefficient and scale is non-negative (`step_lower_bound`);
* the same per (model-parallel row, N_DP) pair before microbatch counts are expanded, with every m-dependent
  coefficient and term at its least over the m the pair allows (`pair_step_lower_bound`).

tests/test_bounds.py checks both against full pricing of every placement of small spaces.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np

from planner import recent
from planner.cost import terms as T
from planner.cost.memory import layout_memory
from planner.cost.pipeline import microbatches_in_flight
from planner.cost.rows import unique_rows
from planner.parallel.dimensions import GROUPS
from planner.parallel.space import Space, factor_options
from planner.schema import Hardware, Workload


class ShapeTable:
    """planner.cost.terms.shape_times over every (N_TP,ff, N_TP,model, v, N_EP, sp) of a space, v = N_DP m N_CP (the
    tokens a GPU sees per microbatch follow from v and N_EP), computed once per search. The toy block depends on
    neither N_EP nor sp: one column each.

    Lookups are by binary search in the sorted candidate values, so pricing millions of tuples costs no sorting.
    """

    def __init__(self, hw: Hardware, wl: Workload, tp_ff: np.ndarray, tp_model: np.ndarray, u: np.ndarray,
                 ep: np.ndarray | None = None, sp: np.ndarray | None = None):
        self.wl = wl
        self.tp_ff, self.tp_model, self.u = np.sort(tp_ff), np.sort(tp_model), np.sort(u)
        tr = wl.transformer is not None
        self.ep = np.sort(ep) if (tr and ep is not None) else np.array([1], dtype=np.int64)
        self.sp = np.sort(sp) if (tr and sp is not None) else np.array([0], dtype=np.int64)
        if not tr:
            # The toy block reads N_TP,ff, N_TP,model and the nanobatch only: given as broadcasting axes, each weight
            # shard is tiled once for every nanobatch (the same numbers as the full grid, element by element).
            grid = (len(self.tp_ff), len(self.tp_model), len(self.u))
            axes = {"tp_ff": self.tp_ff[:, None, None], "tp_model": self.tp_model[None, :, None],
                    "dp": self.u[None, None, :], "microbatches": np.ones((1, 1, 1), dtype=np.int64)}
            toy = T.shape_times(hw, wl, axes, (wl.batch_tokens // wl.experts) / axes["dp"].astype(np.float64))
            self.times = {k: np.broadcast_to(v, grid).ravel() for k, v in toy.items()}
            return
        g = np.meshgrid(self.tp_ff, self.tp_model, self.u, self.ep, self.sp, indexing="ij")
        n = g[2].size
        cols = {"tp_ff": g[0].ravel(), "tp_model": g[1].ravel(), "dp": g[2].ravel(),
                "microbatches": np.ones(n, dtype=np.int64), "ep": g[3].ravel(), "cp": np.ones(n, dtype=np.int64),
                "sp": g[4].ravel()}
        self.times = T.shape_times(hw, wl, cols)

    @classmethod
    def for_space(cls, hw: Hardware, wl: Workload, space: Space) -> ShapeTable:
        """Every shape the space can produce: its N_TP,ff, N_TP,model, N_EP and sp candidates and every N_DP m N_CP
        product."""
        u = np.unique(space.dp_m["dp"] * space.dp_m["microbatches"])
        v = np.unique(np.outer(u, space.values["cp"]).ravel())
        return cls(hw, wl, space.values["tp_ff"], space.values["tp_model"], v, space.values["ep"],
                   space.values["sp"])

    def least_work(self, space: Space) -> LeastWork:
        return LeastWork(self, space.dp_m, space.values["cp"])

    def lookup(self, cols: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.lookup_arrays(cols["tp_ff"], cols["tp_model"], cols["dp"] * cols["microbatches"] * cols["cp"],
                                  cols["ep"], cols["sp"])

    def _axis(self, values: np.ndarray, x) -> np.ndarray:
        return np.searchsorted(values, x) if len(values) > 1 else np.zeros(np.shape(x), dtype=np.int64)

    def flat_index(self, tp_ff, tp_model, u, ep, sp) -> np.ndarray:
        i = np.searchsorted(self.tp_ff, tp_ff)
        j = np.searchsorted(self.tp_model, tp_model)
        k = np.searchsorted(self.u, u)
        e = self._axis(self.ep, ep)
        q = self._axis(self.sp, sp)
        return (((i * len(self.tp_model) + j) * len(self.u) + k) * len(self.ep) + e) * len(self.sp) + q

    def lookup_arrays(self, tp_ff, tp_model, u, ep, sp) -> dict[str, np.ndarray]:
        flat = self.flat_index(tp_ff, tp_model, u, ep, sp)
        return {k: v[flat] for k, v in self.times.items()}

    def per_microbatch_total(self) -> np.ndarray:
        """Each shape's GEMM work per microbatch summed over all pipeline devices: toy, one expert's block (the
        caller scales by (L / N_PP)(E / N_EP)); transformer, L layers plus the embedding and the LM head (the
        busiest device does at least 1 / N_PP of it; recomputation only adds to it)."""
        if self.wl.transformer is None:
            return self.times["block_s"]
        return self.wl.layers * self.times["block_s"] + self.times["embed_s"] + self.times["head_s"]


class LeastWork:
    """min over m of m * (per-microbatch work at v = N_DP m N_CP), per (N_TP,ff, N_TP,model, N_DP, N_EP, N_CP, sp)
    (ShapeTable.per_microbatch_total).

    A toy tuple's pipelined GEMM time is stretch * m (L / N_PP)(E / N_EP) block_s with stretch >= 1, so (L / N_PP)
    (E / N_EP) times this table bounds it from below for every microbatch count the batch allows; a transformer's
    is stretch * m * (busiest device) >= m * total / N_PP.
    """

    def __init__(self, shapes: ShapeTable, dp_m: Mapping[str, np.ndarray], cps: np.ndarray):
        dp, ms_all = dp_m["dp"], dp_m["microbatches"]
        self.dps = np.unique(dp)
        self.cps = np.sort(cps)
        n_f, n_m, n_u, n_e, n_s = (len(shapes.tp_ff), len(shapes.tp_model), len(shapes.u), len(shapes.ep),
                                   len(shapes.sp))
        work = shapes.per_microbatch_total().reshape(n_f, n_m, n_u, n_e, n_s)
        self.table = np.empty((n_f, n_m, len(self.dps), n_e, len(self.cps), n_s))
        for j, d in enumerate(self.dps):
            ms = ms_all[dp == d]
            for c, cp in enumerate(self.cps):
                k = np.searchsorted(shapes.u, d * ms * cp)
                self.table[:, :, j, :, c, :] = (work[:, :, k, :, :]
                                                * ms.astype(np.float64)[None, None, :, None, None]).min(axis=2)
        self.shapes = shapes

    def lookup(self, tp_ff, tp_model, dp, ep, cp, sp) -> np.ndarray:
        sh = self.shapes
        return self.table[np.searchsorted(sh.tp_ff, tp_ff), np.searchsorted(sh.tp_model, tp_model),
                          np.searchsorted(self.dps, dp), sh._axis(sh.ep, ep), np.searchsorted(self.cps, cp),
                          sh._axis(sh.sp, sp)]


def group_factor_rows(hw: Hardware, group: str, values: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Every combination of factor vectors of one placement group's degrees (each within the level capacities)."""
    degrees = GROUPS[group]
    opts = [factor_options(hw, int(values[d])) for d in degrees]
    idx = list(itertools.product(*[range(len(o)) for o in opts]))
    H = len(hw.levels)
    if not idx:
        return {d: np.zeros((0, H), dtype=np.int64) for d in degrees}
    ix = np.array(idx, dtype=np.int64)
    return {d: opts[k][ix[:, k]] for k, d in enumerate(degrees)}


def feature_key(hw: Hardware, wl: Workload) -> tuple:
    """Everything a group term's *feature* reads (planner.cost.terms: the levels' collective bandwidths and latencies,
    the ring step latencies, the word size, the level capacities the factor vectors are drawn within, and the
    profile switches that pick a feature: `zero_flat`, `moe_dispatch_dedup`), with the workload. Two searches with
    the same key have the same least feature for every term name and key (a term's scale, which reads overlaps and
    imbalance, is not cached)."""
    prof = hw.profile
    return (wl, repr(hw.levels), tuple(T._bw(hw)), tuple(T.level_latencies(hw)),
            tuple(prof.per_level(prof.ring_step_latency_s, len(hw.levels))), hw.gpu.word_bytes, prof.zero_flat,
            prof.moe_dispatch_dedup, tuple(hw.level_caps))


_FEATURES: dict[tuple, dict[str, dict[bytes, float]]] = {}
"""Least features of recent searches by `feature_key` (each key's values as int64 bytes): re-plans in one process
that move an input no feature reads (a GEMM rate, an overlap share, a memory or failure input) share them (`plan
--sensitivity`, `--confidence`)."""
FEATURE_ENTRIES = 32
"""Stores kept: the plan's and one for each network input a sensitivity moves (each store a few thousand floats)."""


class LeastFeatures:
    """Each group term's feature at its least over the group's factor vectors, per value of the columns it reads
    (the group's degrees and the term's extra keys); computed on demand and cached for one search."""

    def __init__(self, hw: Hardware, wl: Workload):
        self.hw, self.wl = hw, wl
        self.terms = T.group_terms(wl, hw.profile)
        key = feature_key(hw, wl)
        shared = recent.recall(_FEATURES, key)
        if shared is None:
            shared = recent.keep(_FEATURES, key, {}, FEATURE_ENTRIES)
        for t in self.terms:
            shared.setdefault(t.name, {})
        self.cache: dict[str, dict[bytes, float]] = shared

    def _fill(self, term: T.GroupTerm, keys: tuple[str, ...], missing: np.ndarray) -> np.ndarray:
        """The least feature of each row of `missing` (one row per key: its values of `keys`), kept in the cache."""
        parts_cols: list[dict[str, np.ndarray]] = []
        parts_fac: list[dict[str, np.ndarray]] = []
        owners = []
        for j, key in enumerate(missing):
            values = dict(zip(keys, key.tolist()))
            fac = group_factor_rows(self.hw, term.group, values)
            n = len(next(iter(fac.values())))
            parts_fac.append(fac)
            parts_cols.append({k: np.full(n, v, dtype=np.int64) for k, v in values.items()})
            owners.append(np.full(n, j))
        own = np.concatenate(owners)
        cols = {k: np.concatenate([p[k] for p in parts_cols]) for k in keys}
        fac = {d: np.concatenate([p[d] for p in parts_fac]) for d in GROUPS[term.group]}
        best = np.full(len(missing), math.inf)
        if len(own):
            np.minimum.at(best, own, term.feature(self.hw, self.wl, cols, fac))
        cache = self.cache[term.name]
        for key, v in zip(missing, best):
            cache[key.tobytes()] = float(v)
        return best

    def least(self, term: T.GroupTerm, cols: Mapping[str, np.ndarray],
              seen: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] | None = None) -> np.ndarray:
        keys = GROUPS[term.group] + term.keys
        if seen is not None and keys in seen:
            uniq, inv = seen[keys]
        else:
            uniq, inv = unique_rows([np.asarray(cols[k], dtype=np.int64) for k in keys])
            uniq = np.ascontiguousarray(uniq, dtype=np.int64)
            if seen is not None:
                seen[keys] = (uniq, inv)
        cache = self.cache[term.name]
        got = [cache.get(r.tobytes()) for r in uniq]
        missing = [j for j, v in enumerate(got) if v is None]
        if missing:
            for j, v in zip(missing, self._fill(term, keys, uniq[missing])):
                got[j] = float(v)
        return np.array(got, dtype=np.float64)[inv]

    def group_values(self, cols: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every group term at its least over the placements (scale x least feature)."""
        out = {}
        seen: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}
        for t in self.terms:
            scale = t.scale(self.hw, self.wl, cols)
            out[t.name] = np.where(scale == 0, 0.0, scale * self.least(t, cols, seen))
        return out


def tuple_terms(hw: Hardware, wl: Workload, t: Mapping[str, np.ndarray], shapes: ShapeTable,
                memory_bytes: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Placement-independent quantities of each degree tuple (tuple quantities of the terms, and total memory;
    `memory_bytes`: `tuple_memory` of these rows when the caller has it already)."""
    q = T.tuple_quantities(hw, wl, t, shapes.lookup(t))
    q["memory_bytes"] = tuple_memory(hw, wl, t, q["nanobatch"]) if memory_bytes is None else memory_bytes
    return q


def tuple_memory(hw: Hardware, wl: Workload, t: Mapping[str, np.ndarray], nanobatch: np.ndarray | None = None
                 ) -> np.ndarray:
    """Total bytes per GPU of each degree tuple (placement-free), so that the memory rule can go before the tuple
    quantities are priced (`nanobatch`: the rows' nanobatch tokens, as the tuple quantities compute them)."""
    if nanobatch is None:
        f = {k: np.asarray(t[k], dtype=np.float64) for k in ("dp", "microbatches", "ep", "cp")}
        nanobatch = T.nanobatch_tokens(wl, f["dp"], f["microbatches"], f["ep"], f["cp"])
    in_flight = microbatches_in_flight(t["pp"], t["interleave"], t["microbatches"], t["zero_bubble"])
    return layout_memory(hw, wl, t, nanobatch, in_flight)["total_bytes"]


def dominated_options(t: Mapping[str, np.ndarray], keys: tuple[str, ...]) -> np.ndarray:
    """Rows whose (ZeRO stage, recomputation) another row of the same tuple (equal in every other column `keys`)
    dominates: True where excluded. Every row given must fit in memory.

    Recomputation only adds time (GEMM time, critical path, re-run collectives) and only saves memory, so at one ZeRO
    stage the least recomputation that fits is never worse than more. ZeRO-2 adds overlapped reduce-scatters to
    ZeRO-1 and changes nothing else, so ZeRO-1 at no more recomputation is never worse than ZeRO-2. ZeRO-3 halves
    the data-parallel phase while adding traffic: no stage dominates it or is dominated by it. Excluding dominated
    rows keeps an optimum at every stage of the objective (each of its terms is no smaller)."""
    n = len(np.asarray(t["zero"]))
    if n == 0:
        return np.zeros(0, dtype=bool)
    _, group = unique_rows([np.asarray(t[k], dtype=np.int64) for k in keys])
    zero = np.asarray(t["zero"], dtype=np.int64)
    rec = np.asarray(t["recompute"], dtype=np.int64)
    least = np.full((group.max() + 1, 4), np.iinfo(np.int64).max)  # least fitting recomputation per (tuple, zero)
    np.minimum.at(least, (group, zero), rec)
    mine = least[group, zero]
    return (rec > mine) | ((zero == 2) & (least[group, 1] <= rec))


def step_lower_bound(hw: Hardware, wl: Workload, t: Mapping[str, np.ndarray], q: Mapping[str, np.ndarray],
                     least: LeastFeatures, dp_overlap: bool = False) -> np.ndarray:
    """A placement-free lower bound of each tuple's step time: the bound reading of planner.cost.terms."""
    values = {**q, **least.group_values(t)}
    return np.max([T.combine(b, values) for b in T.branches(wl, dp_overlap, hw.profile)], axis=0)


def pair_step_lower_bound(hw: Hardware, wl: Workload, rows: Mapping[str, np.ndarray], m_min: np.ndarray,
                          m_max: np.ndarray, shapes: ShapeTable, work: LeastWork, least: LeastFeatures,
                          dp_overlap: bool = False) -> np.ndarray:
    """A lower bound of the step time of every tuple a (model-parallel row, N_DP) pair expands to, over every
    microbatch count in [m_min, m_max] the batch allows and every placement.

    The branches of planner.cost.terms are read with each coefficient and term at its least over m: the bubble
    stretch at 1, the 1F1B latency multiplicity m / N_PP at the fewest microbatches, the stretched GEMM time at
    LeastWork's minimum, the critical path's GEMMs at the largest m (a GEMM never gets faster as its nanobatch
    grows); the group terms do not depend on m.
    """
    pp = rows["pp"].astype(np.float64)
    fast = shapes.lookup_arrays(rows["tp_ff"], rows["tp_model"], rows["dp"] * m_max * rows["cp"], rows["ep"],
                                rows["sp"])
    least_work = work.lookup(rows["tp_ff"], rows["tp_model"], rows["dp"], rows["ep"], rows["cp"], rows["sp"])
    if wl.transformer is None:
        experts_here = wl.experts / rows["ep"].astype(np.float64)
        matmul_s = (wl.layers / pp) * experts_here * least_work
        critical_mm_s = wl.layers * experts_here * fast["block_critical_s"]
    else:
        matmul_s = least_work / pp
        extra = T.recompute_extra({"fwd": fast["block_fwd_s"], "core_fwd": fast["block_core_fwd_s"]},
                                  rows["recompute"])
        critical_mm_s = (wl.layers * (fast["block_critical_s"] + extra) + fast["embed_critical_s"]
                         + fast["head_critical_s"])
    # Every scale is non-decreasing in m (ZeRO's overlapped traffic grows with it; the rest is per step): read them
    # at the fewest microbatches.
    values = dict(least.group_values({**rows, "microbatches": m_min}))
    values.update({
        "one": np.ones_like(pp),
        "stretch": np.ones_like(pp),
        "lat_share": T.latency_share(hw, rows["zero_bubble"], m_min / pp),
        "optimizer_s": T.optimizer_s(hw, wl, rows),
        "matmul_s": matmul_s,
        "critical_mm_s": critical_mm_s,
        "exposed_s": np.zeros_like(pp),
        # The stage-wise EP overlap's branches (profile.overlap_ep_stages) and the host floor read at zero: each is
        # then at most its true value, and the GEMM branch above keeps the bound.
        **{k: np.zeros_like(pp) for k in (*T.EP_STAGE_TOTALS, "ep_rest_s", "host_s", "ep_stage_share",
                                          "ep_unpaired_stretch", "ep_unpaired_share")},
    })
    return np.max([T.combine(b, values) for b in T.branches(wl, dp_overlap, hw.profile)], axis=0)

