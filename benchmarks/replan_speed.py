"""How much a re-plan that moves one input costs: `plan --sensitivity` against one plan, measured in one run.

    python benchmarks/replan_speed.py                 # the realistic profile's must-show, default jobs
    python benchmarks/replan_speed.py --jobs 1        # one process: the re-plans' own cost, no parallelism
    python benchmarks/replan_speed.py --fresh 3       # also: 3 fresh processes, each a plan from cold tables, then
                                                      # its sensitivity; and the two commands, 3 times each

Three readings of "one plan", each ratio measured in one run: (1) this process, the plan with the model-parallel rows,
shape tables and least features of a warm-up plan of the same request (only the count records and the pair tables'
keys cleared), then the sensitivity; (2) `--fresh N`: N fresh processes, each importing the planner and planning
another compute (imports and first file loads), then the plan from cold tables and its sensitivity: what `plan
--sensitivity` costs against `plan` after the interpreter has started; (3) `--fresh N`: the commands themselves,
`planner plan ...` against `planner plan ... --sensitivity` (default jobs), wall-clock, alternating, N each.

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
from pathlib import Path

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
    ap.add_argument("--fresh", type=int, default=0, metavar="N",
                    help="also time N fresh processes (plan from cold tables, then its sensitivity) and the commands")
    ap.add_argument("--days", type=float, default=90.0, help="the deadline (default 90)")
    ap.add_argument("--fresh-child", action="store_true", help=argparse.SUPPRESS)  # one of --fresh's processes
    args = ap.parse_args()
    if args.fresh_child:
        fresh_child(args.days, args.jobs)
        return
    if args.no_seed:
        sens_mod.SEED = False
    if args.no_records:
        cpsat.COUNT_RECORDS = False
    kw = dict(compute_flop=1e26, gpu="h100", days=args.days, profile="realistic")
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
    if args.fresh:
        fresh(args.fresh, args.days, args.jobs)


def fresh_child(days: float, jobs: int | None) -> None:
    """One process of reading (2): a plan of another compute first (imports and first loads), then the plan from
    cold tables and its sensitivity; prints [plan wall, plan CPU, sensitivity wall, sensitivity CPU] as JSON."""
    import json

    kw = dict(compute_flop=1e26, gpu="h100", days=days, profile="realistic")
    api.plan(compute_flop=1e24, gpu="h100", days=30.0, profile="realistic")
    t0, c0 = time.perf_counter(), cpu_s()
    plan = api.plan(**kw)
    t1, c1 = time.perf_counter(), cpu_s()
    sensitivity(plan, PlanRequest(**kw), jobs=jobs)
    t2, c2 = time.perf_counter(), cpu_s()
    print(json.dumps([t1 - t0, c1 - c0, t2 - t1, c2 - c1]))


def fresh(n: int, days: float, jobs: int | None) -> None:
    """Readings (2) and (3) of the module's docstring, printed as medians of `n`."""
    import json
    import shutil
    import subprocess
    import sys

    child = [sys.executable, __file__, "--fresh-child", "--days", str(days)] + ([] if jobs is None else
                                                                                 ["--jobs", str(jobs)])
    runs = [json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout) for _ in range(n)]
    plan_w, plan_c, sens_w, sens_c = (statistics.median(r[k] for r in runs) for k in range(4))
    print(f"fresh processes ({n}, medians): plan from cold tables {plan_w:.3f} s wall, {plan_c:.3f} s CPU; its "
          f"--sensitivity {sens_w:.2f} s wall, {sens_c:.2f} s CPU; plan + sensitivity = "
          f"{(plan_w + sens_w) / plan_w:.1f}x one plan's wall time, {(plan_c + sens_c) / plan_c:.1f}x its CPU time")
    exe = shutil.which("planner") or str(Path(sys.executable).with_name("planner"))
    base = [exe, "plan", "--compute", "1e26", "--gpu", "h100", "--days", f"{days:g}", "--profile", "realistic",
            "--quiet"]
    walls: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(n):
        for with_sens in (False, True):
            t0 = time.perf_counter()
            subprocess.run(base + (["--sensitivity"] if with_sens else []), check=True, capture_output=True)
            walls[with_sens].append(time.perf_counter() - t0)
    one, both = statistics.median(walls[False]), statistics.median(walls[True])
    print(f"commands ({n} each, alternating, medians): `plan` {one:.2f} s wall, `plan --sensitivity` {both:.2f} s "
          f"wall: {both / one:.1f}x")


def cpu_s() -> float:
    """CPU seconds of this process and of its worker processes that have finished."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


if __name__ == "__main__":
    main()
