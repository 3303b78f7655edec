"""Formatting of times and rates, and the `planner hardware list` table's title, columns and row strings, with the
standard library only: planner/render/light.py builds the rich table from these, and the command line's fast path
(planner/fasttable.py) draws the same table without rich, so the two cannot drift apart."""

from __future__ import annotations

import math
from collections.abc import Iterable
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

Column = tuple[str, str | None, str, bool, str]
"""A table column: (header, style, justification, no_wrap, overflow)."""
TableSpec = tuple[str, bool, tuple[Column, ...], list[tuple[str, ...] | None]]
"""(title, show header, columns, rows); a None row ends a section (a rule under the row before it)."""


LIST_TITLE = "Hardware (levels: name, GPUs per group, per-GPU bidirectional bandwidth, one-way latency)"
LIST_COLUMNS: tuple[Column, ...] = (
    ("name", "bold", "left", True, "ellipsis"),  # the name to type: never cut
    ("GPU", None, "left", False, "ellipsis"),
    ("network levels, bottom-up", None, "left", False, "ellipsis"),
    ("peak FLOP/s\n(dense 16-bit)", None, "right", True, "ellipsis"),
    ("HBM", None, "right", True, "ellipsis"),
)
"""`hardware list`'s columns (`Column`)."""


def list_row(hw: Any) -> tuple[str, ...]:
    """One system's row of `hardware list`. `hw`: a Hardware, or anything with the same attributes (name;
    gpu.name, gpu.peak_flops, gpu.hbm_bytes; levels as in levels_summary)."""
    return (hw.name, hw.gpu.name, levels_summary(hw), fmt_flops(hw.gpu.peak_flops), f"{hw.gpu.hbm_bytes / 1e9:g} GB")


def list_table(hardware: Iterable[Any]) -> TableSpec:
    """`hardware list`: one row per system (`list_row`)."""
    return (LIST_TITLE, True, LIST_COLUMNS, [list_row(hw) for hw in hardware])


def _file_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "inf"
    return f"{value:.10g}"


_KV: tuple[Column, ...] = (("", "bold", "left", False, "ellipsis"),
                           ("", None, "left", False, "fold"))  # a long URL breaks across lines, never loses its end
_FIELD_VALUE_SOURCE: tuple[Column, ...] = (("field", "bold", "left", False, "ellipsis"),
                                           ("value", None, "right", True, "ellipsis"),
                                           ("source", None, "left", False, "fold"))


def show_tables(hw: Any) -> list[TableSpec]:
    """`hardware show`: every field with its value in the file's units and where the number comes from, as four
    tables. `hw`: a Hardware, or anything with the attributes read here (the fast path's view of a shipped file)."""
    from planner.hardware_keys import ECONOMICS_KEYS, GPU_KEYS, LEVEL_KEYS

    head: TableSpec = (f"Hardware '{hw.name}'", False, _KV, [
        ("description", hw.description or "—"),
        ("GPUs per node", str(hw.gpus_per_node)),
    ])
    rows: list[tuple[str, ...] | None] = []
    for key, (field, scale) in GPU_KEYS.items():
        raw = getattr(hw.gpu, field)
        if raw is None:  # an optional rate the file leaves out (no FP8 / FP4 tensor cores)
            rows.append((key, "none", hw.sources.get(f"gpu.{key}", "not in the file")))
            continue
        value = raw if scale in (None, 1) else raw / scale
        rows.append((key, _file_value(value), hw.sources.get(f"gpu.{key}", "default")))
    g = hw.gpu
    rows.append(None)
    rows.append(("peak FLOP/s", fmt_flops(g.peak_flops), "derived: threads/SM x SMs x FLOP/clock/thread x max clock"))
    rows.append(("sustained FLOP/s", fmt_flops(g.sustained_flops), "derived: peak x sustained clock factor"))
    rows.append(("shared memory bandwidth", f"{g.shared_mem_Bps / 1e12:.4g} TB/s",
                 "derived: 32 banks x 4 B x SMs x sustained clock"))
    rows.append(("on-chip SRAM", f"{g.sram_bytes / 2**20:.4g} MiB", "derived: L2 + SMs x (register file + L1)"))
    gpu: TableSpec = (f"GPU: {hw.gpu.name}", True, _FIELD_VALUE_SOURCE, rows)
    rows = []
    for k, lvl in enumerate(hw.levels):
        if k:
            rows.append(None)
        for key, (field, scale) in LEVEL_KEYS.items():
            raw = getattr(lvl, field)
            if raw is None and field in ("unit", "usable"):
                if lvl.subdivided:  # the other one is set: this one takes its default
                    derived = lvl.unit_gpus if field == "unit" else lvl.usable_gpus
                    rows.append((lvl.name, key, str(derived), "default (from the other of unit / usable)"))
                continue  # neither set: the level is filled exactly, nothing to show
            if raw is None:
                rows.append((lvl.name, key, "unbounded", "top level"))
                continue
            value = raw if scale == 1 else raw / scale
            rows.append((lvl.name, key, _file_value(value), hw.sources.get(f"levels[{k}].{key}", "default")))
    levels: TableSpec = ("Network levels (bottom-up)", True, (("level", "bold", "left", False, "ellipsis"),
                                                              ("field", None, "left", False, "ellipsis"),
                                                              *_FIELD_VALUE_SOURCE[1:]), rows)
    rows = []
    for key, (field, _) in ECONOMICS_KEYS.items():
        raw = None if hw.economics is None else getattr(hw.economics, field)
        rows.append((key, "none" if raw is None else _file_value(raw),
                     hw.sources.get(f"economics.{key}", "not in the file" if raw is None else "default")))
    econ: TableSpec = ("Economics: price and power (planner.economics)", True, _FIELD_VALUE_SOURCE, rows)
    return [head, gpu, levels, econ]
