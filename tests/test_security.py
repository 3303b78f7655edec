"""Issue 28: safe to source, safe to run as root, bounded on any input (docs/reliability.md, "Threat model").

Every reproducer of the issue runs in pytest's scratch folder (never against a system path): it must end in exit 2
with one line, or work, and touch nothing but its named outputs.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from cli_helpers import BIN, invoke

from planner import api
from planner.errors import InvalidInput
from planner.export import Launch, comment_text, megatron_text, toml_string, torchtitan_sections, torchtitan_text
from planner.files import Journal, check_output, safe_file_part
from planner.render.sweep import _write_rows, csv_cell, plot_paths
from planner.schema import Plan
from planner.sweep import journal_line, point_id, read_journal
from planner.workload import load_model_preset

ROOT = Path(__file__).resolve().parent.parent
H100 = (ROOT / "hardware_specs" / "h100.toml").read_text(encoding="utf-8")
SWEEP = ["sweep", "--from", "1e24", "--to", "1e25", "--points", "2", "--jobs", "1", "--quiet", "--time-limit", "20"]


def _one_error(code: int, err: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err


def _hardware(tmp_path: Path, gpu_name: str, name: str = "h100") -> Path:
    """A copy of the shipped H100 with another GPU name (and system name), as a user's file."""
    text = H100.replace('name = "h100"', f"name = {toml_string(name)}", 1)
    head, rest = text.split("[gpu]", 1)
    rest = rest.replace('name = "H100 SXM5"', f"name = {toml_string(gpu_name)}", 1)
    path = tmp_path / "hw.toml"
    path.write_text(head + "[gpu]" + rest, encoding="utf-8")
    assert tomllib.loads(path.read_text())["gpu"]["name"] == gpu_name
    return path


# --------------------------------------------------------------------------------------------------
# 1. Emitted files are safe to source and parse
# --------------------------------------------------------------------------------------------------

HOSTILE_PRINTABLE = "H100 $(touch pwned1) `touch pwned2` \"q\" 'x'; touch pwned3 # [job] = \\"
"""Legal in a name (no control character), hostile to a shell or a TOML parser if written unquoted."""


@pytest.mark.parametrize("argv", [
    ["--set", r'gpu.name="X\ntouch pwned\n#"'],
    ["--set", r'gpu.name="X\rY"'],
    ["--set", r'gpu.name="X\u0085Y"'],
])
def test_control_characters_in_a_set_name_are_refused(capsys, argv):
    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--emit", "megatron", *argv])
    _one_error(code, err)
    assert "control character" in err and out == ""


@pytest.mark.parametrize("where", ["gpu", "system", "level"])
def test_control_characters_in_a_hardware_file_are_refused(capsys, tmp_path, where):
    bad = "X\ntouch pwned\n#"
    path = _hardware(tmp_path, bad if where == "gpu" else "H100 SXM5", bad if where == "system" else "h100")
    if where == "level":
        path.write_text(path.read_text().replace('name = "NVLink"', f"name = {toml_string(bad)}", 1))
    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--gpu", str(path),
                                     "--emit", "torchtitan"])
    _one_error(code, err)
    assert "control character" in err


def test_control_characters_in_a_plan_file_are_refused(capsys, tmp_path):
    code, out, _ = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--json"])
    assert code == 0
    doc = json.loads(out)
    for field in ("gpu", "hardware", "profile"):
        bad = dict(doc, **{field: "X\ntouch pwned\n#"})
        path = tmp_path / f"{field}.json"
        path.write_text(json.dumps(bad))
        code, out, err = invoke(capsys, ["export", "--plan", str(path), "--to", "megatron"])
        _one_error(code, err)
        assert out == ""


def test_every_emitted_file_is_safe_to_source_and_parse_with_a_hostile_name(capsys, tmp_path):
    path = _hardware(tmp_path, HOSTILE_PRINTABLE)
    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--gpu", str(path),
                                     "--emit", "megatron"])
    assert code == 0, err
    script = tmp_path / "parallel.sh"
    script.write_text(out)
    run = subprocess.run(["bash", "-c", "source ./parallel.sh && printf '%s\\n' \"${PLANNER_ARGS[@]}\""],
                         cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert not list(tmp_path.glob("pwned*"))
    first = run.stdout.split("\n")[:4]  # the layout's own values, read back as bash parsed them
    assert first[0::2] == ["--tensor-model-parallel-size", "--pipeline-model-parallel-size"]
    assert all(v.isdigit() for v in first[1::2])
    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--gpu", str(path),
                                     "--emit", "torchtitan"])
    assert code == 0, err
    doc = tomllib.loads(out)
    assert set(doc) == {"training", "parallelism", "activation_checkpoint"}


