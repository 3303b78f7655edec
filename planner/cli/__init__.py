"""The command line: a thin typer skin over planner.api (parse, call the library, render)."""

from planner.cli.commands import app, main, plan_app, plan_main, run

__all__ = ["app", "main", "plan_app", "plan_main", "run"]
