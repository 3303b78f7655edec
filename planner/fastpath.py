"""The console script `planner`: the few invocations that only print shipped data are answered here with the
standard library and rich, before typer is imported (typer alone builds and converts a command's options for about
as long as the rest of the command line takes to start); everything else goes to planner.cli.main.

Fast invocations (argv exactly, nothing else):

    planner reference              the checked-in docs/reference/*.md pages, when running from a source checkout
    planner hardware list          the table, from the shipped hardware TOML files read with tomllib

They print the same bytes as the full path (tests/test_fastpath.py compares them at several widths, with and
without color, and fails when a page or a column changes on one side only). The files read here unvalidated are the
shipped ones that the test suite validates (tests/test_fastpath.py loads each through the pydantic documents, and
`planner reference --check` compares the pages with the code); anything unexpected in them (a key, a plain number
without its source) falls through to the full path, which validates and words the error. Set PLANNER_FULL_PATH=1 to
always take the full path (the tests do, to compare).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

FULL_PATH_ENV = "PLANNER_FULL_PATH"
"""Set (to anything non-empty) to skip the fast path: the tests compare both."""

REFERENCE_PAGES = ("hardware-format.md", "model-format.md", "profile-format.md", "failure-format.md")
"""planner.reference.PAGES's file names, in its order (tests/test_fastpath.py checks they agree)."""

_ROOT = Path(__file__).resolve().parent.parent


class _Unexpected(Exception):
    """Something the fast path does not handle: take the full path."""


def _reference() -> str:
    folder = _ROOT / "docs" / "reference"
    if not (_ROOT / "pyproject.toml").is_file():  # an installed package: no docs/ beside it
        raise _Unexpected
    try:
        return "\n".join((folder / name).read_text(encoding="utf-8") for name in REFERENCE_PAGES)
    except (OSError, UnicodeDecodeError):
        raise _Unexpected from None


def _value(table: dict[str, Any], key: str) -> Any:
    """A shipped file's number: an inline table with its value and source (planner.sourced)."""
    raw = table[key]
    if not (isinstance(raw, dict) and "value" in raw and "source" in raw):
        raise _Unexpected
    value = raw["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Unexpected
    return value


def _hardware_row(doc: dict[str, Any]) -> SimpleNamespace:
    """The attributes hardware_list_table reads, converted to SI units as planner.hardware does (float(x) * scale;
    whole numbers as int)."""
    gpu = doc["gpu"]

    def whole(table: dict[str, Any], key: str) -> int:
        value = _value(table, key)
        if value != int(value):
            raise _Unexpected
        return int(value)

    peak = (whole(gpu, "threads_per_sm") * whole(gpu, "sms") * float(_value(gpu, "flop_per_clock_per_thread"))
            * (float(_value(gpu, "max_clock_MHz")) * 1e6))
    levels = []
    for lvl in doc["levels"]:
        levels.append(SimpleNamespace(name=str(lvl["name"]), size=whole(lvl, "size") if "size" in lvl else None,
                                      bw_bidir_Bps=float(_value(lvl, "bw_bidir_GBps")) * 1e9,
                                      lat_s=float(_value(lvl, "lat_us")) * 1e-6))
    return SimpleNamespace(name=str(doc["name"]), levels=levels, gpu=SimpleNamespace(
        name=str(gpu["name"]), peak_flops=peak, hbm_bytes=float(_value(gpu, "hbm_GB")) * 1e9))


def _hardware_list() -> Any:
    import tomllib
    from importlib.util import find_spec

    spec = find_spec("planner.hardware_specs")  # where planner.hardware reads them (importlib.resources: 6 ms more)
    if spec is None or not spec.submodule_search_locations:
        raise _Unexpected
    folder = Path(list(spec.submodule_search_locations)[0])
    rows = []
    for path in sorted(folder.glob("*.toml"), key=lambda p: p.stem):
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
            rows.append(_hardware_row(doc))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError,
                OverflowError):
            raise _Unexpected from None
    from planner.render.light import hardware_list_table

    return hardware_list_table(rows)


def fast(argv: Sequence[str]) -> int | None:
    """The exit code after answering `argv` here, or None when it takes the full path (nothing printed)."""
    args = list(argv)
    try:
        if args == ["reference"]:
            text = _reference()

            def show() -> None:
                sys.stdout.write(text)
        elif args == ["hardware", "list"]:
            table = _hardware_list()

            def show() -> None:
                from planner.render import stdout_console

                stdout_console().print(table)
        else:
            return None
    except _Unexpected:
        return None
    try:
        show()
        sys.stdout.flush()
    except BrokenPipeError:  # as planner.cli.app.run: the reader went away
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return 0


def main() -> None:
    """Console script `planner`."""
    if not os.environ.get(FULL_PATH_ENV):
        code = fast(sys.argv[1:])
        if code is not None:
            sys.exit(code)
    from planner.cli import main as full

    full()