def test_escapers_hold_whatever_reaches_them():
    """Defence in depth: a plan built without validation still emits a comment that stays one line and TOML that
    parses to the same strings."""
    nasty = "a\nb\r\"c\\d\x00\x1b\x7f\u2028é\t"
    assert "\n" not in comment_text(nasty) and "\r" not in comment_text(nasty)
    assert all(ord(c) >= 32 and ord(c) != 127 for c in comment_text(nasty))
    assert tomllib.loads(f"v = {toml_string(nasty)}")["v"] == nasty
    res = subprocess.run([str(BIN / "planner"), "plan", "--model", "llama3-8b", "--gpus", "64", "--json"],
                         capture_output=True, text=True, timeout=120)
    plan = Plan.model_validate_json(res.stdout)
    raw = plan.model_construct(**{**dict(plan), "gpu": "X\ntouch pwned\n["})  # bypasses the name check
    launch = Launch(tp=8, pp=2, vpp=1, cp=1, ep=1, dp=4, micro_batch=1, global_batch=2048, seq_len=8192, sp=True,
                    recompute=0, zero=3, fp8=True, layers_per_stage=16, first_less=0, last_less=0, overlap=False,
                    experts=1)
    text = torchtitan_text(raw, launch)
    assert tomllib.loads(text) == tomllib.loads(tomllib_dump(torchtitan_sections(launch)))
    assert tomllib.loads(text)["model"]["converters"] == ["quantize.linear.float8"]
    lines = megatron_text(raw, launch, load_model_preset("llama3-8b")).splitlines()
    k = lines.index("PLANNER_ARGS=(")  # the header and the prediction: comment lines only
    assert k >= 2 and all(line.startswith("# ") for line in lines[:k])


def tomllib_dump(sections: dict) -> str:
    from planner.export import _toml_value

    return "\n".join(f"[{s}]\n" + "\n".join(f"{k} = {_toml_value(v)}" for k, v in keys.items())
                     for s, keys in sections.items())


# --------------------------------------------------------------------------------------------------
# 2. Files written safely
# --------------------------------------------------------------------------------------------------


def test_sweep_refuses_a_fifo_or_symlink_at_the_csv_path(capsys, tmp_path):
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    target = tmp_path / "target"
    target.write_text("keep")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    for path in (fifo, link):
        t0 = time.perf_counter()
        code, _, err = invoke(capsys, [*SWEEP, "--csv", str(path)])
        _one_error(code, err)
        assert time.perf_counter() - t0 < 5  # refused before any point is solved
    assert fifo.is_fifo() and link.is_symlink() and target.read_text() == "keep"
    assert not (tmp_path / "fifo.csv.plans.jsonl").exists() and not (tmp_path / "link.csv.plans.jsonl").exists()


def test_side_files_never_follow_a_planted_symlink(capsys, tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    (tmp_path / "a.csv.plans.jsonl").symlink_to(target)
    code, _, err = invoke(capsys, [*SWEEP, "--csv", str(tmp_path / "a.csv")])
    _one_error(code, err)
    (tmp_path / "b.csv.tmp").symlink_to(target)
    code, _, err = invoke(capsys, [*SWEEP, "--csv", str(tmp_path / "b.csv")])
    assert code == 0, err
    assert target.read_text() == "keep" and (tmp_path / "b.csv.tmp").is_symlink()
    rows = list(csv.DictReader((tmp_path / "b.csv").open()))
    assert len(rows) == 2 and not (tmp_path / "b.csv").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv.plans.jsonl", "b.csv", "b.csv.plans.jsonl",
                                                          "b.csv.tmp", "target"]


