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

FAST = (("reference",), ("schema",), ("hardware", "list"), ("hardware", "show", "h100"))
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


@pytest.mark.parametrize("argv", [(), ("--help",), ("hardware",), ("hardware", "list", "--json"),
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
