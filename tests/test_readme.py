"""Every complete command README.md shows runs as written (exit 0): the README is read here, so a command added or
changed there is tested without editing this file. A mention of a command with placeholders (`plan ...`,
`--plan FILE.json`, `[--write|--check]`) or of a flag alone is not a command and is left out, as are commands that
write into the repository (`--write`)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from cli_helpers import invoke

from planner.cli import app
from planner.cli.app import plan_app

README = Path(__file__).resolve().parent.parent / "README.md"
SUBCOMMANDS = {"plan", "evaluate", "sweep", "study", "limits", "export", "validate", "hardware", "models", "schema",
               "reference"}

MENTIONS = {"plan --json", "planner study"}
"""Inline code that names a flag or a command in a sentence rather than giving one to run (`planner study` needs
its FILE.toml, given in the Commands table)."""

SLOW = ("--confidence", "planner validate")
"""Commands that take more than a few seconds (--confidence re-plans 64 samples; validate prices every published run):
run in the `-m slow` step."""


def readme_commands() -> list[str]:
    """`plan ...` / `planner ...` commands in README.md: fenced lines and inline code spans (wrapped lines joined),
    without shell redirections and comments, placeholders left out (see the module docstring)."""
    text = README.read_text(encoding="utf-8")
    found: list[str] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        found += [line.split("#", 1)[0].split(">", 1)[0].strip() for line in block.splitlines()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S).replace("\n", " ")
    found += [m.group(1) for m in re.finditer(r"`((?:plan|planner) [^`]+)`", prose)]
    out: list[str] = []
    for cmd in found:
        cmd = " ".join(cmd.split())
        if not re.match(r"^(plan|planner) ", cmd) or cmd in out:
            continue
        words = shlex.split(cmd)
        if len(words) < 2 or not (words[1].startswith("--") if words[0] == "plan" else words[1] in SUBCOMMANDS):
            continue  # a table cell or a sentence naming a module ("planner plan, evaluate")
        placeholder = any("..." in w or "[" in w or "|" in w or "FILE" in w or "DIR" in w
                          or re.fullmatch(r"[A-Z]+", w) for w in words)
        if placeholder or "--write" in words or cmd in MENTIONS:
            continue
        out.append(cmd)
    return out


COMMANDS = readme_commands()


def test_the_readme_has_the_commands_it_promises():
    # the main command, the worked examples of each section (a sanity check on the extraction itself)
    assert "plan --compute 1e28 --gpu h100 --days 90" in COMMANDS
    assert any(c.startswith("plan --model llama3-70b --gpu h100 --gpus 2048 --emit megatron") for c in COMMANDS)
    assert any(c.startswith("planner evaluate --model deepseek-v3") for c in COMMANDS)
    assert len(COMMANDS) >= 12


@pytest.mark.parametrize("cmd", [pytest.param(c, marks=pytest.mark.slow) if any(s in c for s in SLOW) else c
                                 for c in COMMANDS])
def test_readme_command_runs(capsys, tmp_path, monkeypatch, cmd):
    words = shlex.split(cmd)
    if "plan.json" in words:  # the README's `plan ... --json > plan.json` then `planner export --plan plan.json`
        monkeypatch.chdir(tmp_path)
        # 1F1B: export refuses a zero-bubble schedule, as the README says right after
        code, out, err = invoke(capsys, ["--model", "llama3-8b", "--gpus", "64", "--schedule", "1f1b", "--json"],
                                plan_app, "plan")
        assert code == 0, err
        (tmp_path / "plan.json").write_text(out)
    if words[0] == "plan":
        code, out, err = invoke(capsys, words[1:], plan_app, "plan")
    else:
        code, out, err = invoke(capsys, words[1:], app)
    assert code == 0, f"{cmd}\n{err}"
    assert out.strip(), cmd


def test_readme_deepseek_example_fits_as_the_published_run_did(capsys):
    """The README's DeepSeek-V3 layout, with the record's flags (validation/runs.toml,
    mbridge2509-deepseek-v3-1024gpu-fp8: fp8, selective recomputation, ZeRO-1, mla_recompute_up_proj), fits on
    1,024 H100, as the run trained; the same layout in bf16 without those savings needs far more than 80 GB."""
    import json

    cmd = next(c for c in COMMANDS if c.startswith("planner evaluate --model deepseek-v3"))
    words = shlex.split(cmd)
    for flag in ("--precision", "--recompute", "--zero"):
        assert flag in words, f"README's DeepSeek-V3 example lacks the record's {flag}"
    code, out, err = invoke(capsys, [*words[1:], "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "feasible" and doc["gpus"] == 1024
    assert doc["memory"]["total_bytes"] < 80e9  # an H100 has 80 GB nominal (85.07 GB usable HBM per the profile)
    bare = list(words[1:])
    for flag in ("--precision", "--recompute", "--zero", "--set"):
        k = bare.index(flag)
        del bare[k:k + 2]
    code, out, _ = invoke(capsys, [*bare, "--json"])
    assert code == 1 and json.loads(out)["memory"]["total_bytes"] > 100e9


def test_the_readme_quotes_the_validation_figures_of_docs_validation():
    """The README's accuracy sentence quotes docs/validation.md (regenerated by `planner validate --write`, which a
    test keeps in step with the model): a re-fit or a new record that moves a figure must move the README too."""
    table: dict[tuple[str, str], list[str]] = {}
    for line in (README.parent / "docs" / "validation.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[1] in ("calibration", "held-out"):
            table[(cells[0], cells[1])] = cells[2:]
    text = " ".join(README.read_text(encoding="utf-8").split())
    m = re.search(r"held-out dense 16-bit published runs it predicts throughput within ([\d.]+%) mean absolute error "
                  r"\(Spearman ([\d.]+)\), where the paper profile is off by ([\d.]+%); on all (\d+) held-out runs "
                  r"\([^)]*\) ([\d.]+%) \(Spearman ([\d.]+)\), on the (\d+) FP8 / FP4 ones ([\d.]+%)", text)
    assert m, "the README's accuracy sentence changed shape"
    dense, paper = table[("realistic, dense 16-bit", "held-out")], table[("paper, dense 16-bit", "held-out")]
    every, low = table[("realistic, all", "held-out")], table[("realistic, FP8 and FP4", "held-out")]
    assert (m[1], m[2], m[3]) == (dense[1], dense[4], paper[1])
    assert (m[4], m[5], m[6]) == (every[0], every[1], every[4])
    assert (m[7], m[8]) == (low[0], low[1])
