"""The finite search space (docs/model.md, "The search space"): degree tuples and their placements on the levels.

A layout = a *degree tuple* (N_DP, N_TP,ff, N_TP,model, N_PP, i, N_EP, m, schedule) + a *placement* (each
degree's factor on each network level). Rules:

- divisibility: N_TP,ff | d_ff, N_TP,model | d_model, N_PP * i | L, N_EP | E, N_DP * m | b / E (the nanobatch
  b / (E N_DP m) is a whole number of tokens);
- schedule: zb-h2 needs i = 1 and m >= 2 N_PP - 1;
- levels fill bottom-up: the degrees' factors at levels 1..h multiply to min(N, size(h)) for every bounded
  level h, so a cluster larger than a node is made of whole nodes (N a multiple of 8 on DGX systems), and a
  cluster that fits in one group sits in one group; a lowest level with `unit` / `usable` (GB200 NVL72: 4-GPU
  trays, 64 of 72 GPUs per rack) is instead used c GPUs per group, c a whole number of units up to `usable`
  (`fill_levels`);
- memory (docs/model.md §7) is a property of the degree tuple alone (placement does not change it).

GPU counts are whatever the products allow, not only powers of two.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

from planner.parallel.dimensions import (
    BY_NAME,
    DEGREES,
    DIMENSIONS,
    OPTIONS,
    divisibility_problems,
    kv_heads_ok,
    stage_problem,
)
from planner.schema import Hardware, Layout, NetworkLevel, Workload


@lru_cache(maxsize=4096)
def divisors(n: int) -> tuple[int, ...]:
    small, large = [], []
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
    return tuple(small + large[::-1])


@dataclass(frozen=True)
class SearchOptions:
    """What the user constrains. `gpus` fixes the cluster size (fixed-cluster mode)."""

    schedule: str = "auto"  # auto | 1f1b | zb-h2
    gpus: int | None = None
    dp_overlap: bool = False
    max_gpus: int | None = None
    """A buyer's limit on the cluster (--max-gpus, or the GPUs --power-mw allows): layouts of more GPUs are left
    out, as the hardware's own bound (Hardware.max_gpus) leaves them out."""
    min_gpus: int | None = None
    """A GPU count below which the caller has proven that no layout meets the deadline (deadline mode only): the
    search starts there instead of at the compute bound. Sound only with such a proof: a re-plan whose moved inputs
    slow every layout starts at the count of the plan it moves (planner.monotone). Counts at and above it are
    searched exactly as without it."""
    below_gpus: int | None = None
    """Deadline mode only: search only the counts below this one, a certificate search (planner.sensitivity): its
    'infeasible' says that no cluster of fewer than `below_gpus` GPUs meets the deadline, nothing about larger ones.
    Each count below it is decided exactly as without it."""
    fixed: tuple[tuple[str, int], ...] = ()
    """Dimensions the user fixed (name, value): context parallelism and the options the search would choose
    (sequence parallelism, recomputation, ZeRO stage)."""
    excluded: tuple[tuple[str, int], ...] = ()
    """(name, value) pairs the search must not use (a framework that cannot run them: planner.export)."""
    whole_rounds: bool = False
    """Interleaved 1F1B runs its microbatches in rounds of N_PP (Megatron's and torchtitan's schedules): with
    interleaving, m must be a multiple of N_PP."""
    rank_order: tuple[str, ...] = ()
    """Non-empty: the placement is not searched but follows a framework's rank order, these degrees innermost first
    (`rank_order_factors`); empty: every placement that fills the levels."""