def test_the_journal_survives_a_typo_and_a_second_writer_is_refused(capsys, tmp_path):
    csv_path = tmp_path / "d.csv"
    journal = Path(str(csv_path) + ".plans.jsonl")
    code, _, err = invoke(capsys, [*SWEEP, "--csv", str(csv_path)])
    assert code == 0, err
    before = journal.read_text()
    assert before.count("\n") == 3  # the header and two points
    for typo in (["--set", "gpu.bogus=1"], ["--jobs", "0"], ["--time-limit", "-1"]):
        code, _, err = invoke(capsys, [*SWEEP, "--csv", str(csv_path), *typo])
        _one_error(code, err)
        assert journal.read_text() == before, typo
    held = Journal(journal)
    try:
        code, _, err = invoke(capsys, [*SWEEP, "--csv", str(csv_path), "--resume"])
        _one_error(code, err)
        assert "another sweep" in err
    finally:
        held.close()
    code, _, err = invoke(capsys, [*SWEEP, "--csv", str(csv_path), "--resume"])
    assert code == 0 and "2 finished point(s) kept" in err and journal.read_text() == before


def test_a_journal_that_is_a_directory_and_an_unwritable_csv_are_bad_input(capsys, tmp_path):
    (tmp_path / "j.csv.plans.jsonl").mkdir()
    code, _, err = invoke(capsys, [*SWEEP, "--csv", str(tmp_path / "j.csv")])
    _one_error(code, err)
    with pytest.raises(InvalidInput, match="directory"):
        check_output(tmp_path / "nowhere" / "x.csv", "--csv")


def test_plot_names_are_sanitised_and_a_fifo_tornado_is_refused_before_the_run(capsys, tmp_path):
    assert safe_file_part("../a/b\n") == "_a_b_"
    assert [p.name for p in plot_paths(tmp_path / "p", ["h100", "a/b"])] == [
        "p-mfu.png", "p-parallelism-h100.png", "p-parallelism-a_b.png"]
    fifo = tmp_path / "t.png"
    os.mkfifo(fifo)
    t0 = time.perf_counter()
    code, _, err = invoke(capsys, ["plan", "--compute", "1e25", "--sensitivity", "--tornado", str(fifo)])
    _one_error(code, err)
    assert time.perf_counter() - t0 < 5 and fifo.is_fifo()


def test_write_commands_refuse_an_installed_package_and_take_out(capsys, tmp_path, monkeypatch):
    import planner.files

    monkeypatch.setattr(planner.files, "installed_package", lambda: True)
    for argv in (["schema", "--write"], ["reference", "--write"], ["validate", "--write"]):
        code, out, err = invoke(capsys, argv)
        _one_error(code, err)
        assert "--out" in err and out == ""
    code, _, err = invoke(capsys, ["schema", "--out", str(tmp_path)])
    assert code == 0, err
    assert (tmp_path / "plan.schema.json").read_text() == (ROOT / "docs" / "plan.schema.json").read_text()
    code, out, err = invoke(capsys, ["reference", "--out", str(tmp_path)])
    assert code == 0 and sorted(p.name for p in tmp_path.glob("*.md")) == sorted(
        p.name for p in (ROOT / "docs" / "reference").glob("*.md"))


def test_validate_finds_its_runs_as_package_data():
    from importlib import resources

    shipped = Path(str(resources.files("planner.published_runs") / "runs.toml"))
    assert shipped.read_text() == (ROOT / "validation" / "runs.toml").read_text()


# --------------------------------------------------------------------------------------------------
# 3. Numbers in SI units, deep structures, API types, CSV cells, tampered journals
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("setting", ["gpu.hbm_GB=1e308", "gpu.l2_MiB=1e308", "gpu.max_clock_MHz=1e300",
                                     "gpu.l2_MiB=1e29"])
def test_numbers_are_checked_after_unit_conversion(capsys, setting):
    code, _, err = invoke(capsys, ["plan", "--compute", "1e24", "--set", setting])
    _one_error(code, err)
    assert "SI units" in err


def test_deep_structures_are_bad_input(capsys, tmp_path):
    deep_toml = tmp_path / "deep.toml"
    deep_toml.write_text("x = " + "[" * 5000 + "]" * 5000)
    deep_json = tmp_path / "deep.json"
    deep_json.write_text('{"a":' * 5000 + "1" + "}" * 5000)
    for argv in (["plan", "--model", str(deep_toml)], ["plan", "--compute", "1e24", "--gpu", str(deep_toml)],
                 ["plan", "--compute", "1e24", "--set", "gpu.hbm_GB=" + "[" * 3000 + "]" * 3000],
                 ["plan", "--compute", "1e24", "--set", "gpu.hbm_GB=" + "[" * 20 + "]" * 20],
                 ["validate", "--runs", str(deep_toml)], ["evaluate", "--plan", str(deep_json)]):
        code, _, err = invoke(capsys, argv)
        _one_error(code, err)


