"""`plan --gpu A,B,...`: the accelerators ranked (planner.compare) as one table, or two when one would not fit the
terminal, then one line per caveat (why an option is unranked, its warnings, the spare GPUs it pays for)."""

from __future__ import annotations

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from planner.render.plan import fmt_pct, rack_scale
from planner.schema import AcceleratorOption, Comparison


def _usd(x: float | None) -> str:
    """Dollars in a few characters: $950,000, $122.0M, $12.61B, $11.7T, then powers of ten ($1.17e+16)."""
    if x is None:
        return "—"
    for scale, suffix, fmt in ((1e12, "T", ".3g"), (1e9, "B", ".2f"), (1e6, "M", ".1f")):
        if x >= scale:
            return f"${x / scale:{fmt}}{suffix}" if x < 1e3 * scale or suffix != "T" else f"${x:.3g}"
    return f"${x:,.0f}"


def _num(x: float | None, fmt: str, big: float = 1e7) -> str:
    """`x` in `fmt`, or three significant figures in powers of ten from `big` on (a 1e32-FLOP plan's 1.9e12 GPUs
    stay legible in a column)."""
    if x is None:
        return "—"
    return format(x, ".3g") if abs(x) >= big else format(x, fmt)


def _mw(x: float | None) -> str:
    """Megawatts to three significant figures (0.0101, 32.5, 1,240), powers of ten from 10 TW on."""
    if x is None:
        return "—"
    return f"{x:.3g}" if x < 1e3 or x >= 1e7 else f"{x:,.0f}"


def _status(o: AcceleratorOption) -> str:
    return o.status + (" (!)" if o.warnings else "")


_SIZE = ("#", "accelerator", "GPUs", "racks / nodes", "days (wall-clock)", "MFU", "status")
_MONEY = ("#", "accelerator", "$ per GPU-hour", "$ wall-clock", "$ compute-only", "MW", "MWh")
_HEADER = {"racks / nodes": "racks /\nnodes", "days (wall-clock)": "days\n(wall-clock)",
           "$ per GPU-hour": "$ per\nGPU-hour", "$ wall-clock": "$\nwall-clock", "$ compute-only": "$\ncompute-only",
           "MW": "facility\nMW", "MWh": "facility\nMWh"}
"""Headers on two lines where a column's figures are narrower than its name."""


def _cells(o: AcceleratorOption) -> dict[str, str]:
    # An 8-GPU node's NVLink domain is not a rack (planner.render.plan.rack_scale): "—" in the racks half.
    rack = o.racks if o.plan is None or rack_scale(o.plan) else None
    racks = "—" if rack is None and o.nodes is None else f"{_num(rack, ',')} / {_num(o.nodes, ',')}"
    price = "—" if o.price_per_gpu_hour is None else f"${_num(o.price_per_gpu_hour, ',.2f', 1e6)}"
    return {"#": "—" if o.rank is None else str(o.rank), "accelerator": o.hardware, "GPUs": _num(o.gpus, ","),
            "racks / nodes": racks, "days (wall-clock)": _num(o.wall_clock_days, ".1f", 1e5), "MFU": fmt_pct(o.mfu),
            "status": _status(o), "$ per GPU-hour": price, "$ wall-clock": _usd(o.cost_usd),
            "$ compute-only": _usd(o.compute_cost_usd), "MW": _mw(o.facility_power_MW),
            "MWh": _num(o.energy_MWh, ",.0f")}


def _table(c: Comparison, columns: tuple[str, ...], title: str | None) -> Table:
    table = Table(title=title, title_justify="left")
    for col in columns:
        left = col in ("accelerator", "status")
        # cells never wrap or lose digits to an ellipsis: a table too wide for the terminal is split instead
        table.add_column(_HEADER.get(col, col), justify="left" if left else "right", no_wrap=True)
    for o in c.options:
        cells = _cells(o)
        table.add_row(*(cells[col] for col in columns))
    return table


def _title(c: Comparison) -> str:
    profiles = sorted({o.plan.profile for o in c.options if o.plan is not None})
    priced = f", priced by the {' / '.join(profiles)} profile" if profiles else ""
    return (f"Accelerators ranked by {c.objective}: {c.ranked_by}{priced} (each plan proven optimal on its own "
            "hardware unless its status says otherwise)")


def caveats(c: Comparison) -> list[str]:
    """One line per caveat: why an option is unranked, each warning of its plan, the spare GPUs its cost and power
    count, and the comparison's notes."""
    lines = []
    for o in c.options:
        if o.why:  # a plan that meets the request but lacks the objective's figure is unranked, not failed
            lines.append(f"{o.hardware}: {'not ranked' if o.status in ('optimal', 'feasible') else o.status}: {o.why}")
        lines += [f"{o.hardware}: WARNING: {w}" for w in o.warnings]
        if o.plan is not None:
            held, used = o.plan.held_gpus, o.plan.gpus
            if held is not None and used is not None and held > used and o.rank is not None:
                lines.append(f"{o.hardware}: holds {held:,} GPUs ({held - used:,} spare in the racks it takes "
                             "whole): $ wall-clock, MW and MWh count them, $ compute-only does not")
    return lines + [f"note: {n}" for n in c.notes]


def comparison_renderables(c: Comparison, width: int) -> list[RenderableType]:
    """The ranking as one table when it fits `width` columns, else as two (size and time; money and power) that share
    the rank and accelerator columns; then the caveats."""
    one = _table(c, _SIZE[:-1] + _MONEY[2:] + _SIZE[-1:], _title(c))
    if Console(width=10_000, markup=False).measure(one).maximum <= width:
        out: list[RenderableType] = [one]
    else:
        out = [_table(c, _SIZE, _title(c)), _table(c, _MONEY, None)]
    return out + [Text(line) for line in caveats(c)]


def comparison_table(c: Comparison) -> Table:
    """The ranking as one table (however wide)."""
    return _table(c, _SIZE[:-1] + _MONEY[2:] + _SIZE[-1:], _title(c))
