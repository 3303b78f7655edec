"""The search's pruning bounds are sound: never above the float model's best step time over the placements.

`planner.search.cpsat` discards (model-parallel row, N_DP) pairs and degree tuples whose lower bound misses the
deadline (or, at a fixed GPU count, exceeds the incumbent), without pricing them. A bound that overstated even one
layout's step time could discard the optimum, so here every tuple of small spaces is priced over all of its
placements with `planner.cost.step.step_arrays` (through `price_placements`, the enumerator's path) and compared
with both bounds, which are the bound reading of planner.cost.terms. The equivalence tests in test_solver.py check
the end result; these check the bounds directly, on more hardware and with both DP modes.
"""

from __future__ import annotations

import numpy as np
import pytest
from bound_helpers import pair_bound_and_best

from planner.hardware import get_hardware
from planner.parallel.space import (
    SearchOptions,
    build_space,
    level_products,
    model_parallel_rows,
    tuples_for_model_parallel,
)
from planner.search.cpsat import PairIndex
from planner.search.exhaustive import price_placements
from planner.search.presolve import (
    LeastFeatures,
    ShapeTable,
    step_lower_bound,
    tuple_terms,
)
from planner.workload import workload_from_shape

INSTANCES = [
    ("h100", (256, 1024, 4, 1, 512)),
    ("h100", (128, 512, 2, 4, 256)),
    ("h100-superpod", (128, 512, 4, 2, 128)),
    ("v100", (512, 2048, 2, 1, 1024)),
    ("h100-global-nvlink", (512, 2048, 8, 4, 1024)),
    ("h100-low-latency", (256, 1024, 6, 1, 384)),
]


def _priced(hw, wl, overlap):
    space = build_space(hw, wl, SearchOptions())
    mp = model_parallel_rows(space)
    t = tuples_for_model_parallel(space, mp, space.dp_m)
    _, valid = level_products(hw, t.gpus)
    t = t.take(np.nonzero(valid & (t.gpus <= 512))[0])
    shapes = ShapeTable.for_space(hw, wl, space)
    terms = tuple_terms(hw, wl, t, shapes)
    rows, _, arr = price_placements(hw, wl, t, overlap, terms)
    best = np.full(len(t), np.inf)
    np.minimum.at(best, rows, arr["step_s"])
    return space, t, terms, best, shapes, LeastFeatures(hw, wl)


@pytest.mark.parametrize("overlap", [False, True], ids=["dp-serial", "dp-overlap"])
@pytest.mark.parametrize("hw_name,shape", [
    pytest.param(h, s, id=f"{h}-{s}", marks=[pytest.mark.slow] if h == "h100-superpod" else [])  # over 5 s each
    for h, s in INSTANCES])
def test_bounds_never_exceed_the_priced_optimum(hw_name, shape, overlap):
    hw, wl = get_hardware(hw_name), workload_from_shape(*shape)
    space, t, terms, best, shapes, least = _priced(hw, wl, overlap)
    priced = np.isfinite(best)
    assert priced.sum() > 100  # the instance is not vacuous

    # Per tuple: step_lower_bound <= the best placement's step time.
    lb = step_lower_bound(hw, wl, t, terms, least, overlap)
    slack = lb[priced] - best[priced]
    assert (slack <= 1e-12 * best[priced]).all(), f"tuple bound above the priced optimum by {slack.max():.3g} s"
    # ... and it is not a trivial bound: on average it recovers most of the step time.
    assert np.median(lb[priced] / best[priced]) > 0.5

    # Per (model-parallel row, N_DP) pair: pair_step_lower_bound <= the best of its tuples over every m.
    index = PairIndex.build(space, model_parallel_rows(space))
    work = shapes.least_work(space)
    bound, pair_best = pair_bound_and_best(hw, wl, t, best, priced, index, shapes, work, least, overlap)
    slack = bound - pair_best
    assert (slack <= 1e-12 * pair_best).all(), f"pair bound above the priced optimum by {slack.max():.3g} s"
