"""Shared by the CLI tests: run a command in-process and capture what it printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from planner.cli import app, run

TINY = ["--d-model", "256", "--d-ff", "1024", "--layers", "4", "--batch-tokens", "64"]
"""N_p = 2 L E d_model d_ff = 2,097,152; D = 20 N_p = 41,943,040 tokens; 655,360 steps of 64 tokens."""
EXH = ["--solver", "exhaustive"]
BIN = Path(sys.executable).parent


def invoke(capsys, argv: list[str], typer_app=app, prog: str = "planner") -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one command, run through planner.cli.run as the console scripts do."""
    capsys.readouterr()
    code = run(typer_app, argv, prog)
    out, err = capsys.readouterr()
    return code, out, err


def journal_ids(path: Path) -> list[str]:
    """The ids of a study or sweep journal's finished lines (after the header), skipping a line a kill cut short."""
    out = []
    for line in path.read_text().splitlines()[1:] if path.exists() else []:
        try:
            out.append(json.loads(line)["id"])
        except ValueError:
            pass  # a line cut by the kill
    return out
