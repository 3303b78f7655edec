"""How much a re-plan that moves one input costs: `plan --sensitivity` against one plan, measured in one run.

    python benchmarks/replan_speed.py                 # the realistic profile's must-show, default jobs
    python benchmarks/replan_speed.py --jobs 1        # one process: the re-plans' own cost, no parallelism

Prints the plan's time (the median of three, after a warm-up plan that pays the imports and first loads), the
sensitivity's time, the ratio, and how many rows --sensitivity answered by re-pricing the plan's layout instead of a
search (planner.sensitivity.ONLY_REMOVES).
"""

from __future__ import annotations

import argparse
import statistics
import time

from planner import api
from planner.sensitivity import sensitivity


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=None, help="processes for the re-plans (default: every core)")
    args = ap.parse_args()
    kw = dict(compute_flop=1e26, gpu="h100", days=90.0, profile="realistic")
    api.plan(**kw)  # warm-up
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        plan = api.plan(**kw)
        times.append(time.perf_counter() - t0)
    one = statistics.median(times)
    t0 = time.perf_counter()
    sens = sensitivity(plan, kw, "h100", "realistic", "default", jobs=args.jobs)
    many = time.perf_counter() - t0
    print(f"plan: {one:.3f} s (median of {len(times)}); --sensitivity: {many:.2f} s for {2 * len(sens.rows)} moved "
          f"inputs ({len(sens.rows)} rows); ratio {(one + many) / one:.1f}x one plan (plan + sensitivity), "
          f"{many / one:.1f}x for the sensitivity alone")


if __name__ == "__main__":
    main()
