"""docs/api.md: every Python example on the page runs as written (in order, in one namespace, in an empty
directory), so the page cannot drift from the API it documents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

API_DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"


@pytest.mark.slow  # about 5 s: every example of docs/api.md, searches included
def test_every_example_of_the_api_page_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", API_DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 7  # plan, plan --gpus, errors, evaluate, presets, hardware, profiles, sweep
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for k, block in enumerate(blocks):
        exec(compile(block, f"docs/api.md block {k + 1}", "exec"), namespace)  # noqa: S102 - our own documentation
    out = capsys.readouterr().out
    assert "bad input: --days must be a positive finite number, got -1" in out
    assert "optimal 64" in out  # 1e23 FLOP on H100s in 30 days: the plan's first line of output
