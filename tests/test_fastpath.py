"""The `planner` console script's fast path (planner/fastpath.py) prints exactly what the full typer path prints,
reads only shipped files that the suite validates, and falls through for everything else."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from planner import fasthelp, fastpath, helptext
from planner.cli import app, run
from planner.hardware import get_hardware, hardware_names

# The fast paths draw typer's help and rich's tables as the releases planner/helptext.py was generated with draw them;
# under other releases they defer to typer and rich (fasthelp.same_libraries), and the tests that check the plain
# path is the one taken do not apply.
GENERATED_RELEASES = all(fasthelp.installed_version(name) == version
                         for name, version in helptext.LIBRARY_VERSIONS.items())
needs_generated_releases = pytest.mark.skipif(
    not GENERATED_RELEASES, reason="typer or rich is not the release planner/helptext.py was generated with: the "
    "fast paths defer to them (regenerate with `python -m planner.fasthelp --write`)")

FAST = (("reference",), ("schema",), ("hardware", "list"), ("hardware", "show", "h100"))
WIDTHS = ("60", "80", "120", "200")
COLORS = ({}, {"NO_COLOR": "1"}, {"FORCE_COLOR": "1"}, {"TERM": "dumb"}, {"FORCE_COLOR": "1", "TERM": "dumb"})
RICH_ENV = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TERM", "COLORTERM", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
            "JUPYTER_COLUMNS", "JUPYTER_LINES", "TERMINAL_WIDTH")


def console_script(argv: list[str], watched: tuple[str, ...], full: bool = False) -> subprocess.CompletedProcess[str]:
    """The `planner` console script's entry (planner.fastpath.main) run on `argv` in a fresh interpreter without
    rich's settings in its environment (PLANNER_FULL_PATH=1 when `full`); its stderr ends with the loaded top-level
    packages among `watched` and the exit code."""
    probe = (f"import sys; sys.argv[1:] = {argv!r}\nfrom planner.fastpath import main\n"
             "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
             f"sys.stderr.write(repr(sorted(m for m in sys.modules if m.split('.')[0] in {watched!r})) + ' ' + "
             "repr(code))")
    env = {k: v for k, v in os.environ.items() if k not in RICH_ENV and k != fastpath.FULL_PATH_ENV}
    if full:
        env[fastpath.FULL_PATH_ENV] = "1"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)


def _fast_and_full(capsys, argv):
    """((exit code, stdout, stderr) of the fast path, the same of the full path) for `argv` in this environment."""
    capsys.readouterr()
    fast_code = fastpath.fast(list(argv))
    fast_out = capsys.readouterr()
    full_code = run(app, list(argv), "planner")
    full_out = capsys.readouterr()
    return (fast_code, fast_out.out, fast_out.err), (full_code, full_out.out, full_out.err)


def _both(capsys, monkeypatch, argv, env):
    for key in RICH_ENV:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return _fast_and_full(capsys, argv)


@pytest.mark.parametrize("argv", FAST, ids=" ".join)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("color", COLORS, ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()) or "plain")
def test_fast_path_prints_the_full_paths_bytes(capsys, monkeypatch, argv, width, color):
    fast, full = _both(capsys, monkeypatch, argv, {"COLUMNS": width, **color})
    assert fast[0] == 0 and full[0] == 0, full[2]
    assert fast == full


@pytest.mark.parametrize("name", hardware_names())
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("color", COLORS[:3], ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()) or "plain")
def test_hardware_show_of_every_shipped_file(capsys, monkeypatch, name, width, color):
    fast, full = _both(capsys, monkeypatch, ("hardware", "show", name), {"COLUMNS": width, **color})
    assert fast[0] == 0 and full[0] == 0, full[2]
    assert fast == full


@pytest.mark.parametrize("argv", FAST, ids=" ".join)
def test_fast_path_piped_width(capsys, monkeypatch, argv):
    """No COLUMNS, stdout not a terminal: both print 140 columns wide."""
    fast, full = _both(capsys, monkeypatch, argv, {})
    assert fast == full and fast[0] == 0
    if argv[0] == "hardware":
        assert max(len(line) for line in fast[1].splitlines()) == 140


def test_schema_fast_path_prints_the_file_the_full_path_prints():
    from planner.cli.schema import PACKAGED_SCHEMA

    assert fastpath.PACKAGED_SCHEMA == PACKAGED_SCHEMA and PACKAGED_SCHEMA.is_file()


def test_colors_do_reach_the_output(capsys, monkeypatch):
    """The color cases above compare styled output, not two plain copies."""
    fast, _ = _both(capsys, monkeypatch, ("hardware", "list"), {"FORCE_COLOR": "1", "COLUMNS": "120"})
    assert "\x1b[1m" in fast[1]
    fast, _ = _both(capsys, monkeypatch, ("hardware", "list"), {"NO_COLOR": "1", "COLUMNS": "120"})
    assert "\x1b[" not in fast[1]


@pytest.mark.parametrize("argv", [("-h",), ("--help", "--json"), ("--version",), ("hardware", "--help"),
                                  ("hardware",), ("hardware", "list", "--json"),
                                  ("hardware", "list", "x"), ("hardware", "show", "H100"),
                                  ("hardware", "show", "hardware_specs/h100.toml"),
                                  ("hardware", "show", "h100", "--json"), ("hardware", "show", "nope"),
                                  ("hardware", "show", "all"), ("reference", "--check"),
                                  ("reference", "--write"), ("Reference",), ("schema", "--write"), ("plan", "--help")])
def test_everything_else_falls_through(capsys, argv):
    assert fastpath.fast(list(argv)) is None
    assert capsys.readouterr().out == ""


def test_reference_pages_are_the_generators_pages():
    from planner.reference import PAGES

    assert fastpath.REFERENCE_PAGES == tuple(PAGES)


def test_every_shipped_hardware_file_validates_and_the_fast_view_agrees():
    """What the fast path reads unvalidated is what the pydantic documents accept, value for value."""
    import tomllib
    from importlib import resources
    from pathlib import Path

    from planner.hardware_keys import ECONOMICS_KEYS, GPU_KEYS, LEVEL_KEYS

    folder = Path(str(resources.files("planner.hardware_specs")))
    assert sorted(p.stem for p in folder.glob("*.toml")) == hardware_names()
    for name in hardware_names():
        hw = get_hardware(name)  # validated: raises on a bad shipped file
        view = fastpath._hardware(tomllib.loads((folder / f"{name}.toml").read_text(encoding="utf-8")))
        assert (view.name, view.description, view.gpus_per_node, view.sources) == (
            hw.name, hw.description, hw.gpus_per_node, hw.sources)
        fields = [f for f, _ in GPU_KEYS.values()] + ["name", "peak_flops", "sustained_flops", "shared_mem_Bps",
                                                      "sram_bytes"]
        assert {f: getattr(view.gpu, f) for f in fields} == {f: getattr(hw.gpu, f) for f in fields}
        fields = [f for f, _ in LEVEL_KEYS.values()] + ["name", "subdivided", "unit_gpus", "usable_gpus"]
        assert [{f: getattr(lv, f) for f in fields} for lv in view.levels] == [
            {f: getattr(lv, f) for f in fields} for lv in hw.levels]
        assert (view.economics is None) == (hw.economics is None)
        if hw.economics is not None:
            fields = [f for f, _ in ECONOMICS_KEYS.values()]
            assert {f: getattr(view.economics, f) for f in fields} == {f: getattr(hw.economics, f) for f in fields}


def test_defaults_are_the_documents_defaults():
    from planner.schema import Economics, Gpu, NetworkLevel

    models = {**{f: Gpu for f in Gpu.model_fields}, **{f: NetworkLevel for f in NetworkLevel.model_fields},
              **{f: Economics for f in Economics.model_fields}}
    for field, default in fastpath.DEFAULTS.items():
        info = models[field].model_fields[field]
        assert not info.is_required() and info.default == default and type(info.default) is type(default), field


def test_a_number_without_its_source_falls_through():
    doc = {"name": "x", "gpu": {"name": "g", "threads_per_sm": {"value": 128, "source": "s"}, "sms": 132},
           "levels": []}
    with pytest.raises(fastpath._Unexpected):
        fastpath._hardware(doc)


@needs_generated_releases
def test_console_script_takes_the_fast_path_without_typer():
    """The installed entry point answers `hardware list` without importing typer or pydantic, and prints what the
    full path (PLANNER_FULL_PATH=1) prints."""
    fast = console_script(["hardware", "list"], ("typer", "pydantic", "click"))
    assert fast.stderr == "[] 0"
    full = console_script(["hardware", "list"], ("typer", "pydantic", "click"), full=True)
    assert full.stdout == fast.stdout and "typer" in full.stderr and full.stderr.endswith(" 0")


# --- `planner --help` and bare `planner` (planner/fasthelp.py) --------------------------------------------------------

HELP_WIDTHS = ("60", "80", "120", "200")
HELP_COLORS = ({}, {"NO_COLOR": "1"}, {"FORCE_COLOR": "1"}, {"TERM": "dumb"}, {"FORCE_COLOR": "1", "TERM": "dumb"},
               {"FORCE_COLOR": "1", "NO_COLOR": "1"}, {"FORCE_COLOR": "1", "TERM": "xterm-256color"},
               {"FORCE_COLOR": "1", "COLORTERM": "truecolor"}, {"FORCE_COLOR": "1", "TERM": "dumb", "LINES": "30"})


@contextlib.contextmanager
def _typer_environment(env):
    """The environment `env` (and nothing else of rich's) for typer's help renderer, re-imported under it as a fresh
    process imports it (typer reads FORCE_COLOR and TERMINAL_WIDTH at import); restored afterwards."""
    from typer import rich_utils

    try:
        with pytest.MonkeyPatch.context() as mp:
            for key in RICH_ENV:
                mp.delenv(key, raising=False)
            for key, value in env.items():
                mp.setenv(key, value)
            importlib.reload(rich_utils)
            yield
    finally:
        importlib.reload(rich_utils)


def _help_both(capsys, argv, env):
    with _typer_environment(env):
        return _fast_and_full(capsys, argv)


@pytest.mark.parametrize("width", HELP_WIDTHS)
@pytest.mark.parametrize("color", HELP_COLORS, ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()) or "plain")
def test_help_fast_path_prints_typers_bytes(capsys, width, color):
    fast, full = _help_both(capsys, ("--help",), {"COLUMNS": width, **color})
    assert fast[0] == 0 and full[0] == 0
    assert fast == full


@pytest.mark.parametrize("env", [{"COLUMNS": "40"}, {"COLUMNS": "117", "FORCE_COLOR": "1"}, {}],
                         ids=["40", "117-color", "piped"])
def test_bare_planner_prints_the_same_help_and_exits_2(capsys, env):
    fast, full = _help_both(capsys, (), env)
    assert fast == full and fast[0] == 2 and "Usage:" in fast[1] and not fast[1].endswith("\n\n")  # no blank line


def test_help_piped_is_140_columns_and_styled_when_forced(capsys):
    fast, full = _help_both(capsys, ("--help",), {})
    assert fast == full and {len(line) for line in fast[1].splitlines() if line} == {140}
    fast, full = _help_both(capsys, ("--help",), {"FORCE_COLOR": "1"})
    assert fast == full and "\x1b[1;36m" in fast[1] and "\x1b[2m╭─\x1b[0m" in fast[1]


def test_help_terminal_width_wins(capsys):
    fast, full = _help_both(capsys, ("--help",), {"TERMINAL_WIDTH": "90", "COLUMNS": "60"})
    assert fast == full and max(len(line) for line in fast[1].splitlines()) == 90


@pytest.mark.parametrize("env", [{"COLUMNS": "39"}, {"COLUMNS": "abc"}, {"PY_COLORS": "1"}, {"TTY_COMPATIBLE": "1"},
                                 {"TYPER_USE_RICH": "0"}, {"GITHUB_ACTIONS": "true"}],
                         ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()))
def test_help_settings_not_modelled_take_typers_path(capsys, env):
    with _typer_environment(env):
        assert fastpath.fast(["--help"]) is None
        assert capsys.readouterr().out == ""


def test_help_on_a_non_utf8_stream_or_a_bad_terminal_width_takes_typers_path():
    class Ascii(io.StringIO):
        encoding = "ascii"

    assert fasthelp.console({"COLUMNS": "80"}, io.StringIO(), 140) == (80, False, False)
    with pytest.raises(fasthelp.Unsupported):
        fasthelp.console({"COLUMNS": "80"}, Ascii(), 140)  # rich would draw the boxes in ASCII
    with pytest.raises(fasthelp.Unsupported):
        fasthelp.console({"TERMINAL_WIDTH": "x"}, io.StringIO(), 140)  # typer fails to import its renderer


def test_helptext_is_what_the_app_generates():
    """planner/helptext.py, which the fast path draws from, is what `python -m planner.fasthelp --write` writes from
    the app now: a command added or renamed, a summary, an option or typer's styles changed make this fail."""
    from planner import helptext
    from planner.cli import COMMANDS

    if GENERATED_RELEASES:
        assert fasthelp.generated_source() == fasthelp.HELPTEXT.read_text(encoding="utf-8"), (
            "planner/helptext.py is stale: run `.venv/bin/python -m planner.fasthelp --write`")
    else:  # other typer / rich releases: their styles may differ, but the app's own words must not
        content = fasthelp.help_content()
        for key in ("USAGE", "DESCRIPTION", "OPTIONS", "COMMANDS"):
            assert content[key] == getattr(helptext, key), f"planner/helptext.py is stale in {key}"
    listed = [name for name, _ in helptext.COMMANDS]
    assert set(listed) == {name for name in COMMANDS if name != "schema"} | {"schema", "reference"}
    assert listed[:3] == ["sweep", "study", "plan"]


def test_a_command_added_to_the_app_reaches_the_generated_list():
    from planner.cli import app as the_app

    before = fasthelp.help_content()["COMMANDS"]

    @the_app.command("frobnicate")
    def frobnicate() -> None:
        """Frobnicate the cluster."""

    try:
        after = fasthelp.help_content()["COMMANDS"]
        assert ("frobnicate", "Frobnicate the cluster.") in after and set(before) < set(after)
        assert fasthelp.generated_source() != fasthelp.HELPTEXT.read_text(encoding="utf-8")
    finally:
        the_app.registered_commands.pop()
    assert fasthelp.help_content()["COMMANDS"] == before


@pytest.mark.parametrize("text", ["Plan a log-spaced range of compute on one or more systems: MFU, cluster",
                                  "a  b   c    d     e      f", "word " * 30, "x" * 12 + " " + "y" * 3 + "   "])
@pytest.mark.parametrize("width", [5, 13, 17, 29, 40])
def test_wrap_breaks_where_rich_breaks(text, width):
    from rich._wrap import divide_line

    starts = [0, *divide_line(text, width)]
    expected = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)])]
    if any(len(word) > width for word in text.split()):
        with pytest.raises(fasthelp.Unsupported):
            fasthelp.wrap(text, width)
        return
    got = [text[a:b] for a, b in fasthelp.wrap(text, width)]
    assert [g.rstrip() for g in got] == [e.rstrip() for e in expected]
    assert all(len(g) <= max(width, len(e.rstrip())) for g, e in zip(got, expected))


