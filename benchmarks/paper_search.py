"""The paper's own search space, replayed on our cost model (a reproduction aid, not part of the planner).

The paper's results were produced by its released simulator (github.com/ege-erdil/limits_to_distributed_training,
`optimal_parallelism.ipynb` with `gpu/gpu_model.py`). Priced on the same layout, our cost model reproduces that
code's output (docs/reproduction.md, "The same layouts priced by both models"), but the planner searches a larger
space. This module searches the simulator's space instead, exhaustively, with our float cost model, so that the
two can be told apart. The simulator's rules, as read in its newest stored notebook (commit 3a871bed):

- cluster sizes N = E * 2^k only, tried in increasing order; the first N on which some layout meets the deadline
  wins, and on it the layout with the least step time;
- the 1F1B schedule only, with one layer per virtual stage: interleaving i = L / N_PP (i = 1 without pipelining);
- microbatches m = the smallest divisor of b / (E N_DP) that is at least N_PP;
- N_TP,ff between isqrt(N_TP) and 4 isqrt(N_TP), where N_TP = N_TP,ff N_TP,model;
- N_EP = gcd(N, E);
- DP in its own phase (its `overlap_DP = 0`), network latency 5 us per level (every stored `gpu_model.py`);
- memory checked for the cluster as a whole, without activations: N x HBM >= N_p x 2 bytes x (N_DP + 4)
  (weights replicated over DP, optimizer state sharded), instead of SPEC §5.5's per-GPU budget.

What stays ours: divisibility (N_TP,ff | d_ff, N_TP,model | d_model, N_DP m | b / E), the placement rules (levels
filled bottom-up), bandwidth times overlapped across levels (the simulator sums them), the critical-path floor,
the GEMM model (ours is slower on Hopper at small nanobatches than the one that wrote the logs), and our shape
rounding.

Usage: python benchmarks/paper_search.py [--gpu h100] [--sparse] [--days 91.3125] [--from 1e25 --to 1e30 --points 16]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.parallel.space import (  # noqa: E402
    SearchOptions,
    Space,
    Tuples,
    build_space,
    divisors,
    layout_from,
    model_parallel_rows,
)
from planner.schema import Hardware, Workload  # noqa: E402
from planner.search.exhaustive import price_placements  # noqa: E402
from planner.search.presolve import ShapeTable, tuple_terms  # noqa: E402

RELEASED_LATENCY_S = 5e-6
"""Network latency per level in every stored version of the simulator's gpu/gpu_model.py (e.g. 00b203e)."""


def with_latency(hw: Hardware, lat_s: float) -> Hardware:
    """`hw` with every network level's one-way latency set to `lat_s` (its name unchanged)."""
    return hw.model_copy(update={"levels": tuple(lv.model_copy(update={"lat_s": lat_s}) for lv in hw.levels)})


def released_hardware(hw: Hardware) -> Hardware:
    """`hw` with the simulator's 5 us per network level."""
    return with_latency(hw, RELEASED_LATENCY_S)


def _smallest_divisor_at_least(n: int, low: int) -> int | None:
    for d in divisors(n):
        if d >= low:
            return d
    return None


