"""The console script `planner`: the few invocations that only print shipped data are answered here with the
standard library (rich only where a hardware table is too narrow to draw without it), before typer is imported
(typer alone builds and converts a command's options for about as long as the rest of the command line takes to
start); everything else goes to planner.cli.main.

Fast invocations (argv exactly, nothing else):

    planner --help                 the group's help page, drawn without typer or rich (planner/fasthelp.py); bare
    planner                        `planner` prints the same page (exit 2, as typer's no-args help)
    planner reference              the checked-in docs/reference/*.md pages, when running from a source checkout
    planner schema                 the packaged JSON Schema (planner/schema/plan.schema.json), as the full path does
    planner hardware list          the table, from the shipped hardware TOML files read with tomllib
    planner hardware show NAME     NAME a shipped file's name as it is spelled (not a path, not another case)
                                   (both drawn by planner/fasttable.py; by rich where that declines)

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


PACKAGED_SCHEMA = Path(__file__).resolve().parent / "schema" / "plan.schema.json"
"""planner.cli.schema.PACKAGED_SCHEMA (tests/test_fastpath.py checks they are one file): `planner schema` prints it."""


def _schema() -> str:
    try:
        return PACKAGED_SCHEMA.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # missing (the full path then builds it from the models) or unreadable
        raise _Unexpected from None


DEFAULTS: dict[str, Any] = {
    "threads_per_sm": 128, "word_bytes": 2, "fp8_flop_per_clock_per_thread": None,
    "fp4_flop_per_clock_per_thread": None,  # Gpu
    "size": None, "unit": None, "usable": None, "switch_W_per_gpu": 0.0,  # NetworkLevel
    "price_per_gpu_hour_usd": None, "board_W": None, "node_overhead_W": 0.0,  # Economics
}
"""The documents' defaults (planner.schema) for the fields a shipped file may leave out; tests/test_fastpath.py checks
each against the model. A file that leaves out any other field takes the full path."""


def _section(table: Any, keys: dict[str, tuple[str, float | None]], where: str,
             sources: dict[str, str]) -> SimpleNamespace:
    """One table of a shipped hardware file as planner.hardware converts it: sourced values (`{ value, source, note }`,
    the source recorded under `where.key`), SI units, whole numbers as int, defaults for what is left out."""
    from planner.hardware_keys import INT_FIELDS

    if not isinstance(table, dict) or set(table) - set(keys) - {"name"}:
        raise _Unexpected
    out: dict[str, Any] = {"name": table["name"]} if "name" in table else {}
    for key, (field, scale) in keys.items():
        if key not in table:
            if field not in DEFAULTS:
                raise _Unexpected
            out[field] = DEFAULTS[field]
            continue
        raw = table[key]
        if not (isinstance(raw, dict) and "value" in raw and str(raw.get("source", "")).strip()
                and not set(raw) - {"value", "source", "note", "spread"}):
            raise _Unexpected
        value = raw["value"]
        sources[f"{where}.{key}"] = str(raw["source"]) + (f" ({raw['note']})" if raw.get("note") else "")
        if scale is None:
            if not isinstance(value, bool):
                raise _Unexpected
            out[field] = value
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Unexpected
        elif field in INT_FIELDS:
            if value != int(value):
                raise _Unexpected
            out[field] = int(value)
        else:
            out[field] = float(value) * scale
    return SimpleNamespace(**out)


def _hardware(doc: dict[str, Any]) -> SimpleNamespace:
    """A shipped hardware file with the attributes the hardware tables read (planner/render/light.py), the derived
    ones by the functions planner.schema's properties call (planner.derived)."""
    from planner import derived
    from planner.hardware_keys import ECONOMICS_KEYS, GPU_KEYS, LEVEL_KEYS

    if set(doc) - {"name", "description", "gpu", "levels", "gpus_per_node", "economics"}:
        raise _Unexpected
    sources: dict[str, str] = {}
    gpu = _section(doc["gpu"], GPU_KEYS, "gpu", sources)
    gpu.peak_flops = derived.peak_flops(gpu)
    gpu.sustained_flops = derived.sustained_flops(gpu)
    gpu.shared_mem_Bps = derived.shared_mem_Bps(gpu)
    gpu.sram_bytes = derived.sram_bytes(gpu)
    levels = []
    for k, table in enumerate(doc["levels"]):
        lvl = _section(table, LEVEL_KEYS, f"levels[{k}]", sources)
        lvl.subdivided = derived.subdivided(lvl)
        lvl.unit_gpus = derived.unit_gpus(lvl)
        lvl.usable_gpus = derived.usable_gpus(lvl)
        levels.append(lvl)
    economics = None if "economics" not in doc else _section(doc["economics"], ECONOMICS_KEYS, "economics", sources)
    gpus_per_node = doc.get("gpus_per_node", 8)
    if type(gpus_per_node) is not int or not isinstance(doc.get("description", ""), str):
        raise _Unexpected
    return SimpleNamespace(name=str(doc["name"]), description=doc.get("description", ""), gpus_per_node=gpus_per_node,
                           gpu=gpu, levels=levels, economics=economics, sources=sources)


