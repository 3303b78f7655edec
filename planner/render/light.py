"""Formatting and the hardware list table, importing only rich and the standard library: `planner hardware list`
renders this same table both from validated Hardware documents (planner/cli/hardware.py) and, on the command line's
fast path (planner/fastpath.py), from the shipped TOML files read directly, so the two print the same bytes.
planner/render/plan.py imports the formatters from here."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from rich.table import Table


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
    if s < 3600:
        return f"{seconds:.4g} s"
    return f"{seconds / 3600:.4g} h"


def fmt_flops(flops: float) -> str:
    if flops >= 1e15:
        return f"{flops / 1e15:.4g} PFLOP/s"
    return f"{flops / 1e12:.4g} TFLOP/s"


def levels_summary(hw: Any) -> str:
    """'NVLink 8 @ 900 GB/s, 1.13 µs | InfiniBand ∞ @ 100 GB/s, 1.13 µs' (bidirectional per-GPU bandwidth).
    `hw`: a Hardware, or anything with its `levels` (name, size, bw_bidir_Bps, lat_s)."""
    parts = []
    for lvl in hw.levels:
        size = "∞" if lvl.size is None else str(lvl.size)
        bw = "∞" if not math.isfinite(lvl.bw_bidir_Bps) else f"{lvl.bw_bidir_Bps / 1e9:g} GB/s"
        parts.append(f"{lvl.name} {size} @ {bw}, {fmt_time(lvl.lat_s)}")
    return " | ".join(parts)


def hardware_list_table(hardware: Iterable[Any]) -> Table:
    """`hardware list`: one row per system. Each item is a Hardware, or anything with the same attributes (name;
    gpu.name, gpu.peak_flops, gpu.hbm_bytes; levels as in levels_summary)."""
    table = Table(title="Hardware (levels: name, GPUs per group, per-GPU bidirectional bandwidth, one-way latency)",
                  title_justify="left")
    table.add_column("name", style="bold", no_wrap=True)  # the name to type: never cut
    table.add_column("GPU")
    table.add_column("network levels, bottom-up")
    table.add_column("peak FLOP/s\n(dense 16-bit)", justify="right", no_wrap=True)
    table.add_column("HBM", justify="right", no_wrap=True)
    for hw in hardware:
        table.add_row(hw.name, hw.gpu.name, levels_summary(hw), fmt_flops(hw.gpu.peak_flops),
                      f"{hw.gpu.hbm_bytes / 1e9:g} GB")
    return table
