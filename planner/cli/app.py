"""The command line's typer apps, entry points and error handling; each command is a module beside this one
(planner/cli/plan.py, evaluate.py, sweep.py, ...), a thin skin over the library. README.md, "Commands".

Two console scripts share these commands:

    plan --compute 1e28 --gpu h100 --days 90 [--json]        (same as `planner plan ...`)
    planner plan | evaluate | sweep | limits | export | validate | hardware list|show | models list|show | schema |
    reference

Exit codes, for scripts: 0 success; 1 infeasible (the explanation on stderr; with --json the infeasible Plan
document on stdout) or a given layout that does not fit in memory or misses --days (a sweep: no point feasible);
2 bad input (one line `error: ...` on stderr naming the bad value: unknown GPU, non-positive or non-finite numbers,
malformed TOML or JSON, impossible layouts, contradictory flags, unparsable options); 3 an internal error (a bug:
one line `internal error: ...`); 141 the reader of stdout went away (`plan | head -1`), as for a SIGPIPE. No traceback
is ever printed. `--json` writes exactly one JSON document on stdout and no error line on stderr, whatever happens:
the result (a Plan, with status 'infeasible' or 'unknown' and its explanation when there is none), or an
ErrorDocument `{"status": "error", "error": {"code", "message", "exit_code"}}`; the exit code is as above.

The commands run through `run()` with click's standalone mode off, so that usage errors, library errors and
bugs all end up in the one place that turns them into one-line messages and exit codes.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Annotated, Any

import typer

try:  # typer >= 0.2x vendors click as typer._click; older typer (pyproject allows >= 0.12) depends on click
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import exceptions as click_exc  # type: ignore[no-redef]  # the same name, from the fallback

from planner.errors import Infeasible, InvalidInput, PlannerError

app = typer.Typer(
    name="planner",
    help="Provably optimal parallel layouts for frontier-scale training runs (Erdil & Schneider-Joseph cost model).",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
hardware_app = typer.Typer(help="The hardware library: shipped systems and user TOML files.", no_args_is_help=True)
app.add_typer(hardware_app, name="hardware")
models_app = typer.Typer(help="The model presets: shipped models/*.toml and user TOML files (--model NAME|FILE).",
                         no_args_is_help=True)
app.add_typer(models_app, name="models")


_argv: list[str] = []
"""The words `run` was given, for the eager --version callback (it runs before --json is parsed)."""


def version_text(as_json: bool) -> str:
    """The version line, or with --json one JSON document `{"name": "planner", "version": ...}` (version null when
    the package is not installed)."""
    import json
    from importlib.metadata import PackageNotFoundError, version

    try:
        number: str | None = version("planner")
    except PackageNotFoundError:
        number = None
    if as_json:
        return json.dumps({"name": "planner", "version": number}, indent=2)
    return f"planner {number}" if number is not None else "planner (not installed as a package)"


def print_version(value: bool) -> None:
    """--version (of `planner` and of `plan`): print it (one JSON document with --json) and exit."""
    if value:
        print(version_text(_wants_json(_argv)))
        raise typer.Exit(0)


def _version_only(argv: Sequence[str]) -> bool:
    """`planner --version --json` (either order): the group has no --json option of its own, so click would call
    --json unknown before the eager --version ran; the options before the command name are only these two."""
    head = list(itertools.takewhile(lambda w: w.startswith("-"), argv))
    return "--version" in head and set(head) <= {"--version", "--json"}


@app.callback()
def _main(version_flag: Annotated[bool, typer.Option(
        "--version", help="Print the version (one JSON document with --json) and exit.", callback=print_version,
        is_eager=True)] = False) -> None:
    """Provably optimal parallel layouts for frontier-scale training runs (Erdil & Schneider-Joseph cost model)."""


# `plan` is also its own console script; a one-command Typer app gives it usage lines that read `plan ...`.
plan_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


_NO_ARGS_IS_HELP = getattr(click_exc, "NoArgsIsHelpError", ())  # click >= 8.2 signals "help printed" this way


LONGEST_WORD = 200
"""Characters of one word (no white space) an error line repeats whole: a longer one (a 5,000-digit --gpus, a
megabyte-long --set value echoed back) is cut to its start and its length, so the line stays one line a person reads."""


def _one_line(text: str) -> str:
    words = str(text).split()
    return " ".join(w if len(w) <= LONGEST_WORD else f"{w[:LONGEST_WORD // 2]}...({len(w):,} characters)"
                    for w in words)


class Terminated(Exception):
    """SIGTERM arrived: stop like Ctrl-C, with exit code 143."""


def _on_sigterm(signum, frame) -> None:  # pragma: no cover - exercised through a subprocess in the tests
    raise Terminated()


def _wants_json(argv: Sequence[str]) -> bool:
    return "--json" in argv


def _json_error(argv: Sequence[str], code: str, exit_code: int, message: str) -> None:
    """With --json, one ErrorDocument on stdout (a provisioning script reads a status, not an empty document)."""
    from planner.schema import ErrorDetail, ErrorDocument

    if _wants_json(argv):
        with contextlib.suppress(OSError):
            doc = ErrorDocument(error=ErrorDetail(code=code, message=_one_line(message), exit_code=exit_code))
            sys.stdout.write(doc.model_dump_json(indent=2) + "\n")
            sys.stdout.flush()


def _fail(argv: Sequence[str], code: str, exit_code: int, message: str, prefix: str = "error") -> int:
    """One line on stderr or, with --json, one ErrorDocument on stdout and nothing on stderr (a script reads one
    stream). Returns the exit code."""
    if _wants_json(argv):
        _json_error(argv, code, exit_code, message)
    else:
        sys.stderr.write(f"{prefix}: {_one_line(message)}\n")
    return exit_code


HELP_WIDTH_PIPED = 140
"""Columns of `--help` when stdout is not a terminal (`planner sweep --help | cat`), as for the tables: rich would
use 80 and cut long words (PREFIX-parallelism-HW.png) in the narrow description column."""


@contextlib.contextmanager
def _help_width() -> Iterator[None]:
    """Widen typer's help console when piped, unless the user set a width (COLUMNS or typer's TERMINAL_WIDTH).

    typer reads TERMINAL_WIDTH when it first imports its help renderer (typer.rich_utils, which loads rich's
    Markdown: a tenth of a second that a command printing no help should not pay), so until then the width goes
    through that variable, for this run only; once the renderer is loaded, its width is set directly."""
    if ({"COLUMNS", "TERMINAL_WIDTH"} & set(os.environ)) or sys.stdout.isatty():
        yield
        return
    rich_utils = sys.modules.get("typer.rich_utils")
    if rich_utils is not None:
        rich_utils.MAX_WIDTH = HELP_WIDTH_PIPED  # type: ignore[attr-defined]
        yield
        return
    os.environ["TERMINAL_WIDTH"] = str(HELP_WIDTH_PIPED)
    try:
        yield
    finally:
        os.environ.pop("TERMINAL_WIDTH", None)


def _switches_as_switches(command: Any) -> None:
    """In help, an on/off flag (--json, --quiet, --sparse) is a switch: no `<bool>` value column beside it, since it
    takes no value. Applied to every option of every (sub)command once the click command is built."""
    for param in getattr(command, "params", []):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    built = command.get_help_option  # click makes --help itself, per context

    def help_option(ctx: Any) -> Any:
        option = built(ctx)
        if option is not None and option.metavar is None:
            option.metavar = ""
        if option is not None and hasattr(option, "type_descriptor") and getattr(option, "_runtime_param",
                                                                                  False) is None:
            option._runtime_param = _PlainValues(option.type_descriptor)  # --help not given: None, no pydantic
        return option

    command.get_help_option = help_option
    for sub in getattr(command, "commands", {}).values():
        _switches_as_switches(sub)


class _PlainValues:
    """A parameter's value conversion without pydantic, where it is the identity or a parser of ours (installed on
    every parameter by `run`).

    typer >= 0.2x converts every parameter's value (even an option left at its default) through a pydantic
    TypeAdapter it builds on first use: `planner schema` would load pydantic for that alone, and the main command
    builds ~45 adapters (0.1 s in a cProfile of it, mostly importing pydantic, which it needs later anyway). For the
    values the planner's options take this conversion is trivial, and here it is done directly: None (an option not
    given); a string for a `str` parameter, a flag's bool, an int or float default of an unbounded number option
    (each itself); any value of an option with `parser=` (the parser's result, as typer's adapter returns it); a
    choice (typer's own `coerce_cli_choice`, which its adapter calls); a list of strings for `list[str]`. Every
    other case, and any value the fast path rejects, goes through typer's own conversion (built on first need), so
    errors read exactly as typer writes them. tests/test_startup.py checks both give the same value or error for
    every parameter of every command."""

    __slots__ = ("descriptor", "_typer")

    def __init__(self, descriptor: Any) -> None:
        self.descriptor = descriptor
        self._typer: Any = None

    def typer_conversion(self) -> Any:
        if self._typer is None:
            from typer._coercion import build_runtime_param

            self._typer = build_runtime_param(self.descriptor)
        return self._typer

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:  # typer's RuntimeParam.coerce: an option not given, before any conversion
            return () if param.multiple or param.nargs == -1 else None
        try:
            return self._plain(value, ctx)
        except _NotPlain:
            return self.typer_conversion().coerce(value, param=param, ctx=ctx)

    def _plain(self, value: Any, ctx: Any) -> Any:
        d = self.descriptor
        info, annotation = d.parameter_info, d.annotation
        if d.is_file or d.is_tuple:
            raise _NotPlain
        if d.is_list:
            from typing import get_args

            if (info.parser is None and get_args(annotation) == (str,) and isinstance(value, (list, tuple))
                    and all(type(v) is str for v in value)):
                return list(value)
            raise _NotPlain
        if info.parser is not None:  # typer's adapter calls the parser on the value, whatever its type
            try:
                return info.parser(value)
            except Exception:  # noqa: BLE001 - typer's conversion calls the parser again and words its error
                raise _NotPlain from None
        if info.parser is None and type(value) is annotation and (
                annotation in (str, bool) or (annotation in (int, float) and not d.is_ranged)):
            return value  # a string, a flag, a number default of its own type: pydantic returns it unchanged
        if info.parser is None and d.is_choice:
            from typer._param_types import coerce_cli_choice

            try:
                return coerce_cli_choice(value, choices=d.choices, case_sensitive=d.case_sensitive, ctx=ctx)
            except ValueError:
                raise _NotPlain from None
        raise _NotPlain


class _NotPlain(Exception):
    """This value takes typer's own (pydantic) conversion."""


def _plain_values(command: Any) -> None:
    """Install `_PlainValues` on every parameter of every (sub)command, where typer has its runtime conversion
    (typer >= 0.2x; older typer converts with click types, without pydantic, and is left as it is)."""
    for param in getattr(command, "params", []):
        if hasattr(param, "type_descriptor") and getattr(param, "_runtime_param", False) is None:
            param._runtime_param = _PlainValues(param.type_descriptor)
    for sub in getattr(command, "commands", {}).values():
        _plain_values(sub)


def _named(info: Any) -> str | None:
    """The name typer gives a registered command (CommandInfo) or sub-app (TyperInfo)."""
    if getattr(info, "name", None):
        return str(info.name)
    callback = getattr(info, "callback", None)
    return typer.main.get_command_name(callback.__name__) if callback is not None else None


def _only_invoked(typer_app: typer.Typer, argv: Sequence[str]) -> typer.Typer:
    """The app with only the command (or sub-app) that `argv` starts with: typer builds the click command of every
    registered command (their signatures, annotations, options) on each run, about 20 ms of CPU for the planner's
    thirteen, while a run uses one. The group keeps its callback (--version), so what the command prints, its help
    and its errors are the same; with no command or an unknown one (the group's help or "No such command", which
    list them all) every command is built."""
    groups, commands = getattr(typer_app, "registered_groups", None), getattr(typer_app, "registered_commands", None)
    if not argv or argv[0].startswith("-") or groups is None or commands is None:
        return typer_app
    keep_groups = [g for g in groups if _named(g) == argv[0]]
    keep_commands = [c for c in commands if _named(c) == argv[0]]
    if len(keep_groups) + len(keep_commands) != 1 or typer_app.registered_callback is None:
        return typer_app
    import copy

    only = copy.copy(typer_app)
    only.registered_groups, only.registered_commands = keep_groups, keep_commands
    return only


def run(typer_app: typer.Typer, argv: Sequence[str], prog_name: str) -> int:
    """Run a Typer app on `argv` and return the exit code (see the module docstring for their meaning)."""
    import signal

    global _argv
    _argv = list(argv)
    if typer_app is app and _version_only(argv):
        try:
            print(version_text(_wants_json(argv)))
        except BrokenPipeError:
            return 141
        return 0
    command = typer.main.get_command(_only_invoked(typer_app, argv))
    _switches_as_switches(command)
    _plain_values(command)
    previous = None
    with contextlib.suppress(ValueError):  # only the main thread may set handlers (tests call run() from others)
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with _help_width():
            rv = command.main(args=list(argv), prog_name=prog_name, standalone_mode=False)
        if rv == 130:  # typer turns a KeyboardInterrupt inside a command into Exit(130) before it reaches us
            raise KeyboardInterrupt
        return rv if isinstance(rv, int) else 0  # an int is the code of a typer.Exit / --help
    except _NO_ARGS_IS_HELP:
        return 2  # typer has already printed the help
    except click_exc.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        # typer converts choices through pydantic, whose message starts 'Value error, ' (not words for a person)
        return _fail(argv, "usage", 2, f"{exc.format_message().replace('Value error, ', '')}{hint}")
    except click_exc.ClickException as exc:
        return _fail(argv, "usage", 2, exc.format_message())
    except (typer.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        return _fail(argv, "interrupted", 130, "interrupted (Ctrl-C); nothing after the last finished step was kept")
    except Terminated:
        return _fail(argv, "interrupted", 143, "terminated (SIGTERM); nothing after the last finished step was kept")
    except Infeasible as exc:
        doc = exc.plan
        kind = "unknown" if doc is not None and doc.status == "unknown" else "infeasible"
        text = str(exc.explanation or exc)
        if doc is not None and doc.explanation and sys.stdout.isatty() and sys.stderr.isatty():
            # both streams on one terminal, and the report above says why in full: say it once
            rest = len(text.splitlines()) - 1
            text = text.splitlines()[0] + (f" (and {rest} more line{'s' if rest > 1 else ''} in the report on "
                                           "stdout)" if rest else "")
        if not _wants_json(argv):
            sys.stderr.write(f"{kind}: {text}\n")
        elif doc is None:  # commands print their infeasible Plan themselves; without one, say it in JSON
            _json_error(argv, "infeasible", 1, str(exc.explanation or exc))
        return 1
    except (InvalidInput, PlannerError) as exc:
        from planner.cli.options import as_typed

        return _fail(argv, "bad_input", 2, as_typed(str(exc), argv))
    except BrokenPipeError:
        # The reader went away (`plan --json | head`): nothing left to say; keep the interpreter from complaining.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe
    except Exception as exc:  # a bug, not a user error: still one line, distinct exit code
        return _fail(argv, "internal", 3, f"{type(exc).__name__}: {exc}", prefix="internal error")
    finally:
        if previous is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, previous)


def main() -> None:
    """Console script `planner`."""
    sys.exit(run(app, sys.argv[1:], "planner"))


def plan_main() -> None:
    """Console script `plan` (same as `planner plan`)."""
    sys.exit(run(plan_app, sys.argv[1:], "plan"))


if __name__ == "__main__":
    main()
