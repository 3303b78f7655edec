"""Whole-process speed of every command against the import floor of its own dependencies (issue 29, part 4).

Each command runs as a fresh process, as a user or a provisioning script runs it, N times; its reference runs
beside it in the same rounds (interleaved: command, reference, command, reference, ...), so that a busy machine
slows both alike and the ratio of the medians stays meaningful. References:

* the *plan floor*: `python -c "import numpy, pydantic, rich, typer, ortools.sat.python.cp_model"`, what any search
  must import (the main command and every plan);
* the *light floor*: `python -c "import typer, rich"`, what a command that prints a few lines needs (`--help`,
  `schema`, `reference`, `hardware list|show`).

Prints one table: median wall time, median peak RSS (per child, from os.wait4), the reference's median, the ratio,
the target and whether it is met. `--markdown` prints the same table as Markdown for docs/benchmarks.md.

    .venv/bin/python benchmarks/startup.py [--runs 7] [--markdown] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PLAN_FLOOR = "import numpy, pydantic, rich, typer, ortools.sat.python.cp_model"
LIGHT_FLOOR = "import typer, rich"


@dataclass(frozen=True)
class Case:
    label: str
    argv: tuple[str, ...]  # after the console script's name
    script: str  # "plan" or "planner"
    floor: str | None  # the reference import line (None: an absolute target only)
    max_ratio: float | None = None  # target: median / reference median
    max_s: float | None = None  # target: median whole-process seconds


CASES = (
    Case("plan --compute 1e28 --gpu h100 --days 90", ("--compute", "1e28", "--gpu", "h100", "--days", "90"),
         "plan", PLAN_FLOOR, max_ratio=1.4),
    Case("planner --help", ("--help",), "planner", LIGHT_FLOOR, max_ratio=1.2),
    Case("planner schema", ("schema",), "planner", LIGHT_FLOOR, max_ratio=1.2),
    Case("planner reference", ("reference",), "planner", LIGHT_FLOOR, max_ratio=1.2),
    Case("planner hardware list", ("hardware", "list"), "planner", LIGHT_FLOOR, max_ratio=1.2),
    Case("planner hardware show h100", ("hardware", "show", "h100"), "planner", LIGHT_FLOOR, max_ratio=1.2),
    Case("plan --model llama3-70b --gpu h100 --gpus 1024", ("--model", "llama3-70b", "--gpu", "h100", "--gpus", "1024"),
         "plan", PLAN_FLOOR, max_s=1.5),
    Case("plan --model llama3-405b --gpu h100 --gpus 16384",
         ("--model", "llama3-405b", "--gpu", "h100", "--gpus", "16384"), "plan", PLAN_FLOOR, max_s=1.5),
    Case("planner limits", ("limits",), "planner", PLAN_FLOOR, max_s=2.0),
)


def _command(script: str, argv: tuple[str, ...]) -> list[str]:
    """The installed console script when there is one (what a user runs), else the same entry point via -c."""
    exe = Path(sys.executable).parent / script
    if exe.exists():
        return [str(exe), *argv]
    entry = "plan_main" if script == "plan" else "main"
    return [sys.executable, "-c", f"from planner.cli import {entry}; {entry}()", *argv]


def run_once(cmd: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds (user + system), peak RSS in MB) of one process; its output is discarded, a failure
    stops the benchmark."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {err.strip()[-300:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0  # Linux reports kilobytes


def measure(cases: tuple[Case, ...], runs: int) -> tuple[dict[str, list[tuple[float, float, float]]],
                                                         dict[str, list[tuple[float, float, float]]]]:
    """Interleaved rounds: each round runs every case once, each followed by its reference."""
    own: dict[str, list[tuple[float, float, float]]] = {c.label: [] for c in cases}
    ref: dict[str, list[tuple[float, float, float]]] = {c.label: [] for c in cases}
    for _ in range(runs):
        for c in cases:
            own[c.label].append(run_once(_command(c.script, c.argv)))
            if c.floor is not None:
                ref[c.label].append(run_once([sys.executable, "-c", c.floor]))
    return own, ref


def rows(cases: tuple[Case, ...], own, ref) -> list[tuple[str, ...]]:
    out = []
    for c in cases:
        wall = statistics.median(w for w, _, _ in own[c.label])
        cpu = statistics.median(u for _, u, _ in own[c.label])
        rss = statistics.median(m for _, _, m in own[c.label])
        base = statistics.median(w for w, _, _ in ref[c.label]) if ref[c.label] else None
        base_cpu = statistics.median(u for _, u, _ in ref[c.label]) if ref[c.label] else None
        ratio = wall / base if base else None
        cpu_ratio = cpu / base_cpu if base_cpu else None
        if c.max_ratio is not None:
            target, met = f"<= {c.max_ratio:g}x", ratio is not None and ratio <= c.max_ratio
        else:
            assert c.max_s is not None
            target, met = f"<= {c.max_s:g} s", wall <= c.max_s
        floor = "plan floor" if c.floor == PLAN_FLOOR else "light floor"
        out.append((c.label, f"{wall:.2f} s", f"{cpu:.2f} s", f"{rss:.0f} MB",
                    f"{base:.2f} s ({floor})" if base else "-", f"{ratio:.2f}x" if ratio else "-",
                    f"{cpu_ratio:.2f}x" if cpu_ratio else "-", target, "met" if met else "NOT met"))
    return out


HEADER = ("command", "wall", "CPU", "peak RSS", "reference wall", "ratio", "CPU ratio", "target", "")
"""Medians of each column; `ratio` (wall / reference wall) is what the targets read, `CPU ratio` (user + system time
over the reference's) is the same comparison less sensitive to other processes on a shared machine."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="rounds (each runs every command and its reference once)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table for docs/benchmarks.md")
    ap.add_argument("--only", default="", help="run only the commands whose label contains this")
    args = ap.parse_args()
    cases = tuple(c for c in CASES if args.only in c.label)
    own, ref = measure(cases, args.runs)
    table = rows(cases, own, ref)
    print(f"{args.runs} interleaved rounds, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; medians")
    if args.markdown:
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "---|" * len(HEADER))
        for r in table:
            print("| " + " | ".join(f"`{r[0]}`" if i == 0 else x for i, x in enumerate(r)) + " |")
    else:
        widths = [max(len(x) for x in col) for col in zip(HEADER, *table)]
        for r in (HEADER, *table):
            print("  ".join(x.ljust(w) for x, w in zip(r, widths)))


if __name__ == "__main__":
    main()
