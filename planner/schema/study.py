"""The study documents (`planner study FILE.toml`, docs/study.md): the study file read, the journal's header and
the outcome half of a result row written (planner.study runs a study).

A study is many plan requests: `[base]` fields shared by all, and either `[grid]` (lists per field, their cartesian
product) or `[sample]` (`n` quasi-random points over ranges and lists). Field names are PlanRequest's
(planner.schema.request), plus `set` for its `overrides` (the --set strings).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.schema import check_name
from planner.schema.request import PlanRequest

MAX_SCENARIOS = 100_000
"""Most scenarios in one study (each is a full plan: 10^5 cheap plans are an hour on 16 cores)."""

MAX_AXIS_VALUES = 10_000
"""Most values listed for one field of a grid or a sample."""

FORCED: dict[str, Any] = {"workers": 1, "why_smaller": False}
"""Request fields a study fixes: one CP-SAT worker (with its fixed seed) per scenario, so that a row is the same
bytes on any engine and any worker count; no search of the smaller clusters (a row does not show them, and that
search is time-limited)."""

STUDY_FIELDS = ("confidence",)
"""Fields a scenario has beside its request: `confidence` P plans the cluster that meets the deadline with
probability P (planner.confidence, `plan --confidence P`, its default samples and seed)."""

ALIASES = {"set": "overrides"}
"""Study-file names of request fields: `set` lists --set strings, as on the command line."""


def request_field(name: str, where: str) -> str:
    """The PlanRequest field a study-file key names; a ValueError naming the accepted keys otherwise."""
    field = ALIASES.get(name, name)
    if (field in PlanRequest.model_fields and field not in FORCED) or field in STUDY_FIELDS:
        return field
    if field in FORCED:
        raise ValueError(f"{name}: a study plans every scenario with {name} = {FORCED[field]} (the rows are "
                         "then the same bytes on any engine); drop it")
    import difflib

    known = sorted([*(k for k in PlanRequest.model_fields if k not in FORCED and k != "overrides"), *ALIASES,
                    *STUDY_FIELDS])
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f" (did you mean '{near[0]}'?)" if near else ""
    raise ValueError(f"unknown field '{name}'{hint} in [{where}]; a study's fields are the request's: "
                     f"{', '.join(known)}")


class _Doc(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


class StudySection(_Doc):
    """`[study]`: what the study is called and how its scenarios are drawn."""

    name: str = Field(description="The study's name (printable, at most 200 characters); it heads the journal.")
    mode: Literal["grid", "sample"] = Field(
        "grid", description="grid: the cartesian product of `[grid]`'s lists; sample: `[sample]`'s n quasi-random "
        "points.")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Seed of the sample's scrambling (the same seed draws the "
                      "same scenarios).")
    families: list[str] | None = Field(
        None, description="Grid fields whose values split the scenarios into families, one tornado plot each (the "
        "other fields vary, one at a time, around their middle value). None: ['gpu'] when the grid varies gpu, "
        "else one family.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        check_name(v)
        if not v.strip():
            raise ValueError("study.name must not be empty")
        return v


class SampleRange(_Doc):
    """A numeric field sampled between `min` and `max` (inclusive), evenly or evenly in log10."""

    min: float = Field(description="Smallest value.")
    max: float = Field(description="Largest value (>= min).")
    scale: Literal["linear", "log"] = Field("linear", description="log: evenly in log10 (positive bounds).")
    whole: bool = Field(False, description="Round to a whole number (e.g. gpus).")

    @model_validator(mode="after")
    def _bounds(self) -> SampleRange:
        if not (math.isfinite(self.min) and math.isfinite(self.max)):
            raise ValueError("a sample range's min and max must be finite")
        if self.max < self.min:
            raise ValueError(f"a sample range's max ({self.max:g}) is below its min ({self.min:g})")
        if self.scale == "log" and self.min <= 0:
            raise ValueError(f"a log-scale sample range needs min > 0, got {self.min:g}")
        return self


class SampleSection(_Doc):
    """`[sample]`: `n` points; every other key is a request field and a range table or a list to choose from."""

    n: int = Field(ge=1, le=MAX_SCENARIOS, description=f"Scenarios to draw, 1 to {MAX_SCENARIOS:,}.")
    axes: dict[str, SampleRange | list[Any]] = Field(
        default_factory=dict, description="Field -> {min, max, scale, whole} or a list of values (chosen evenly).")

    @model_validator(mode="before")
    @classmethod
    def _split(cls, data: Any) -> Any:
        if isinstance(data, dict) and "axes" not in data:
            return {"n": data.get("n"), "axes": {k: v for k, v in data.items() if k != "n"}}
        return data

    @field_validator("axes")
    @classmethod
    def _axes(cls, axes: dict[str, Any]) -> dict[str, Any]:
        for name, spec in axes.items():
            request_field(name, "sample")
            if isinstance(spec, list) and not 1 <= len(spec) <= MAX_AXIS_VALUES:
                raise ValueError(f"sample.{name}: list 1 to {MAX_AXIS_VALUES:,} values, got {len(spec)}")
        return axes


class StudyFile(_Doc):
    """A study file: `[study]`, `[base]` and `[grid]` or `[sample]`."""

    study: StudySection = Field(description="`[study]`: name, mode (grid or sample), seed and families.")
    base: dict[str, Any] = Field(default_factory=dict, description="Request fields every scenario shares.")
    grid: dict[str, list[Any]] = Field(
        default_factory=dict, description="Request field -> the values it takes; the scenarios are the cartesian "
        "product, the first field varying slowest (the file's order).")
    sample: SampleSection | None = Field(
        None, description="`[sample]`: n quasi-random scenarios over ranges (mode sample); null in grid mode.")

    @field_validator("base")
    @classmethod
    def _base(cls, base: dict[str, Any]) -> dict[str, Any]:
        for name in base:
            request_field(name, "base")
        if "overrides" in base and "set" in base:
            raise ValueError("base: give `set` or `overrides`, not both")
        return base

    @field_validator("grid")
    @classmethod
    def _grid(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for name, values in grid.items():
            request_field(name, "grid")
            if not 1 <= len(values) <= MAX_AXIS_VALUES:
                raise ValueError(f"grid.{name}: list 1 to {MAX_AXIS_VALUES:,} values, got {len(values)}")
        return grid

    @model_validator(mode="after")
    def _mode(self) -> StudyFile:
        if self.study.mode == "grid" and self.sample is not None:
            raise ValueError("study.mode is 'grid' but the file has a [sample] table; set mode = 'sample' or drop it")
        if self.study.mode == "sample" and self.sample is None:
            raise ValueError("study.mode is 'sample': give a [sample] table with n and the fields to sample")
        if self.study.mode == "sample" and self.grid:
            raise ValueError("study.mode is 'sample' but the file has a [grid] table; put its lists in [sample]")
        axes = self.axes
        in_base = {ALIASES.get(k, k) for k in self.base}
        for name in axes:  # --set strings add up: the base's first, then the scenario's
            if ALIASES.get(name, name) != "overrides" and ALIASES.get(name, name) in in_base:
                raise ValueError(f"'{name}' is both in [base] and varied; keep it in one place")
        for name in self.study.families or []:
            if name not in axes:
                raise ValueError(f"study.families: '{name}' is not a varied field ({', '.join(axes) or 'none'})")
        return self

    @property
    def axes(self) -> list[str]:
        """The varied fields, in the file's order (study-file names: `set`, not `overrides`)."""
        return list(self.grid) if self.sample is None else list(self.sample.axes)