def _pty_run(argv, env, columns):
    import fcntl
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out = b""
    while select.select([master], [], [], 60)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, out


@pytest.mark.slow
@pytest.mark.parametrize("columns", [60, 117])
@pytest.mark.parametrize("term", [{"TERM": "xterm-256color"}, {"TERM": "dumb"}, {"TERM": "xterm", "NO_COLOR": "1"}],
                         ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()))
def test_help_on_a_terminal(columns, term):
    """The console script on a pseudo-terminal of `columns` (no COLUMNS: the terminal's own size), both paths."""
    script = str(Path(sys.executable).parent / "planner")
    env = {k: v for k, v in os.environ.items() if k not in RICH_ENV and k != fastpath.FULL_PATH_ENV}
    env.update(term)
    fast = _pty_run([script, "--help"], env, columns)
    full = _pty_run([script, "--help"], {**env, fastpath.FULL_PATH_ENV: "1"}, columns)
    assert fast == full and fast[0] == 0
    assert (b"\x1b[" in fast[1]) == (term["TERM"] != "dumb")
    plain = re.sub(r"\x1b\[[0-9;]*m", "", fast[1].decode())
    assert max(len(line) for line in plain.splitlines()) == (80 if term["TERM"] == "dumb" else columns)  # rich: dumb 80


