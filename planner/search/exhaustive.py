"""Brute-force enumerator: prices every layout of the space with the float model (a baseline; the tests' oracle is
tests/oracle.py, which shares no code with this).

No bound pruning: every degree tuple that satisfies the rules of docs/model.md ("The search space") is expanded
into every valid placement and priced with `planner.cost.step.step_arrays` (vectorised, in chunks). The optimum is
the lexicographic minimum of (GPUs, step time, network time) in deadline mode, or of (step time, network time) at a
fixed GPU count; exact ties go to the first layout in enumeration order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import cache

import numpy as np

from planner.cost.memory import usable_bytes
from planner.cost.step import step_arrays
from planner.cost.terms import shape_keys
from planner.parallel.dimensions import DEGREES
from planner.parallel.space import (
    SearchOptions,
    Tuples,
    build_space,
    layout_from,
    level_products,
    model_parallel_rows,
    rank_order_factors,
    space_size,
    tuples_for_model_parallel,
)
from planner.schema import Hardware, Workload
from planner.search.presolve import ShapeTable, tuple_terms
from planner.search.result import SearchResult


@cache
def _level_patterns(cap: int) -> np.ndarray:
    """Every 5-tuple of per-degree factors whose product is at most `cap` (one bounded level): array (k, 5)."""
    out = []

    def rec(prefix, prod):
        if len(prefix) == len(DEGREES):
            out.append(prefix)
            return
        for f in range(1, cap // prod + 1):
            rec(prefix + (f,), prod * f)

    rec((), 1)
    return np.array(out, dtype=np.int64)


def expand_placements(hw: Hardware, t: Tuples) -> tuple[np.ndarray, np.ndarray]:
    """All (tuple row, placement) pairs, level by level. Returns (row index array, placements (k, 5, H))."""
    prods, valid = level_products(hw, t.gpus)
    rows = np.nonzero(valid)[0]
    remaining = np.stack([t[d] for d in DEGREES], axis=1)[rows]  # (n, degrees)
    assigned = np.zeros((len(rows), len(DEGREES), 0), dtype=np.int64)
    for h, cap in enumerate(hw.level_caps):
        if cap is None:  # the unbounded top level takes what is left
            f = remaining
        else:
            pat = _level_patterns(cap)  # (k, 5)
            pat_prod = pat.prod(axis=1)
            step = max(1, 2_000_000 // (len(pat) * len(DEGREES)))
            si_parts, pi_parts = [], []
            for s0 in range(0, len(rows), step):  # bounded memory: rows x patterns in slices
                sl = slice(s0, s0 + step)
                ok = pat_prod[None, :] == prods[rows[sl], h][:, None]
                ok &= (remaining[sl][:, None, :] % pat[None, :, :] == 0).all(axis=2)
                a, c = np.nonzero(ok)
                si_parts.append(a + s0)
                pi_parts.append(c)
            si = np.concatenate(si_parts) if si_parts else np.zeros(0, dtype=np.int64)
            pi = np.concatenate(pi_parts) if pi_parts else np.zeros(0, dtype=np.int64)
            rows, remaining, assigned = rows[si], remaining[si] // pat[pi], assigned[si]
            f = pat[pi]
        assigned = np.concatenate([assigned, f[:, :, None]], axis=2)
        if cap is None:
            remaining = np.ones_like(remaining)
    done = (remaining == 1).all(axis=1)
    return rows[done], assigned[done]


def price_placements(hw: Hardware, wl: Workload, t: Tuples, dp_overlap: bool, q: Mapping[str, np.ndarray],
                     rank_order: tuple[str, ...] = ()):
    """Every valid placement of every tuple (only the rank order's, if given), priced whole by
    planner.cost.step.step_arrays (`q`: the tuples' shape times, as planner.search.presolve.tuple_terms returns them).

    Returns (tuple row of each priced layout, placements (k, degrees, H), the step_arrays columns).
    """
    rows, pl = expand_placements(hw, t)
    if rank_order:
        fixed, ok = rank_order_factors(hw, t, rank_order)
        keep = ok[rows]
        for k, d in enumerate(DEGREES):
            keep &= (pl[:, k, :] == fixed[d][rows]).all(axis=1)
        rows, pl = rows[keep], pl[keep]
    if len(rows) == 0:
        return rows, pl, {}
    cols = {k: v[rows] for k, v in t.items()}
    arr = step_arrays(hw, wl, cols, {d: pl[:, k, :] for k, d in enumerate(DEGREES)}, dp_overlap=dp_overlap,
                      shape={k: q[k][rows] for k in shape_keys(wl)})
    return rows, pl, arr


def _best_in_batch(hw: Hardware, wl: Workload, options: SearchOptions, deadline_s: float | None, t: Tuples,
                   shapes: ShapeTable, goodput: Callable[[float], float] | None = None):
    """Price every placement of the batch's tuples; return (best key or None, its layout, rows priced)."""
    terms = tuple_terms(hw, wl, t, shapes)
    rows, pl, arr = price_placements(hw, wl, t, options.dp_overlap, terms, options.rank_order)
    if len(rows) == 0:
        return None
    ok = arr["total_bytes"] <= usable_bytes(hw)
    if deadline_s is not None:
        if goodput is None:
            ok &= wl.steps * arr["step_s"] <= deadline_s
        else:
            counts, where = np.unique(arr["gpus"], return_inverse=True)
            g = np.array([goodput(float(n)) for n in counts])[where]
            ok &= wl.steps * arr["step_s"] <= deadline_s * g
    idx = np.nonzero(ok)[0]
    if len(idx) == 0:
        return None, None, len(rows)
    gpus = arr["gpus"][idx]
    order = np.lexsort((idx, arr["network_s"][idx], arr["step_s"][idx],
                        gpus if deadline_s is not None else np.zeros_like(gpus)))
    k = idx[order[0]]
    key = (float(arr["gpus"][k]) if deadline_s is not None else 0.0, float(arr["step_s"][k]),
           float(arr["network_s"][k]))
    return key, layout_from(t, int(rows[k]), pl[k]), len(rows)


def solve_exhaustive(hw: Hardware, wl: Workload, options: SearchOptions, deadline_s: float | None,
                     time_limit_s: float | None = None, goodput: Callable[[float], float] | None = None
                     ) -> SearchResult:
    """Enumerate everything. `deadline_s` None means fixed-cluster mode (options.gpus must be set)."""
    t0 = time.perf_counter()
    space = build_space(hw, wl, options)
    size = space_size(space)
    mp_rows = model_parallel_rows(space)
    shapes = ShapeTable.for_space(hw, wl, space)
    best_key, best = None, None
    evaluated = 0
    chunk = max(1, 200_000 // max(len(mp_rows["pp"]), 1))
    finished = True
    # Sub-batches bound memory and let the clock be checked often: placements per tuple grow fast with levels.
    tuple_batch = 20_000 if len(hw.levels) <= 2 else 2_000
    for start in range(0, len(space.dp_m["dp"]), chunk):
        t_all = tuples_for_model_parallel(space, mp_rows, {k: v[start:start + chunk] for k, v in space.dp_m.items()})
        if options.gpus is not None:
            t_all = t_all.take(np.nonzero(t_all.gpus == options.gpus)[0])
        if options.max_gpus is not None:
            t_all = t_all.take(np.nonzero(t_all.gpus <= options.max_gpus)[0])
        if options.min_gpus is not None and deadline_s is not None:
            t_all = t_all.take(np.nonzero(t_all.gpus >= options.min_gpus)[0])
        if options.below_gpus is not None and deadline_s is not None:
            t_all = t_all.take(np.nonzero(t_all.gpus < options.below_gpus)[0])
        for s0 in range(0, len(t_all), tuple_batch):
            if time_limit_s is not None and time.perf_counter() - t0 > time_limit_s:
                finished = False
                break
            t = t_all.take(np.arange(s0, min(s0 + tuple_batch, len(t_all))))
            found = _best_in_batch(hw, wl, options, deadline_s, t, shapes, goodput)
            if found is None:
                continue
            evaluated += found[2]
            if found[0] is not None and (best_key is None or found[0] < best_key):
                best_key, best = found[0], found[1]
        if not finished:
            break
    wall = time.perf_counter() - t0
    if not finished:
        return SearchResult("exhaustive", "feasible" if best else "unknown", best, wall, size, evaluated,
                            gap=None, notes=[f"time limit {time_limit_s:g} s reached before the enumeration ended"])
    return SearchResult("exhaustive", "optimal" if best else "infeasible", best, wall, size, evaluated)
