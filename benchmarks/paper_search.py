"""The paper's simulator, replayed on our cost model, and the waterfall from its search to ours (reproduction aid).

The paper's tables come from its simulator (github.com/ege-erdil/limits_to_distributed_training,
`optimal_parallelism.ipynb` with `gpu/gpu_model.py`). This module searches *that* code's space, with *its*
settings, exhaustively, pricing every layout with our float cost model (planner.cost.terms through
planner.search.exhaustive.price_placements), so that "their search" and "our search" can be told apart. The rules
below were read in the simulator's final commit b1f771c (2024-10-23; the changes that matter are 8909283, a3bfdf5
and cffbe24). The code carries no licence: nothing here is taken from it but the rules, restated in our words.

Shapes and grid (`sim_workload`, `SIM_D_MODELS`):
- d_model runs over f 2^k (f odd, 1..15) from 12288 to 128 x 12288, d_ff = 4 d_model; L and (sparse) E are the
  App. 8.1.4 laws rounded to the nearest (linear distance, ties down) f 2^k with f in {1, 3, 5, 7, 9};
- D = 20 N_p, T = 6 (N_p / E) D; the batch is E x (the nearest such number to sqrt(E) (T / 3e23)^(1/6) 2048 / E)
  sequences of 2048 tokens;
- a run must finish within 0.25 of its 3.154e7-second year (`SIM_DEADLINE_DAYS`); network latency is 1.125 us per
  level (our hardware files already say so).

Search (`Rules()`, the replay):
- clusters N = E 2^k in increasing order, from the least N whose sustained peak could meet the deadline; the first
  N on which the fastest layout meets the deadline wins, and on it that fastest layout;
- N_EP = gcd(N, E); N / N_EP = N_TP N_DP N_PP with N_TP,ff between isqrt(N_TP) and 4 isqrt(N_TP);
- both schedules: 1F1B with i = L / N_PP (i = 1 without pipelining) and the four smallest microbatch counts m that
  divide b / (E N_DP) and are at least N_PP; ZB-H2 with i = 1 and the single smallest such m that is at least
  2 N_PP (twice the stages, so that the latency hides);
- memory for the cluster as a whole, without activations: N x HBM >= N_p x 2 bytes x (N_DP + 4);
- step: DP in its own phase after the pipeline; under 1F1B the TP + PP/EP latency of one microbatch's path once per
  step, after the bubble; under ZB-H2 no bubble and no TP/PP/EP latency at all (the final code takes the max of
  that latency and the overlapped traffic only after the pipeline time has been formed, so the latency never
  reaches the step time); no critical-path floor.

What stays ours even in the replay: the GEMM model, TP and DP all-reduce times (both take the max over levels since
8909283), the point-to-point traffic (we take the max over levels where the simulator sums them), divisibility of
each degree into its own dimension, and placements filled bottom-up (the simulator's partitions do the same).

The waterfall (`WATERFALL`) relaxes one rule at a time, cumulatively, toward the planner's own search; its last two
steps are the planner's own sweep (docs/reproduction/table3-*.json), read first with the simulator's crossing rule
and then with ours.

Usage: python benchmarks/paper_search.py [--gpu h100] [--sparse] [--step N]   (one curve; step 0 = the replay)
"""

from __future__ import annotations

import argparse
import bisect
import csv
import json
import math
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.cost.step import evaluate, mfu  # noqa: E402
from planner.cost.terms import group_terms  # noqa: E402
from planner.parallel.dimensions import DEGREES  # noqa: E402
from planner.parallel.space import (  # noqa: E402
    SearchOptions,
    Space,
    Tuples,
    build_space,
    divisors,
    layout_from,
    model_parallel_rows,
    mp_size,
)
from planner.schema import Hardware, Layout, Workload  # noqa: E402
from planner.search.exhaustive import price_placements  # noqa: E402
from planner.search.presolve import LeastFeatures, ShapeTable, tuple_terms  # noqa: E402

# --------------------------------------------------------------------------------------------------
# The simulator's settings and shapes (final commit b1f771c)
# --------------------------------------------------------------------------------------------------