@needs_generated_releases
def test_help_console_script_imports_neither_typer_nor_rich():
    fast = console_script(["--help"], ("typer", "pydantic", "click", "rich"))
    assert fast.stderr == "[] 0"
    full = console_script(["--help"], ("typer", "pydantic", "click", "rich"), full=True)
    assert full.stdout == fast.stdout and "typer" in full.stderr and full.stderr.endswith(" 0")


@pytest.mark.parametrize("width", ["40", "100"])
@pytest.mark.parametrize("color", COLORS, ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()) or "plain")
def test_hardware_list_at_more_widths(capsys, monkeypatch, width, color):
    """With the widths above: 40 (rich draws it), 60 (rich), 80, 100, 120, 200 (drawn without rich)."""
    fast, full = _both(capsys, monkeypatch, ("hardware", "list"), {"COLUMNS": width, **color})
    assert fast[0] == 0 and fast == full


@needs_generated_releases
@pytest.mark.parametrize("width", ["80", "100", "140", "200"])
def test_hardware_list_is_drawn_without_rich_where_it_fits(monkeypatch, width):
    """At 80 columns and wider (and piped, 140) `hardware list` is drawn by planner/fasttable.py, not by rich; the
    tests above compare its bytes with the full path's at every width and colour setting."""
    monkeypatch.setenv("COLUMNS", width)
    assert fastpath._hardware_list_plain(fastpath._hardware_views()).count("\n") > 16


