"""Rendering: rich tables, JSON and plots. `StdoutConsole` is the console every command prints its report with."""

from __future__ import annotations

import os
import sys
from typing import Any

from rich.console import Console


class StdoutConsole(Console):
    """A rich Console that lets a closed pipe (`plan | head -1`) reach `planner.cli.run` as BrokenPipeError,
    which exits 141 like a shell's SIGPIPE, instead of rich's own exit code 1 (the code for "no plan").

    Markup is off: the reports style with `Text` objects, and every string they print is data (a hardware file's
    "[economics]" table, a description a user file wrote) that rich would otherwise read as a style tag, dropping
    it or, for an unmatched "[/x]", failing with MarkupError."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        super().__init__(*args, **kwargs)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def stdout_console() -> StdoutConsole:
    """The console on the current stdout; 140 columns when piped (rich would use 80, too narrow for Table 2) unless
    COLUMNS is set."""
    from planner.hardware_listing import PIPED_WIDTH

    width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else PIPED_WIDTH
    return StdoutConsole(file=sys.stdout, width=width)
