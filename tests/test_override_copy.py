"""overrides.apply copies the parsed document with overrides._copy instead of copy.deepcopy (--sensitivity applies one
override set per moved input): on every shipped TOML file the copy equals deepcopy's and shares no table or array
with the original, and applying an override leaves the cached original as it was."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from planner.overrides import _copy, apply, parse_overrides
from planner.sourced import load_toml

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(p for d in ("profiles", "hardware_specs", "failures", "facility", "models")
                 for p in (ROOT / d).rglob("*.toml"))


def _containers(node, out):
    if isinstance(node, (dict, list)):
        out.append(id(node))
        for v in (node.values() if isinstance(node, dict) else node):
            _containers(v, out)
    return out


def test_there_are_shipped_files():
    assert len(SHIPPED) >= 4


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_copy_equals_deepcopy_and_shares_no_container(path):
    doc = load_toml(path, "file")
    out = _copy(doc)
    assert out == copy.deepcopy(doc)
    assert not set(_containers(out, [])) & set(_containers(doc, []))


def test_apply_leaves_the_original_unchanged():
    doc = load_toml(ROOT / "profiles" / "realistic.toml", "profile file")
    before = copy.deepcopy(doc)
    ovs = parse_overrides(["profile.gemm.sustained_factor=0.7"])
    out = apply(doc, ovs, "profile")
    assert doc == before
    assert out != before
