"""`planner models list | show`: the model presets (models/*.toml) as tables."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import RenderableType
from rich.table import Table

from planner.render.limits import fmt_si
from planner.render.plan import _kv_table
from planner.schema.preset import ModelPreset


def _kind(preset: ModelPreset) -> str:
    wl = preset.workload
    if wl.transformer is None:
        return "toy MLP" + (f", {wl.experts} experts" if wl.experts > 1 else "")
    tr = wl.transformer
    moe = f", MoE {wl.experts} x top-{tr.top_k}" if wl.experts > 1 else ""
    return f"transformer ({tr.attention.upper()}, {tr.ffn}{moe})"


def models_list_table(presets: Iterable[ModelPreset]) -> Table:
    table = Table(title="Model presets (models/*.toml; --model NAME)", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("kind")
    table.add_column("params", justify="right")
    table.add_column("active", justify="right")
    table.add_column("layers", justify="right")
    table.add_column("d_model", justify="right")
    table.add_column("seq", justify="right")
    table.add_column("batch (tokens)", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("description")
    for p in presets:
        wl = p.workload
        table.add_row(p.name, _kind(p), fmt_si(wl.params, 3), fmt_si(wl.active_params, 3), str(wl.layers),
                      str(wl.d_model), str(wl.seq_len), fmt_si(wl.batch_tokens, 3), fmt_si(wl.tokens, 3),
                      p.description)
    return table


def _published(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g}"


def model_show_renderables(preset: ModelPreset) -> list[RenderableType]:
    """Every size of one preset, the parameter counts it gives and the source's, and where they come from."""
    wl = preset.workload
    rows: list[tuple[str, RenderableType]] = [
        ("description", preset.description or "—"),
        ("kind", _kind(preset)),
        ("d_model", str(wl.d_model)), ("d_ff", str(wl.d_ff)), ("layers", str(wl.layers)),
        ("experts", str(wl.experts)), ("seq_len", f"{wl.seq_len} tokens"),
        ("batch", f"{wl.batch_tokens:,} tokens ({wl.batch_tokens // wl.seq_len:,} sequences)"),
        ("training tokens", f"{wl.tokens:.4g}"),
        ("parameters", f"{wl.params:.4g} (published: {_published(preset.published_params)})"),
        ("active parameters", f"{wl.active_params:.4g} (published: {_published(preset.published_active_params)})"),
        ("training compute", f"{wl.compute_flop:.4g} FLOP ({wl.flop_convention})"),
    ]
    tr = wl.transformer
    if tr is not None:
        rows += [(name, str(getattr(tr, name))) for name in type(tr).model_fields]
    rows += [("source", preset.source or "—"), ("note", preset.note or "—"),
             ("parameter counts from", preset.params_source or "—")]
    return [_kv_table(f"Model preset '{preset.name}'", rows)]
