"""`models list` and `models show`: the model presets (models/*.toml)."""

from __future__ import annotations

from typing import Annotated

import typer

from planner.cli.app import models_app
from planner.cli.output import emit_json, show_document, stdout_console, to_json


@models_app.command("list")
def models_list(json_out: Annotated[bool, typer.Option(
        "--json", help="Print a JSON list of the presets (each a ModelPreset: metadata and the validated shape).")]
        = False) -> None:
    """The shipped model presets: kind, parameters, layers, width, batch and tokens."""
    from planner.render.models import models_list_table
    from planner.workload import model_preset_names, read_model_preset
    from planner.workload.families import families

    presets = [read_model_preset(name) for name in model_preset_names()]
    if json_out:
        emit_json(to_json(presets))
        return
    console = stdout_console()
    console.print(models_list_table(presets, width=console.width))
    console.print(f"Families, scaled to a compute budget (--model-family NAME with --compute; docs/families.md): "
                  f"{', '.join(families())}")


@models_app.command("show")
def models_show(
    name: Annotated[str, typer.Argument(help="Preset name or path to a TOML file.", metavar="NAME|FILE.toml")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the validated preset as JSON.")] = False,
) -> None:
    """Every size of one model preset, its parameter counts beside the published ones, and its sources."""
    from pathlib import Path

    from planner.errors import InvalidInput
    from planner.render.models import model_show_renderables
    from planner.workload import model_preset_names, read_model_preset
    from planner.workload.families import families

    path = Path(name.strip())
    key = name.strip().lower()  # a name that is both (deepseek-v3) is the preset: it has a show page
    if (key in families() and key not in model_preset_names()) or (path.parent.name == "families"
                                                                      and path.stem in families()):
        name = path.stem.lower()
        raise InvalidInput(f"'{name}' is a model family, not a preset: `plan --compute C --model-family {name}` scales "
                           "it to a compute budget (docs/families.md, models/families/); `planner models list` lists "
                           "the presets")
    preset = read_model_preset(name)
    show_document(preset, model_show_renderables, json_out)
