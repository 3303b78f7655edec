"""The contract with scripts (issue 26, part 5): every field of every document described with its unit."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from planner.goodput import FailureModel, Goodput
from planner.limits import LimitsRow
from planner.profile import ExecutionProfile
from planner.schema import ErrorDocument, Evaluation, Hardware, Plan, Workload
from planner.sensitivity import Sensitivity
from planner.sweep import SweepResult
from planner.validation import PublishedRun, ValidationRow
from planner.workload.scaling import ModelPreset

DOCUMENTS: list[type[BaseModel]] = [Plan, Evaluation, ErrorDocument, Hardware, Workload, ExecutionProfile,
                                    FailureModel, Goodput, Sensitivity, LimitsRow, ModelPreset, SweepResult,
                                    PublishedRun, ValidationRow]
"""Every document the planner writes (--json of plan, evaluate, limits, sweep, validate, hardware show, errors) or
reads (hardware, profile, failure-model, preset and runs files; plan files for evaluate --plan)."""


def undocumented(schema: dict[str, Any]) -> list[str]:
    """'Model.field' for every property of the schema and of every model in its $defs without a description."""
    missing = []
    models = {schema.get("title", "?"): schema, **schema.get("$defs", {})}
    for title, model in models.items():
        for name, prop in model.get("properties", {}).items():
            if not str(prop.get("description", "")).strip():
                missing.append(f"{title}.{name}")
    return missing


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: d.__name__)
def test_every_field_is_described(doc):
    assert undocumented(doc.model_json_schema()) == []


def test_the_walk_finds_an_undocumented_field():
    """The walk above can fail: a nested model with one bare field is named."""
    from pydantic import Field

    class Inner(BaseModel):
        described: int = Field(description="a count")
        bare: float

    class Outer(BaseModel):
        inner: Inner = Field(description="nested")

    assert undocumented(Outer.model_json_schema()) == ["Inner.bare"]
