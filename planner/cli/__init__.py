"""The command line: a thin typer skin over the library, one module per command (parse flags, build the request,
call the service, render). planner/cli/app.py holds the typer apps and the entry points; importing a command module
registers its command, so COMMANDS (in the order `planner --help` lists them) is imported here."""

import importlib
import inspect

from planner.cli.app import app, main, plan_app, plan_main, run

COMMANDS = ("sweep", "study", "plan", "export", "validate", "evaluate", "limits", "hardware", "models", "schema")
"""Command modules under planner/cli/ (schema.py holds `schema` and `reference`, hardware.py `hardware list|show`,
models.py `models list|show`)."""

for _name in COMMANDS:
    importlib.import_module(f"planner.cli.{_name}")


def one_line_summaries() -> None:
    """`planner --help` lists each command by the first paragraph of its help; in rich markup mode typer keeps that
    paragraph's line breaks (the docstrings wrap at 120 columns), which broke a listed sentence mid-line. Each command
    without a short help gets its first paragraph joined into one line (rich then wraps it to the terminal)."""
    for info in app.registered_commands:
        text = info.help or (info.callback.__doc__ if info.callback is not None else None) or ""
        if info.short_help is None and text:
            info.short_help = " ".join(inspect.cleandoc(text).split("\n\n")[0].split())


one_line_summaries()

__all__ = ["COMMANDS", "app", "main", "plan_app", "plan_main", "run"]
