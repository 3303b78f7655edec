"""Formatting and the hardware tables, importing only rich, the standard library and the hardware file's keys:
`planner hardware list|show` render these same tables both from validated Hardware documents (planner/cli/hardware.py)
and, on the command line's fast path (planner/fastpath.py), from the shipped TOML files read directly, so the two print
the same bytes.
planner/render/plan.py imports the formatters from here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import RenderableType
from rich.table import Table

from planner.hardware_listing import TableSpec, fmt_flops, fmt_time, levels_summary, list_table, show_tables

__all__ = ["fmt_flops", "fmt_time", "hardware_list_table", "hardware_show_renderables", "kv_table", "levels_summary"]


def hardware_list_table(hardware: Iterable[Any]) -> Table:
    """`hardware list`: one row per system (planner.hardware_listing.list_table)."""
    return spec_table(list_table(hardware))


def kv_table(title: str, rows: Iterable[tuple[str, RenderableType]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", overflow="fold")  # a long URL breaks across lines instead of losing its end to "…"
    for row in rows:
        table.add_row(*row)
    return table


def spec_table(spec: TableSpec) -> Table:
    """A rich Table from a planner.hardware_listing table spec."""
    title, show_header, columns, rows = spec
    table = Table(title=title, title_justify="left", show_header=show_header)
    for header, style, justify, no_wrap, overflow in columns:
        table.add_column(header, style=style, justify=justify, no_wrap=no_wrap,  # type: ignore[arg-type]
                         overflow=overflow)  # type: ignore[arg-type]
    for row in rows:
        if row is None:
            table.add_section()
        else:
            table.add_row(*row)
    return table


def hardware_show_renderables(hw: Any) -> list[RenderableType]:
    """`hardware show`: the four tables of planner.hardware_listing.show_tables."""
    return [spec_table(spec) for spec in show_tables(hw)]