SIM_COMMIT = "b1f771c93f95b179f3dfee32ebfe1169a78b61d5"
SIM_SECONDS_PER_YEAR = 3.154e7
SIM_RUN_YEARS = 0.25
SIM_DEADLINE_DAYS = SIM_RUN_YEARS * SIM_SECONDS_PER_YEAR / 86400.0
"""Three months as the notebook counts them (91.27 days; ours is 365.25 / 4 = 91.31)."""
SIM_LATENCY_S = 1.125e-6
"""Network latency per level for V100, A100 and H100 in the final gpu/gpu_model.py."""
SIM_SEQ_LEN = 2048
_SIM_ROUNDING = sorted(f * 2**k for f in (1, 3, 5, 7, 9) for k in range(60))
SIM_D_MODELS = tuple(sorted(f * 2**k for f in range(1, 17, 2) for k in range(11, 22)
                            if 12288 <= f * 2**k <= 128 * 12288))
"""The notebook's d_model grid: f 2^k, f odd in 1..15, between 12288 and 128 x 12288."""


def with_latency(hw: Hardware, lat_s: float) -> Hardware:
    """`hw` with every network level's one-way latency set to `lat_s` (its name unchanged; a sensitivity)."""
    return hw.model_copy(update={"levels": tuple(lv.model_copy(update={"lat_s": lat_s}) for lv in hw.levels)})


def sim_round(x: float) -> int:
    """The nearest f 2^k (f in {1, 3, 5, 7, 9}) by linear distance, the smaller on a tie (the notebook's rule)."""
    pos = bisect.bisect_left(_SIM_ROUNDING, x)
    if pos == 0:
        return _SIM_ROUNDING[0]
    before, after = _SIM_ROUNDING[pos - 1], _SIM_ROUNDING[pos]
    return after if after - x < x - before else before


def sim_workload(d_model: int, sparse: bool) -> Workload:
    """The simulator's model at one d_model of its grid (module docstring)."""
    from planner.workload import workload_from_shape

    d_ff = 4 * d_model
    layers = sim_round(0.10056 * (d_model * d_ff) ** 0.3751)
    experts = sim_round(8 * (d_model * d_ff / (4 * 12288**2)) ** 0.5) if sparse else 1
    params = 2 * d_model * d_ff * layers * experts
    compute = 6 * params * 20 * params / experts
    seqs = experts ** 0.5 * (compute / 3e23) ** (1 / 6) * 2048 * 2048 / SIM_SEQ_LEN
    batch_tokens = experts * sim_round(seqs / experts) * SIM_SEQ_LEN
    return workload_from_shape(d_model, d_ff, layers, experts, batch_tokens,
                               label=f"simulator @ {SIM_COMMIT[:7]}, d_model {d_model}")


# --------------------------------------------------------------------------------------------------
# Rules: the replay, and each relaxation toward our search
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rules:
    """One search. Every field's first value is the simulator's (the replay); the other is ours."""

    clusters: str = "e2k"  # "e2k": N = E 2^k, first N that meets the deadline | "any": fewest GPUs of any count
    microbatches: str = "sim"  # "sim": 4 smallest m >= N_PP (1F1B), smallest m >= 2 N_PP (ZB) | "free": any m
    # (ZB-H2: m >= 2 N_PP - 1)
    interleave: str = "sim"  # "sim": i = L / N_PP under 1F1B | "free": any i with N_PP i | L
    ep: str = "gcd"  # "gcd": N_EP = gcd(N, E) | "any": any divisor of E
    tp_split: str = "sim"  # "sim": isqrt(N_TP) <= N_TP,ff <= 4 isqrt(N_TP) | "free": any split
    memory: str = "cluster"  # "cluster": N HBM >= N_p 2 B (N_DP + 4) | "ours": per GPU, docs/model.md §7
    latency: str = "once"  # "once": one microbatch's path per 1F1B step | "ours": m / N_PP of it (docs/model.md §4)
    floor: bool = False  # the critical-path floor (docs/model.md §6)


REPLAY = Rules()
OURS = Rules("any", "free", "free", "any", "free", "ours", "ours", True)