class JournalHeader(_Doc):
    """The journal's first line: which study its rows belong to (a resume checks the hash)."""

    kind: Literal["planner-study-journal"] = Field(
        "planner-study-journal", description="Marks the file as a study journal (always 'planner-study-journal').")
    study: str = Field(description="The study's name.")
    study_hash: str = Field(description="SHA-256 of the study file's canonical JSON (comments and layout do not "
                            "count; any field or value does).")
    scenarios: int = Field(description="Scenarios the study has.")
    settings: dict[str, Any] | None = Field(
        None, description="A sweep's settings (days, profile, --set, ...: every request field its points share), so "
        "that a --resume with other settings names them; null (left out) for a study file, whose hash says it all.")


Count = Annotated[int, Field(ge=1)]
Fraction = Annotated[float, Field(gt=0, le=1)]
Amount = Annotated[float, Field(ge=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0)]
"""The value rules of StudyOutcome's columns (a count of GPUs or nodes, MFU, a finite amount, a confidence column)."""


class StudyOutcome(_Doc):
    """The answer half of a result row: one plan, flat, without wall times (the same bytes on any engine). Counts are
    at least 1, MFU in (0, 1], other numbers >= 0 and finite (the confidence columns may be infinite): a journal line
    read on --resume is validated with these rules, so a tampered line outside them is planned again."""

    status: Literal["optimal", "feasible", "infeasible", "unknown", "error"] = Field(
        description="The plan's status; error: the scenario is bad input (see `error`).")
    hardware: str | None = Field(None, description="Hardware name the plan ran on.")
    profile: str | None = Field(None, description="Execution profile that priced it.")
    gpus: Count | None = Field(None, description="GPUs of the chosen cluster.")
    nodes: Count | None = Field(None, description="Nodes of the chosen cluster (the lowest network level's units).")
    mfu: Fraction | None = Field(None, description="Model FLOPs utilisation, fraction (0-1) of peak dense FLOP/s.")
    training_days: Amount | None = Field(None, description="Days of training compute.")
    wall_clock_days: Amount | None = Field(None, description="Expected wall-clock days (with goodput).")
    goodput: Amount | None = Field(None, description="Share of wall-clock time that trains (goodput on).")
    gpu_hours: Amount | None = Field(None, description="GPU-hours of training compute (GPUs x training days x 24).")
    cost_usd: Amount | None = Field(None, description="Cost, USD, of the GPUs held for the wall-clock time (the "
                                   "plan's cost_usd); null without a price.")
    compute_cost_usd: Amount | None = Field(None, description="Compute-only cost, USD: gpu_hours x price per "
                                           "GPU-hour; null without a price.")
    facility_power_MW: Amount | None = Field(None, description="Facility power, MW (IT power x PUE); null without "
                                            "power data for the hardware.")
    energy_MWh: Amount | None = Field(None, description="Facility energy over the wall-clock time held, MWh.")
    step_time_s: Amount | None = Field(None, description="Time of one training step, seconds.")
    bottleneck: str | None = Field(None, description="The step's binding term (what limits the step time).")
    params: Amount | None = Field(None, description="Model parameters.")
    tokens: Amount | None = Field(None, description="Training tokens.")
    layout: str | None = Field(None, description="Every dimension of the layout, 'dp=.. tp_ff=.. ... schedule=..'.")
    solver_status: str | None = Field(None, description="CP-SAT's status: optimal (proven), feasible (time limit), "
                                      "infeasible or unknown.")
    gap: Amount | None = Field(None, description="Relative gap between the layout found and the proven bound, "
                              "fraction (0-1); 0 when proven optimal.")
    point_gpus: Count | None = Field(None, description="With confidence: the point estimate's GPUs (`gpus` is then "
                                   "the cluster that meets the deadline with probability P).")
    met: NonNegative | None = Field(None, description="With confidence: share of samples meeting the deadline on gpus.")
    days_p10: NonNegative | None = Field(None, description="With confidence: 10th percentile of wall-clock days "
                                   "on gpus.")
    days_p50: NonNegative | None = Field(None, description="With confidence: median wall-clock days on gpus.")
    days_p90: NonNegative | None = Field(None, description="With confidence: 90th percentile of wall-clock days "
                                   "on gpus.")
    explanation: str | None = Field(None, description="First line of why a plan is infeasible.")
    error: str | None = Field(None, description="The one-line error of a bad scenario.")


OUTCOME_COLUMNS: tuple[str, ...] = tuple(StudyOutcome.model_fields)


class JournalRecord(_Doc):
    """A journal line after the header: one finished scenario."""

    id: str = Field(description="The scenario's id (16 hex digits of a SHA-256; planner.study.scenario_id, or for a "
                    "sweep point planner.sweep.point_id).")
    outcome: StudyOutcome = Field(description="The row's answer columns.")
    plan: dict[str, Any] | None = Field(
        None, description="The whole Plan document, kept where the caller needs more than the row (a sweep: its "
        "--json, table and CSV); left out for a study file.")


__all__ = ["STUDY_FIELDS", "ALIASES", "FORCED", "MAX_AXIS_VALUES", "MAX_SCENARIOS", "OUTCOME_COLUMNS", "JournalHeader",
           "JournalRecord", "SampleRange", "SampleSection", "StudyFile", "StudyOutcome", "StudySection",
           "request_field"]
