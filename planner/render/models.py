"""`planner models list | show`: the model presets (models/*.toml) as tables."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, RenderableType
from rich.table import Table

from planner.render.limits import fmt_sci, fmt_si
from planner.render.plan import _kv_table, fmt_count
from planner.schema.preset import ModelPreset


def _kind(preset: ModelPreset) -> str:
    wl = preset.workload
    if wl.transformer is None:
        return "toy MLP" + (f", {wl.experts} experts" if wl.experts > 1 else "")
    tr = wl.transformer
    moe = f", MoE {wl.experts} x top-{tr.top_k}" if wl.experts > 1 else ""
    # 'gqa' is the formula family: its own words say which (render.plan words a plan's attention the same way)
    attention = ("MLA" if tr.attention == "mla" else "MHA" if tr.kv_heads == tr.heads else "MQA" if tr.kv_heads == 1
                 else "GQA")
    return f"transformer ({attention}, {tr.ffn}{moe})"


MODELS_DROP_ORDER = ("description", "seq", "batch (tokens)", "active", "d_model")
"""Columns left out, in this order, until the list fits the terminal (`models show NAME` has every size)."""


def models_list_table(presets: Iterable[ModelPreset], width: int | None = None) -> Table:
    """One row per preset. With `width` (the terminal's columns), the columns of MODELS_DROP_ORDER are left out, one
    at a time, until the table fits; the title says which. Names and figures are never cut."""
    presets = list(presets)
    dropped: list[str] = []
    table = _models_table(presets, dropped)
    for col in MODELS_DROP_ORDER:
        if width is None:
            break
        # fits: its figures and names whole, and each text column at least 16 wide (`minimum` is the longest word)
        if Console(width=10_000, markup=False).measure(table).minimum + 16 * _text_columns(table) <= width:
            break
        dropped.append(col)
        table = _models_table(presets, dropped)
    return table


def _text_columns(table: Table) -> int:
    return sum(1 for c in table.columns if not c.no_wrap)


def _models_table(presets: list[ModelPreset], dropped: list[str]) -> Table:
    left_out = f" (narrow terminal: {', '.join(dropped)} left out; `planner models show NAME`)" if dropped else ""
    table = Table(title=f"Model presets (models/*.toml; --model NAME){left_out}", title_justify="left")
    cols = ("name", "kind", "params", "active", "layers", "d_model", "seq", "batch (tokens)", "tokens", "description")
    for col in cols:
        if col in dropped:
            continue
        text = col in ("kind", "description")
        table.add_column(col, style="bold" if col == "name" else "", justify="left" if text or col == "name"
                         else "right", no_wrap=not text)
    for p in presets:
        wl = p.workload
        cells = (p.name, _kind(p), fmt_si(wl.params, 3), fmt_si(wl.active_params, 3), str(wl.layers),
                 f"{wl.d_model:,}", f"{wl.seq_len:,}", fmt_si(wl.batch_tokens, 3), fmt_si(wl.tokens, 3), p.description)
        table.add_row(*(c for col, c in zip(cols, cells, strict=True) if col not in dropped))
    return table


def _published(x: float | None) -> str:
    return "—" if x is None else fmt_si(x, 3)


def _field(value: object) -> str:
    """A transformer field as the plan's model table writes it: whole numbers grouped (128,256), the rest as is."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def model_show_renderables(preset: ModelPreset) -> list[RenderableType]:
    """Every size of one preset, the parameter counts it gives and the source's, and where they come from."""
    wl = preset.workload
    rows: list[tuple[str, RenderableType]] = [
        ("description", preset.description or "—"),
        ("kind", _kind(preset)),
        ("d_model", f"{wl.d_model:,}"), ("d_ff", f"{wl.d_ff:,}"), ("layers", str(wl.layers)),
        ("experts", str(wl.experts)), ("seq_len", f"{wl.seq_len:,} tokens"),
        ("batch", f"{wl.batch_tokens:,} tokens ({wl.batch_tokens // wl.seq_len:,} sequences)"),
        ("training tokens", fmt_count(wl.tokens)),
        ("parameters", f"{fmt_count(wl.params)} (published: {_published(preset.published_params)})"),
        ("active parameters", f"{fmt_count(wl.active_params)} (published: "
                              f"{_published(preset.published_active_params)})"),
        ("training compute", f"{fmt_sci(wl.compute_flop, 4)} FLOP ({wl.flop_convention})"),
    ]
    tr = wl.transformer
    if tr is not None:
        rows += [(name, _field(getattr(tr, name))) for name in type(tr).model_fields]
    rows += [("source", preset.source or "—"), ("note", preset.note or "—"),
             ("parameter counts from", preset.params_source or "—")]
    return [_kv_table(f"Model preset '{preset.name}'", rows)]
