"""Formatting of times and rates, and the `planner hardware list` table's title, columns and row strings, with the
standard library only: planner/render/light.py builds the rich table from these, and the command line's fast path
(planner/fasttable.py) draws the same table without rich, so the two cannot drift apart."""

from __future__ import annotations

import math
from typing import Any


def fmt_time(seconds: float | None) -> str:
    """Four significant figures in a readable unit: 0.0001084 -> '108.4 µs'; 1.5 -> '1.5 s'; 7200 -> '2 h'."""
    if seconds is None:
        return "—"
    if not math.isfinite(seconds):
        return "∞" if seconds > 0 else str(seconds)
    s = abs(seconds)
    if s == 0:
        return "0 s"
    if s < 1e-6:
        return f"{seconds * 1e9:.4g} ns"
    if s < 1e-3:
        return f"{seconds * 1e6:.4g} µs"
    if s < 1:
        return f"{seconds * 1e3:.4g} ms"
    if s < 1000:
        return f"{seconds:.4g} s"
    if s < 3600:  # whole seconds, grouped as every other count is: 1,847 s
        return f"{seconds:,.0f} s"
    return f"{seconds / 3600:.4g} h"


def fmt_flops(flops: float) -> str:
    if flops >= 1e15:
        return f"{flops / 1e15:.4g} PFLOP/s"
    return f"{flops / 1e12:.4g} TFLOP/s"


def levels_summary(hw: Any) -> str:
    """'NVLink 8 @ 900 GB/s, 1.13 µs' then 'InfiniBand ∞ @ 100 GB/s, 1.13 µs' on the next line, one level per line
    (bidirectional per-GPU bandwidth): a narrow column wraps within a level, never runs two levels together.
    `hw`: a Hardware, or anything with its `levels` (name, size, bw_bidir_Bps, lat_s)."""
    parts = []
    for lvl in hw.levels:
        size = "∞" if lvl.size is None else str(lvl.size)
        bw = "∞" if not math.isfinite(lvl.bw_bidir_Bps) else f"{lvl.bw_bidir_Bps / 1e9:g} GB/s"
        parts.append(f"{lvl.name} {size} @ {bw}, {fmt_time(lvl.lat_s)}")
    return "\n".join(parts)


PIPED_WIDTH = 140
"""Columns of a report printed to a pipe or file (planner.render.stdout_console), unless COLUMNS is set: rich would use
80, too narrow for Table 2."""

LIST_TITLE = "Hardware (levels: name, GPUs per group, per-GPU bidirectional bandwidth, one-way latency)"
LIST_COLUMNS: tuple[tuple[str, str | None, str, bool], ...] = (
    ("name", "bold", "left", True),  # the name to type: never cut
    ("GPU", None, "left", False),
    ("network levels, bottom-up", None, "left", False),
    ("peak FLOP/s\n(dense 16-bit)", None, "right", True),
    ("HBM", None, "right", True),
)
"""`hardware list`'s columns: (header, style, justification, no_wrap)."""


def list_row(hw: Any) -> tuple[str, ...]:
    """One system's row of `hardware list`. `hw`: a Hardware, or anything with the same attributes (name;
    gpu.name, gpu.peak_flops, gpu.hbm_bytes; levels as in levels_summary)."""
    return (hw.name, hw.gpu.name, levels_summary(hw), fmt_flops(hw.gpu.peak_flops), f"{hw.gpu.hbm_bytes / 1e9:g} GB")