WATERFALL: tuple[tuple[str, str], ...] = (
    ("replay", "the simulator's final search on our cost model, read with its rule (the first point at or below "
               "the line)"),
    ("crossing", "the same points, read with our rule (the non-increasing fit's crossing, log-interpolated)"),
    ("clusters", "any GPU count: the fewest GPUs that meet the deadline"),
    ("microbatches", "any microbatch count (ZB-H2: m >= 2 N_PP - 1)"),
    ("interleave", "any interleaving i with N_PP·i dividing L"),
    ("ep", "N_EP any divisor of E"),
    ("tp_split", "any N_TP,ff : N_TP,model split"),
    ("memory", "our per-GPU memory model (activations, gradients, reserve)"),
    ("latency", "1F1B waits m / N_PP latency paths per step, not one"),
    ("floor", "the critical-path floor: our search, on the simulator's shapes"),
    ("shapes", "our shapes, grid and 91.31-day runs: the planner's own sweep"),
)
"""(what changes, what that means); each step keeps the changes before it. Steps 'replay' and 'crossing' share one
search; 'shapes' is the planner's sweep (docs/reproduction/table3-*.json), not searched here."""

SEARCH_FIELDS = tuple(f for f, _ in WATERFALL if f not in ("replay", "crossing", "shapes"))


def rules_at(step: int) -> Rules:
    """The search rules of waterfall step `step` (0 and 1: the replay; the last: not searched here)."""
    r = REPLAY
    for field, _ in WATERFALL[2:step + 1]:
        if field in SEARCH_FIELDS:
            r = replace(r, **{field: getattr(OURS, field)})
    return r


# --------------------------------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------------------------------


def _microbatch_choices(per_rank: int, pp: int, zero_bubble: bool, rule: str) -> list[int]:
    ms = divisors(per_rank)
    if rule == "sim":
        return [d for d in ms if d >= 2 * pp][:1] if zero_bubble else [d for d in ms if d >= pp][:4]
    return [d for d in ms if d >= 2 * pp - 1] if zero_bubble else list(ms)


@dataclass
class _Prepared:
    space: Space
    mp: dict[str, np.ndarray]
    mp_gpus: np.ndarray
    shapes: ShapeTable
    least: LeastFeatures
    terms: tuple


_PREPARED: dict[tuple, _Prepared] = {}


