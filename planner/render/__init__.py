"""Rendering: rich tables, JSON and plots. `StdoutConsole` is the console every command prints its report with."""

from __future__ import annotations

from rich.console import Console


class StdoutConsole(Console):
    """A rich Console that lets a closed pipe (`plan | head -1`) reach `planner.cli.run` as BrokenPipeError,
    which exits 141 like a shell's SIGPIPE, instead of rich's own exit code 1 (the code for "no plan")."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError
