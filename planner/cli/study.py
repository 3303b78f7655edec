"""`study`: many scenarios from one TOML file (a grid or a sample over request fields), planned on local worker
processes or a Ray cluster, with a journal that survives interruptions, a progress bar, CSV/Parquet and figures
(planner.study plans, planner.render.study writes; docs/study.md)."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from planner.cli.app import app
from planner.cli.options import parse_whole
from planner.errors import InvalidInput

if TYPE_CHECKING:  # planner.files (tempfile) is imported where a study writes: other commands do not load it
    from planner.files import Journal

JOURNAL = "journal.jsonl"
RESULTS_CSV = "results.csv"
RESULTS_PARQUET = "results.parquet"
COMPUTE_PNG = "gpus-cost-vs-compute.png"


def _out_dir(path: Path) -> Path:
    """--out DIR: an existing directory (not a link to one), or a new one made in an existing directory."""
    text = str(path)
    if not text or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidInput(f"--out {text!r}: give a directory name without control characters")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            os.mkdir(path, 0o755)
        except OSError as exc:
            raise InvalidInput(f"--out {path}: cannot create the directory: {exc.strerror}") from None
        return path
    except OSError as exc:
        raise InvalidInput(f"--out {path}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise InvalidInput(f"--out {path} is not a directory (a symbolic link is not followed); give a directory")
    return path


def study_command(
    file: Annotated[Path, typer.Argument(help="The study: a TOML file with \\[study], \\[base] and \\[grid] or "
                                         "\\[sample] (docs/study.md).", metavar="FILE.toml", show_default=False)],
    out: Annotated[Path | None, typer.Option(
        "--out", help=f"Directory for {JOURNAL} (every finished scenario, as it finishes), {RESULTS_CSV}, "
        f"{RESULTS_PARQUET} and the figures; made if absent. Without it the CSV goes to stdout and nothing is kept.",
        metavar="DIR", show_default=False)] = None,
    jobs: Annotated[int, typer.Option("--jobs", parser=parse_whole, metavar="INT",
                                      help="Local worker processes (scenarios planned at once).")] = 2,
    ray: Annotated[str | None, typer.Option(
        "--ray", help="Run on a Ray cluster instead: auto (the cluster this machine joined), HOST:6379, "
        "ray://HOST:10001, or local (a private one of --jobs CPUs here). Needs pip install 'planner\\[ray]'.",
        metavar="auto|ADDRESS|local", show_default=False)] = None,
    batch: Annotated[int | None, typer.Option(
        "--batch", parser=parse_whole, metavar="INT", show_default=False,
        help="Scenarios per task (default: about 8 tasks per worker, at most 50 locally and 100 on Ray).")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help=f"Keep the scenarios {JOURNAL} in --out holds (the same study) and plan only the rest."
    )] = False,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="With --out: write the figures.")] = True,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Plan every scenario of a study file: a grid or a sample over accelerators, compute, deadlines, --set
    overrides, profiles and the other request fields, on local workers or a Ray cluster (--ray)."""
    from planner import study as st

    spec = st.load_study(file)
    scenarios = st.expand(spec)
    st.check_jobs(jobs, batch)
    st.check_inputs(scenarios)
    if ray is not None:
        st.check_ray(ray)  # missing or unreachable: one line now, not after the journal is opened
    if resume and out is None:
        raise InvalidInput("--resume needs --out DIR (the journal of the earlier run is DIR/journal.jsonl)")
    head = st.header(spec, scenarios)
    if out is None:
        results = _plan(scenarios, None, {}, jobs, ray, batch, quiet, None)
        from planner.render.study import csv_text

        rows = [st.row(sc, results[sc.id]) for sc in scenarios]
        sys.stdout.write(csv_text(rows, st.columns(scenarios)))
        return
    from planner.files import Journal, check_output

    _out_dir(out)
    for name in (JOURNAL, RESULTS_CSV, RESULTS_PARQUET, COMPUTE_PNG):
        check_output(out / name, "--out")
    journal = Journal(out / JOURNAL, "--out", "study")  # locked: a second run on this --out is refused
    try:
        size = os.fstat(journal._fh.fileno()).st_size
        finished: dict[str, Any] = {}
        if size and not resume:
            raise InvalidInput(f"{out / JOURNAL} holds an earlier run; --resume continues it (the same study), or "
                               "give another --out")
        if size:
            finished = st.read_journal(out / JOURNAL, head, scenarios)
            sys.stderr.write(f"--resume: {len(finished)} finished scenario(s) kept from {out / JOURNAL}; planning "
                             f"the other {len(scenarios) - len(finished)}\n")
        else:
            journal.write(head.model_dump_json(exclude_none=True) + "\n")
            journal.sync()
        results = _plan(scenarios, journal, finished, jobs, ray, batch, quiet, out)
    finally:
        journal.close()
    _write_outputs(spec, scenarios, results, out, plots)