class Tuples(Mapping[str, np.ndarray]):
    """Degree tuples as named int64 columns, one row each: every dimension of the registry
    (planner.parallel.dimensions) plus 'zero_bubble' (the schedule, bool)."""

    COLUMNS: tuple[str, ...] = (*DEGREES, *OPTIONS, "zero_bubble")
    EXTRA: tuple[str, ...] = ("expert_ep", "etp", "first_layers", "last_layers")
    """Optional columns of given layouts that the search never sets: a folded expert layout (expert_ep, etp; both or
    neither) and custom end stages (first_layers, last_layers; -1 for the automatic split)."""

    def __init__(self, cols: Mapping[str, np.ndarray]):
        missing = set(self.COLUMNS) - set(cols)
        if missing:
            raise ValueError(f"degree tuples need columns {sorted(missing)}")
        self.cols = {k: np.asarray(cols[k]) for k in (*self.COLUMNS, *self.EXTRA) if k in cols}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def __iter__(self):
        return iter(self.cols)

    def __len__(self) -> int:
        return len(self.cols["dp"])

    @property
    def gpus(self) -> np.ndarray:
        n = np.ones(len(self), dtype=np.int64)
        for d in DEGREES:
            n = n * self.cols[d]
        return n

    def take(self, idx) -> Tuples:
        return Tuples({k: v[idx] for k, v in self.cols.items()})

    @classmethod
    def concat(cls, parts: list[Tuples]) -> Tuples:
        return cls({k: np.concatenate([p[k] for p in parts]) for k in cls.COLUMNS})

    @classmethod
    def empty(cls) -> Tuples:
        return cls({k: np.zeros(0, dtype=bool if k == "zero_bubble" else np.int64) for k in cls.COLUMNS})

    @classmethod
    def from_layouts(cls, layouts: list[Layout]) -> Tuples:
        cols = {d: np.array([lay.degree(d) for lay in layouts], dtype=np.int64) for d in (*DEGREES, *OPTIONS)}
        cols["zero_bubble"] = np.array([lay.schedule == "zb-h2" for lay in layouts], dtype=bool)
        if any(lay.folded for lay in layouts):
            cols["expert_ep"] = np.array([lay.expert_degrees[0] for lay in layouts], dtype=np.int64)
            cols["etp"] = np.array([lay.expert_degrees[1] for lay in layouts], dtype=np.int64)
        if any(lay.custom_stages for lay in layouts):
            for key, field in (("first_layers", "first_stage_layers"), ("last_layers", "last_stage_layers")):
                cols[key] = np.array([-1 if getattr(lay, field) is None else getattr(lay, field)
                                      for lay in layouts], dtype=np.int64)
        return cls(cols)


@dataclass
class Space:
    """The candidate values of every decision dimension for one (hardware, workload, options).

    `values[d]` lists the candidates of a dimension without a partner (each divides its workload size);
    `pp_i_zb` holds the (N_PP, i, schedule) rows (N_PP i | L; ZB-H2 only with i = 1) and `dp_m` the (N_DP, m) rows
    (N_DP m | b / E), as named columns.
    """

    hw: Hardware
    wl: Workload
    options: SearchOptions
    values: dict[str, np.ndarray]
    pp_i_zb: dict[str, np.ndarray]
    dp_m: dict[str, np.ndarray]

    @property
    def H(self) -> int:
        return len(self.hw.levels)


