"""The pair bound's check, shared by tests/test_bounds.py and tests/test_memory_savers.py."""

from __future__ import annotations

import numpy as np

from planner.search.presolve import pair_step_lower_bound, unique_rows


def pair_bound_and_best(hw, wl, t, best, priced, index, shapes, work, least, overlap=False):
    """(pair_step_lower_bound, the least priced step) per (model-parallel row, N_DP) pair of the priced tuples
    (microbatch counts merged): the bound must never exceed the best."""
    names = tuple(k for k in t if k != "microbatches")
    uniq, inv = unique_rows([t[k][priced].astype(np.int64) for k in names])
    pair_best = np.full(len(uniq), np.inf)
    np.minimum.at(pair_best, inv, best[priced])
    rows = {k: uniq[:, n] for n, k in enumerate(names)}
    j = np.searchsorted(index.dps, rows["dp"])
    bound = pair_step_lower_bound(hw, wl, rows, index.m_min[j], index.m_max[j], shapes, work, least, overlap)
    return bound, pair_best