def _prepare(hw: Hardware, wl: Workload, rules: Rules) -> _Prepared:
    key = (hw.name, wl.model_dump_json(), rules.interleave, rules.tp_split)
    if key not in _PREPARED:
        space = build_space(hw, wl, SearchOptions(schedule="auto"))
        mp = model_parallel_rows(space)
        keep = np.ones(len(mp["pp"]), dtype=bool)
        if rules.interleave == "sim":
            want = np.where(mp["zero_bubble"] | (mp["pp"] == 1), 1, wl.layers // mp["pp"])
            keep &= mp["interleave"] == want
        if rules.tp_split == "sim":
            root = np.array([math.isqrt(int(x)) for x in mp["tp_ff"] * mp["tp_model"]], dtype=np.int64)
            keep &= (mp["tp_ff"] >= root) & (mp["tp_ff"] <= 4 * root)
        mp = {k: v[keep] for k, v in mp.items()}
        if len(_PREPARED) > 8:
            _PREPARED.clear()
        _PREPARED[key] = _Prepared(space, mp, mp_size(mp), ShapeTable.for_space(hw, wl, space),
                                   LeastFeatures(hw, wl), group_terms(wl, hw.profile))
    return _PREPARED[key]


def candidate_tuples(hw: Hardware, wl: Workload, rules: Rules, lo: float, hi: float) -> Tuples:
    """Every degree tuple the rules allow with lo <= N < hi."""
    prep = _prepare(hw, wl, rules)
    mp, per_expert = prep.mp, wl.batch_tokens // wl.experts
    parts = []
    for dp in divisors(per_expert):
        n = prep.mp_gpus * dp
        idx = np.nonzero((n >= lo) & (n < hi))[0]
        ni = np.round(n[idx]).astype(np.int64)  # < 2 MAX_GPUS: exact
        ok = np.ones(len(idx), dtype=bool)
        if rules.clusters == "e2k":
            k = ni // wl.experts
            ok &= (ni % wl.experts == 0) & ((k & (k - 1)) == 0)
        if rules.ep == "gcd":
            ok &= mp["ep"][idx] == np.gcd(ni, wl.experts)
        idx = idx[ok]
        if len(idx) == 0:
            continue
        combos = np.unique(np.stack([mp["pp"][idx], mp["zero_bubble"][idx].astype(np.int64)], axis=1), axis=0)
        for pp, zb in combos:
            ms = _microbatch_choices(per_expert // dp, int(pp), bool(zb), rules.microbatches)
            if not ms:
                continue
            rows = idx[(mp["pp"][idx] == pp) & (mp["zero_bubble"][idx] == bool(zb))]
            cols = {k: np.repeat(v[rows], len(ms)) for k, v in mp.items()}
            cols["dp"] = np.full(len(rows) * len(ms), dp, dtype=np.int64)
            cols["microbatches"] = np.tile(np.array(ms, dtype=np.int64), len(rows))
            parts.append(Tuples(cols))
    return Tuples.concat(parts) if parts else Tuples.empty()


@dataclass(frozen=True)
class Choice:
    gpus: int
    step_s: float
    mfu: float
    training_days: float
    layout: Layout


def _step_under(rules: Rules, arr: dict[str, np.ndarray], critical_mm_s: np.ndarray, zb: np.ndarray) -> np.ndarray:
    """The step time under the rules' latency accounting, from our cost model's pieces (planner.cost.terms.price):
    Eq. 21 with its 1F1B latency term m / N_PP x path replaced by one path (ZB-H2: none), and the floor if asked."""
    eq21 = arr["eq21_s"]
    if rules.latency == "once":
        path = arr["critical_path_s"] - critical_mm_s
        eq21 = eq21 - (arr["latency_s"] - arr["latency_dp_s"]) + np.where(zb, 0.0, path)
    return np.maximum(eq21, arr["floor_s"]) if rules.floor else eq21


def _best_at_least_gpus(hw: Hardware, wl: Workload, rules: Rules, deadline_s: float, t: Tuples) -> Choice | None:
    """The fewest-GPU N of `t` with a layout that meets the deadline and the memory rule, and on it the fastest."""
    prep = _prepare(hw, wl, rules)
    q = tuple_terms(hw, wl, t, prep.shapes)
    n = t.gpus.astype(np.float64)
    if rules.memory == "cluster":
        fits = n * hw.gpu.hbm_bytes >= wl.params * hw.gpu.word_bytes * (t["dp"].astype(np.float64) + 4.0)
    else:
        fits = q["memory_bytes"] <= hw.gpu.hbm_bytes
    # Every step rule is at least the DP phase plus the stretched max(GEMMs, overlapped traffic); with each group
    # term at its least over placements (planner.search.presolve's bound reading) that is a placement-free test.
    keep = np.nonzero(fits & (wl.steps * q["stretch"] * q["matmul_s"] <= deadline_s))[0]
    if len(keep) == 0:
        return None
    t, q, n = t.take(keep), {k: v[keep] for k, v in q.items()}, n[keep]
    least = prep.least.group_values(t)
    bw = sum((least[g.name] for g in prep.terms if g.kind in ("bw", "zero_bw")), np.zeros(len(t)))
    dp = sum((least[g.name] for g in prep.terms if g.kind in ("dp_bw", "dp_lat")), np.zeros(len(t)))
    keep = np.nonzero(wl.steps * (q["stretch"] * np.maximum(q["matmul_s"], bw) + dp) <= deadline_s)[0]
    if len(keep) == 0:
        return None
    keep = keep[np.argsort(n[keep], kind="stable")]
    start = 0
    while start < len(keep):
        stop = min(start + 20_000, len(keep))
        while stop < len(keep) and n[keep[stop]] == n[keep[stop - 1]]:
            stop += 1  # a chunk ends with whole GPU counts
        sub = t.take(keep[start:stop])
        qs = {k: v[keep[start:stop]] for k, v in q.items()}
        rows, pl, arr = price_placements(hw, wl, sub, False, qs)
        if len(rows):
            zb = sub["zero_bubble"][rows].astype(bool)
            step = _step_under(rules, arr, qs["critical_mm_s"][rows], zb)
            ok = np.nonzero(wl.steps * step <= deadline_s)[0]
            if len(ok):
                gpus = arr["gpus"][ok]
                order = np.lexsort((ok, arr["network_s"][ok], step[ok], gpus))
                k = ok[order[0]]
                s = float(step[k])
                return Choice(int(arr["gpus"][k]), s, float(mfu(hw, wl, int(arr["gpus"][k]), s)),
                              wl.steps * s / 86400.0, layout_from(sub, int(rows[k]), pl[k]))
        start = stop
    return None


MAX_GPUS = 2.0**40


def plan_rules(hw: Hardware, wl: Workload, rules: Rules, days: float = SIM_DEADLINE_DAYS) -> Choice | None:
    """The rules' choice for one workload, or None if no cluster up to MAX_GPUS meets the deadline.

    Windows of GPU counts [lo, 2 lo) are searched in increasing order from the least N whose sustained peak could
    meet the deadline (no layout of our model beats the sustained clock), so the first window with a feasible
    layout holds the fewest-GPU answer."""
    deadline_s = days * 86400.0
    lo = max(1.0, math.floor(0.999 * wl.compute_flop / (deadline_s * hw.gpu.peak_flops
                                                          * hw.gpu.sustained_clock_factor)))
    while lo < MAX_GPUS:
        hi = lo * WINDOW_RATIO
        t = candidate_tuples(hw, wl, rules, lo, hi)
        if len(t):
            got = _best_at_least_gpus(hw, wl, rules, deadline_s, t)
            if got is not None:
                return got
        lo = hi
    return None


WINDOW_RATIO = 2.0**0.25
"""GPU-count windows [lo, lo x 2^(1/4)): the answer does not depend on the windows (each holds whole counts and they
are searched in increasing order), but a window's tuples are priced at once, and the sparse curves' relaxed steps
held 22 GB in windows of a factor 2."""


# --------------------------------------------------------------------------------------------------
# Curves and their end of linear scaling
# --------------------------------------------------------------------------------------------------


def threshold_mfu(hw: Hardware) -> float:
    from planner.sweep import LINEAR_SCALING_FRACTION

    return LINEAR_SCALING_FRACTION * hw.gpu.sustained_clock_factor


def sim_curve(hw: Hardware, sparse: bool, rules: Rules, below_to_stop: int = 3,
              d_models: tuple[int, ...] = SIM_D_MODELS, from_flop: float = 0.0) -> list[dict]:
    """The rules' choice at every d_model of the simulator's grid (from compute `from_flop` on), in order, until the
    last `below_to_stop` points are all at or below the line (enough for both crossing rules) or no cluster meets
    the deadline (the simulator stops there too)."""
    rows: list[dict] = []
    thr = threshold_mfu(hw)
    for d in d_models:
        wl = sim_workload(d, sparse)
        if wl.compute_flop < from_flop:
            continue
        t0 = time.perf_counter()
        got = plan_rules(hw, wl, rules)
        if got is None:
            break
        lay = got.layout
        rows.append({"d_model": d, "layers": wl.layers, "experts": wl.experts, "batch_tokens": wl.batch_tokens,
                     "compute_flop": wl.compute_flop, "gpus": got.gpus, "mfu": got.mfu,
                     "training_days": got.training_days, "dp": lay.dp, "tp_ff": lay.tp_ff,
                     "tp_model": lay.tp_model, "pp": lay.pp, "interleave": lay.interleave, "ep": lay.ep,
                     "microbatches": lay.microbatches, "schedule": lay.schedule,
                     "solve_s": time.perf_counter() - t0})
        if len(rows) >= below_to_stop and all(r["mfu"] <= thr for r in rows[-below_to_stop:]):
            break
    return rows


def curve_ends(hw: Hardware, rows: list[dict]) -> dict[str, float | None]:
    """Both readings of one curve: 'first' (the simulator's) and 'fit' (ours)."""
    thr = threshold_mfu(hw)
    return {"first": first_crossing(rows, thr),
            "fit": fit_crossing([r["compute_flop"] for r in rows], [r["mfu"] for r in rows], thr)}


def first_crossing(rows: list[dict], threshold: float, key: str = "compute_flop") -> float | None:
    """The simulator's rule: the compute of the first point whose MFU is at or below the line (None: none is)."""
    for r in rows:
        if r["mfu"] is not None and r["mfu"] <= threshold:
            return r[key]
    return None


def fit_crossing(xs: list[float], mfus: list[float], threshold: float) -> float | None:
    """Our rule (planner.sweep.summarise): where the non-increasing fit crosses the line, log-interpolated."""
    from planner.sweep import crossing_below, non_increasing_fit

    return crossing_below(xs, non_increasing_fit(mfus), threshold)


# --------------------------------------------------------------------------------------------------
# The final notebook's own printed rows, priced by our model (per-layout agreement)
# --------------------------------------------------------------------------------------------------

NOTEBOOK_ROWS_CSV = Path(__file__).resolve().parent.parent / "docs" / "reproduction" / "simulator-b1f771c-h100.csv"
"""The dense H100 rows the final notebook prints for its "Default scaling" setting (the paper's batch law), as
numbers: extracted by `--extract-notebook` from the notebook's stored output at b1f771c."""

_ROW = re.compile(r"Layers: (\d+)\s+Sparsity: (\d+).*Training: ([\d.e+]+) FLOP, ([\d.]+) months\s+Util: ([\d.]+)"
                  r".*\((\d+), (\d+)\)=\d+ TP, (\d+) PP \(v=(\d+)\), (\d+) DP, (\d+) EP")
_PART = re.compile(r"DP: \[([\d, ]+)\] TP_m: \[([\d, ]+)\] TP_ff: \[([\d, ]+)\] PP: \[([\d, ]+)\] EP: \[([\d, ]+)\]")
_MB = re.compile(r"Number of vertical microbatches: (\d+)")
_COMM = re.compile(r"TP comm time: ([\d.]+) months, PP comm time: ([\d.]+) months, DP comm time: ([\d.]+) months, "
                   r"Network latency time: ([\d.]+) months")
_DIMS = re.compile(r"Individual GPU matmul dimensions: (\d+), (\d+), (\d+)")


def extract_notebook_rows(text: str, setting: str = "Default scaling") -> list[dict]:
    """The printed rows of one setting of the notebook's output, as numbers (d_model and the batch from the
    printed per-GPU GEMM dimensions, which are exact; the other fields as printed)."""
    block = text.split(f"Simulating training runs for setting: {setting}")[1].split("Simulating training runs")[0]
    out = []
    for chunk in block.split("d_model: ")[1:]:
        m, part, mb, dims = _ROW.search(chunk), _PART.search(chunk), _MB.search(chunk), _DIMS.search(chunk)
        comm = _COMM.search(chunk)
        if not (m and part and mb and dims and comm):
            continue
        levels = [[int(x) for x in g.split(",")] for g in part.groups()]
        tp_m, tp_ff, pp, v, dp, ep = (int(m.group(k)) for k in (6, 7, 8, 9, 10, 11))
        micro = int(mb.group(1))
        out.append({"d_model": int(dims.group(1)) * tp_m, "layers": int(m.group(1)), "experts": int(m.group(2)),
                    "batch_tokens": int(dims.group(3)) * dp * micro * int(m.group(2)),
                    "compute_flop": float(m.group(3)), "months": float(m.group(4)), "mfu": float(m.group(5)),
                    "dp": dp, "tp_model": tp_m, "tp_ff": tp_ff, "pp": pp, "interleave": v, "ep": ep,
                    "microbatches": micro, "tp_months": float(comm.group(1)), "pp_months": float(comm.group(2)),
                    "dp_months": float(comm.group(3)), "latency_months": float(comm.group(4)),
                    "placement": dict(zip(("dp", "tp_model", "tp_ff", "pp", "ep"), levels))})
    return out


def write_notebook_rows(notebook_path: str) -> None:
    """Extract the rows from a copy of optimal_parallelism.ipynb at b1f771c into NOTEBOOK_ROWS_CSV."""
    nb = json.loads(Path(notebook_path).read_text(encoding="utf-8"))
    text = "".join("".join(o.get("text", [])) for c in nb["cells"] if c["cell_type"] == "code"
                   for o in c.get("outputs", []))
    rows = extract_notebook_rows(text)
    with NOTEBOOK_ROWS_CSV.open("w", newline="", encoding="utf-8") as f:
        cols = [k for k in rows[0] if k != "placement"] + [f"{d}_levels" for d in rows[0]["placement"]]
        wr = csv.writer(f)
        wr.writerow(cols)
        for r in rows:
            wr.writerow([r[k] for k in cols if not k.endswith("_levels")]
                        + [" ".join(str(x) for x in r["placement"][d]) for d in r["placement"]])


def read_notebook_rows() -> list[dict]:
    with NOTEBOOK_ROWS_CSV.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        row: dict = {k: (float(v) if k in ("compute_flop", "mfu") or k.endswith("months") else int(v))
                     for k, v in r.items() if not k.endswith("_levels")}
        row["placement"] = {k[:-7]: tuple(int(x) for x in v.split()) for k, v in r.items() if k.endswith("_levels")}
        out.append(row)
    return out


def price_notebook_row(hw: Hardware, row: dict) -> dict:
    """Our MFU for one printed row: its own shape, layout and placement, the replay's step rule. A pipelined row
    printed with v = 1 is ZB-H2 (1F1B always interleaves L / N_PP there); without pipelining both schedules price
    the same but for the latency, and the faster (the simulator's choice) is taken."""
    wl = sim_workload(row["d_model"], row["experts"] > 1)
    schedules = ["zb-h2"] if row["pp"] > 1 and row["interleave"] == 1 else ["1f1b"]
    if row["pp"] == 1:
        schedules = ["1f1b", "zb-h2"]
    best = None
    for sched in schedules:
        lay = Layout(dp=row["dp"], tp_ff=row["tp_ff"], tp_model=row["tp_model"], pp=row["pp"],
                     interleave=row["interleave"], ep=row["ep"], microbatches=row["microbatches"], schedule=sched,
                     placement={**{d: row["placement"][d] for d in row["placement"]}, "cp": (1,) * len(hw.levels)})
        t = Tuples.from_layouts([lay])
        prep_shapes = ShapeTable(hw, wl, t["tp_ff"], t["tp_model"], t["dp"] * t["microbatches"])
        q = tuple_terms(hw, wl, t, prep_shapes)
        rows, pl, arr = price_placements(hw, wl, t, False, q)
        mine = np.stack([np.array(lay.placement[d]) for d in DEGREES])[None]
        k = int(np.nonzero((pl == mine).all(axis=(1, 2)))[0][0])
        one = {key: np.broadcast_to(v, (len(rows),))[k:k + 1] for key, v in arr.items()}
        step = float(_step_under(REPLAY, one,
                                 q["critical_mm_s"][rows[k:k + 1]], t["zero_bubble"][rows[k:k + 1]].astype(bool))[0])
        ev = evaluate(hw, wl, lay)
        got = {"schedule": sched, "mfu": float(mfu(hw, wl, lay.gpus, step)),
               "tp_months": ev.step.tp_s * wl.steps / (SIM_SECONDS_PER_YEAR / 12),
               "matmul_months": ev.step.matmul_s * wl.steps / (SIM_SECONDS_PER_YEAR / 12),
               "months": wl.steps * step / (SIM_SECONDS_PER_YEAR / 12), "layers_match": wl.layers == row["layers"],
               "batch_match": wl.batch_tokens == row["batch_tokens"]}
        if best is None or got["mfu"] > best["mfu"]:
            best = got
    assert best is not None
    return best


def main(argv: list[str] | None = None) -> int:
    from planner.hardware import get_hardware

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--sparse", action="store_true")
    ap.add_argument("--extract-notebook", metavar="IPYNB",
                    help=f"write {NOTEBOOK_ROWS_CSV.name} from the notebook at b1f771c, then exit")
    ap.add_argument("--step", type=int, default=0, help=f"waterfall step, 0 (replay) .. {len(WATERFALL) - 2}")
    a = ap.parse_args(argv)
    if a.extract_notebook:
        write_notebook_rows(a.extract_notebook)
        return 0
    hw = get_hardware(a.gpu)
    rules = rules_at(a.step)
    t0 = time.perf_counter()
    rows = sim_curve(hw, a.sparse, rules)
    for r in rows:
        print(f"d_model {r['d_model']}: {r['compute_flop']:.3g} FLOP, {r['gpus']:,} GPUs, MFU {r['mfu']:.3f}, "
              f"{r['training_days']:.1f} days, dp {r['dp']} tp {r['tp_ff']}x{r['tp_model']} pp {r['pp']} "
              f"i {r['interleave']} m {r['microbatches']} ep {r['ep']} {r['schedule']} ({r['solve_s']:.1f} s)")
    ends = curve_ends(hw, rows)
    print(f"{rules}\nend of linear scaling: " + ", ".join(f"{k} {'—' if v is None else f'{v:.3g}'}"
                                                          for k, v in ends.items())
          + f" FLOP ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
