"""Placements given by hand or built greedily: for `evaluate`, where the user names degrees but not (all) factors.

The search never uses these; it places every degree itself (planner.search.cpsat).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from planner.errors import InvalidInput
from planner.parallel.dimensions import BY_NAME, DEGREES
from planner.parallel.space import level_products, level_rule, nearest_cluster_sizes
from planner.schema import Hardware

GREEDY_ORDER: tuple[str, ...] = tuple(sorted(DEGREES, key=lambda d: BY_NAME[d].greedy_rank))
"""Degrees in the order they claim the fastest levels (the registry's greedy_rank: most traffic first)."""


def greedy_placement(hw: Hardware, degrees: Mapping[str, int],
                     fixed: Mapping[str, Sequence[int]] | None = None) -> dict[str, tuple[int, ...]]:
    """A valid placement of the given degrees on `hw`'s network levels, filled bottom-up and greedily.

    Levels fill bottom-up (docs/model.md, "The search space"): the factors on level h must multiply to the GPUs
    that level contributes (8 on a DGX node once the cluster spans nodes; 64 on a GB200 NVL72 rack of which a job
    uses 16 trays; planner.parallel.space.fill_levels). Walking up the levels, each degree in
    the order TP,ff, TP,model, CP, PP, DP, EP takes the largest factor of what is left of it that still fits what is
    left of the level (the gcd of the two): the most talkative traffic gets the fastest links. Degrees named in
    `fixed` keep their factors and the others fill the room they leave. Prime by prime, this greedy fill always
    succeeds when any placement of the free degrees does. It is not the optimal placement; `plan` searches those.
    """
    fixed = dict(fixed or {})
    degrees = {d: int(degrees.get(d, 1)) for d in DEGREES}  # a degree left out is 1
    n_levels = len(hw.levels)
    gpus = math.prod(int(degrees[d]) for d in DEGREES)
    prods, valid = level_products(hw, np.array([gpus]))
    sizes = [lvl.size for lvl in hw.levels if lvl.size]
    expr = " * ".join(f"{d}({degrees[d]})" for d in DEGREES)
    if not valid[0]:
        raise InvalidInput(f"{expr} = {gpus} GPUs cannot fill {hw.name}'s network levels bottom-up ({level_rule(hw)}); "
                           f"{_size_hint(gpus, degrees['dp'], nearest_cluster_sizes(hw, gpus))}")
    room = [int(p) for p in prods[0]]
    for d, factors in fixed.items():
        for h, f in enumerate(factors):
            if room[h] % f:
                raise InvalidInput(f"placement puts {d} factor {f} on level {h + 1} ({hw.levels[h].name}), which "
                                   f"has room for a product of {room[h]} there after the other given factors")
            room[h] //= f
    left = {d: int(degrees[d]) for d in GREEDY_ORDER if d not in fixed}
    out: dict[str, list[int]] = {d: [1] * n_levels for d in left}
    for h in range(n_levels):
        for d in left:
            f = math.gcd(left[d], room[h])
            out[d][h] = f
            left[d] //= f
            room[h] //= f
    if any(r != 1 for r in room) or any(v != 1 for v in left.values()):
        raise InvalidInput(f"cannot place {expr} on {hw.name}'s levels (group sizes {sizes}) around the given factors")
    return {d: tuple(fixed[d]) if d in fixed else tuple(out[d]) for d in DEGREES}


def _size_hint(gpus: int, dp: int, near: tuple[int | None, int | None]) -> str:
    """'the nearest cluster sizes that do: 72 and 144 GPUs (e.g. dp=36 or dp=72)': the valid counts next to `gpus`,
    and the data-parallel degree that reaches each with the other degrees unchanged, where one does."""
    sizes = [s for s in dict.fromkeys(near) if s is not None]
    if not sizes:  # pragma: no cover - a level-valid count always has a neighbour below
        return "no cluster size near it fills them"
    rest = gpus // dp
    moves = [f"dp={s // rest}" for s in sizes if s % rest == 0]
    counts = " and ".join(f"{s:,}" for s in sizes)
    plural = len(sizes) > 1
    text = f"the nearest cluster size{'s' if plural else ''} that {'do' if plural else 'does'}: {counts} GPUs"
    return text + (f" (e.g. {' or '.join(moves)})" if moves else "")


def parse_placement(text: str, degrees: Mapping[str, int], n_levels: int) -> dict[str, tuple[int, ...]]:
    """'dp=1,4;tp_ff=8,1' -> {'dp': (1, 4), 'tp_ff': (8, 1)}; one factor per network level, bottom-up."""
    out: dict[str, tuple[int, ...]] = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        name, sep, factors = item.partition("=")
        key = name.strip().lower().replace("-", "_")
        if not sep or key not in DEGREES:
            raise InvalidInput(f"--placement item '{item}': expected NAME=F1,F2,... with NAME one of "
                               f"{', '.join(DEGREES)}")
        if key in out:
            raise InvalidInput(f"--placement names {key} twice")
        try:
            values = tuple(int(f) for f in factors.split(","))
        except ValueError:
            raise InvalidInput(f"--placement item '{item}': factors must be whole numbers separated by commas"
                               ) from None
        if len(values) != n_levels:
            raise InvalidInput(f"--placement item '{item}': {len(values)} factor(s) given, the hardware has "
                               f"{n_levels} network level(s)")
        if any(v < 1 for v in values):
            raise InvalidInput(f"--placement item '{item}': factors must be >= 1")
        if math.prod(values) != degrees[key]:
            raise InvalidInput(f"--placement item '{item}': factors multiply to {math.prod(values)} but {key} = "
                               f"{degrees[key]}")
        out[key] = values
    if not out:
        raise InvalidInput("--placement is empty; expected e.g. 'dp=1,4;tp_ff=8,1'")
    return out
