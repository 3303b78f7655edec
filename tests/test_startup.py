"""Each command imports what it uses (issue 29, part 4; docs/benchmarks.md, "Startup and whole-process speed"): a
command that prints a few lines loads neither numpy, OR-Tools nor the planner's documents and services, and the main
command loads no plotting, sweep or export code. Every case runs the console script's entry point in a fresh
interpreter and reads `sys.modules` after the command finished."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "ortools", "pandas", "matplotlib", "planner.schema", "planner.api", "planner.search",
         "planner.cost", "planner.sweep", "planner.export", "planner.explain")

PROBE = """
import json, sys
entry, argv = sys.argv[1], sys.argv[2:]
sys.argv = [entry, *argv]
from planner.cli import main, plan_main
try:
    (plan_main if entry == "plan" else main)()
except SystemExit as exc:
    code = exc.code
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + " EXIT " + str(code) + "\\n")
"""


def loaded(entry: str, *argv: str) -> set[str]:
    """The modules (and their packages) loaded by `entry argv...` in a fresh interpreter; the command must succeed."""
    proc = subprocess.run([sys.executable, "-c", PROBE, entry, *argv], capture_output=True, text=True, timeout=300)
    tail = proc.stderr.rsplit("\nMODULES ", 1)[-1]
    modules, _, code = tail.rpartition(" EXIT ")
    assert code.strip() == "0", proc.stderr[-2000:]
    return set(json.loads(modules))


def heavy_in(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


@pytest.mark.parametrize("argv", [("--help",), ("schema",)])
def test_help_and_schema_load_no_planner_logic(argv):
    """`planner --help` builds the command line from option declarations only; `planner schema` prints the packaged
    schema file. (pydantic itself is loaded by typer >= 0.2x to convert a command's option values.)"""
    assert heavy_in(loaded("planner", *argv), HEAVY) == []


@pytest.mark.parametrize("argv", [("hardware", "list"), ("hardware", "show", "h100")])
def test_hardware_commands_load_no_numpy_or_solver(argv):
    """The hardware files are read into their documents (pydantic), which need neither numpy nor the search."""
    modules = loaded("planner", *argv)
    assert heavy_in(modules, ("numpy", "ortools", "pandas", "matplotlib", "planner.api", "planner.search",
                              "planner.cost", "planner.sweep", "planner.export")) == []


def test_main_command_loads_only_what_it_uses():
    """The paper's main command plans and prints: no plots, sweeps, exports, studies, or typer's help renderer."""
    modules = loaded("plan", "--compute", "1e28", "--gpu", "h100", "--days", "90")
    assert {"planner.api", "planner.search.cpsat", "planner.render.plan"} <= modules  # the test sees a real plan
    # OR-Tools' Python front end (ortools.sat.python.cp_model) imports pandas and pyarrow; the search builds its
    # models through the compiled helper instead (planner.search.satmodel).
    assert heavy_in(modules, ("pandas", "pyarrow", "ortools.sat.python.cp_model")) == []
    assert heavy_in(modules, ("matplotlib", "planner.sweep", "planner.render.sweep", "planner.export",
                              "planner.confidence", "planner.sensitivity", "planner.validation", "planner.compare",
                              "planner.reference", "typer.rich_utils")) == []


def test_every_document_builds_on_first_use():
    """Each pydantic model of the documents layer is declared `defer_build=True` (planner/schema/__init__.py), so
    that importing the documents does not build the validators of the ~45 models a command does not use."""
    import importlib
    import pkgutil

    from pydantic import BaseModel

    import planner.schema

    eager = []
    for info in pkgutil.iter_modules(planner.schema.__path__, "planner.schema."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == module.__name__
                    and not obj.model_config.get("defer_build")):
                eager.append(f"{module.__name__}.{obj.__name__}")
    for obj in vars(planner.schema).values():
        if (isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == "planner.schema"
                and not obj.model_config.get("defer_build")):
            eager.append(f"planner.schema.{obj.__name__}")
    assert eager == [], f"declare these with ConfigDict(defer_build=True, ...): {eager}"


def _conversions(conversion, value, param, ctx):
    """((type, repr) of the value, None) or (None, (exception type, message)) of one conversion (repr: NaN equals
    itself)."""
    try:
        got = conversion.coerce(value, param=param, ctx=ctx)
        return (type(got).__name__, repr(got)), None
    except Exception as exc:  # noqa: BLE001 - compared, not hidden
        return None, (type(exc).__name__, str(getattr(exc, "message", exc)))


def _samples(param) -> list:
    d = param.type_descriptor
    out = [None, param.default, "abc", "ABC", "1e3", "12", "-3", "0", "nan", "x" * 3, ("a=1", "b=2"), (), 2, 2.5,
           True]
    for choice in d.choices or ():
        value = getattr(choice, "value", choice)
        out += [choice, value, str(value).upper()]
    return out


def test_plain_value_conversion_agrees_with_typers():
    """planner.cli.app._PlainValues converts option values without pydantic where typer's conversion is the identity
    or our own parser; for every parameter of every command and a spread of values (given, default, bad, each
    choice in either case), the result, or the error and its message, is the same as typer's own conversion."""
    typer_coercion = pytest.importorskip("typer._coercion")
    import typer

    from planner.cli import app, plan_app
    from planner.cli.app import _PlainValues

    def commands(cmd):
        yield cmd
        for sub in getattr(cmd, "commands", {}).values():
            yield from commands(sub)

    checked = plain = 0
    for top in (app, plan_app):
        for cmd in commands(typer.main.get_command(top)):
            ctx = typer.Context(cmd)
            for param in cmd.params:
                if not hasattr(param, "type_descriptor"):
                    continue
                ours = _PlainValues(param.type_descriptor)
                theirs = typer_coercion.build_runtime_param(param.type_descriptor)
                for value in _samples(param):
                    if value is None:
                        empty = () if param.multiple or param.nargs == -1 else None
                        expected = ((type(empty).__name__, repr(empty)), None)
                    else:
                        expected = _conversions(theirs, value, param, ctx)
                    assert _conversions(ours, value, param, ctx) == expected, (cmd.name, param.name, value)
                    checked += 1
                    try:
                        ours._plain(value, ctx)
                        plain += 1
                    except Exception:  # noqa: BLE001 - counted only
                        pass
    assert checked > 1000 and plain > 300, (checked, plain)  # the test saw the commands, and the fast path ran


@pytest.mark.parametrize("argv", [("schema",), ("--help",)])
def test_light_commands_load_no_pydantic(argv):
    """With plain option values converted without typer's TypeAdapters, `schema` and `--help` import no pydantic;
    nor the file-writing helpers (planner.files, tempfile), which only a command that writes needs."""
    assert heavy_in(loaded("planner", *argv), ("pydantic", "pydantic_core", "typer._adapters", "planner.files",
                                               "tempfile")) == []


def test_a_run_builds_only_the_command_it_runs():
    """planner.cli.app._only_invoked: `planner NAME ...` builds the click command of NAME only (typer would build all
    thirteen), the same command as in the full app; no name or an unknown one builds every command."""
    import typer

    from planner.cli import app
    from planner.cli.app import _only_invoked

    full = typer.main.get_command(app)
    names = sorted(full.commands)
    assert {"plan", "schema", "hardware", "models", "limits"} <= set(names)

    def described(cmd):
        return (cmd.name, cmd.help, [(p.name, p.opts, p.default, getattr(p, "help", None)) for p in cmd.params],
                sorted(getattr(cmd, "commands", {})))

    for name in names:
        only = typer.main.get_command(_only_invoked(app, [name, "--json"]))
        assert sorted(only.commands) == [name]
        assert described(only.commands[name]) == described(full.commands[name])
        assert [p.name for p in only.params] == [p.name for p in full.params]  # --version kept
    for argv in ([], ["--help"], ["nosuch"], ["--version"]):
        assert sorted(typer.main.get_command(_only_invoked(app, argv)).commands) == names