@pytest.mark.parametrize("width", ["20", "40", "60"])
def test_hardware_list_narrower_than_its_words_is_left_to_rich(monkeypatch, width):
    monkeypatch.setenv("COLUMNS", width)
    with pytest.raises(fasthelp.Unsupported):
        fastpath._hardware_list_plain(fastpath._hardware_views())


@needs_generated_releases
@pytest.mark.parametrize("width", ["80", "140"])
def test_hardware_show_is_drawn_without_rich_where_it_fits(monkeypatch, width):
    """Every shipped file's `hardware show` at 80 and 140 columns is drawn by planner/fasttable.py (the tests above
    compare its bytes with the full path's for every file, width and colour setting)."""
    monkeypatch.setenv("COLUMNS", width)
    for name in hardware_names():
        assert "Economics" in fastpath._hardware_show_plain(fastpath._hardware_show_view(name))


def test_fold_cuts_a_long_word_where_rich_does():
    from rich._wrap import divide_line

    text = "see https://example.com/" + "a" * 50 + "/b and more words here"
    for width in (7, 10, 23):
        starts = [0, *divide_line(text, width, fold=True)]
        assert [a for a, _ in fasthelp.wrap(text, width, fold=True)] == starts


@needs_generated_releases
@pytest.mark.parametrize("argv", [["hardware", "list"], ["hardware", "show", "h100"]], ids=" ".join)
def test_hardware_console_script_imports_no_rich(argv):
    assert console_script(argv, ("typer", "pydantic", "click", "rich")).stderr == "[] 0"


