"""How much a re-plan that moves one input costs: `plan --sensitivity` against one plan, measured in one run.

    python benchmarks/replan_speed.py                 # the realistic profile's must-show, default jobs
    python benchmarks/replan_speed.py --jobs 1        # one process: the re-plans' own cost, no parallelism

Prints the plan's time (the median of three, after a warm-up plan that pays the imports and first loads) and the
sensitivity's, wall-clock and CPU (this process and its finished worker processes), and their ratios; and how many
re-plans were re-priced, searched, and searched from a proven count (the plan's, for a move that slows every layout:
planner.monotone; a family certificate's, for one that may speed layouts up: planner.sensitivity), and how many
carried a skip proof (the plan's layout re-priced instead of searched when it stays the only fastest on the plan's
count: planner.sensitivity._skip_proof; the searched count includes them), and how many were seeded with the plan's
layout (its integer step lowers the cap of the plan's count: api.replan_answer; `--no-seed` leaves it out). On a shared
machine the wall-clock ratio moves with the load; the CPU ratio does not (it is the work, not the parallelism).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

from planner import api
from planner import sensitivity as sens_mod
from planner.schema.request import PlanRequest
from planner.search import cpsat
from planner.sensitivity import sensitivity


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=None, help="processes for the re-plans (default: every core)")
    ap.add_argument("--no-seed", action="store_true",
                    help="re-plans bounded at the plan's count unseeded (sensitivity.SEED): what the seed saves")
    ap.add_argument("--no-records", action="store_true",
                    help="no count records shared between searches (search.cpsat.COUNT_RECORDS): what they save")
    args = ap.parse_args()
    if args.no_seed:
        sens_mod.SEED = False
    if args.no_records:
        cpsat.COUNT_RECORDS = False
    kw = dict(compute_flop=1e26, gpu="h100", days=90.0, profile="realistic")
    api.plan(**kw)  # warm-up
    times, cpus = [], []
    for _ in range(3):
        cpsat.clear_records()  # each plan filters its counts and builds its tables from cold, as `plan
        cpsat.clear_key_combos()  # --sensitivity` does once
        t0, c0 = time.perf_counter(), cpu_s()
        plan = api.plan(**kw)
        times.append(time.perf_counter() - t0)
        cpus.append(cpu_s() - c0)
    one, one_cpu = statistics.median(times), statistics.median(cpus)
    stats: dict[str, int] = {}
    t0, c0 = time.perf_counter(), cpu_s()
    sens = sensitivity(plan, PlanRequest(**kw), jobs=args.jobs, stats=stats)
    many, many_cpu = time.perf_counter() - t0, cpu_s() - c0
    searched, bounded = stats["searched"], stats["bounded"]
    print(f"plan: {one:.3f} s wall, {one_cpu:.3f} s CPU (median of {len(times)}); --sensitivity "
          f"({2 * len(sens.rows)} moved inputs, {len(sens.rows)} rows; {2 * len(sens.rows) - searched} re-priced, "
          f"{searched} searched, {bounded} of them from a proven count, {stats['skip_proofs']} with a skip proof "
          f"({stats['corner_proofs']} of them speeding moves', from a corner's runner-up), "
          f"{stats['chained']} bounded by another failure move's answer, "
          f"{stats['seeded']} seeded with the plan's layout; "
          f"{stats['certificates']} family certificates, which re-priced {stats['certified_repriced']}): "
          f"{many:.2f} s wall, {many_cpu:.2f} s CPU; "
          f"plan + sensitivity = {(one + many) / one:.1f}x one plan's wall time, {(one_cpu + many_cpu) / one_cpu:.1f}x "
          "its CPU time")


def cpu_s() -> float:
    """CPU seconds of this process and of its worker processes that have finished."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


if __name__ == "__main__":
    main()
