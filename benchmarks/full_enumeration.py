"""One large deadline-mode instance run to completion by both searches (>= 1e28 FLOP, ratio in one run).

    python benchmarks/full_enumeration.py [--compute 1e28] [--gpu h100] [--sparse] [--limit 7200]

The inferred 90-day shape is solved by CP-SAT, then by the brute-force enumerator with no bound pruning (about an
hour on 2 cores at 1e28 FLOP), then by CP-SAT again (so that load drift during the long run shows), in one process.
Prints both wall times, their ratio and whether the optima agree (GPU count and float step time, re-priced with
planner.cost.step.evaluate). Ladder 1 of benchmarks/solver.py can only give lower bounds on these instances.
"""

from __future__ import annotations

import argparse
import os
import time

from planner.cost.step import evaluate
from planner.hardware import get_hardware
from planner.parallel.space import SearchOptions
from planner.search.cpsat import solve_cpsat
from planner.search.exhaustive import solve_exhaustive
from planner.workload import infer_workload


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compute", type=float, default=1e28)
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--sparse", action="store_true")
    ap.add_argument("--days", type=float, default=90.0)
    ap.add_argument("--limit", type=float, default=7200.0, help="enumerator time limit, s")
    a = ap.parse_args(argv)
    hw, wl = get_hardware(a.gpu), infer_workload(a.compute, sparse=a.sparse, budget="paper")
    deadline = a.days * 86400.0
    print(f"{a.compute:.0e} FLOP {a.gpu} {'sparse' if a.sparse else 'dense'}: d{wl.d_model} L{wl.layers} "
          f"E{wl.experts} b{wl.batch_tokens}; load average before: {os.getloadavg()}", flush=True)
    cp1 = solve_cpsat(hw, wl, SearchOptions(), deadline, time_limit_s=60.0)
    print(f"CP-SAT: {cp1.status} in {cp1.wall_s:.2f} s, {cp1.layout}", flush=True)
    t0 = time.perf_counter()
    ex = solve_exhaustive(hw, wl, SearchOptions(), deadline, time_limit_s=a.limit)
    ex_wall = time.perf_counter() - t0
    print(f"exhaustive: {ex.status} in {ex_wall:.1f} s ({ex.evaluated:,} layouts priced), {ex.layout}", flush=True)
    cp2 = solve_cpsat(hw, wl, SearchOptions(), deadline, time_limit_s=60.0)
    print(f"CP-SAT again: {cp2.status} in {cp2.wall_s:.2f} s; load average after: {os.getloadavg()}", flush=True)
    if ex.status == "optimal" and cp1.layout is not None:
        e, c = evaluate(hw, wl, ex.layout), evaluate(hw, wl, cp1.layout)
        agree = e.gpus == c.gpus and abs(e.step.step_s - c.step.step_s) <= 1e-8
        print(f"optima agree: {agree} (enumerator {e.gpus:,} GPUs, {e.step.step_s!r} s; "
              f"CP-SAT {c.gpus:,} GPUs, {c.step.step_s!r} s)")
        print(f"ratio exhaustive / CP-SAT: {ex_wall / cp1.wall_s:.0f}x (first run), {ex_wall / cp2.wall_s:.0f}x "
              f"(second run)")
    else:
        print(f"the enumerator did not finish within {a.limit:g} s: ratio > {ex_wall / cp1.wall_s:.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