WL = load_model_preset("llama3-8b")


@pytest.mark.parametrize("call", [
    lambda: api.plan(1e24, None),
    lambda: api.evaluate(None, "h100", WL),
    lambda: api.evaluate(None, "h100", None),
    lambda: api.plan(1e24, overrides=[1]),
    lambda: api.plan(1e24, overrides="gpu.hbm_GB=96"),
    lambda: api.plan(1e24, dp_overlap="no"),
    lambda: api.plan(1e24, workers=0),
    lambda: api.plan(1e24, workers=-1),
    lambda: api.plan("1e24"),
    lambda: api.plan(1e24, fixed=[("cp", 2)]),
], ids=["gpu-None", "layout-None", "workload-None", "override-int", "override-str", "dp-overlap-str", "workers-0",
        "workers--1", "compute-str", "fixed-list"])
def test_the_api_checks_argument_types(call):
    with pytest.raises(InvalidInput):
        call()


def test_csv_cells_are_escaped_against_formulas(tmp_path):
    assert [csv_cell(v) for v in ("=1+1", "+x", "-x", "@x", "\tx", "h100", None, -1.5, 3)] == [
        "'=1+1", "'+x", "'-x", "'@x", "'\tx", "h100", "", -1.5, 3]
    res = subprocess.run([str(BIN / "planner"), "plan", "--compute", "1e24", "--json"], capture_output=True,
                         text=True, timeout=120)
    plan = Plan.model_validate_json(res.stdout).model_copy(update={"hardware": '=HYPERLINK("http://x")'})
    _write_rows([plan], tmp_path / "s.csv")
    row = next(csv.DictReader((tmp_path / "s.csv").open()))
    assert row["hardware"] == "'=HYPERLINK(\"http://x\")" and float(row["mfu"]) == plan.mfu


def test_resume_rechecks_tampered_journal_plans(capsys, tmp_path):
    csv_path = tmp_path / "r.csv"
    code, _, err = invoke(capsys, [*SWEEP, "--csv", str(csv_path)])
    assert code == 0, err
    journal = Path(str(csv_path) + ".plans.jsonl")
    head, *recs = [json.loads(line) for line in journal.read_text().splitlines()]
    assert head["kind"] == "planner-study-journal" and head["scenarios"] == 2  # a study journal's header
    settings = head["settings"]
    grid = [r["plan"]["workload"]["requested_compute_flop"] for r in recs]
    assert [r["id"] for r in recs] == [point_id("h100", c, settings) for c in grid]
    assert len(read_journal(journal, settings, ["h100"], grid)) == 2
    tampered = [dict(recs[0], plan=dict(recs[0]["plan"], gpus=recs[0]["plan"]["gpus"] + 1)),  # degrees disagree
                dict(recs[1], plan=dict(recs[1]["plan"], hardware="a100")),  # not the id's hardware
                dict(recs[1], id=point_id("h100", 3e24, settings))]  # not a point of this sweep
    journal.write_text("".join(json.dumps(r) + "\n" for r in [head, *tampered]) + json.dumps(recs[1]) + "\n")
    kept = read_journal(journal, settings, ["h100"], grid)
    assert list(kept) == [("h100", grid[1])]
    code, _, err = invoke(capsys, [*SWEEP, "--csv", str(csv_path), "--resume"])
    assert code == 0 and "1 finished point(s) kept" in err and "solving the other 1" in err
    line = json.loads(journal_line(Plan.model_validate(recs[1]["plan"]), settings))
    assert line["id"] == recs[1]["id"] and line["outcome"]["gpus"] == recs[1]["plan"]["gpus"]


# --------------------------------------------------------------------------------------------------
# 4. Bounded work
# --------------------------------------------------------------------------------------------------


