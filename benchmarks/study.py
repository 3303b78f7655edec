"""The per-scenario cost of a study (issue 27 part 5): scenarios per second per core, local 1 worker vs 2 workers vs
a local Ray cluster of 2 CPUs, measured in one run on the same scenarios (so the ratios compare like with like).

The scenarios are N of benchmarks/study_10k.toml taken evenly (every (10000/N - 1)-th): cheap plans of the paper
profile at small compute, the kind a large study is mostly made of. Each engine plans the same scenarios from a
cold start (worker processes or the Ray cluster started inside the timing, as a user's run would); the rows of every
engine are checked to be the same bytes. Record the printed table in docs/benchmarks.md.

    python benchmarks/study.py [--n 400] [--no-ray]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from planner import study as st
from planner.render.study import csv_text

STUDY = Path(__file__).resolve().parent / "study_10k.toml"


def timed(scenarios, **kw) -> tuple[float, str]:
    results: dict[str, dict] = {}
    t0 = time.perf_counter()
    st.run(scenarios, lambda b: results.update(b), **kw)
    wall = time.perf_counter() - t0
    return wall, csv_text([st.row(sc, results[sc.id]) for sc in scenarios], st.columns(scenarios))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400, help="scenarios per engine")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray engine")
    args = ap.parse_args()
    everything = st.expand(st.load_study(STUDY))
    scenarios = everything[:: max(1, len(everything) // args.n - 1)][: args.n]  # a step coprime-ish to the grid's
    print(f"{len(scenarios)} scenarios of {STUDY.name}; {os.cpu_count()} CPUs on this machine; load average "
          f"{os.getloadavg()[0]:.1f} at the start")
    runs = [("local, 1 worker", 1, {"jobs": 1}), ("local, 2 workers", 2, {"jobs": 2})]
    if not args.no_ray:
        runs.append(("Ray, local cluster of 2 CPUs", 2, {"jobs": 2, "ray": "local"}))
    base = None
    rows = None
    print(f"{'engine':32} {'wall s':>8} {'scen/s':>8} {'scen/s/core':>12} {'vs 1 worker':>12}")
    for name, cores, kw in runs:
        wall, text = timed(scenarios, **kw)
        rate = len(scenarios) / wall
        base = base or rate
        assert rows is None or text == rows, f"{name}: rows differ from the first engine's"
        rows = text
        print(f"{name:32} {wall:8.1f} {rate:8.2f} {rate / cores:12.2f} {rate / base:11.2f}x")
    print("rows identical across engines: yes")


if __name__ == "__main__":
    main()
