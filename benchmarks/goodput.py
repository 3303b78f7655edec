"""Goodput and sensitivity, measured for docs/model.md §9-§10 and docs/benchmarks.md ("Sensitivity").

1. The same requests with failures modelled and not: GPUs, compute and wall-clock days, goodput; the
   failure-free answer beside the one with Llama 3's interruption rate (failures/default.toml).
2. `plan --compute 1e26 --gpu b200 --sensitivity`: which estimated inputs move the answer most, and the wall time of
   the re-plans on 1 process and on 2 (a ratio measured in one run).

Usage: python benchmarks/goodput.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner import api  # noqa: E402
from planner.errors import Infeasible  # noqa: E402
from planner.sensitivity import sensitivity  # noqa: E402

CASES = [
    ("1e28, paper profile", dict(compute_flop=1e28, profile="paper")),
    ("1e28, realistic profile", dict(compute_flop=1e28, profile="realistic")),
    ("1e27, realistic profile", dict(compute_flop=1e27, profile="realistic")),
    ("1e26, realistic profile", dict(compute_flop=1e26, profile="realistic")),
    ("1e26, realistic, 2-min restarts", dict(compute_flop=1e26, profile="realistic",
                                             overrides=["goodput.restart_minutes=2"])),
    ("1e28, paper profile, 365 days", dict(compute_flop=1e28, profile="paper", days=365.0)),
    ("1e28, paper, 365 days, 1-min restarts", dict(compute_flop=1e28, profile="paper", days=365.0,
                                                   overrides=["goodput.restart_minutes=1"])),
]


def row(label: str, kw: dict, goodput: bool) -> str:
    try:
        p = api.plan(gpu="h100", goodput=goodput, **{"days": 90.0, **kw})
    except Infeasible as exc:
        return f"| {label} | {'on' if goodput else 'off'} | infeasible: {str(exc).split(':')[0]} | | | |"
    g = f"{p.goodput.goodput:.1%}" if p.goodput else "—"
    return (f"| {label} | {'on' if goodput else 'off'} | {p.gpus:,} | {p.training_days:.1f} | "
            f"{p.wall_clock_days:.1f} | {g} |")


def main() -> int:
    print("| request (h100, 90 days unless stated) | failures | GPUs | compute days | wall-clock days | goodput |")
    print("|---|---|---|---|---|---|")
    for label, kw in CASES:
        for on in (False, True):
            print(row(label, kw, on))
    kwargs = dict(compute_flop=1e26, gpu="b200", days=90.0, time_limit_s=60.0)
    base = api.plan(**kwargs)
    times = {}
    for jobs in (1, 2):
        t0 = time.perf_counter()
        s = sensitivity(base, kwargs, "b200", None, "default", jobs=jobs)
        times[jobs] = time.perf_counter() - t0
    print(f"\nb200 1e26 sensitivity (plan: {base.gpus:,} GPUs): {len(s.rows)} inputs, {2 * len(s.rows)} re-plans")
    for r in s.rows:
        print(f"  {r.input:34s} {r.why:9s} {r.base:>8s}: low {r.low} -> {r.gpus_low}, high {r.high} -> "
              f"{r.gpus_high} (swing {r.swing:.1%})")
    print(f"re-plans: 1 process {times[1]:.1f} s, 2 processes {times[2]:.1f} s, ratio {times[1] / times[2]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
