"""Rendering of a sweep (README.md "Commands"): rich table, CSV, PNG plots like the paper's Figs. 6-9, and the
`sweep` command.

The command lives here (not in planner/cli/commands.py) so that cli.py only registers it; it raises the library's typed
errors and lets `planner.cli.run` turn them into one-line messages and exit codes.
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import TaskID
from rich.table import Table

from planner.choices import BatchScaling, Budget, ScheduleChoice
from planner.errors import InvalidInput
from planner.files import check_output, journal, safe_file_part, write_atomic
from planner.render import StdoutConsole
from planner.schema import Plan
from planner.sweep import SweepResult, sweep

CSV_FIELDS = ("hardware", "requested_compute_flop", "compute_flop", "status", "solver_status", "gpus", "nodes", "mfu",
              "training_days", "wall_clock_days", "goodput", "step_time_s", "gpu_hours", "cost_usd", "compute_cost_usd",
              "facility_power_MW", "energy_MWh", "warnings", "dp_overlap", "dp",
              "tp_ff", "tp_model", "pp",
              "interleave", "ep", "microbatches", "schedule", "d_model", "d_ff", "layers", "experts", "batch_tokens",
              "bottleneck", "solver_wall_s", "explanation")


def _sci(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "-"
    if math.isinf(x):
        return "inf"
    return f"{x:.{digits - 1}e}".replace("e+", "e")


def _usd(x: float | None) -> str:
    """Whole dollars below a billion, three significant figures above."""
    return f"${x:,.0f}" if x is not None and x < 1e9 else _sci(x, 3)


def _requested(p: Plan) -> float:
    return p.workload.requested_compute_flop or p.workload.compute_flop


# --------------------------------------------------------------------------------------------------
# Table and CSV
# --------------------------------------------------------------------------------------------------


def sweep_table(res: SweepResult) -> Table:
    priced = res.price_per_gpu_hour is not None
    t = Table(title=f"Sweep: {res.days:g}-day runs, {'sparse' if res.sparse else 'dense'}, "
                    f"batch scaling {res.batch_scaling}, {res.budget} budget, {res.profile} profile"
                    + (f", {', '.join(res.overrides)}" if res.overrides else "")
                    + (", DP overlapped with compute" if res.dp_overlap else "")
                    + (f", at ${res.price_per_gpu_hour:,.2f} per GPU-hour" if priced else ""), title_justify="left")
    cols = ("hardware", "requested FLOP", "trained FLOP", "GPUs", "MFU", "days (wall-clock)") \
        + (("cost (USD, wall-clock held)",) if priced else ()) \
        + ("dp", "tp_ff", "tp_model", "pp", "ep", "schedule", "status")
    for col in cols:
        t.add_column(col, justify="left" if col in ("hardware", "schedule", "status") else "right")
    for p in res.plans:
        lay = p.layout
        status = p.status if p.status not in ("infeasible", "unknown") else (
            "infeasible" if p.status == "infeasible" and p.solver.status == "infeasible" else "no plan (time limit)")
        cost = (_usd(p.cost_usd),) if priced else ()
        t.add_row(p.hardware, _sci(_requested(p)), _sci(p.workload.compute_flop),
                  "-" if p.gpus is None else f"{p.gpus:,}",
                  "-" if p.mfu is None else f"{p.mfu:.3f}",
                  "-" if p.training_days is None else f"{(p.wall_clock_days or p.training_days):.1f}", *cost,
                  *(("-",) * 5 if lay is None else (str(lay.dp), str(lay.tp_ff), str(lay.tp_model), str(lay.pp),
                                                    str(lay.ep))),
                  "-" if lay is None else (lay.schedule + (f" i={lay.interleave}" if lay.interleave > 1 else "")),
                  status)
    return t


def summary_table(res: SweepResult) -> Table:
    t = Table(title="Per hardware", title_justify="left")
    for col in ("hardware", "MFU ceiling", "80 % threshold", "end of linear scaling (FLOP)", "last feasible (FLOP)",
                "notes"):
        t.add_column(col)
    for s in res.summaries:
        t.add_row(s.hardware, f"{s.ceiling_mfu:.3f}", f"{s.threshold_mfu:.3f}", _sci(s.end_of_linear_scaling_flop),
                  _sci(s.last_feasible_flop), "; ".join(s.notes))
    return t


def plan_row(p: Plan) -> dict:
    lay = p.layout
    wl = p.workload
    row = {
        "hardware": p.hardware, "requested_compute_flop": wl.requested_compute_flop, "compute_flop": wl.compute_flop,
        "status": p.status, "solver_status": p.solver.status, "gpus": p.gpus, "nodes": p.nodes, "mfu": p.mfu,
        "training_days": p.training_days, "wall_clock_days": p.wall_clock_days,
        "goodput": None if p.goodput is None else p.goodput.goodput, "step_time_s": p.step_time_s,
        "gpu_hours": p.gpu_hours,
        "cost_usd": p.cost_usd, "compute_cost_usd": p.compute_cost_usd, "facility_power_MW": p.facility_power_MW,
        "energy_MWh": p.energy_MWh, "warnings": " | ".join(p.warnings), "dp_overlap": p.dp_overlap,
        "d_model": wl.d_model, "d_ff": wl.d_ff,
        "layers": wl.layers, "experts": wl.experts, "batch_tokens": wl.batch_tokens, "bottleneck": p.bottleneck,
        "solver_wall_s": round(p.solver.wall_s, 3), "explanation": " ".join(p.explanation.split()),
    }
    for k in ("dp", "tp_ff", "tp_model", "pp", "interleave", "ep", "microbatches", "schedule"):
        row[k] = None if lay is None else getattr(lay, k)
    return row


CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""A text cell starting with one of these is a formula (or its start) to a spreadsheet (OWASP's CSV injection)."""


