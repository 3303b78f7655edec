"""`sweep`: plan a log-spaced range of compute on one or more systems, with a progress bar, a resumable journal,
CSV and plots (planner.sweep does the planning, planner.render.sweep the tables and charts)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from planner.choices import BatchScaling, Budget, ScheduleChoice
from planner.cli.app import app
from planner.cli.options import RAY_HELP, parse_number, parse_whole
from planner.cli.output import stdout_console
from planner.errors import InvalidInput

if TYPE_CHECKING:
    from rich.progress import TaskID

    from planner.schema import Plan
    from planner.sweep import SweepResult

# The module level holds what typer reads to build the command line; the bodies import the services they call, so
# that `planner --help` and the light commands do not load the planner.


def sweep_command(
    gpu: Annotated[list[str] | None, typer.Option(
        "--gpu", help="Hardware name or TOML file; repeat for several curves (default h100).",
        metavar="NAME|FILE.toml", show_default=False)] = None,
    compute_from: Annotated[float, typer.Option("--from", parser=parse_number, metavar="FLOP",
                                                help="Smallest training compute.")] = 1e24,
    compute_to: Annotated[float, typer.Option("--to", parser=parse_number, metavar="FLOP",
                                              help="Largest training compute.")] = 1e32,
    points: Annotated[int, typer.Option("--points", parser=parse_whole, metavar="INT",
                                        help="Log-spaced compute points per hardware.")] = 30,
    sparse: Annotated[bool, typer.Option("--sparse", help="Sparse (mixture-of-experts) models.")] = False,
    batch_scaling: Annotated[BatchScaling, typer.Option(
        "--batch-scaling", help="Batch-size law: paper, deepseek (Bi et al. 2024) or fixed (2^22 tokens).")
    ] = BatchScaling.paper,
    budget: Annotated[Budget, typer.Option(
        "--budget", help="exact: each point trains its compute (tokens absorb the shape rounding); paper: D = 20 N_p "
        "of the rounded shape, as the paper's tables.", case_sensitive=False)] = Budget.exact,
    schedule: Annotated[ScheduleChoice, typer.Option("--schedule", help="Pipeline schedule.")] = ScheduleChoice.auto,
    days: Annotated[float, typer.Option("--days", parser=parse_number, metavar="NUMBER",
                                        help="Training duration (the paper uses 3 months = 91.3125).")] = 90.0,
    dp_overlap: Annotated[bool | None, typer.Option(
        "--dp-overlap/--no-dp-overlap",
        help="Let the DP gradient all-reduce overlap with compute (default: the profile's: its own phase in the "
        "paper's, overlapped in the realistic one; docs/model.md §6).", show_default=False)
    ] = None,
    price_per_gpu_hour: Annotated[float | None, typer.Option(
        "--price-per-gpu-hour", parser=parse_number, metavar="USD", show_default=False,
        help="Price per GPU-hour; adds each point's cost (table, CSV, JSON).")] = None,
    time_limit: Annotated[float, typer.Option("--time-limit", parser=parse_number, metavar="S",
                                              help="Solver time limit per point, seconds.")] = 30.0,
    jobs: Annotated[int, typer.Option("--jobs", parser=parse_whole, metavar="INT",
                                      help="Points solved in parallel (processes).")] = 2,
    ray: Annotated[str | None, typer.Option("--ray", help=RAY_HELP, metavar="auto|ADDRESS|local",
                                            show_default=False)] = None,
    csv_file: Annotated[Path | None, typer.Option("--csv", help="Write one row per point to this CSV file.",
                                                  metavar="FILE", dir_okay=False, show_default=False)] = None,
    plot: Annotated[str | None, typer.Option(
        "--plot", help="Write PNG plots PREFIX-mfu.png and PREFIX-parallelism-HW.png.", metavar="PREFIX",
        show_default=False)] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print one JSON document (plans, end_of_linear_scaling_flop, last_feasible_flop).")] = False,
    resume: Annotated[bool, typer.Option(
        "--resume", help="With --csv: keep the points an interrupted run of the same sweep finished (FILE.plans.jsonl) "
        "and solve only the rest.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
    profile: Annotated[str | None, typer.Option(
        "--profile", help="Execution profile of every plan: paper (default), realistic, or a TOML file.",
        metavar="paper|realistic|FILE.toml", show_default=False)] = None,
    goodput: Annotated[bool | None, typer.Option(
        "--goodput/--no-goodput", help="Plan with failures, checkpoints and restarts (default: the profile's).",
        show_default=False)] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="FIELD=VALUE on a hardware, profile or failure-model field, for every plan (as `plan --set`).",
        metavar="FIELD=VALUE", show_default=False)] = None,
) -> None:
    """Plan a log-spaced range of compute on one or more systems: MFU, cluster and layout per point (Figs. 6-9)."""
    from rich.text import Text

    from planner.api import resolve
    from planner.files import journal
    from planner.overrides import parse_overrides
    from planner.render.sweep import _check_outputs, summary_notes, summary_table, sweep_table, write_csv, write_plots
    from planner.schema.request import check_positive
    from planner.sweep import compute_grid, read_journal

    grid = compute_grid(compute_from, compute_to, points)  # bad values: one error line before any progress output
    check_positive("--price-per-gpu-hour", price_per_gpu_hour)
    sets = parse_overrides(list(set_ or []))
    for name in gpu or []:
        text = name.strip()
        if ("," in text or text == "all") and not text.endswith(".toml") and "/" not in text:
            raise InvalidInput(f"--gpu '{text}': a sweep draws one curve per --gpu; repeat the flag (--gpu "
                               f"{' --gpu '.join(text.split(',')) if text != 'all' else 'h100 --gpu b200 ...'})")
    names = [resolve(name, profile, sets).name for name in gpu or ["h100"]]  # --set and --profile checked here too
    if resume and csv_file is None:
        raise InvalidInput("--resume needs --csv FILE (the finished points are kept beside it, in FILE.plans.jsonl)")
    _check_outputs(csv_file, plot, names)  # a bad path fails now, not after every point has been solved
    if ray is not None:
        from planner.workers import check_ray

        check_ray(ray)  # missing or unreachable: one line now, not after the journal is opened
    journal_path = Path(str(csv_file) + ".plans.jsonl") if csv_file is not None else None
    settings = {"days": days, "sparse": sparse, "batch_scaling": batch_scaling.value, "budget": budget.value,
                "profile": profile, "goodput": goodput, "overrides": list(set_ or []),
                "schedule": schedule.value,
                "dp_overlap": dp_overlap, "price_per_gpu_hour": price_per_gpu_hour, "time_limit_s": time_limit}
    with journal(journal_path) as journal_fh:  # locked: a second sweep on this --csv is refused, not interleaved
        finished = read_journal(journal_path, settings, names, grid) if (journal_path is not None and resume) else {}
        if resume:
            total = len(grid) * len(names)
            sys.stderr.write(f"--resume: {len(finished)} finished point(s) kept from {journal_path}; solving the "
                             f"other {total - len(finished)}\n")
        res = _run_sweep(gpu, compute_from, compute_to, points, days, sparse, batch_scaling, schedule, time_limit,
                         jobs, dp_overlap, price_per_gpu_hour, finished, budget, profile, goodput, set_, csv_file,
                         journal_fh, journal_path, settings, resume, json_out, quiet, grid, ray, names)
    if csv_file is not None:
        write_csv(res, csv_file)
    written = write_plots(res, plot) if plot else []
    none_feasible = bool(res.plans) and all(p.status == "infeasible" for p in res.plans)
    if json_out:
        sys.stdout.write(res.model_dump_json(indent=2) + "\n")
        if none_feasible:  # the exit code says it; the document's plans carry their explanations
            raise typer.Exit(1)
        return
    console = stdout_console()  # the terminal's width (COLUMNS when set); 140 columns when piped
    console.print(sweep_table(res, console.width))
    console.print(summary_table(res))
    for line in summary_notes(res):
        console.print(Text(line))
    for path in ([csv_file] if csv_file else []) + written:
        console.print(f"wrote {path}")
    if none_feasible:  # exit 1, as `plan` does when nothing is feasible (planner.cli.app's exit codes)
        sys.stderr.write(f"infeasible: no point of the sweep has a layout that meets the {days:g}-day deadline "
                         "(the notes above say why)\n")
        raise typer.Exit(1)


def _run_sweep(gpu, compute_from, compute_to, points, days, sparse, batch_scaling, schedule, time_limit, jobs,
               dp_overlap, price_per_gpu_hour, finished, budget, profile, goodput, set_, csv_file, journal_fh,
               journal_path, settings, resume, json_out, quiet, grid, ray, names) -> SweepResult:
    """The sweep with its progress bar and journal. The journal is emptied (without --resume) only when the first
    point finishes, i.e. once the sweep has accepted every argument: a typo leaves an interrupted run's journal as it
    was, for --resume."""
    from rich.console import Console

    from planner.render.sweep import _requested, _sci, _write_rows
    from planner.sweep import journal_header, journal_line, sweep

    kept: list[Plan] = list(finished.values())
    fresh = [not resume]  # empty the journal and write its header at the first finished point
    header = [resume and journal_fh is not None and os.fstat(journal_fh._fh.fileno()).st_size == 0]
    bar = None
    err_console = Console(stderr=True)
    if not json_out and not quiet and err_console.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(TextColumn("sweeping"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       TextColumn("{task.description}"), console=err_console, transient=True)
    task: TaskID | None = None

    def progress_cb(done: int, total: int, p: Plan) -> None:
        kept.append(p)
        if journal_fh is not None:  # every finished point is on disk before the next one is awaited
            if fresh[0] or header[0]:
                if fresh[0]:
                    journal_fh.start_fresh()
                journal_fh.write(journal_header(settings, len(grid) * len(names)))
                fresh[0] = header[0] = False
            journal_fh.write(journal_line(p, settings))
            journal_fh.sync()
        if bar is not None and task is not None:
            bar.update(task, completed=done, total=total,
                       description=f"{p.hardware} {_sci(_requested(p))}: {p.status}")

    try:
        if bar is not None:
            bar.start()
            task = bar.add_task("", total=None)
        return sweep(gpu or ["h100"], compute_from, compute_to, points, days=days, sparse=sparse,
                     batch_scaling=batch_scaling.value, schedule=schedule.value, time_limit_s=time_limit, workers=1,
                     jobs=jobs, progress=progress_cb, dp_overlap=dp_overlap, price_per_gpu_hour=price_per_gpu_hour,
                     finished=finished, budget=budget.value, profile=profile, goodput=goodput,
                     overrides=list(set_ or []), ray=ray)
    except BaseException:  # Ctrl-C, SIGTERM or an error: what finished is kept, in grid order
        if csv_file is not None and len(kept) > len(finished):
            order = {c: k for k, c in enumerate(grid)}
            kept.sort(key=lambda p: (p.hardware, order.get(_requested(p) or 0.0, 0)))
            _write_rows(kept, csv_file)
            sys.stderr.write(f"kept {len(kept)} finished point(s) in {csv_file} (and {journal_path}); rerun with "
                             "--resume to solve only the rest\n")
        raise
    finally:
        if bar is not None:
            bar.stop()


app.command("sweep", help=sweep_command.__doc__)(sweep_command)
