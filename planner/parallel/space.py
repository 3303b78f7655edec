"""The finite search space (SPEC §6): degree tuples and their placements over the network levels.

A layout = a *degree tuple* (N_DP, N_TP,ff, N_TP,model, N_PP, i, N_EP, m, schedule) + a *placement* (each
degree's factor on each network level). Rules:

- divisibility: N_TP,ff | d_ff, N_TP,model | d_model, N_PP * i | L, N_EP | E, N_DP * m | b / E (the nanobatch
  b / (E N_DP m) is a whole number of tokens);
- schedule: zb-h2 needs i = 1 and m >= 2 N_PP - 1;
- levels fill bottom-up: the degrees' factors at levels 1..h multiply to min(N, size(h)) for every bounded
  level h, so a cluster larger than a node is made of whole nodes (N a multiple of 8 on DGX systems), and a
  cluster that fits in one group sits in one group;
- memory (SPEC §5.5) is a property of the degree tuple alone (placement does not change it).

GPU counts are whatever the products allow, not only powers of two.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from planner.schema import DEGREES, Hardware, Layout, Workload


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
    """What the user constrains. `gpus` fixes the cluster size (SPEC §6 fixed-cluster mode)."""

    schedule: str = "auto"  # auto | 1f1b | zb-h2
    gpus: int | None = None
    dp_overlap: bool = False


@dataclass
class Tuples:
    """Degree tuples as parallel int64 arrays (one row each)."""

    dp: np.ndarray
    tp_ff: np.ndarray
    tp_model: np.ndarray
    pp: np.ndarray
    interleave: np.ndarray
    ep: np.ndarray
    microbatches: np.ndarray
    zero_bubble: np.ndarray

    def __len__(self) -> int:
        return len(self.dp)

    @property
    def gpus(self) -> np.ndarray:
        return self.dp * self.tp_ff * self.tp_model * self.pp * self.ep

    def take(self, idx) -> "Tuples":
        return Tuples(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})

    def degree(self, name: str) -> np.ndarray:
        return getattr(self, name)

    @classmethod
    def concat(cls, parts: list["Tuples"]) -> "Tuples":
        return cls(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in cls.__dataclass_fields__})


@dataclass
class Space:
    """The candidate values of every decision variable for one (hardware, workload, options)."""

    hw: Hardware
    wl: Workload
    options: SearchOptions
    tp_ff: np.ndarray
    tp_model: np.ndarray
    ep: np.ndarray
    pp_i_zb: np.ndarray  # (k, 3): N_PP, i, zero_bubble
    dp_m: np.ndarray  # (k, 2): N_DP, m with N_DP m | b / E
    level_tuples: list[np.ndarray] = field(default_factory=list)

    @property
    def H(self) -> int:
        return len(self.hw.levels)


def build_space(hw: Hardware, wl: Workload, options: SearchOptions) -> Space:
    per_expert = wl.batch_tokens // wl.experts if wl.batch_tokens % wl.experts == 0 else None
    if per_expert is None:
        dp_m = np.zeros((0, 2), dtype=np.int64)
    else:
        dp_m = np.array([(d, m) for u in divisors(per_expert) for d in divisors(u) for m in (u // d,)],
                        dtype=np.int64)
    rows = []
    for pp in divisors(wl.layers):
        for i in divisors(wl.layers // pp):
            if options.schedule in ("auto", "1f1b"):
                rows.append((pp, i, 0))
            if options.schedule in ("auto", "zb-h2") and i == 1:
                rows.append((pp, 1, 1))
    return Space(
        hw=hw, wl=wl, options=options,
        tp_ff=np.array(divisors(wl.d_ff), dtype=np.int64),
        tp_model=np.array(divisors(wl.d_model), dtype=np.int64),
        ep=np.array(divisors(wl.experts), dtype=np.int64),
        pp_i_zb=np.array(rows, dtype=np.int64).reshape(-1, 3),
        dp_m=dp_m,
    )


def tuples_for_model_parallel(space: Space, mp_rows: np.ndarray, dp_m_rows: np.ndarray) -> Tuples:
    """Cartesian product of model-parallel rows (tf, tm, pp, i, zb, ep) and (dp, m) rows, with schedule rules."""
    a = np.repeat(mp_rows, len(dp_m_rows), axis=0)
    b = np.tile(dp_m_rows, (len(mp_rows), 1))
    keep = (a[:, 4] == 0) | (b[:, 1] >= 2 * a[:, 2] - 1)
    a, b = a[keep], b[keep]
    return Tuples(dp=b[:, 0], tp_ff=a[:, 0], tp_model=a[:, 1], pp=a[:, 2], interleave=a[:, 3],
                  ep=a[:, 5], microbatches=b[:, 1], zero_bubble=a[:, 4].astype(bool))


def model_parallel_rows(space: Space) -> np.ndarray:
    """All (tf, tm, pp, i, zb, ep) combinations, shape (k, 6)."""
    grids = np.meshgrid(np.arange(len(space.tp_ff)), np.arange(len(space.tp_model)),
                        np.arange(len(space.pp_i_zb)), np.arange(len(space.ep)), indexing="ij")
    g = [x.ravel() for x in grids]
    pz = space.pp_i_zb[g[2]]
    return np.stack([space.tp_ff[g[0]], space.tp_model[g[1]], pz[:, 0], pz[:, 1], pz[:, 2], space.ep[g[3]]], axis=1)


def space_size(space: Space) -> int:
    """Number of valid degree tuples (placements counted separately; see `placement_count`)."""
    n_mp_1f1b = len(space.tp_ff) * len(space.tp_model) * len(space.ep)
    total = 0
    m = space.dp_m[:, 1]
    for pp, i, zb in space.pp_i_zb:
        total += n_mp_1f1b * (int((m >= 2 * pp - 1).sum()) if zb else len(m))
    return int(total)


# --------------------------------------------------------------------------------------------------
# Placements
# --------------------------------------------------------------------------------------------------


def level_products(hw: Hardware, gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Required product of the degrees' factors at each level (levels fill bottom-up), and validity.

    Returns (products of shape (n, H), valid of shape (n,)). Invalid: the cluster spans a level but is not a
    whole number of its groups, or it exceeds the top level's size.
    """
    gpus = np.asarray(gpus, dtype=np.int64)
    n, H = len(gpus), len(hw.levels)
    prods = np.ones((n, H), dtype=np.int64)
    valid = np.ones(n, dtype=bool)
    prev_cum = np.ones(n, dtype=np.int64)
    for h, lvl in enumerate(hw.levels):
        cum = gpus if lvl.size is None else np.minimum(gpus, lvl.size)
        valid &= cum % prev_cum == 0
        prods[:, h] = cum // np.maximum(prev_cum, 1)
        prev_cum = cum
    valid &= prev_cum == gpus
    return prods, valid


