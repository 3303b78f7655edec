"""Whole-process speed of every command against the import floor of its own dependencies (issue 29, part 4).

Each command runs as a fresh process, as a user or a provisioning script runs it, N times; its reference runs
beside it in the same rounds (interleaved: command, reference, command, reference, ...), so that a busy machine
slows both alike and the ratio of the medians stays meaningful. References:

* the *plan floor*: `python -c "import numpy, pydantic, rich, typer, ortools.sat.python.cp_model"`, what any search
  must import (the main command and every plan);
* the *helper floor*: the plan floor with OR-Tools' compiled helper (`ortools.sat.python.cp_model_helper`) in place
  of its Python front end, whose module-level pandas import no planner command pays (planner.search.satmodel);
* the *light floor*: `python -c "import typer, rich"`, what a command that prints a few lines needs (`--help`,
  `schema`, `reference`, `hardware list|show`).

Prints one table: median wall time, median peak RSS (per child, from os.wait4), the reference's median, the ratio,
the target and whether it is met. `--markdown` prints the same table as Markdown for docs/benchmarks.md.

    .venv/bin/python benchmarks/startup.py [--runs 7] [--markdown] [--only SUBSTRING] [--before DIR]

With --before DIR every command is run through `python -c "from planner.cli import ..."` (so that PYTHONPATH picks
the tree), the current checkout's too.

Before the rounds, the planner's source trees are compiled to bytecode (`compileall`, as `pip install` does for an
installed package): the references' libraries were compiled when they were installed, and an editable checkout under
PYTHONDONTWRITEBYTECODE=1 (as on the shared development machine) would otherwise recompile the planner's ~65 modules
in every process, about 0.1 s of CPU that no user pays. `--no-compile` measures without.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PLAN_FLOOR = "import numpy, pydantic, rich, typer, ortools.sat.python.cp_model"
# What a plan imports of OR-Tools since the search builds its models through the compiled helper
# (planner.search.satmodel): the front end above also imports pandas and pyarrow, which no planner command loads.
HELPER_FLOOR = "import numpy, pydantic, rich, typer, ortools.sat.python.cp_model_helper"
LIGHT_FLOOR = "import typer, rich"
TYPER_COMMAND = """
import typer
app = typer.Typer(add_completion=False)
@app.command()
def show(name: str, json_out: bool = typer.Option(False, "--json")) -> None:
    pass
app()
"""
"""What any typer command that takes an argument and an option costs, before it does anything: typer >= 0.2x
converts parameter values with pydantic TypeAdapters, which imports pydantic's core (not in the light floor). Its
`--help`: typer's rich help renderer (typer.rich_utils, which imports rich's Markdown, markdown-it and pygments)."""
DOCUMENT_COMMAND = """
import typer
app = typer.Typer(add_completion=False)
@app.command()
def show(name: str, json_out: bool = typer.Option(False, "--json")) -> None:
    import tomllib
    from pydantic import BaseModel, ConfigDict
    from rich.console import Console
    from rich.table import Table
    class Doc(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        name: str
        value: float
    doc = Doc.model_validate(tomllib.loads('name = "h100"\\nvalue = 1.0'))
    table = Table("field", "value")
    table.add_row("name", doc.name)
    Console().print(table)
app()
"""
"""What a command that reads one TOML file into a validated pydantic document and prints a rich table costs, doing
nothing else (`hardware list|show`, `reference` and `models` do this for their documents): the typer command floor,
pydantic's model machinery (building a validator loads pydantic's plugin registry, importlib.metadata: about 30 ms
of CPU), tomllib and rich's table and console."""


@dataclass(frozen=True)
class Case:
    label: str
    argv: tuple[str, ...]  # after the console script's name
    script: str  # "plan" or "planner"
    floor: str | None  # the reference import line (None: an absolute target only)
    max_ratio: float | None = None  # target: median / reference median
    max_s: float | None = None  # target: median whole-process seconds (neither: a reference row, no target)


