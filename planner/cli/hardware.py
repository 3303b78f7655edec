"""`hardware list` and `hardware show`: the hardware library."""

from __future__ import annotations

from typing import Annotated

import typer

from planner.cli.app import hardware_app
from planner.cli.output import emit_json, show_document, stdout_console, to_json


@hardware_app.command("list")
def hardware_list(json_out: Annotated[bool, typer.Option("--json", help="Print a JSON list of hardware specs.")]
                  = False) -> None:
    """The shipped systems: GPU, network levels, peak FLOP/s, HBM."""
    from planner.hardware import get_hardware, hardware_names
    from planner.render.light import hardware_list_table

    specs = [get_hardware(name) for name in hardware_names()]
    if json_out:
        emit_json(to_json(specs))
        return
    stdout_console().print(hardware_list_table(specs))


@hardware_app.command("show")
def hardware_show(
    name: Annotated[str, typer.Argument(help="Hardware name or path to a TOML file.", metavar="NAME|FILE.toml")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the validated spec as JSON.")] = False,
) -> None:
    """Every field of one hardware spec, with its value and its source."""
    from planner.hardware import get_hardware
    from planner.render.light import hardware_show_renderables

    hw = get_hardware(name)
    show_document(hw, hardware_show_renderables, json_out)