@lru_cache(maxsize=None)
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
    """Every valid placement of one degree tuple: array (k, 5, H) in DEGREES order."""
    gpus = int(t.gpus[row])
    prods, valid = level_products(hw, np.array([gpus]))
    if not valid[0]:
        return np.zeros((0, len(DEGREES), len(hw.levels)), dtype=np.int64)
    opts = [factor_options(hw, int(t.degree(d)[row])) for d in DEGREES]
    idx = np.array(list(itertools.product(*[range(len(o)) for o in opts])), dtype=np.int64)
    if len(idx) == 0:
        return np.zeros((0, len(DEGREES), len(hw.levels)), dtype=np.int64)
    stacked = np.stack([opts[k][idx[:, k]] for k in range(len(DEGREES))], axis=1)  # (k, 5, H)
    ok = (stacked.prod(axis=1) == prods[0][None, :]).all(axis=1)
    return stacked[ok]


def layout_from(t: Tuples, row: int, placement: np.ndarray) -> Layout:
    return Layout(
        dp=int(t.dp[row]), tp_ff=int(t.tp_ff[row]), tp_model=int(t.tp_model[row]), pp=int(t.pp[row]),
        interleave=int(t.interleave[row]), ep=int(t.ep[row]), microbatches=int(t.microbatches[row]),
        schedule="zb-h2" if t.zero_bubble[row] else "1f1b",
        placement={d: tuple(int(x) for x in placement[k]) for k, d in enumerate(DEGREES)},
    )


def check_layout(hw: Hardware, wl: Workload, layout: Layout) -> list[str]:
    """Every rule of SPEC §6 a layout breaks, as sentences naming the numbers (empty list = valid)."""
    problems = []
    H = len(hw.levels)
    if len(layout.placement["dp"]) != H:
        return [f"placement has {len(layout.placement['dp'])} levels but {hw.name} has {H}"]
    if wl.d_ff % layout.tp_ff:
        problems.append(f"tp_ff={layout.tp_ff} does not divide d_ff={wl.d_ff}")
    if wl.d_model % layout.tp_model:
        problems.append(f"tp_model={layout.tp_model} does not divide d_model={wl.d_model}")
    if wl.layers % (layout.pp * layout.interleave):
        problems.append(f"pp({layout.pp}) * interleave({layout.interleave}) does not divide layers={wl.layers}")
    if wl.experts % layout.ep:
        problems.append(f"ep={layout.ep} does not divide experts={wl.experts}")
    denom = wl.experts * layout.dp * layout.microbatches
    if wl.batch_tokens % denom:
        problems.append(f"batch {wl.batch_tokens} tokens is not divisible by experts({wl.experts}) * dp({layout.dp}) "
                        f"* microbatches({layout.microbatches}) = {denom}: the nanobatch must be whole tokens")
    if layout.schedule == "zb-h2":
        if layout.interleave != 1:
            problems.append("zb-h2 is modelled without interleaving (interleave must be 1)")
        if layout.microbatches < 2 * layout.pp - 1:
            problems.append(f"zb-h2 needs microbatches >= 2*pp-1 = {2 * layout.pp - 1}, got {layout.microbatches}")
    prods, valid = level_products(hw, np.array([layout.gpus]))
    if not valid[0]:
        sizes = [lvl.size for lvl in hw.levels if lvl.size]
        problems.append(f"{layout.gpus} GPUs cannot fill the network levels bottom-up (group sizes {sizes})")
    else:
        for h, lvl in enumerate(hw.levels):
            got = math.prod(layout.placement[d][h] for d in DEGREES)
            if got != prods[0][h]:
                problems.append(f"factors on level {h + 1} ({lvl.name}) multiply to {got}, need {prods[0][h]}")
    return problems