CASES = (
    Case("plan --compute 1e28 --gpu h100 --days 90", ("--compute", "1e28", "--gpu", "h100", "--days", "90"),
         "plan", PLAN_FLOOR, max_ratio=1.4),
    Case("plan --compute 1e28 --gpu h100 --days 90 (against what it imports)",
         ("--compute", "1e28", "--gpu", "h100", "--days", "90"), "plan", HELPER_FLOOR, max_ratio=1.4),
    Case("typer command floor (a do-nothing command, NAME --json)", ("-c", TYPER_COMMAND, "h100", "--json"), "python",
         LIGHT_FLOOR),
    Case("typer help floor (the same do-nothing command's --help)", ("-c", TYPER_COMMAND, "--help"), "python",
         LIGHT_FLOOR),
    Case("document floor (a do-nothing command that validates one TOML document and prints a table)",
         ("-c", DOCUMENT_COMMAND, "h100"), "python", LIGHT_FLOOR),
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


def _command(script: str, argv: tuple[str, ...], via_entry: bool = False) -> list[str]:
    """The installed console script when there is one (what a user runs), else (or with `via_entry`) the same entry
    point via -c."""
    if script == "python":  # a reference command, the same on every tree
        return [sys.executable, *argv]
    exe = Path(sys.executable).parent / script
    if exe.exists() and not via_entry:
        return [str(exe), *argv]
    if script == "planner":  # the console script's entry: planner.fastpath.main, or planner.cli.main on older trees
        return [sys.executable, "-c", "try:\n from planner.fastpath import main\nexcept ImportError:\n"
                " from planner.cli import main\nmain()", *argv]
    return [sys.executable, "-c", "from planner.cli import plan_main; plan_main()", *argv]


def run_once(cmd: list[str], tree: Path | None = None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds (user + system), peak RSS in MB) of one process; its output is discarded, a failure
    stops the benchmark. `tree`: import planner from that source tree instead (PYTHONPATH; its own .venv's python
    when it has one)."""
    env = None
    if tree is not None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        own = tree / ".venv" / "bin" / "python"
        if own.exists() and cmd[0] == sys.executable:
            # the tree's own environment: an editable install maps the package data (profiles, hardware files) to
            # its own tree, which PYTHONPATH alone does not (the before code would read this tree's data files)
            cmd = [str(own), *cmd[1:]]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tree or ROOT, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {err.strip()[-300:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0  # Linux reports kilobytes


Samples = dict[str, list[tuple[float, float, float]]]


def measure(cases: tuple[Case, ...], runs: int, before: Path | None = None) -> tuple[Samples, Samples, Samples]:
    """Interleaved rounds: each round runs every case once, each followed by its reference (and, with `before`, by
    the same command on that source tree)."""
    own: Samples = {c.label: [] for c in cases}
    ref: Samples = {c.label: [] for c in cases}
    old: Samples = {c.label: [] for c in cases}
    for _ in range(runs):
        for c in cases:
            own[c.label].append(run_once(_command(c.script, c.argv, via_entry=before is not None)))
            if c.floor is not None:
                ref[c.label].append(run_once([sys.executable, "-c", c.floor]))
            if before is not None:
                old[c.label].append(run_once(_command(c.script, c.argv, via_entry=True), before))
    return own, ref, old


def rows(cases: tuple[Case, ...], own: Samples, ref: Samples, old: Samples) -> list[tuple[str, ...]]:
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
        elif c.max_s is not None:
            target, met = f"<= {c.max_s:g} s", wall <= c.max_s
        else:
            target, met = "(reference)", None
        floor = {PLAN_FLOOR: "plan floor", HELPER_FLOOR: "helper floor"}.get(c.floor or "", "light floor")
        row = (c.label, f"{wall:.2f} s", f"{cpu:.2f} s", f"{rss:.0f} MB",
               f"{base:.2f} s ({floor})" if base else "-", f"{ratio:.2f}x" if ratio else "-",
               f"{cpu_ratio:.2f}x" if cpu_ratio else "-", target, {None: "", True: "met", False: "NOT met"}[met])
        if old[c.label]:
            was = statistics.median(w for w, _, _ in old[c.label])
            was_cpu = statistics.median(u for _, u, _ in old[c.label])
            was_rss = statistics.median(m for _, _, m in old[c.label])
            was_ratio = was / base if base else None
            ratio_text = f" ({was_ratio:.2f}x)" if was_ratio else ""
            row += (f"{was:.2f} s / {was_cpu:.2f} s / {was_rss:.0f} MB{ratio_text}",)
        out.append(row)
    return out


HEADER = ("command", "wall", "CPU", "peak RSS", "reference wall", "ratio", "CPU ratio", "target", "")
"""Medians of each column; `ratio` (wall / reference wall) is what the targets read, `CPU ratio` (user + system time
over the reference's) is the same comparison less sensitive to other processes on a shared machine."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="rounds (each runs every command and its reference once)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table for docs/benchmarks.md")
    ap.add_argument("--only", default="", help="run only the commands whose label contains this")
    ap.add_argument("--before", type=Path, default=None, metavar="DIR",
                    help="also run each command on this source tree (e.g. `git archive REV | tar -x -C DIR`), in the "
                    "same rounds: wall / CPU / RSS before, and the ratio to the reference")
    ap.add_argument("--no-compile", action="store_true",
                    help="do not compile the planner's sources to bytecode first (see the module docstring)")
    args = ap.parse_args()
    if not args.no_compile:
        for tree in (ROOT, *([args.before] if args.before else [])):
            compileall.compile_dir(str(tree / "planner"), quiet=1)
    cases = tuple(c for c in CASES if args.only in c.label)
    own, ref, old = measure(cases, args.runs, args.before)
    table = rows(cases, own, ref, old)
    header = HEADER + (("before: wall / CPU / RSS (ratio)",) if args.before else ())
    print(f"{args.runs} interleaved rounds, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; medians")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in table:
            print("| " + " | ".join(f"`{r[0]}`" if i == 0 else x for i, x in enumerate(r)) + " |")
    else:
        widths = [max(len(x) for x in col) for col in zip(header, *table)]
        for r in (header, *table):
            print("  ".join(x.ljust(w) for x, w in zip(r, widths)))


if __name__ == "__main__":
    main()