def _pairs_dividing(n: int) -> list[tuple[int, int]]:
    """Every (a, c) with a c | n."""
    return [(a, u // a) for u in divisors(n) for a in divisors(u)]


def _stage_pairs(wl: Workload) -> list[tuple[int, int]]:
    """(N_PP, i) pairs: N_PP i | L for the toy; a transformer's ends may be lighter (planner.cost.terms
    .stage_layers), so any N_PP i <= L whose ends can drop the difference."""
    if wl.transformer is None:
        return sorted(_pairs_dividing(wl.layers))
    out = []
    for pp in range(1, wl.layers + 1):
        for i in range(1, wl.layers // pp + 1):
            if stage_problem(wl, pp, i) is None:
                out.append((pp, i))
    return out


def batch_allows(wl: Workload, cols: Mapping[str, np.ndarray]) -> np.ndarray:
    """Transformer: N_DP N_EP m divides the batch in sequences (the toy's rule is already in its (N_DP, m) rows)."""
    n = len(np.asarray(cols["dp"]))
    if wl.transformer is None:
        return np.ones(n, dtype=bool)
    seqs = wl.batch_tokens // wl.seq_len
    return seqs % (np.asarray(cols["dp"]) * np.asarray(cols["ep"]) * np.asarray(cols["microbatches"])) == 0


def build_space(hw: Hardware, wl: Workload, options: SearchOptions) -> Space:
    solo = {d.name: np.array(divisors(d.divides(wl)), dtype=np.int64)
            for d in DIMENSIONS if d.placed and d.partner is None and d.divides is not None}
    solo["tp_ff"] = np.array([v for v in solo["tp_ff"] if kv_heads_ok(wl, int(v))], dtype=np.int64)
    for d in DIMENSIONS:
        if d.candidates is not None:
            solo[d.name] = np.array(d.candidates(wl), dtype=np.int64)
    for name, value in options.fixed:
        solo[name] = solo[name][solo[name] == value]
    for name, value in options.excluded:
        solo[name] = solo[name][solo[name] != value]
    unit = BY_NAME["dp"].divides(wl)  # type: ignore[misc]
    if wl.transformer is not None or wl.batch_tokens % wl.experts == 0:
        dm = np.array(_pairs_dividing(unit), dtype=np.int64).reshape(-1, 2)
    else:
        dm = np.zeros((0, 2), dtype=np.int64)
    rows = []
    for pp, i in _stage_pairs(wl):
        if options.schedule in ("auto", "1f1b"):
            rows.append((pp, i, 0))
        if options.schedule in ("auto", "zb-h2") and i == 1:
            rows.append((pp, 1, 1))
    pz = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return Space(hw=hw, wl=wl, options=options, values=solo,
                 pp_i_zb={"pp": pz[:, 0], "interleave": pz[:, 1], "zero_bubble": pz[:, 2].astype(bool)},
                 dp_m={"dp": dm[:, 0], "microbatches": dm[:, 1]})


def zb_allows(pp, microbatches, zero_bubble) -> np.ndarray:
    """The schedule rule: ZB-H2 needs m >= 2 N_PP - 1 (interleaving is already 1 in its rows)."""
    return ~np.asarray(zero_bubble, dtype=bool) | (np.asarray(microbatches) >= 2 * np.asarray(pp) - 1)


def schedule_allows(options: SearchOptions, cols: Mapping[str, np.ndarray]) -> np.ndarray:
    """The schedule rules for these options: ZB-H2's, and whole rounds of N_PP with interleaving if asked."""
    ok = zb_allows(cols["pp"], cols["microbatches"], cols["zero_bubble"])
    if options.whole_rounds:
        ok &= (np.asarray(cols["interleave"]) == 1) | (np.asarray(cols["microbatches"]) % np.asarray(cols["pp"]) == 0)
    return ok


def sp_allows(tp_ff, sp) -> np.ndarray:
    """Sequence parallelism shards over the tensor-parallel ranks: on only with N_TP,ff > 1."""
    return (np.asarray(sp) == 0) | (np.asarray(tp_ff) > 1)


def model_parallel_rows(space: Space) -> dict[str, np.ndarray]:
    """Every combination of the dimensions other than (N_DP, m), as named columns."""
    rows = model_parallel_rows_within(space, None)
    assert rows is not None
    return rows


def model_parallel_rows_within(space: Space, out_of_time: Callable[[], bool] | None,
                               keep_rows: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None,
                               max_size: float | None = None, divides: int | None = None
                               ) -> dict[str, np.ndarray] | None:
    """`model_parallel_rows`, built one value of the first dimension at a time (the same rows in the same order), so
    that `out_of_time` (the search's clock: the time limit covers presolve) can stop it between slices; None when it
    did. `max_size`: rows whose model-parallel GPU count (`mp_size`) exceeds it are left out, for a search that
    looks at no larger cluster (every tuple of such a row has more GPUs); they are found on the index grid and only
    the rows kept are gathered. `keep_rows` (a mask over a slice's gathered columns) drops more rows slice by slice
    (a fixed cluster's GPU count that a row's size does not divide). Either way a large space is never held whole,
    and the rows kept are the same, in the same order, as filtering the whole table afterwards. `divides` (a fixed
    cluster's GPU count): rows whose size does not divide it are left out on the grid too."""
    names = list(space.values)
    axes = [*space.values.values(), np.arange(len(space.pp_i_zb["pp"]))]
    pp_of_row = space.pp_i_zb["pp"].astype(np.float64)
    shape = tuple(len(a) for a in axes[1:])
    parts: list[dict[str, np.ndarray]] = []
    for first in axes[0]:
        if out_of_time is not None and out_of_time():
            return None
        # Broadcast views of each axis over the slice's grid (meshgrid 'ij' order): nothing is copied until the
        # rows are chosen.
        grid = dict(zip(names, np.meshgrid(np.array([first]), *axes[1:-1], np.array([0]), indexing="ij",
                                           sparse=True)))
        pp_view = pp_of_row.reshape((1,) * len(names) + (-1,))
        keep = sp_allows(grid["tp_ff"], grid["sp"])
        if max_size is not None:
            size = pp_view
            for d in DEGREES:
                if d not in ("dp", "pp"):
                    size = size * grid[d].astype(np.float64)
            keep = keep & (size <= max_size)
        if divides is not None:
            size = pp_view
            for d in DEGREES:
                if d not in ("dp", "pp"):
                    size = size * grid[d].astype(np.float64)
            keep = keep & (size <= divides) & (np.fmod(float(divides), size) == 0)
        flat = np.nonzero(np.broadcast_to(keep, (1, *shape)).ravel())[0]
        index = np.unravel_index(flat, shape)
        cols = {names[0]: np.full(len(flat), first, dtype=axes[0].dtype)}
        cols.update({name: axes[k + 1][index[k]] for k, name in enumerate(names[1:])})
        cols.update({k: v[index[-1]] for k, v in space.pp_i_zb.items()})
        if keep_rows is not None:
            more = keep_rows(cols)
            cols = {k: v[more] for k, v in cols.items()}
        parts.append(cols)
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def model_parallel_sizes(space: Space) -> np.ndarray:
    """The distinct `mp_size` values of `model_parallel_rows(space)`, ascending, without building the rows: the
    products of every degree value but N_DP's and every N_PP. The options (sp, recomputation, ZeRO) do not change a
    row's size; sp on is refused only with N_TP,ff = 1, so with sp fixed on N_TP,ff = 1 has no row."""
    axes = {d: space.values[d] for d in DEGREES if d not in ("dp", "pp")}
    if 0 not in space.values["sp"]:
        axes["tp_ff"] = axes["tp_ff"][axes["tp_ff"] > 1]
    if min(len(space.pp_i_zb["pp"]), *(len(v) for v in space.values.values()), *(len(v) for v in axes.values())) == 0:
        return np.zeros(0)
    sizes = np.unique(space.pp_i_zb["pp"]).astype(np.float64)
    for values in axes.values():
        sizes = np.unique(np.multiply.outer(sizes, values.astype(np.float64)).ravel())
    return sizes


def mp_size(mp: Mapping[str, np.ndarray]) -> np.ndarray:
    """GPUs of the model-parallel part of each row: the product of every degree but N_DP (float: no overflow)."""
    n = np.ones(len(mp["pp"]))
    for d in DEGREES:
        if d != "dp":
            n = n * mp[d].astype(np.float64)
    return n


def tuples_for_model_parallel(space: Space, mp: Mapping[str, np.ndarray], dp_m: Mapping[str, np.ndarray]) -> Tuples:
    """Cartesian product of model-parallel rows and (N_DP, m) rows, with the schedule rule applied."""
    n_mp, n_dm = len(mp["pp"]), len(dp_m["dp"])
    cols = {k: np.repeat(v, n_dm) for k, v in mp.items()}
    cols.update({k: np.tile(v, n_mp) for k, v in dp_m.items()})
    keep = schedule_allows(space.options, cols) & batch_allows(space.wl, cols)
    return Tuples({k: v[keep] for k, v in cols.items()})


def space_size(space: Space) -> int:
    """Number of valid degree tuples (placements counted separately; see `placement_count`)."""
    tp_sp = int(sp_allows(*np.meshgrid(space.values["tp_ff"], space.values["sp"])).sum())
    n_solo = tp_sp * math.prod(len(v) for k, v in space.values.items() if k not in ("tp_ff", "sp"))
    dp, m = space.dp_m["dp"], space.dp_m["microbatches"]
    if space.wl.transformer is None:
        per_ep = [(n_solo, np.ones(len(m), dtype=bool))]
    else:  # the batch rule involves N_EP: count each N_EP value's (N_DP, m) rows
        seqs = space.wl.batch_tokens // space.wl.seq_len
        n_other = n_solo // max(1, len(space.values["ep"]))
        per_ep = [(n_other, seqs % (dp * m * int(ep)) == 0) for ep in space.values["ep"]]
    total = 0
    for pp, i, zb in zip(space.pp_i_zb["pp"], space.pp_i_zb["interleave"], space.pp_i_zb["zero_bubble"]):
        rounds = (m % pp == 0) if space.options.whole_rounds and i > 1 else True
        for n, ok in per_ep:
            total += n * (int((ok & rounds & (m >= 2 * pp - 1)).sum()) if zb else int((ok & rounds).sum()))
    return int(total)


# --------------------------------------------------------------------------------------------------
# Placements
# --------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1 << 16)
def fill_levels(levels: tuple[NetworkLevel, ...], n: int) -> tuple[int, ...] | None:
    """The product the degrees' factors must reach on each level for a cluster of n GPUs, or None if n cannot fill
    the levels (docs/model.md, "The search space"). One rule, used by the search, the enumerator and the checks.

    Each group of a level holds size(h) / size(h-1) groups of the level below, and a job uses the same number of GPUs
    in every group it touches: min(n, groups below x GPUs used in each) at an ordinary level, so a cluster larger
    than a group is a whole number of fully used groups. A lowest level with a `unit` / `usable` (a GB200 NVL72
    rack of 4-GPU trays) is used in part: c GPUs per group, c a multiple of the unit (or n itself below one unit),
    c <= usable and c | n, the largest such c for which the levels above fill (fewest racks)."""
    if n < 1:
        return None
    first = levels[0]
    if first.subdivided and first.size is not None:
        unit, usable = first.unit_gpus, first.usable_gpus
        assert usable is not None
        per_unit = min(n, unit)
        if n % per_unit:
            return None
        for units in range(min(n // per_unit, usable // unit), 0, -1):
            c = per_unit * units
            if n % c == 0 and (rest := _fill_above(levels[1:], n, c, first.size)) is not None:
                return (c, *rest)
        return None
    return _fill_above(levels, n, 1, 1)


def _fill_above(levels: tuple[NetworkLevel, ...], n: int, used: int, size: int) -> tuple[int, ...] | None:
    """`fill_levels` for ordinary levels above a group of `size` GPUs of which the job uses `used`."""
    out = []
    for lvl in levels:
        cum = n if lvl.size is None else min(n, lvl.size // size * used)
        if cum % used:
            return None
        out.append(cum // used)
        used, size = cum, lvl.size or size
    return tuple(out) if used == n else None


def level_products(hw: Hardware, gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Required product of the degrees' factors at each level, and validity: `fill_levels` for many GPU counts at
    once (vectorised; tests/test_racks.py checks the two agree count by count).

    Returns (products of shape (n, H), valid of shape (n,)). Invalid: the cluster spans a level but is not a
    whole number of its groups (of a whole number of units per group on a lowest level with `unit`), or it exceeds
    the top level's size.
    """
    gpus = np.asarray(gpus, dtype=np.int64)
    first = hw.levels[0]
    if not (first.subdivided and first.size is not None):
        return _fill_above_arrays(hw.levels, gpus, np.ones(len(gpus), dtype=np.int64), 1)
    unit, usable = first.unit_gpus, first.usable_gpus
    assert usable is not None
    per_unit = np.clip(gpus, 1, unit)
    whole_units = (gpus >= 1) & (gpus % per_unit == 0)
    prods = np.ones((len(gpus), len(hw.levels)), dtype=np.int64)
    valid = np.zeros(len(gpus), dtype=bool)
    for units in range(usable // unit, 0, -1):  # the largest per-group count first: fewest groups
        c = per_unit * units
        try_c = whole_units & ~valid & (c <= gpus) & (gpus % c == 0)
        if not try_c.any():
            continue
        above, ok = _fill_above_arrays(hw.levels[1:], gpus, c, first.size)
        take = try_c & ok
        prods[take, 0] = c[take]
        prods[take, 1:] = above[take]
        valid |= take
    return prods, valid


def _fill_above_arrays(levels: tuple[NetworkLevel, ...], gpus: np.ndarray, used: np.ndarray, size: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """`_fill_above` for arrays of GPU counts (`used` GPUs of each group of `size`)."""
    out = np.ones((len(gpus), len(levels)), dtype=np.int64)
    valid = gpus >= 1
    for j, lvl in enumerate(levels):
        if lvl.size is None:
            cum = gpus
        else:
            k = lvl.size // size
            spills = used > gpus // k  # k x used > gpus, computed without overflowing int64
            cum = np.where(spills, gpus, k * np.where(spills, 1, used))
        used_safe = np.maximum(used, 1)
        valid &= cum % used_safe == 0
        out[:, j] = cum // used_safe
        used, size = cum, lvl.size or size
    valid &= used == gpus
    return out, valid


@dataclass(frozen=True)
class RackUse:
    """How a cluster sits on the lowest bounded level's groups (NVLink domains: racks, or nodes on DGX systems)."""

    level: str
    groups: int
    """Groups (racks) the job touches: each is bought whole."""
    gpus_per_group: int
    spare_gpus: int
    """GPUs in those groups the job leaves idle: groups x size - n."""


def rack_use(hw: Hardware, n: int) -> RackUse | None:
    """Racks bought and spares for n GPUs (None: no bounded level, or n does not fill the levels)."""
    fill = fill_levels(hw.levels, n)
    h = next((k for k, lvl in enumerate(hw.levels) if lvl.size is not None), None)
    if fill is None or h is None:
        return None
    per = math.prod(fill[:h + 1])
    groups = n // per
    size = hw.levels[h].size
    assert size is not None
    return RackUse(level=hw.levels[h].name, groups=groups, gpus_per_group=per, spare_gpus=groups * size - n)


def level_rule(hw: Hardware) -> str:
    """The level-filling rule of `hw` in words, for errors: 'groups of 8 (NVLink): a cluster larger than a group must
    be a whole number of groups'."""
    bounded = [lvl for lvl in hw.levels if lvl.size is not None]
    if not bounded:
        return "no bounded network level"
    groups = ", ".join(f"{lvl.size} ({lvl.name})" for lvl in bounded)
    text = f"groups of {groups}: a cluster larger than a group must be a whole number of groups"
    first = hw.levels[0]
    if first.subdivided:
        text += (f", except that each {first.name} group is used in part: the same number of GPUs in each, a multiple "
                 f"of {first.unit_gpus} and at most {first.usable_gpus}")
    return text


def nearest_cluster_sizes(hw: Hardware, n: int) -> tuple[int | None, int | None]:
    """The GPU counts nearest to `n` from below and above that fill `hw`'s levels bottom-up (as `level_products`
    accepts them); both are `n` when it does. Between a level's group size s and the next level's, the valid counts
    are the multiples of s (the next size is one too), so the neighbours are n rounded down and up to a multiple of the
    largest group size below n. With a `usable` lowest level, the capacities (`Hardware.level_caps`) take the sizes'
    place and the counts between their multiples are scanned in whole units. Above a bounded top level there is no
    valid count: (top, None)."""
    top = hw.max_gpus
    if top is not None and n > top:
        return top, None
    caps = hw.level_caps
    full = [math.prod(c for c in caps[:h + 1] if c is not None) for h in range(len(caps)) if caps[h] is not None]
    group = max((g for g in full if g < n), default=1)
    lo, hi = n // group * group, -(-n // group) * group
    first = hw.levels[0]
    unit = first.unit_gpus
    if first.subdivided and n < unit:  # inside one unit
        return n, n
    if first.subdivided and group == 1:  # inside one group: any whole number of units up to `usable`
        return n // unit * unit, -(-n // unit) * unit
    if first.subdivided and group // unit <= 1 << 16:  # a nearer count in whole units, within reach
        below = next((k for k in range(n // unit * unit, lo, -unit) if fill_levels(hw.levels, k)), lo)
        above = next((k for k in range(-(-n // unit) * unit, hi, unit) if fill_levels(hw.levels, k)), hi)
        lo, hi = below, above
    return lo, hi


@cache
def _factor_vectors(value: int, caps: tuple) -> tuple[tuple[int, ...], ...]:
    """All ways to write `value` as a product of one factor per level, each within its level's capacity."""
    H = len(caps)
    out = []

    def rec(h, rem, acc):
        if h == H - 1:
            if caps[h] is None or rem <= caps[h]:
                out.append(tuple(acc + [rem]))
            return
        for f in divisors(rem):
            if caps[h] is not None and f > caps[h]:
                break
            rec(h + 1, rem // f, acc + [f])

    rec(0, value, [])
    return tuple(out)


def factor_options(hw: Hardware, value: int) -> np.ndarray:
    """Placement options of one degree value: array (k, H) of per-level factors."""
    return np.array(_factor_vectors(int(value), hw.level_caps), dtype=np.int64).reshape(-1, len(hw.levels))


def placements_for_tuple(hw: Hardware, t: Tuples, row: int) -> np.ndarray:
    """Every valid placement of one degree tuple: array (k, degrees, H) in DEGREES order."""
    gpus = int(t.gpus[row])
    prods, valid = level_products(hw, np.array([gpus]))
    if not valid[0]:
        return np.zeros((0, len(DEGREES), len(hw.levels)), dtype=np.int64)
    opts = [factor_options(hw, int(t[d][row])) for d in DEGREES]
    idx = np.array(list(itertools.product(*[range(len(o)) for o in opts])), dtype=np.int64)
    if len(idx) == 0:
        return np.zeros((0, len(DEGREES), len(hw.levels)), dtype=np.int64)
    stacked = np.stack([opts[k][idx[:, k]] for k in range(len(DEGREES))], axis=1)  # (k, degrees, H)
    ok = (stacked.prod(axis=1) == prods[0][None, :]).all(axis=1)
    return stacked[ok]


def rank_order_factors(hw: Hardware, t: Mapping[str, np.ndarray], order: tuple[str, ...]
                       ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The placement a framework's rank order gives each tuple (consecutive ranks share the lowest level): walking up
    the levels, each degree of `order` (innermost first; the others must be 1) takes the largest part of what is left
    of it that fills what is left of the level. Returns (degree -> factors (n, H), valid): invalid where a degree's
    ranks would straddle a level's groups (a partial fill that leaves room) or the levels cannot be filled."""
    gpus = np.ones(len(np.asarray(t["dp"])), dtype=np.int64)
    for d in DEGREES:
        gpus = gpus * np.asarray(t[d], dtype=np.int64)
    prods, valid = level_products(hw, gpus)
    n, H = prods.shape
    left = {d: np.asarray(t[d], dtype=np.int64).copy() for d in order}
    room = prods.copy()
    out = {d: np.ones((n, H), dtype=np.int64) for d in DEGREES}
    broken = np.zeros(n, dtype=bool)
    for d in DEGREES:
        if d not in order:
            broken |= np.asarray(t[d]) != 1
    for h in range(H):
        for d in order:
            f = np.gcd(left[d], room[:, h])
            straddle = f < np.minimum(left[d], room[:, h])
            f = np.where(straddle, 1, f)
            out[d][:, h] = f
            left[d] //= f
            room[:, h] //= f
            spill = left[d] > 1
            broken |= spill & (room[:, h] > 1) & ~straddle | straddle
            room[:, h] = np.where(spill, 1, room[:, h])
    ok = valid & ~broken
    for d in order:
        ok &= left[d] == 1
    return out, ok


def layout_from(t: Tuples, row: int, placement: np.ndarray | Mapping[str, np.ndarray]) -> Layout:
    """The layout of one tuple row; `placement` is (degrees, H) in DEGREES order or a degree -> factors map."""
    factors = placement if isinstance(placement, Mapping) else {d: placement[k] for k, d in enumerate(DEGREES)}
    return Layout(
        **{d: int(t[d][row]) for d in (*DEGREES, *OPTIONS)},
        schedule="zb-h2" if t["zero_bubble"][row] else "1f1b",
        placement={d: tuple(int(x) for x in factors[d]) for d in DEGREES},
    )


def precision_problem(hw: Hardware, wl: Workload) -> str | None:
    """Why this GPU cannot run the workload's precision and recipe (None: it can). MXFP8's block scales need
    Blackwell's tensor cores (Transformer Engine transformer_engine/pytorch/fp8.py check_mxfp8_support: compute
    capability 10.0 or higher), the same that give the FP4 rate, so a hardware file shows them by its FP4 rate."""
    if hw.gpu.at_precision(wl.precision) is None:
        return (f"{hw.gpu.name} has no {wl.precision.upper()} rate in its hardware file; use precision "
                f"{hw.gpu.instead_of(wl.precision)}")
    if wl.recipe_name == "mxfp8" and hw.gpu.at_precision("fp4") is None:
        return (f"mxfp8 needs Blackwell's block-scaled tensor cores (compute capability 10.0; an FP4 rate in the "
                f"hardware file), which {hw.gpu.name} lacks; use fp8, fp8-delayed or fp8-blockwise")
    return None


def check_layout(hw: Hardware, wl: Workload, layout: Layout) -> list[str]:
    """Every rule of the search space (docs/model.md) a layout breaks, as sentences naming the numbers."""
    H = len(hw.levels)
    if len(layout.placement["dp"]) != H:
        return [f"placement has {len(layout.placement['dp'])} levels but {hw.name} has {H}"]
    problem = precision_problem(hw, wl)
    if problem is not None:
        return [problem]
    problems = divisibility_problems(wl, {d: layout.degree(d) for d in (*DEGREES, *OPTIONS)})
    if layout.custom_stages and layout.pp > 1:  # custom ends replace the automatic split's rule
        uniform = stage_problem(wl, layout.pp, layout.interleave)
        problems = [p for p in problems if p != uniform]
    problems += folding_problems(wl, layout) + custom_stage_problems(wl, layout)
    if layout.schedule == "zb-h2":
        if layout.interleave != 1:
            problems.append("zb-h2 is modelled without interleaving (interleave must be 1)")
        if layout.microbatches < 2 * layout.pp - 1:
            problems.append(f"zb-h2 needs microbatches >= 2*pp-1 = {2 * layout.pp - 1}, got {layout.microbatches}")
    prods, valid = level_products(hw, np.array([layout.gpus]))
    if not valid[0]:
        problems.append(f"{layout.gpus} GPUs cannot fill the network levels bottom-up ({level_rule(hw)})")
    else:
        for h, lvl in enumerate(hw.levels):
            got = math.prod(layout.placement[d][h] for d in DEGREES)
            if got != prods[0][h]:
                problems.append(f"factors on level {h + 1} ({lvl.name}) multiply to {got}, need {prods[0][h]}")
    return problems


def folding_problems(wl: Workload, layout: Layout) -> list[str]:
    """The rules of a folded expert layout (Megatron's parallel folding, docs/model.md §1c), in words."""
    if not layout.folded:
        return []
    tr = wl.transformer
    if tr is None or wl.experts == 1:
        return ["etp / expert_ep (a folded expert layout) need a transformer with experts"]
    eep, etp = layout.expert_degrees
    out = []
    if layout.ep != 1:
        out.append(f"a folded expert layout gives expert parallelism as expert_ep: the placed ep must be 1, got "
                   f"{layout.ep}")
    if layout.tp_model != 1:
        out.append(f"a folded expert layout needs tp_model = 1 (Megatron has one TP axis), got {layout.tp_model}")
    if wl.experts % eep:
        out.append(f"expert_ep={eep} does not divide experts={wl.experts}")
    width = tr.expert_d_ff or wl.d_ff
    if width % etp:
        out.append(f"etp={etp} does not divide the expert width {width}")
    block = layout.dp * layout.ep * layout.cp * layout.tp_ff * layout.tp_model
    if block % (eep * etp):
        out.append(f"expert_ep({eep}) * etp({etp}) = {eep * etp} does not divide dp({layout.dp}) * cp({layout.cp}) "
                   f"* tp_ff({layout.tp_ff}) = {block}, the ranks of a pipeline stage the experts fold over")
    return out


def custom_stage_problems(wl: Workload, layout: Layout) -> list[str]:
    """The rules of custom first / last virtual-stage layer counts, in words."""
    if not layout.custom_stages:
        return []
    if wl.transformer is None:
        return ["first_stage_layers / last_stage_layers need a transformer workload"]
    v = layout.pp * layout.interleave
    if v < 2:
        return ["first_stage_layers / last_stage_layers need pipeline parallelism (pp * interleave >= 2)"]
    first, last = layout.first_stage_layers, layout.last_stage_layers
    given = [x for x in (first, last) if x is not None]
    rest = wl.layers - sum(given)
    left = v - len(given)
    if rest < 0:
        return [f"first and last stages hold {sum(given)} layers, more than the model's {wl.layers}"]
    if left == 0:
        return [] if rest == 0 else [f"pp({layout.pp}) * interleave({layout.interleave}) = 2 virtual stages hold "
                                     f"{sum(given)} layers, the model has {wl.layers}"]
    if rest % left or rest // left < 1:
        return [f"the {rest} layers left after the custom end stages do not split evenly over the other {left} "
                f"virtual stages (pp({layout.pp}) * interleave({layout.interleave}) = {v}), at least one each"]
    return []