@pytest.mark.slow
@pytest.mark.parametrize("columns", [60, 117])
@pytest.mark.parametrize("term", [{"TERM": "xterm-256color"}, {"TERM": "dumb"}],
                         ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()))
def test_hardware_list_on_a_terminal(columns, term):
    script = str(Path(sys.executable).parent / "planner")
    env = {k: v for k, v in os.environ.items() if k not in RICH_ENV and k != fastpath.FULL_PATH_ENV}
    env.update(term)
    fast = _pty_run([script, "hardware", "list"], env, columns)
    full = _pty_run([script, "hardware", "list"], {**env, fastpath.FULL_PATH_ENV: "1"}, columns)
    assert fast == full and fast[0] == 0


def test_other_typer_or_rich_releases_take_their_own_path(capsys, monkeypatch):
    """helptext.py records the typer and rich releases it was generated with; under another release the help page
    and the hardware tables are left to typer and rich, which may draw them otherwise."""
    assert set(helptext.LIBRARY_VERSIONS) == {"typer", "rich"}
    for name in ("typer", "rich"):
        monkeypatch.setitem(helptext.LIBRARY_VERSIONS, name, "0.0.0-not-installed")
        with pytest.raises(fasthelp.Unsupported, match=f"{name} release"):
            fasthelp.page({"COLUMNS": "100"}, io.StringIO())
        monkeypatch.undo()
    monkeypatch.setitem(helptext.LIBRARY_VERSIONS, "rich", "0.0.0-not-installed")
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(fasthelp.Unsupported, match="rich release"):
        fastpath._hardware_list_plain(fastpath._hardware_views())
