"""The latency wall's cost: paired CPU time of whole commands that compute it, and of `floor_bound` in process
(docs/benchmarks.md, "A transformer's latency wall from the cost terms").

    python benchmarks/floor_speed.py --before /path/to/other/checkout/.venv/bin/planner

Each command runs as a fresh process, this checkout's `planner` and the --before one alternating (the order swapped
every round), and the children's user + system CPU time is compared: on a shared machine CPU time is steadier than
wall time. Without --before only this checkout is timed. `--inline` times `floor_bound` alone for four presets.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {
    "wall": ["plan", "--model", "deepseek-v3", "--gpu", "h100", "--days", "0.01", "--no-goodput"],
    "limits": ["limits"],
    "plan60": ["plan", "--model", "deepseek-v3", "--gpu", "h100", "--days", "60", "--no-goodput"],
}
PRESETS = ("llama3-70b", "llama3-405b", "mixtral-8x7b", "deepseek-v3")


def child_cpu_s(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def inline(runs: int) -> None:
    from planner.explain import floor_bound
    from planner.hardware import get_hardware, with_profile
    from planner.workload import load_model_preset

    hw = with_profile(get_hardware("h100"), "realistic")
    for name in PRESETS:
        wl = load_model_preset(name)
        floor_bound(hw, wl)
        times = []
        for _ in range(runs):
            t0 = time.process_time()
            fb = floor_bound(hw, wl)
            times.append(time.process_time() - t0)
        print(f"{name}: floor_bound {statistics.median(times) * 1e3:.1f} ms CPU (median of {runs}), "
              f"{fb.days:.4g} days")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="another checkout's planner executable, timed alternately with this one")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--inline", action="store_true", help="time floor_bound in this process instead")
    args = ap.parse_args()
    if args.inline:
        inline(args.runs)
        return
    here = str(Path(sys.executable).with_name("planner"))
    sides = {"after": here, **({"before": args.before} if args.before else {})}
    for name, cmd in COMMANDS.items():
        times: dict[str, list[float]] = {s: [] for s in sides}
        for i in range(args.runs):
            for side in (sorted(sides) if i % 2 == 0 else sorted(sides, reverse=True)):
                times[side].append(child_cpu_s([sides[side], *cmd]))
        med = {s: statistics.median(v) for s, v in times.items()}
        line = f"{name}: " + ", ".join(f"{s} {med[s]:.2f} s CPU" for s in sorted(med))
        if "before" in med:
            line += f", after / before {med['after'] / med['before']:.3f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