def paper_tuples(space: Space) -> Tuples:
    """Every degree tuple of the simulator's space for the space's workload (all cluster sizes E * 2^k).

    `space` is our 1F1B space (`SearchOptions(schedule="1f1b")`); its divisor candidates are filtered here."""
    wl = space.wl
    mp = model_parallel_rows(space)
    tp = mp["tp_ff"] * mp["tp_model"]
    root = np.array([math.isqrt(int(x)) for x in tp], dtype=np.int64)
    want_i = np.where(mp["pp"] > 1, wl.layers // mp["pp"], 1)
    keep = (mp["interleave"] == want_i) & (mp["tp_ff"] >= root) & (mp["tp_ff"] <= 4 * root)
    mp = {k: v[keep] for k, v in mp.items()}
    per_expert = wl.batch_tokens // wl.experts
    parts = []
    for pp in np.unique(mp["pp"]):
        dm = []
        for dp in divisors(per_expert):
            m = _smallest_divisor_at_least(per_expert // dp, int(pp))
            if m is not None:
                dm.append((dp, m))
        if not dm:
            continue
        sel = mp["pp"] == pp
        dm_arr = np.array(dm, dtype=np.int64)
        n_rows = int(sel.sum())
        cols = {k: np.repeat(v[sel], len(dm_arr)) for k, v in mp.items()}
        cols["dp"] = np.tile(dm_arr[:, 0], n_rows)
        cols["microbatches"] = np.tile(dm_arr[:, 1], n_rows)
        cols["zero_bubble"] = np.zeros(len(cols["dp"]), dtype=bool)
        parts.append(Tuples(cols))
    t = Tuples.concat(parts)
    n = t.gpus
    power_of_two = (n % wl.experts == 0) & (((n // wl.experts) & (n // wl.experts - 1)) == 0)
    ep_rule = t["ep"] == np.gcd(n, wl.experts)
    return t.take(np.nonzero(power_of_two & ep_rule)[0])


def _fastest(hw: Hardware, wl: Workload, deadline_s: float, t: Tuples, shapes: ShapeTable):
    """(step seconds, layout) of the fastest layout of the batch that meets the deadline and the simulator's
    memory rule, or None. Ties: least network time, then enumeration order."""
    terms = tuple_terms(hw, wl, t, shapes)
    rows, pl, arr = price_placements(hw, wl, t, False, terms)
    if len(rows) == 0:
        return None
    n = arr["gpus"].astype(np.float64)
    memory_ok = n * hw.gpu.hbm_bytes >= wl.params * hw.gpu.word_bytes * (t["dp"][rows].astype(np.float64) + 4.0)
    idx = np.nonzero(memory_ok & (wl.steps * arr["step_s"] <= deadline_s))[0]
    if len(idx) == 0:
        return None
    k = idx[np.lexsort((idx, arr["network_s"][idx], arr["step_s"][idx]))[0]]
    return float(arr["step_s"][k]), layout_from(t, int(rows[k]), pl[k])


def plan_paper_space(hw: Hardware, wl: Workload, days: float):
    """(GPUs, step seconds, layout) of the simulator's choice, or None if no E * 2^k cluster meets the deadline."""
    hw = released_hardware(hw)
    space = build_space(hw, wl, SearchOptions(schedule="1f1b"))
    t = paper_tuples(space)
    shapes = ShapeTable.for_space(hw, wl, space)
    deadline_s = days * 86400.0
    for n in np.unique(t.gpus):
        batch = t.take(np.nonzero(t.gpus == n)[0])
        found = _fastest(hw, wl, deadline_s, batch, shapes)
        if found is not None:
            return int(n), found[0], found[1]
    return None


SIX_MONTHS_DAYS = 0.5 * 3.154e7 / 86400.0
"""The deadline of every main cell of the stored notebooks (`years=0.5`, with its `seconds_in_year = 3.154e7`)."""


def replay(hw_name: str, sparse: bool, days: float, grid: list[float]) -> list[dict]:
    """One curve: the simulator's choice at every compute of the grid (no row where no cluster meets `days`)."""
    from planner.cost.step import evaluate
    from planner.hardware import get_hardware
    from planner.workload import infer_workload

    hw = get_hardware(hw_name)
    rows = []
    for c in grid:
        wl = infer_workload(c, sparse=sparse)
        got = plan_paper_space(hw, wl, days)
        if got is None:
            continue
        n, _, lay = got
        ev = evaluate(released_hardware(hw), wl, lay)
        rows.append({"requested_compute_flop": c, "compute_flop": wl.compute_flop, "gpus": n, "mfu": ev.mfu,
                     "training_days": ev.training_days, "dp": lay.dp, "tp_ff": lay.tp_ff, "tp_model": lay.tp_model,
                     "pp": lay.pp, "interleave": lay.interleave, "microbatches": lay.microbatches, "ep": lay.ep})
    return rows


def end_of_linear_scaling(hw_name: str, rows: list[dict]) -> float | None:
    """The same rule as planner.sweep.summarise: where the non-increasing fit crosses 0.8 x the ceiling."""
    from planner.hardware import get_hardware
    from planner.sweep import LINEAR_SCALING_FRACTION, crossing_below, non_increasing_fit

    threshold = LINEAR_SCALING_FRACTION * get_hardware(hw_name).gpu.sustained_clock_factor
    return crossing_below([r["requested_compute_flop"] for r in rows],
                          non_increasing_fit([r["mfu"] for r in rows]), threshold)


def main(argv: list[str] | None = None) -> int:
    from planner.sweep import THREE_MONTHS_DAYS, compute_grid

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--sparse", action="store_true")
    ap.add_argument("--days", type=float, default=THREE_MONTHS_DAYS)
    ap.add_argument("--from", dest="lo", type=float, default=1e25)
    ap.add_argument("--to", dest="hi", type=float, default=1e30)
    ap.add_argument("--points", type=int, default=16)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = replay(a.gpu, a.sparse, a.days, compute_grid(a.lo, a.hi, a.points))
    for r in rows:
        print(f"{r['requested_compute_flop']:.3g}: {r['gpus']:,} GPUs, MFU {r['mfu']:.3f}, "
              f"{r['training_days']:.1f} days, dp {r['dp']} tp_ff {r['tp_ff']} tp_model {r['tp_model']} pp {r['pp']} "
              f"i {r['interleave']} m {r['microbatches']} ep {r['ep']}")
    end = end_of_linear_scaling(a.gpu, rows)
    print(f"end of linear scaling: {end if end is None else f'{end:.3g}'} FLOP "
          f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