def csv_cell(v: object) -> object:
    """One CSV cell: None empty; text that a spreadsheet would run as a formula (a hardware named '=HYPERLINK(...)')
    prefixed with a quote, so that it reads as the text it is. Numbers are written as they are."""
    if v is None:
        return ""
    if isinstance(v, str) and v.startswith(CSV_FORMULA_START):
        return "'" + v
    return v


def write_csv(res: SweepResult, path: Path | str) -> None:
    _write_rows(res.plans, path)


def _write_rows(plans: Sequence[Plan], path: Path | str) -> None:
    """One CSV row per plan, written whole (planner.files.write_atomic: never half a file, never through a link or
    over a device)."""
    def write(fh) -> None:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        w.writeheader()
        for p in plans:
            w.writerow({k: csv_cell(v) for k, v in plan_row(p).items()})

    write_atomic(path, write, "--csv")


def plot_paths(prefix: str | Path, hardware: Sequence[str]) -> list[Path]:
    """The files --plot PREFIX writes: PREFIX-mfu.png, then PREFIX-parallelism-HW.png per hardware, the hardware's
    name made one safe path component (planner.files.safe_file_part: a '/' in a user's name is not a directory)."""
    prefix = str(prefix)
    return [Path(f"{prefix}-mfu.png")] + [Path(f"{prefix}-parallelism-{safe_file_part(hw)}.png") for hw in hardware]


def _check_outputs(csv_file: Path | str | None, plot: str | Path | None, hardware: Sequence[str] = ()) -> None:
    """Every file the sweep will write (the CSV, its journal, the plots) is a regular file or absent, in an existing
    writable directory (checked before a sweep, not after every point has been solved)."""
    if csv_file is not None:
        check_output(csv_file, "--csv")
        check_output(str(csv_file) + ".plans.jsonl", "--csv journal")
    if plot is not None:
        for path in plot_paths(plot, hardware):
            check_output(path, "--plot")


# --------------------------------------------------------------------------------------------------
# Plots (matplotlib, Agg)
# --------------------------------------------------------------------------------------------------


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


CEILING_LABEL_GAP = 0.06
"""Least vertical distance between two ceiling labels, in MFU (the y axis runs from 0 to 1): two lines of 7-point
text on the 5-inch figure."""


def ceiling_label_positions(levels: Sequence[float], gap: float = CEILING_LABEL_GAP, top: float = 1.0
                            ) -> list[float]:
    """Heights for labels of the sorted `levels`, each as near its level as it can be with at least `gap` between
    neighbours and all within [0, top]: pushed up from the lowest, then back down from the top if they overflow."""
    out: list[float] = []
    for y in levels:
        out.append(max(y, out[-1] + gap) if out else max(y, 0.0))
    for k in range(len(out) - 1, -1, -1):
        ceiling = top if k == len(out) - 1 else out[k + 1] - gap
        out[k] = min(out[k], ceiling)
    return out


