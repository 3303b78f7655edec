"""The sensitivity document: a plan re-planned with each uncertain input moved down and up (`plan --sensitivity`,
planner.sensitivity runs it; the Plan document carries it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SensitivityRow(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    input: str = Field(description="The --set field moved (levels.*.lat_us: every level).")
    why: str = Field(description="'estimate' (its source says so), 'fitted', or 'what-if' (a standard question).")
    base: str = Field(description="Its value in the plan.")
    low: str = Field(description="The low value tried (--set FIELD=low).")
    high: str = Field(description="The high value tried (--set FIELD=high).")
    gpus_low: int | None = Field(description="GPUs with the low value (null: infeasible).")
    gpus_high: int | None = Field(description="GPUs with the high value (null: infeasible).")
    days_low: float | None = Field(description="Wall-clock days with the low value.")
    days_high: float | None = Field(description="Wall-clock days with the high value.")
    swing: float = Field(description="GPU swing: max |GPUs / plan's GPUs - 1| over low and high (inf when one is "
                         "infeasible).")
    days_swing: float = Field(0.0, description="Days swing: max |wall-clock days / plan's - 1| over low and high "
                              "(inf when one is infeasible).")


class Sensitivity(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    base_gpus: int | None = Field(description="GPUs of the plan every row is compared with.")
    base_days: float | None = Field(description="Wall-clock days of that plan.")
    rows: list[SensitivityRow] = Field(description="One row per input moved, largest swing first.")
