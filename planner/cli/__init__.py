"""The command line: a thin typer skin over the library, one module per command (parse flags, build the request,
call the service, render). planner/cli/app.py holds the typer apps and the entry points; importing a command module
registers its command, so COMMANDS (in the order `planner --help` lists them) is imported here."""

import importlib

from planner.cli.app import app, main, plan_app, plan_main, run

COMMANDS = ("sweep", "study", "plan", "export", "validate", "evaluate", "limits", "hardware", "models", "schema")
"""Command modules under planner/cli/ (schema.py holds `schema` and `reference`, hardware.py `hardware list|show`,
models.py `models list|show`)."""

for _name in COMMANDS:
    importlib.import_module(f"planner.cli.{_name}")

__all__ = ["COMMANDS", "app", "main", "plan_app", "plan_main", "run"]