def _specs_folder() -> Path:
    from importlib.util import find_spec

    spec = find_spec("planner.hardware_specs")  # where planner.hardware reads them (importlib.resources: 6 ms more)
    if spec is None or not spec.submodule_search_locations:
        raise _Unexpected
    return Path(list(spec.submodule_search_locations)[0])


def _read_hardware(path: Path) -> SimpleNamespace:
    import tomllib

    try:
        return _hardware(tomllib.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError, OverflowError,
            AttributeError):
        raise _Unexpected from None


def _hardware_views() -> list[SimpleNamespace]:
    paths = sorted(_specs_folder().glob("*.toml"), key=lambda p: p.stem)  # hardware_names()'s order
    return [_read_hardware(p) for p in paths]


def _plain(specs: list[Any]) -> str:
    """planner.hardware_listing table specs drawn without rich (planner/fasttable.py), as the full path's console
    would print them here; fasthelp.Unsupported where they would differ."""
    from planner import fasttable
    from planner.hardware_listing import PIPED_WIDTH

    width, styled = fasttable.console(os.environ, sys.stdout, PIPED_WIDTH)
    return "".join(fasttable.to_text(fasttable.render(title, columns, rows, width, show_header), styled)
                   for title, show_header, columns, rows in specs)


def _hardware_list_plain(hardware: list[SimpleNamespace]) -> str:
    """`hardware list` drawn without rich; fasthelp.Unsupported where it would differ."""
    from planner.hardware_listing import list_table

    return _plain([list_table(hardware)])


def _hardware_show_plain(hw: SimpleNamespace) -> str:
    """`hardware show`'s four tables drawn without rich; fasthelp.Unsupported where they would differ."""
    from planner.hardware_listing import show_tables

    return _plain(show_tables(hw))


def _hardware_show_view(name: str) -> SimpleNamespace:
    """A shipped name exactly as its file is named (h100, not H100 or a path: those take the full path)."""
    folder = _specs_folder()
    if name not in {p.stem for p in folder.glob("*.toml")}:
        raise _Unexpected
    return _read_hardware(folder / f"{name}.toml")


def fast(argv: Sequence[str]) -> int | None:
    """The exit code after answering `argv` here, or None when it takes the full path (nothing printed)."""
    args = list(argv)
    code = 0
    text: str | None = None  # what to print as it is; else `items`, drawn by rich
    items: list[Any] = []
    try:
        if args in (["reference"], ["schema"]):
            text = _reference() if args[0] == "reference" else _schema()
        elif args in ([], ["--help"]):  # the group's help page (bare `planner` prints it and exits 2)
            from planner.fasthelp import Unsupported, page

            try:
                text = page() + ("\n" if args else "")
            except Unsupported:
                return None
            code = 0 if args else 2
        elif args == ["hardware", "list"] or (len(args) == 3 and args[:2] == ["hardware", "show"]):
            from planner.fasthelp import Unsupported as NotPlain

            if args[1] == "list":
                views = _hardware_views()
                try:
                    text = _hardware_list_plain(views)
                except NotPlain:  # rich draws it
                    from planner.render.light import hardware_list_table

                    items = [hardware_list_table(views)]
            else:
                view = _hardware_show_view(args[2])
                try:
                    text = _hardware_show_plain(view)
                except NotPlain:  # rich draws them
                    from planner.render.light import hardware_show_renderables

                    items = hardware_show_renderables(view)
        else:
            return None
    except _Unexpected:
        return None

    def show() -> None:
        if text is not None:
            sys.stdout.write(text)
            return
        from planner.render import stdout_console

        console = stdout_console()
        for item in items:
            console.print(item)

    try:
        show()
        sys.stdout.flush()
    except BrokenPipeError:  # as planner.cli.app.run: the reader went away
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return code


def main() -> None:
    """Console script `planner`."""
    if not os.environ.get(FULL_PATH_ENV):
        code = fast(sys.argv[1:])
        if code is not None:
            sys.exit(code)
    from planner.cli import main as full

    full()
