"""Fixed-cluster search: best-first pair expansion (planner.search.cpsat._LazyCount) against pricing every tuple.

Both paths run in one process, alternating instance by instance and round by round (so a busy machine slows both
alike): `LAZY_FIXED = False` prices every degree tuple of the count before the probe (the path before the change),
`True` expands (model-parallel row, N_DP) pairs in order of their pair bound. Prints, per instance, the median CPU
time (time.process_time: every thread of this process, CP-SAT's workers included) and wall time of `solve_cpsat` on
each path, their ratio, and whether both returned the same layout, status and CP-SAT statistics (they must: the two
paths build the same models; tests/test_lazy_fixed.py checks it model by model).

    .venv/bin/python benchmarks/lazy_fixed.py [--runs 3] [--markdown]
"""

from __future__ import annotations

import argparse
import statistics
import time

import planner.search.cpsat as C
from planner.api import resolve
from planner.hardware import get_hardware
from planner.parallel.space import SearchOptions
from planner.workload import infer_workload
from planner.workload.scaling import load_model_preset

PRESETS = [("llama3-405b", 16384), ("llama3-70b", 1024), ("llama3-8b", 64), ("mixtral-8x7b", 512)]
"""Transformer presets on H100 under the realistic profile (`plan --model NAME --gpu h100 --gpus N`)."""

LADDER = [(1e22, False, 2), (1e24, False, 200), (1e26, False, 23040), (1e28, False, 2359296),
          (1e30, False, 616562688), (1e22, True, 3), (1e24, True, 256), (1e26, True, 28224), (1e28, True, 2949120),
          (1e30, True, 462422016)]
"""docs/benchmarks.md, ladder 3 (h100, paper profile): the inferred shape at the deadline-mode optimum's count."""


def instances():
    for name, n in PRESETS:
        yield f"{name}, {n:,} GPUs (realistic)", resolve("h100", "realistic"), load_model_preset(name), n
    for compute, sparse, n in LADDER:
        wl = infer_workload(compute, sparse=sparse, budget="paper")
        yield f"{compute:.0e} {'sparse' if sparse else 'dense'}, {n:,} GPUs (paper)", get_hardware("h100"), wl, n


def timed(hw, wl, n: int, lazy: bool):
    C.LAZY_FIXED = lazy
    C._SHARED.clear()  # both paths build the model-parallel rows
    c0, w0 = time.process_time(), time.perf_counter()
    r = C.solve_cpsat(hw, wl, SearchOptions(gpus=n), None, time_limit_s=None, workers=2)
    cpu = time.process_time() - c0
    key = (r.status, r.layout, r.cpsat_tuples, r.cpsat_pairs, r.cpsat_models, r.evaluated, r.cpsat_status)
    return cpu, time.perf_counter() - w0, key


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    rows = []
    for label, hw, wl, n in instances():
        t = {False: ([], []), True: ([], [])}
        keys = {}
        for r in range(args.runs):
            for lazy in ((False, True) if r % 2 == 0 else (True, False)):
                cpu, wall, keys[lazy] = timed(hw, wl, n, lazy)
                t[lazy][0].append(cpu)
                t[lazy][1].append(wall)
        med = {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in t.items()}
        rows.append((label, med[False], med[True], med[False][0] / max(med[True][0], 1e-9), keys[False] == keys[True],
                     keys[True][4]))
        print(f"  {label}: every tuple {med[False][0]:.3f} s CPU, best-first {med[True][0]:.3f} s CPU, "
              f"{rows[-1][3]:.1f}x, same answer and statistics: {rows[-1][4]}", flush=True)
    if args.markdown:
        print("| instance | every tuple priced: CPU / wall | best-first: CPU / wall | CPU ratio | same answer and "
              "CP-SAT statistics |")
        print("|---|---|---|---|---|")
        for label, a, b, ratio, same, _ in rows:
            print(f"| {label} | {a[0]:.3f} s / {a[1]:.3f} s | {b[0]:.3f} s / {b[1]:.3f} s | {ratio:.1f}x | "
                  f"{'yes' if same else 'NO'} |")
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
