"""The `planner` console script's fast path (planner/fastpath.py) prints exactly what the full typer path prints,
reads only shipped files that the suite validates, and falls through for everything else."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from planner import fastpath
from planner.cli import app, run
from planner.hardware import get_hardware, hardware_names

FAST = (("reference",), ("hardware", "list"))
WIDTHS = ("60", "80", "120", "200")
COLORS = ({}, {"NO_COLOR": "1"}, {"FORCE_COLOR": "1"}, {"TERM": "dumb"}, {"FORCE_COLOR": "1", "TERM": "dumb"})
RICH_ENV = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TERM", "COLORTERM", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
            "JUPYTER_COLUMNS", "JUPYTER_LINES", "TERMINAL_WIDTH")


def _both(capsys, monkeypatch, argv, env):
    for key in RICH_ENV:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    fast_code = fastpath.fast(list(argv))
    fast_out = capsys.readouterr()
    full_code = run(app, list(argv), "planner")
    full_out = capsys.readouterr()
    return (fast_code, fast_out.out, fast_out.err), (full_code, full_out.out, full_out.err)


@pytest.mark.parametrize("argv", FAST, ids=" ".join)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("color", COLORS, ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()) or "plain")
def test_fast_path_prints_the_full_paths_bytes(capsys, monkeypatch, argv, width, color):
    fast, full = _both(capsys, monkeypatch, argv, {"COLUMNS": width, **color})
    assert fast[0] == 0 and full[0] == 0, full[2]
    assert fast == full


@pytest.mark.parametrize("argv", FAST, ids=" ".join)
def test_fast_path_piped_width(capsys, monkeypatch, argv):
    """No COLUMNS, stdout not a terminal: both print 140 columns wide."""
    fast, full = _both(capsys, monkeypatch, argv, {})
    assert fast == full and fast[0] == 0
    if argv[0] == "hardware":
        assert max(len(line) for line in fast[1].splitlines()) == 140


def test_colors_do_reach_the_output(capsys, monkeypatch):
    """The color cases above compare styled output, not two plain copies."""
    fast, _ = _both(capsys, monkeypatch, ("hardware", "list"), {"FORCE_COLOR": "1", "COLUMNS": "120"})
    assert "\x1b[1m" in fast[1]
    fast, _ = _both(capsys, monkeypatch, ("hardware", "list"), {"NO_COLOR": "1", "COLUMNS": "120"})
    assert "\x1b[" not in fast[1]


@pytest.mark.parametrize("argv", [(), ("--help",), ("hardware",), ("hardware", "list", "--json"),
                                  ("hardware", "list", "x"), ("hardware", "show", "h100"), ("reference", "--check"),
                                  ("reference", "--write"), ("Reference",), ("schema",), ("plan", "--help")])
def test_everything_else_falls_through(capsys, argv):
    assert fastpath.fast(list(argv)) is None
    assert capsys.readouterr().out == ""


def test_reference_pages_are_the_generators_pages():
    from planner.reference import PAGES

    assert fastpath.REFERENCE_PAGES == tuple(PAGES)


def test_every_shipped_hardware_file_validates_and_the_fast_rows_agree():
    """What the fast path reads unvalidated is what the pydantic documents accept, value for value."""
    import tomllib
    from importlib import resources
    from pathlib import Path

    folder = Path(str(resources.files("planner.hardware_specs")))
    assert sorted(p.stem for p in folder.glob("*.toml")) == hardware_names()
    for name in hardware_names():
        hw = get_hardware(name)  # validated: raises on a bad shipped file
        row = fastpath._hardware_row(tomllib.loads((folder / f"{name}.toml").read_text(encoding="utf-8")))
        assert (row.name, row.gpu.name) == (hw.name, hw.gpu.name)
        assert row.gpu.peak_flops == hw.gpu.peak_flops and row.gpu.hbm_bytes == hw.gpu.hbm_bytes
        assert [(lv.name, lv.size, lv.bw_bidir_Bps, lv.lat_s) for lv in row.levels] == [
            (lv.name, lv.size, lv.bw_bidir_Bps, lv.lat_s) for lv in hw.levels]

def test_a_number_without_its_source_falls_through():
    doc = {"name": "x", "gpu": {"name": "g", "threads_per_sm": {"value": 128, "source": "s"}, "sms": 132},
           "levels": []}
    with pytest.raises(fastpath._Unexpected):
        fastpath._hardware_row(doc)


def test_console_script_takes_the_fast_path_without_typer():
    """The installed entry point answers `hardware list` without importing typer or pydantic, and prints what the
    full path (PLANNER_FULL_PATH=1) prints."""
    probe = ("import sys; sys.argv[1:] = ['hardware', 'list']\nfrom planner.fastpath import main\n"
             "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
             "sys.stderr.write(repr(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'pydantic', "
             "'click'))) + ' ' + repr(code))")
    env = {k: v for k, v in os.environ.items() if k not in RICH_ENV and k != fastpath.FULL_PATH_ENV}
    fast = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert fast.stderr == "[] 0"
    full = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**env, fastpath.FULL_PATH_ENV: "1"})
    assert full.stdout == fast.stdout and "typer" in full.stderr and full.stderr.endswith(" 0")
