"""Writing to the terminal and to stdout: rich consoles, the search spinner, JSON documents, where --write goes."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from planner.errors import InvalidInput

if TYPE_CHECKING:  # imported where used: a command that prints a few lines loads neither pydantic nor rich's console
    from pydantic import BaseModel
    from rich.console import Console

    from planner.schema import Plan

D = TypeVar("D", bound="BaseModel")

SCHEMA_PATH = Path(__file__).resolve().parent.parent.parent / "docs" / "plan.schema.json"
"""Where the published Plan JSON Schema lives in the repository (regenerate: `planner schema --write`)."""


def stdout_console() -> Console:
    """Rich console on the current stdout; 140 columns when piped (rich would use 80, too narrow for Table 2)
    unless COLUMNS is set."""
    from planner.render import stdout_console as console

    return console()


def searching(enabled: bool):
    """A spinner on stderr while the search runs, only for a person at a terminal (never with --json)."""
    if enabled and sys.stderr.isatty():
        from rich.console import Console

        return Console(stderr=True).status("searching for the optimal layout ...")
    return contextlib.nullcontext()


def emit_json(text: str) -> None:
    sys.stdout.write(text.rstrip("\n") + "\n")


def show_document(doc: D, renderables: Callable[[D], Iterable[Any]], json_out: bool) -> None:
    """A `show` command's output: the validated document as JSON, or its renderables on the stdout console."""
    if json_out:
        emit_json(to_json(doc))
        return
    console = stdout_console()
    for item in renderables(doc):
        console.print(item)


def to_json(model: BaseModel | Sequence[BaseModel]) -> str:
    """Pydantic's JSON (its float formatting, field order), with infinities written as the string "Infinity"
    (as LimitsRow does) so that they survive a round trip instead of becoming null; for finite documents this is
    byte for byte `model.model_dump_json(indent=2)`."""
    import pydantic_core

    data = [m.model_dump() for m in model] if isinstance(model, Sequence) else model.model_dump()
    return pydantic_core.to_json(data, indent=2, inf_nan_mode="strings").decode()


def plan_json(plan: Plan) -> str:
    return to_json(plan)


def docs_dir(write: bool, out: Path | None, default: Path, flag: str = "--write") -> Path | None:
    """Where a `--write` command writes: --out DIR, else the repository's `default` (docs/...) when planner runs from
    a source checkout; from an installed package that would be site-packages, so it is refused (planner.files)."""
    if out is not None:
        if not out.is_dir():
            raise InvalidInput(f"--out {out}: not an existing directory")
        return out
    if not write:
        return None
    from planner.files import installed_package  # (tempfile): only a command that writes loads it

    if installed_package():
        raise InvalidInput(f"{flag} writes into the repository's docs/, but planner runs from an installed package "
                           f"({Path(__file__).resolve().parent.parent}); give --out DIR")
    return default