def _preset_with(tmp_path: Path, **fields: int) -> Path:
    text = (ROOT / "models" / "mixtral-8x7b.toml").read_text()
    lines = []
    for line in text.splitlines():
        key = line.split("=", 1)[0].strip()
        lines.append(f"{key} = {fields[key]}" if key in fields else line)
    path = tmp_path / "m.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("fields,word", [({"layers": 513, "experts": 1, "top_k": 1}, "512"),
                                         ({"layers": 2**40}, "layers"), ({"experts": 65536}, "4096"),
                                         ({"experts": 513}, "512"), ({"layers": 128, "experts": 256}, "24576"),
                                         ({"heads": 2048, "kv_heads": 2048}, "heads")])
def test_sizes_that_grow_the_search_have_documented_ranges(capsys, tmp_path, fields, word):
    t0 = time.perf_counter()
    code, _, err = invoke(capsys, ["plan", "--model", str(_preset_with(tmp_path, **fields)), "--gpus", "1024",
                                   "--time-limit", "5"])
    _one_error(code, err)
    assert word in err and time.perf_counter() - t0 < 5


def test_network_levels_are_bounded(capsys, tmp_path):
    head, levels = H100.split("[[levels]]", 1)
    extra = "".join(f'\n[[levels]]\nname = "L{k}"\nsize = {2 ** (k + 1)}\nbw_bidir_GBps = 900\nlat_us = 1\n'
                    for k in range(9))
    path = tmp_path / "deep-net.toml"
    path.write_text(head.replace('name = "h100"', 'name = "deep-net"', 1) + extra
                    + '\n[[levels]]\nname = "top"\nbw_bidir_GBps = 100\nlat_us = 5\n')
    code, _, err = invoke(capsys, ["plan", "--compute", "1e26", "--gpu", str(path)])
    _one_error(code, err)
    assert "at most 8" in err


@pytest.mark.slow
def test_the_largest_accepted_transformer_plans_within_its_time_limit_and_memory_bound(tmp_path):
    """The documented bound (docs/reliability.md): a request at the edge of the ranges ends within its time limit
    plus 5 s and under 4 GB of peak memory."""
    path = _preset_with(tmp_path, layers=512)
    t0 = time.perf_counter()
    res = subprocess.run(["/usr/bin/time", "-f", "%M", str(BIN / "planner"), "plan", "--model", str(path),
                          "--gpus", "1024", "--time-limit", "5"], capture_output=True, text=True, timeout=60)
    assert res.returncode in (0, 1) and time.perf_counter() - t0 < 10
    assert int(res.stderr.strip().splitlines()[-1]) < 4 * 2**20  # KB (measured: 3.4 GB)


def test_an_absurd_network_latency_is_refused_at_once(capsys):
    """A level latency of 1e20 us was accepted and took the search most of a minute to prove infeasible; more than
    1 s per message is not a training network, and the error says so in the unit the user wrote."""
    code, out, err = invoke(capsys, ["plan", "--compute", "1e24", "--set", "levels.0.lat_us=1e20"])
    _one_error(code, err)
    assert "1 s (1,000,000 us)" in err


def test_figure_names_that_sanitise_alike_get_distinct_files(tmp_path, monkeypatch):
    """Two names with the same safe form (`a/b` and `a_b`) wrote one figure file, the later replacing the earlier
    (sweep --plot per hardware, study tornados per family); each now gets its own file."""
    from types import SimpleNamespace

    from planner.files import safe_file_parts
    from planner.render import study as study_render

    assert safe_file_parts(["a/b", "a_b", "a_b-2", "a b"]) == ["a_b", "a_b-2", "a_b-2-2", "a_b-3"]
    assert [p.name for p in plot_paths(tmp_path / "p", ["a/b", "a_b"])] == [
        "p-mfu.png", "p-parallelism-a_b.png", "p-parallelism-a_b-2.png"]
    bar = SimpleNamespace(field="gpu", low=64.0, high=256.0, low_label="64", high_label="256")
    monkeypatch.setattr(study_render, "tornado_families", lambda study, rows: [("a/b", 128.0, [bar]),
                                                                            ("a_b", 128.0, [bar])])
    written = study_render.plot_tornados(SimpleNamespace(study=SimpleNamespace(name="s")), [], tmp_path)
    assert sorted(p.name for p in written) == ["tornado-a_b-2.png", "tornado-a_b.png"]
    assert sorted(p.name for p in tmp_path.glob("tornado-*.png")) == ["tornado-a_b-2.png", "tornado-a_b.png"]
