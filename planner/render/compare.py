"""`plan --gpu A,B,...`: one table ranking the accelerators (planner.compare)."""

from __future__ import annotations

from rich.table import Table

from planner.render.plan import fmt_pct
from planner.schema import Comparison


def _usd(x: float | None) -> str:
    if x is None:
        return "—"
    return f"${x / 1e6:,.1f}M" if x >= 1e6 else f"${x:,.0f}"


def _num(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def comparison_table(c: Comparison) -> Table:
    table = Table(title=f"Accelerators ranked by {c.objective}: {c.ranked_by} (each plan proven optimal on its own "
                  "hardware unless its status says otherwise)", title_justify="left")
    for col, right in (("#", True), ("accelerator", False), ("GPUs", True), ("racks / nodes", True),
                       ("days (wall-clock)", True), ("$ wall-clock", True), ("$ compute-only", True), ("MW", True),
                       ("MWh", True), ("MFU", True), ("status / why", False)):
        table.add_column(col, justify="right" if right else "left")
    for o in c.options:
        racks = "—" if o.racks is None and o.nodes is None else f"{_num(o.racks, ',')} / {_num(o.nodes, ',')}"
        status = o.status if not o.why else f"{o.status}: {o.why}"
        table.add_row("—" if o.rank is None else str(o.rank), o.hardware, _num(o.gpus, ","), racks,
                      _num(o.wall_clock_days, ".1f"), _usd(o.cost_usd), _usd(o.compute_cost_usd),
                      _num(o.facility_power_MW, ".1f"), _num(o.energy_MWh, ",.0f"),
                      "—" if o.mfu is None else fmt_pct(o.mfu), status)
    return table
