"""A study's results as files (`planner study --out DIR`): results.csv, results.parquet, and the figures: GPUs and
cost against compute per accelerator, and a tornado per scenario family (planner.study chooses what they show).

Every file is written whole through planner.files.write_atomic (never half a file, never through a link)."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from planner.files import safe_file_parts, write_atomic
from planner.render.sweep import csv_cell
from planner.schema.study import StudyFile
from planner.study import Row, curves, tornado_families


def csv_text(rows: Sequence[Row], columns: Sequence[str]) -> str:
    """The rows as CSV text (the bytes compared across engines): numbers as Python writes them (shortest repr),
    None empty, text a spreadsheet would run as a formula quoted (render.sweep.csv_cell)."""
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_csv(r.get(c)) for c in columns])
    return buf.getvalue()


def _csv(v: Any) -> Any:
    if isinstance(v, bool):
        return "true" if v else "false"
    return csv_cell(v)


def write_csv(rows: Sequence[Row], columns: Sequence[str], path: Path) -> Path:
    text = csv_text(rows, columns)
    return write_atomic(path, lambda fh: fh.write(text), "--out results.csv")


def have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _column(values: list[Any]) -> list[Any]:
    """One column with one type for Parquet: numbers all float when any is (ints otherwise), anything mixed as text."""
    present = [v for v in values if v is not None]
    if all(isinstance(v, bool) for v in present):
        return values
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        if any(isinstance(v, float) for v in present):
            return [None if v is None else float(v) for v in values]
        return values
    if all(isinstance(v, str) for v in present):
        return values
    return [None if v is None else str(v) for v in values]


def write_parquet(rows: Sequence[Row], columns: Sequence[str], path: Path) -> Path:
    """The rows as one Parquet table (pyarrow; the caller checks `have_pyarrow` first)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({c: pa.array(_column([r.get(c) for r in rows])) for c in columns})
    return write_atomic(path, lambda fh: pq.write_table(table, fh), "--out results.parquet", binary=True)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    plt = _plt()
    fig.tight_layout()
    out = write_atomic(path, lambda fh: fig.savefig(fh, format="png", dpi=110), "--out plot", binary=True)
    plt.close(fig)
    return out


def plot_compute(study: StudyFile, rows: Sequence[Row], path: Path) -> Path | None:
    """GPUs and cost (USD, or GPU-hours without a price) against compute, one line per accelerator (a sample: its
    points). None when the study does not vary compute_flop."""
    lines = curves(study, rows)
    if not lines:
        return None
    plt = _plt()
    fig, (ax_n, ax_c) = plt.subplots(1, 2, figsize=(12, 4.8))
    priced = any(r.get("cost_usd") is not None for rs in lines.values() for r in rs)
    y2 = "cost_usd" if priced else "gpu_hours"
    style = "o" if study.sample is not None else "o-"
    for hw, rs in lines.items():
        xs = [float(r["in_compute_flop"]) for r in rs]
        ax_n.plot(xs, [r["gpus"] for r in rs], style, label=hw, markersize=3)
        ax_c.plot(xs, [r[y2] for r in rs], style, label=hw, markersize=3)
    for ax, what in ((ax_n, "GPUs"), (ax_c, "cost, USD" if priced else "GPU-hours")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training compute, FLOP")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    ax_n.legend(fontsize=8)
    held = "" if study.sample is not None else " (other fields at their middle value)"
    fig.suptitle(f"{study.study.name}: GPUs and {'cost' if priced else 'GPU-hours'} against compute{held}",
                 fontsize=10)
    return _save(fig, path)


MAX_TORNADOS = 64
"""Most tornado figures written (one per family)."""


def plot_tornados(study: StudyFile, rows: Sequence[Row], out_dir: Path) -> list[Path]:
    """tornado-FAMILY.png per scenario family: the spread of the GPU count as each varied field moves alone."""
    plt = _plt()
    written: list[Path] = []
    families = tornado_families(study, rows)[:MAX_TORNADOS]
    parts = safe_file_parts([label for label, _, _ in families])  # two labels never share one file
    for (label, mid, bars), part in zip(families, parts, strict=True):
        if not bars:
            continue
        fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * len(bars)))
        for k, b in enumerate(reversed(bars)):
            ax.barh(k, math.log10(b.high) - math.log10(b.low) if b.low > 0 else 0, left=math.log10(max(b.low, 1)),
                    color="tab:blue", alpha=0.7)
            ax.text(math.log10(max(b.low, 1)), k, f"{b.low_label} ", ha="right", va="center", fontsize=7)
            ax.text(math.log10(max(b.high, 1)), k, f" {b.high_label}", ha="left", va="center", fontsize=7)
        ax.set_yticks(range(len(bars)), [b.field for b in reversed(bars)])
        if mid is not None and mid > 0:
            ax.axvline(math.log10(mid), color="k", lw=0.8)
        ax.set_xlabel("log10 GPUs (the line: every field at its middle value)")
        ax.set_title(f"{study.study.name}: {label}", fontsize=9)
        ends = [math.log10(max(v, 1)) for b in bars for v in (b.low, b.high)]
        span = max(max(ends) - min(ends), 0.5)
        ax.set_xlim(min(ends) - 0.3 * span, max(ends) + 0.3 * span)
        written.append(_save(fig, out_dir / f"tornado-{part}.png"))
    return written


__all__ = ["MAX_TORNADOS", "csv_text", "have_pyarrow", "plot_compute", "plot_tornados", "write_csv",
           "write_parquet"]
