"""Rendering of a sweep (README.md "Commands"): rich table, CSV and PNG plots like the paper's Figs. 6-9. The
`sweep` command is planner/cli/sweep.py."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from planner.files import check_output, safe_file_parts, write_atomic
from planner.render.plan import fmt_pct
from planner.schema import Plan
from planner.sweep import SweepResult

CSV_FIELDS = ("hardware", "profile", "requested_compute_flop", "compute_flop", "status", "solver_status", "gpus",
              "nodes", "mfu",
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


SWEEP_DROP_ORDER = ("trained FLOP", "tp_model", "ep", "schedule", "cost (USD, wall-clock held)", "days (wall-clock)",
                    "pp", "tp_ff", "dp")
"""Columns left out, in this order, until the sweep table fits the terminal (a row never wraps or is cut)."""


def sweep_table(res: SweepResult, width: int | None = None) -> Table:
    """One row per point. With `width` (the terminal's columns), the columns of SWEEP_DROP_ORDER are left out, one
    at a time, until every row fits on one line; the title says which were left out."""
    dropped: list[str] = []
    table = _sweep_table(res, dropped)
    if width is not None:
        for col in SWEEP_DROP_ORDER:
            if _table_width(table) <= width:
                break
            if col in [c.header for c in table.columns]:
                dropped.append(col)
                table = _sweep_table(res, dropped)
    return table


def _table_width(table: Table) -> int:
    return Console(width=10_000, markup=False).measure(table).maximum


def _sweep_table(res: SweepResult, dropped: Sequence[str]) -> Table:
    priced = res.price_per_gpu_hour is not None
    t = Table(title=f"Sweep: {res.days:g}-day runs, {'sparse' if res.sparse else 'dense'}, "
                    f"batch scaling {res.batch_scaling}, {res.budget} budget, {res.profile} profile"
                    + (f", {', '.join(res.overrides)}" if res.overrides else "")
                    + (", DP overlapped with compute" if res.dp_overlap else "")
                    + (f", at ${res.price_per_gpu_hour:,.2f} per GPU-hour" if priced else "")
                    + (f" (narrow terminal: {', '.join(dropped)} left out)" if dropped else ""), title_justify="left")
    cols = ("hardware", "requested FLOP", "trained FLOP", "GPUs", "MFU", "days (wall-clock)") \
        + (("cost (USD, wall-clock held)",) if priced else ()) \
        + ("dp", "tp_ff", "tp_model", "pp", "ep", "schedule", "status")
    keep = [c not in dropped for c in cols]
    for col, kept in zip(cols, keep):
        if kept:
            t.add_column(col, justify="left" if col in ("hardware", "schedule", "status") else "right", no_wrap=True)
    for p in res.plans:
        lay = p.layout
        status = p.status if p.status not in ("infeasible", "unknown") else (
            "infeasible" if p.status == "infeasible" and p.solver.status == "infeasible" else "no plan (time limit)")
        cost = (_usd(p.cost_usd),) if priced else ()
        cells = (p.hardware, _sci(_requested(p)), _sci(p.workload.compute_flop),
                 "-" if p.gpus is None else f"{p.gpus:,}",
                 "-" if p.mfu is None else fmt_pct(p.mfu),
                 "-" if p.training_days is None else f"{(p.wall_clock_days or p.training_days):.1f}", *cost,
                 *(("-",) * 5 if lay is None else (str(lay.dp), str(lay.tp_ff), str(lay.tp_model), str(lay.pp),
                                                   str(lay.ep))),
                 "-" if lay is None else (lay.schedule + (f" i={lay.interleave}" if lay.interleave > 1 else "")),
                 status)
        t.add_row(*(c for c, kept in zip(cells, keep) if kept))
    return t


def summary_table(res: SweepResult) -> Table:
    """One row of figures per hardware; its notes, sentences, follow the table (summary_notes)."""
    t = Table(title="Per hardware", title_justify="left")
    for col in ("hardware", "MFU\nceiling", "80%\nthreshold", "end of linear\nscaling (FLOP)",
                "last feasible\n(FLOP)"):
        t.add_column(col, no_wrap=True)
    for s in res.summaries:
        t.add_row(s.hardware, fmt_pct(s.ceiling_mfu), fmt_pct(s.threshold_mfu), _sci(s.end_of_linear_scaling_flop),
                  _sci(s.last_feasible_flop))
    return t


def summary_notes(res: SweepResult) -> list[str]:
    """Each hardware's notes as lines ('h100: MFU stays >= ...'), printed under the summary table."""
    return [f"{s.hardware}: {note}" for s in res.summaries for note in s.notes]


def plan_row(p: Plan) -> dict:
    lay = p.layout
    wl = p.workload
    row = {
        "hardware": p.hardware, "profile": p.profile, "requested_compute_flop": wl.requested_compute_flop,
        "compute_flop": wl.compute_flop,
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
    name made one safe path component, distinct from the others' (planner.files.safe_file_parts: a '/' in a user's
    name is not a directory, and `a/b` beside `a_b` does not overwrite its figure)."""
    prefix = str(prefix)
    parts = safe_file_parts(hardware)
    return [Path(f"{prefix}-mfu.png")] + [Path(f"{prefix}-parallelism-{part}.png") for part in parts]


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
        ax.annotate(f"{y:.2f}: 80% of\n{thresholds_drawn[y]:.2f} ceiling", (1.0, y), xytext=(1.01, at),
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
        labels.append("end of linear scaling (MFU trend < 80% of ceiling)")
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
