"""CLI rough edges found in review (task qa3), each pinned by a test that failed before its fix: --version with
--json; the toy model's fixed-count infeasibility names batch sizes as well as GPU counts; evaluate and validate
agree on the README's DeepSeek-V3 MFU."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest
from cli_helpers import invoke

from planner.cli.app import plan_app

# --------------------------------------------------------------------------------------------------
# 1. --version --json: one JSON document, as every other --json output, from both console scripts
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv,prog", [(["--version", "--json"], "planner"), (["--json", "--version"], "planner"),
                                       (["--version", "--json"], "plan"), (["--json", "--version"], "plan"),
                                       (["plan", "--version", "--json"], "planner")])
def test_version_with_json_is_one_json_document(capsys, argv, prog):
    code, out, err = invoke(capsys, argv, plan_app, "plan") if prog == "plan" else invoke(capsys, argv)
    assert code == 0 and err == ""
    assert json.loads(out) == {"name": "planner", "version": version("planner")}


@pytest.mark.parametrize("argv,prog", [(["--version"], "planner"), (["--version"], "plan")])
def test_version_without_json_stays_one_line(capsys, argv, prog):
    code, out, err = invoke(capsys, argv, plan_app, "plan") if prog == "plan" else invoke(capsys, argv)
    assert (code, out, err) == (0, f"planner {version('planner')}\n", "")


def test_json_alone_is_still_a_usage_error_in_json(capsys):
    code, out, err = invoke(capsys, ["--json"])
    assert code == 2 and err == "" and json.loads(out)["error"]["code"] == "usage"