def plot_mfu(curves: Sequence[tuple[str, SweepResult, str]], path: Path | str, title: str = "") -> Path:
    """MFU vs compute (paper Figs. 6, 8, 9): one line per (label, sweep, hardware); a dotted horizontal line at
    80 % of each distinct ceiling; a dashed vertical marker at each curve's end of linear scaling and a dotted one
    at its last feasible compute (when the grid goes past it).

    Proven-optimal points are filled circles; feasible points whose search hit the time limit (not proven, so
    their MFU may be below the curve) are hollow. Points with no layout sit on the x axis: a cross when proven
    infeasible, a hollow triangle when the time limit stopped the search first. The x range is padded so that
    markers at the grid's ends stay clear of the frame."""
    from matplotlib.lines import Line2D

    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    thresholds_drawn: dict[float, float] = {}  # 80 % threshold -> its ceiling
    seen = {"unproven": False, "infeasible": False, "unknown": False, "end": False, "wall": False}
    for k, (label, res, hw) in enumerate(curves):
        color = f"C{k % 10}"
        plans = res.plans_for(hw)
        s = res.summary(hw)
        pts = [(c, p) for c, p in zip(res.compute_flop, plans, strict=True)
               if p.mfu is not None and p.status != "infeasible"]
        ax.plot([c for c, _ in pts], [p.mfu for _, p in pts], "-", color=color, lw=1.6, label=label)
        proven = [(c, p.mfu) for c, p in pts if p.status == "optimal"]
        unproven = [(c, p.mfu) for c, p in pts if p.status != "optimal"]
        ax.plot([c for c, _ in proven], [y for _, y in proven], "o", color=color, ms=3.5, ls="none")
        if unproven:
            seen["unproven"] = True
            ax.plot([c for c, _ in unproven], [y for _, y in unproven], "o", color=color, ms=5, ls="none",
                    markerfacecolor="white", markeredgewidth=1.2)
        none = [(c, p) for c, p in zip(res.compute_flop, plans, strict=True) if p.mfu is None]
        none_proven = [c for c, p in none if p.solver.status == "infeasible"]
        none_open = [c for c, p in none if p.solver.status != "infeasible"]
        if none_proven:
            seen["infeasible"] = True
            ax.plot(none_proven, [0.0] * len(none_proven), "x", color=color, ms=5, ls="none", clip_on=False)
        if none_open:
            seen["unknown"] = True
            ax.plot(none_open, [0.0] * len(none_open), "^", color=color, ms=5, ls="none", clip_on=False,
                    markerfacecolor="white")
        if s.threshold_mfu not in thresholds_drawn:
            thresholds_drawn[s.threshold_mfu] = s.ceiling_mfu
            ax.axhline(s.threshold_mfu, color="grey", ls=":", lw=1.0)
        if s.end_of_linear_scaling_flop is not None:
            seen["end"] = True
            ax.axvline(s.end_of_linear_scaling_flop, color=color, ls="--", lw=0.9, alpha=0.8)
        if s.last_feasible_flop is not None and s.last_feasible_flop < res.compute_flop[-1]:
            seen["wall"] = True
            ax.axvline(s.last_feasible_flop, color=color, ls=":", lw=1.2, alpha=0.9)
    # Threshold labels sit in the right margin, clear of the curves, spread apart when thresholds are close.
    levels = sorted(thresholds_drawn)
    for y, at in zip(levels, ceiling_label_positions(levels), strict=True):
        ax.annotate(f"{y:.2f}: 80 % of\n{thresholds_drawn[y]:.2f} ceiling", (1.0, y), xytext=(1.01, at),
                    xycoords=("axes fraction", "data"), textcoords=("axes fraction", "data"), ha="left",
                    va="center", fontsize=7, color="grey", annotation_clip=False,
                    arrowprops=dict(arrowstyle="-", color="grey", lw=0.5) if abs(at - y) > 1e-9 else None)
    ax.set_xscale("log")
    lo = min(res.compute_flop[0] for _, res, _ in curves)
    hi = max(res.compute_flop[-1] for _, res, _ in curves)
    pad = 10 ** (0.03 * max(math.log10(hi / lo), 1.0))
    ax.set_xlim(lo / pad, hi * pad)
    ax.set_ylim(0, 1.0)
    ax.set_xlabel("Requested training compute (FLOP)")
    ax.set_ylabel("Model FLOP utilization (MFU, fraction of peak)")
    ax.set_title(title or "MFU vs training compute")
    ax.grid(True, which="major", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if seen["end"]:
        handles.append(Line2D([], [], color="k", ls="--", lw=0.9))
        labels.append("end of linear scaling (MFU trend < 80 % of ceiling)")
    if seen["wall"]:
        handles.append(Line2D([], [], color="k", ls=":", lw=1.2))
        labels.append("last feasible compute")
    if seen["unproven"]:
        handles.append(Line2D([], [], color="k", marker="o", ls="none", markerfacecolor="white"))
        labels.append("feasible, not proven optimal (time limit)")
    if seen["infeasible"]:
        handles.append(Line2D([], [], color="k", marker="x", ls="none"))
        labels.append("no layout meets the deadline (proven)")
    if seen["unknown"]:
        handles.append(Line2D([], [], color="k", marker="^", ls="none", markerfacecolor="white"))
        labels.append("no layout found before the time limit")
    ax.legend(handles, labels, fontsize=8, loc="lower left")
    fig.tight_layout()
    path = write_atomic(path, lambda fh: fig.savefig(fh, format="png"), "--plot", binary=True)
    plt.close(fig)
    return path


def plot_parallelism(res: SweepResult, hw: str, path: Path | str, title: str = "") -> Path:
    """Fig. 7: log N_X / log N_GPU vs compute for dp, tp (= tp_ff x tp_model), pp and ep."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    series: dict[str, list[tuple[float, float]]] = {"dp": [], "tp (tp_ff x tp_model)": [], "pp": [], "ep": []}
    for c, p in zip(res.compute_flop, res.plans_for(hw), strict=True):
        if p.layout is None or p.status == "infeasible" or not p.gpus or p.gpus < 2:
            continue
        lay = p.layout
        ln = math.log(p.gpus)
        for name, deg in (("dp", lay.dp), ("tp (tp_ff x tp_model)", lay.tp_ff * lay.tp_model), ("pp", lay.pp),
                          ("ep", lay.ep)):
            series[name].append((c, math.log(deg) / ln))
    for k, (name, pts) in enumerate(series.items()):
        if name == "ep" and not any(y > 0 for _, y in pts):
            continue
        ax.plot([x for x, _ in pts], [y for _, y in pts], "-o", ms=3.5, color=f"C{k}", label=name)
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("Requested training compute (FLOP)")
    ax.set_ylabel("Fraction of parallelism, log N_X / log N_GPU")
    ax.set_title(title or f"Parallelism split on {hw}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = write_atomic(path, lambda fh: fig.savefig(fh, format="png"), "--plot", binary=True)
    plt.close(fig)
    return path


def write_plots(res: SweepResult, prefix: str | Path) -> list[Path]:
    """`PREFIX-mfu.png` (all hardware) and `PREFIX-parallelism-HW.png` (one per hardware)."""
    paths = plot_paths(prefix, res.hardware)
    _check_outputs(None, prefix, res.hardware)
    kind = (f"{'sparse' if res.sparse else 'dense'}, {res.days:g}-day runs, batch scaling {res.batch_scaling}"
            + (", DP overlapped" if res.dp_overlap else ""))
    out = [plot_mfu([(hw, res, hw) for hw in res.hardware], paths[0], f"MFU vs compute ({kind})")]
    for hw, path in zip(res.hardware, paths[1:]):
        out.append(plot_parallelism(res, hw, path, f"Parallelism split on {hw} ({kind})"))
    return out


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number") from None


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a whole number") from None


def sweep_command(
    gpu: Annotated[list[str] | None, typer.Option(
        "--gpu", help="Hardware name or TOML file; repeat for several curves (default h100).",
        metavar="NAME|FILE.toml", show_default=False)] = None,
    compute_from: Annotated[float, typer.Option("--from", parser=_number, metavar="FLOP",
                                                help="Smallest training compute.")] = 1e24,
    compute_to: Annotated[float, typer.Option("--to", parser=_number, metavar="FLOP",
                                              help="Largest training compute.")] = 1e32,
    points: Annotated[int, typer.Option("--points", parser=_whole, metavar="INT",
                                        help="Log-spaced compute points per hardware.")] = 30,
    sparse: Annotated[bool, typer.Option("--sparse", help="Sparse (mixture-of-experts) models.")] = False,
    batch_scaling: Annotated[BatchScaling, typer.Option(
        "--batch-scaling", help="Batch-size law: paper, deepseek (Bi et al. 2024) or fixed (2^22 tokens).")
    ] = BatchScaling.paper,
    budget: Annotated[Budget, typer.Option(
        "--budget", help="exact: each point trains its compute (tokens absorb the shape rounding); paper: D = 20 N_p "
        "of the rounded shape, as the paper's tables.", case_sensitive=False)] = Budget.exact,
    schedule: Annotated[ScheduleChoice, typer.Option("--schedule", help="Pipeline schedule.")] = ScheduleChoice.auto,
    days: Annotated[float, typer.Option("--days", parser=_number, metavar="NUMBER",
                                        help="Training duration (the paper uses 3 months = 91.3125).")] = 90.0,
    dp_overlap: Annotated[bool | None, typer.Option(
        "--dp-overlap/--no-dp-overlap",
        help="Let the DP gradient all-reduce overlap with compute (default: the profile's: its own phase in the "
        "paper's, overlapped in the realistic one; docs/model.md §6).", show_default=False)
    ] = None,
    price_per_gpu_hour: Annotated[float | None, typer.Option(
        "--price-per-gpu-hour", parser=_number, metavar="USD", show_default=False,
        help="Price per GPU-hour; adds each point's cost (table, CSV, JSON).")] = None,
    time_limit: Annotated[float, typer.Option("--time-limit", parser=_number, metavar="S",
                                              help="Solver time limit per point, seconds.")] = 30.0,
    jobs: Annotated[int, typer.Option("--jobs", parser=_whole, metavar="INT",
                                      help="Points solved in parallel (processes).")] = 2,
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
    from planner.api import _positive, resolve
    from planner.overrides import parse_overrides
    from planner.sweep import compute_grid, read_journal

    grid = compute_grid(compute_from, compute_to, points)  # bad values: one error line before any progress output
    _positive("--price-per-gpu-hour", price_per_gpu_hour)
    sets = parse_overrides(list(set_ or []))
    names = [resolve(name, profile, sets).name for name in gpu or ["h100"]]  # --set and --profile checked here too
    if resume and csv_file is None:
        raise InvalidInput("--resume needs --csv FILE (the finished points are kept beside it, in FILE.plans.jsonl)")
    _check_outputs(csv_file, plot, names)  # a bad path fails now, not after every point has been solved
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
                         journal_fh, journal_path, settings, resume, json_out, quiet, grid)
    if csv_file is not None:
        write_csv(res, csv_file)
    written = write_plots(res, plot) if plot else []
    if json_out:
        sys.stdout.write(res.model_dump_json(indent=2) + "\n")
        return
    console = StdoutConsole(width=max(Console().width, 140))
    console.print(sweep_table(res))
    console.print(summary_table(res))
    for path in ([csv_file] if csv_file else []) + written:
        console.print(f"wrote {path}")


def _run_sweep(gpu, compute_from, compute_to, points, days, sparse, batch_scaling, schedule, time_limit, jobs,
               dp_overlap, price_per_gpu_hour, finished, budget, profile, goodput, set_, csv_file, journal_fh,
               journal_path, settings, resume, json_out, quiet, grid) -> SweepResult:
    """The sweep with its progress bar and journal. The journal is emptied (without --resume) only when the first
    point finishes, i.e. once the sweep has accepted every argument: a typo leaves an interrupted run's journal as it
    was, for --resume."""
    from planner.sweep import journal_line

    kept: list[Plan] = list(finished.values())
    fresh = [not resume]
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
            if fresh[0]:
                journal_fh.start_fresh()
                fresh[0] = False
            journal_fh.write(journal_line(p, settings))
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
                     overrides=list(set_ or []))
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
