"""`export`: a saved plan's launch configuration (planner.export)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from planner.choices import Framework
from planner.cli.app import app


@app.command("export")
def export_command(
    plan_file: Annotated[Path, typer.Option(
        "--plan", help="A plan printed by `plan --json`.", metavar="FILE.json", show_default=False, dir_okay=False)],
    to: Annotated[Framework, typer.Option("--to", help="megatron (Megatron-LM arguments) or torchtitan (TOML job "
                                          "config).", case_sensitive=False)],
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="Hardware the plan was priced on, if not a shipped name (a TOML file).",
        metavar="NAME|FILE.toml", show_default=False)] = None,
) -> None:
    """Print the launch configuration of a saved plan's layout; exit 2 naming what to change if the framework cannot
    run it exactly."""
    from planner import api
    from planner.cli.inputs import hardware_of_plan, load_plan_file, workload_of_plan
    from planner.export import export_text

    doc = load_plan_file(plan_file)
    hw = api.resolve_hardware(hardware_of_plan(doc, gpu))
    sys.stdout.write(export_text(doc, hw, workload_of_plan(doc), to.value) + "\n")