def _plan(scenarios: Sequence[Any], journal: Journal | None, finished: dict[str, Any], jobs: int, ray: str | None,
          batch: int | None, quiet: bool, out: Path | None) -> dict[str, Any]:
    """Plan the scenarios not yet finished, journalling each batch (fsynced) as it arrives, under a progress bar.
    Interrupted (Ctrl-C, SIGTERM, an error), what finished is written to results.csv before the exit."""
    from rich.console import Console

    from planner import study as st

    results = dict(finished)
    todo = [sc for sc in scenarios if sc.id not in results]
    bar = None
    err = Console(stderr=True)
    if not quiet and err.is_terminal and todo:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        bar = Progress(TextColumn("study"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       TextColumn("ETA"), TimeRemainingColumn(), console=err, transient=True)
    task = bar.add_task("", total=len(todo)) if bar is not None else None

    def done(batch_rows: list[tuple[str, Any]]) -> None:
        if journal is not None:
            for sid, outcome in batch_rows:
                journal.write(st.journal_line(sid, outcome))
            journal.sync()  # on the disk before the next batch is awaited
        for sid, outcome in batch_rows:
            results[sid] = outcome
        if bar is not None and task is not None:
            bar.advance(task, len(batch_rows))

    try:
        if bar is not None:
            bar.start()
        st.run(todo, done, jobs=jobs, ray=ray, batch=batch)
    except BaseException:
        if out is not None and len(results) > len(finished):
            from planner.render.study import write_csv

            kept = [sc for sc in scenarios if sc.id in results]
            write_csv([st.row(sc, results[sc.id]) for sc in kept], st.columns(scenarios), out / RESULTS_CSV)
            sys.stderr.write(f"kept {len(kept)} finished scenario(s) in {out / RESULTS_CSV} (and {out / JOURNAL}); "
                             "rerun with --resume to plan only the rest\n")
        raise
    finally:
        if bar is not None:
            bar.stop()
    return results


def _write_outputs(spec: Any, scenarios: Sequence[Any], results: dict[str, Any], out: Path, plots: bool) -> None:
    from planner import study as st
    from planner.cli.output import stdout_console
    from planner.render.study import have_pyarrow, plot_compute, plot_tornados, write_csv, write_parquet

    rows = [st.row(sc, results[sc.id]) for sc in scenarios]
    cols = st.columns(scenarios)
    written = [write_csv(rows, cols, out / RESULTS_CSV)]
    if have_pyarrow():
        written.append(write_parquet(rows, cols, out / RESULTS_PARQUET))
    else:
        sys.stderr.write("note: pyarrow is not installed, so no results.parquet (pip install 'planner[study]')\n")
    if plots:
        fig = plot_compute(spec, rows, out / COMPUTE_PNG)
        written += ([fig] if fig else []) + plot_tornados(spec, rows, out)
    console = stdout_console()
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    console.print(f"{spec.study.name}: {len(rows)} scenario(s): "
                  + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    for path in written:
        console.print(f"wrote {path}")


app.command("study", help=study_command.__doc__)(study_command)
