"""Formatting and the hardware tables, importing only rich, the standard library and the hardware file's keys:
`planner hardware list|show` render these same tables both from validated Hardware documents (planner/cli/hardware.py)
and, on the command line's fast path (planner/fastpath.py), from the shipped TOML files read directly, so the two print
the same bytes.
planner/render/plan.py imports the formatters from here."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from rich.console import RenderableType
from rich.table import Table

from planner.hardware_keys import ECONOMICS_KEYS, GPU_KEYS, LEVEL_KEYS
from planner.hardware_listing import LIST_COLUMNS, LIST_TITLE, fmt_flops, fmt_time, levels_summary, list_row

__all__ = ["fmt_flops", "fmt_time", "hardware_list_table", "hardware_show_renderables", "kv_table", "levels_summary"]


def hardware_list_table(hardware: Iterable[Any]) -> Table:
    """`hardware list`: one row per system (planner.hardware_listing: the columns and each row's strings)."""
    table = Table(title=LIST_TITLE, title_justify="left")
    for header, style, justify, no_wrap in LIST_COLUMNS:
        table.add_column(header, style=style, justify=justify, no_wrap=no_wrap)  # type: ignore[arg-type]
    for hw in hardware:
        table.add_row(*list_row(hw))
    return table


def kv_table(title: str, rows: Iterable[tuple[str, RenderableType]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", overflow="fold")  # a long URL breaks across lines instead of losing its end to "…"
    for row in rows:
        table.add_row(*row)
    return table


def _file_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "inf"
    return f"{value:.10g}"


def hardware_show_renderables(hw: Any) -> list[RenderableType]:
    """`hardware show`: every field with its value in the file's units and where the number comes from. `hw`: a
    Hardware, or anything with the attributes read here (the fast path's view of a shipped file)."""
    head = kv_table(f"Hardware '{hw.name}'", [
        ("description", hw.description or "—"),
        ("GPUs per node", str(hw.gpus_per_node)),
    ])
    gpu = Table(title=f"GPU: {hw.gpu.name}", title_justify="left")
    gpu.add_column("field", style="bold")
    gpu.add_column("value", justify="right", no_wrap=True)
    gpu.add_column("source", overflow="fold")
    for key, (field, scale) in GPU_KEYS.items():
        raw = getattr(hw.gpu, field)
        if raw is None:  # an optional rate the file leaves out (no FP8 / FP4 tensor cores)
            gpu.add_row(key, "none", hw.sources.get(f"gpu.{key}", "not in the file"))
            continue
        value = raw if scale in (None, 1) else raw / scale
        gpu.add_row(key, _file_value(value), hw.sources.get(f"gpu.{key}", "default"))
    g = hw.gpu
    gpu.add_section()
    gpu.add_row("peak FLOP/s", fmt_flops(g.peak_flops), "derived: threads/SM x SMs x FLOP/clock/thread x max clock")
    gpu.add_row("sustained FLOP/s", fmt_flops(g.sustained_flops), "derived: peak x sustained clock factor")
    gpu.add_row("shared memory bandwidth", f"{g.shared_mem_Bps / 1e12:.4g} TB/s",
                "derived: 32 banks x 4 B x SMs x sustained clock")
    gpu.add_row("on-chip SRAM", f"{g.sram_bytes / 2**20:.4g} MiB", "derived: L2 + SMs x (register file + L1)")
    levels = Table(title="Network levels (bottom-up)", title_justify="left")
    levels.add_column("level", style="bold")
    levels.add_column("field")
    levels.add_column("value", justify="right", no_wrap=True)
    levels.add_column("source", overflow="fold")
    for k, lvl in enumerate(hw.levels):
        if k:
            levels.add_section()
        for key, (field, scale) in LEVEL_KEYS.items():
            raw = getattr(lvl, field)
            if raw is None and field in ("unit", "usable"):
                if lvl.subdivided:  # the other one is set: this one takes its default
                    derived = lvl.unit_gpus if field == "unit" else lvl.usable_gpus
                    levels.add_row(lvl.name, key, str(derived), "default (from the other of unit / usable)")
                continue  # neither set: the level is filled exactly, nothing to show
            if raw is None:
                levels.add_row(lvl.name, key, "unbounded", "top level")
                continue
            value = raw if scale == 1 else raw / scale
            levels.add_row(lvl.name, key, _file_value(value), hw.sources.get(f"levels[{k}].{key}", "default"))
    econ = Table(title="Economics: price and power (planner.economics)", title_justify="left")
    econ.add_column("field", style="bold")
    econ.add_column("value", justify="right", no_wrap=True)
    econ.add_column("source", overflow="fold")
    for key, (field, _) in ECONOMICS_KEYS.items():
        raw = None if hw.economics is None else getattr(hw.economics, field)
        econ.add_row(key, "none" if raw is None else _file_value(raw),
                     hw.sources.get(f"economics.{key}", "not in the file" if raw is None else "default"))
    return [head, gpu, levels, econ]
