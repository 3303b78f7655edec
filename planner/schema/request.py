"""The question `plan` answers, as one validated document (issue 29): workload, hardware, deadline or GPUs, profile,
what-if overrides, goodput and search options.

The CLI builds one from its flags, `planner.api.plan` answers one, and sweep, sensitivity and validation derive the
requests they need from one with `model_copy(update=...)` (which validates the result again here) instead of
passing twenty parameters along. A request is a file too: `to_json` / `from_json` and `to_toml` / `from_toml` write
and read it, so a study can be a list of requests.

Validated here: types and every rule that needs no file read (positive numbers, known names, one workload source).
What needs the hardware, profile or failure files (--set paths, --gpus above a rack limit, a precision the GPU has,
pins the workload allows) is checked by `planner.api.plan`, which resolves them.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planner.choices import BatchScaling, Budget, Framework, ScheduleChoice, Solver
from planner.errors import MAX_PRICE_PER_GPU_HOUR, InvalidInput, is_count, is_number, validation_message
from planner.schema import Facility, Hardware, Workload
from planner.schema.goodput import FailureModel

MAX_WORKERS = 256
"""Most CP-SAT worker threads accepted per plan."""

MAX_GPUS = 2**53
"""Largest cluster accepted (larger would overflow the int64 cost arrays)."""

DEFAULT_DAYS = 90.0
"""The deadline when neither `days` nor `gpus` is given."""

_NONE = (type(None),)

# (field, accepted types, what the error says is accepted); the order is the order in which problems are reported.
_TYPES: tuple[tuple[str, tuple[type, ...], str], ...] = (
    ("compute_flop", (int, float, *_NONE), "a number of FLOP or None"),
    ("gpu", (str, Hardware), "a hardware name, a TOML path or a Hardware"),
    ("days", (int, float, *_NONE), "a number of days or None"),
    ("workload", (Workload, *_NONE), "a Workload or None"),
    ("sparse", (bool,), "true or false"),
    ("dp_overlap", (bool, *_NONE), "true, false or None"),
    ("goodput", (bool, *_NONE), "true, false or None"),
    ("batch_scaling", (str,), "a string"),
    ("budget", (str,), "a string"),
    ("schedule", (str,), "a string"),
    ("solver", (str,), "a string"),
    ("profile", (str, *_NONE), "a profile name, a TOML path or None"),
    ("failures", (str, FailureModel), "a failure-model name, a TOML path or a FailureModel"),
    ("fixed", (Mapping, *_NONE), "a mapping of dimension name to value, or None"),
    ("runs_on", (str, *_NONE), "'megatron', 'torchtitan' or None"),
    ("time_limit_s", (int, float, *_NONE), "a number of seconds or None"),
    ("price_per_gpu_hour", (int, float, *_NONE), "a number or None"),
    ("power_mw", (int, float, *_NONE), "a number of MW or None"),
    ("facility", (str, Facility), "a facility name, a TOML path or a Facility"),
    ("why_smaller", (bool,), "true or false"),
)
_DOCUMENTS: dict[str, type[BaseModel]] = {"gpu": Hardware, "workload": Workload, "failures": FailureModel,
                                          "facility": Facility}
"""Fields that may hold a document: read back from JSON or TOML they arrive as tables (dicts)."""


def check_type(name: str, value: object, types: tuple[type, ...], what: str) -> None:
    """An argument checked by type before use: a wrong type is an InvalidInput naming it, not an AttributeError deep
    inside (docs/reliability.md). bool is not accepted as a number."""
    if isinstance(value, bool) and bool not in types:
        raise InvalidInput(f"{name} must be {what}, got {value!r}")
    if not isinstance(value, types):
        raise InvalidInput(f"{name} must be {what}, got {type(value).__name__} {str(value)[:60]!r}")


def check_positive(name: str, value: float | None, unit: str = "") -> None:
    """None, or a positive finite number (not a bool)."""
    if value is None:
        return
    if not is_number(value) or not math.isfinite(value) or value <= 0:
        raise InvalidInput(f"{name} must be a positive finite number{unit}, got {value!r}")


def check_price(name: str, value: float | None, given: str | None = None) -> None:
    """None, or a price per GPU-hour in USD above 0 and at most MAX_PRICE_PER_GPU_HOUR (`given`: the value as the
    message quotes it)."""
    check_positive(name, value, " (USD per GPU-hour)")
    if value is not None and value > MAX_PRICE_PER_GPU_HOUR:
        raise InvalidInput(f"{name} {given or format(value, 'g')}: at most {MAX_PRICE_PER_GPU_HOUR:,.0f} USD per "
                           "GPU-hour (market prices are $1-$15; give the price of one GPU for one hour)")


def check_workers(workers: object) -> None:
    if not is_count(workers) or not 1 <= workers <= MAX_WORKERS:
        raise InvalidInput(f"--workers must be a whole number from 1 to {MAX_WORKERS}, got {workers!r}")


def check_headroom(gb: object) -> None:
    if not is_number(gb) or not (math.isfinite(gb) and gb >= 0):
        raise InvalidInput(f"memory headroom must be a finite number of GB >= 0, got {gb!r}")


def _choice(kind: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise InvalidInput(f"unknown {kind} '{value}'; choose one of {', '.join(choices)}")


class PlanRequest(BaseModel):
    """One planning question: train this workload on this hardware within `days` (the fewest GPUs) or on exactly
    `gpus` (the fastest layout), priced under this profile with these what-if overrides.

    A new question (a power cap, a GPU ceiling, ...) is a new field here, with its unit in its description and its
    rule in a validator; the flag that sets it goes in planner/cli/plan.py, and planner.api.plan reads it."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    compute_flop: float | None = Field(
        None, description="Training compute T, FLOP: the model shape is inferred from the paper's scaling laws "
        "(App. 8.1.4). Give this or `workload`, not both.")
    workload: Workload | None = Field(
        None, description="An explicit workload (a preset, a shape or a transformer); give this or `compute_flop`.")
    gpu: str | Hardware = Field(
        "h100", description="Hardware: a shipped name (`planner hardware list`), a TOML path, or a Hardware.")
    days: float | None = Field(
        None, description="Deadline, days of training (wall-clock days when goodput is on). None: 90 days, or no "
        "deadline when `gpus` fixes the cluster.")
    gpus: int | None = Field(
        None, description="Fix the cluster at this many GPUs and find its fastest layout (1 to 2^53). None: find "
        "the fewest GPUs that meet the deadline.")
    sparse: bool = Field(False, description="With `compute_flop`: a mixture-of-experts model (E > 1, App. 8.1.4).")
    batch_scaling: str = Field(
        "paper", description="With `compute_flop`: the batch-size law, 'paper', 'deepseek' or 'fixed' (§6.3.2).")
    budget: str = Field(
        "exact", description="With `compute_flop`: 'exact' trains exactly that compute (tokens absorb the shape's "
        "rounding); 'paper' trains 20 N_p tokens of the rounded shape, as the paper's tables do.")
    schedule: str = Field("auto", description="Pipeline schedule: 'auto' (the search chooses), '1f1b' or 'zb-h2'.")
    dp_overlap: bool | None = Field(
        None, description="Overlap the data-parallel gradient all-reduce with compute. None: the profile's default.")
    solver: str = Field(
        "cpsat", description="'cpsat' (proves optimality) or 'exhaustive' (brute-force enumeration of the same "
        "space).")
    time_limit_s: float | None = Field(
        60.0, description="Search time limit, seconds (None: no limit); a stopped search reports its bound and gap.")
    workers: int = Field(2, description=f"CP-SAT worker threads, 1 to {MAX_WORKERS}.")
    price_per_gpu_hour: float | None = Field(
        None, description="Price, USD per GPU-hour (at most 1,000), in place of the hardware "
        "file's; None: the file's dated market figure prices cost_usd.")
    fixed: dict[str, int] = Field(
        default_factory=dict, description="Dimensions pinned instead of searched, name -> value (tp_model, cp, sp, "
        "recompute, zero; e.g. {'recompute': 2} for full recomputation).")
    runs_on: str | None = Field(
        None, description="Search only layouts this framework runs, 'megatron' or 'torchtitan' (planner.export). "
        "None: any layout of the cost model.")
    profile: str | None = Field(
        None, description="Execution profile: 'paper', 'realistic' or a profile TOML path. None: 'paper' for the "
        "paper's toy workload, 'realistic' for a transformer or a framework (planner.api.DEFAULT_PROFILE_RULE).")
    goodput: bool | None = Field(
        None, description="Plan with failures, checkpoints and restarts (the deadline then bounds wall-clock time). "
        "None: the profile's default (on in the realistic profile).")
    failures: str | FailureModel = Field(
        "default", description="Failure model for goodput: a shipped name, a TOML path or a FailureModel.")
    overrides: tuple[str, ...] = Field(
        (), description="--set FIELD=VALUE strings on hardware, profile and failure-model fields (planner.overrides),"
        " applied in order and echoed in the plan.")
    memory_headroom_GB: float | None = Field(
        None, description="HBM a layout must leave free, GB (>= 0; = --set profile.memory.headroom_GB). None: the "
        "profile's.")

    power_mw: float | None = Field(
        None, description="A buyer's limit: facility power at most this many MW (GPU boards, nodes and switches x "
        "PUE; planner.economics). The plan is the fewest GPUs within it that meet the deadline; none: Infeasible "
        "says what the deadline needs and the fastest plan within the limit.")
    max_gpus: int | None = Field(
        None, description="A buyer's limit: at most this many GPUs (1 to 2^53); the fewest within it that meet the "
        "deadline, or why not and what fits.")
    facility: str | Facility = Field(
        "default", description="The site: a shipped facility name, a TOML path or a Facility; sets the PUE of the "
        "plan's power figures and the largest announced site past which a plan carries a warning.")

    why_smaller: bool = Field(
        True, description="With a deadline and no fixed `gpus`: fill the plan's `smaller_clusters` (the next smaller "
        "sizes and why they fail), at the cost of one fixed-cluster search of at most 10 s. Studies that read only "
        "the answer (sweeps, sensitivity, a buyer's-limit re-plan) turn it off.")

    def __init__(self, **data: Any) -> None:
        """Every problem is an InvalidInput with the one-line message the CLI prints (not a ValidationError)."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidInput(validation_message(exc, strip_kind=True)) from None

    @model_validator(mode="before")
    @classmethod
    def _check_types(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise InvalidInput(f"a plan request is a table of fields, got {type(data).__name__}")
        data = dict(data)
        for name, types, what in _TYPES:
            if name not in data:
                continue
            value = data[name]
            doc = _DOCUMENTS.get(name)
            if doc is not None and isinstance(value, Mapping):
                data[name] = doc.model_validate(value)  # a document read back from JSON or TOML
                continue
            check_type(name, value, types, what)
        # numbers as given (before pydantic makes a float of an int): the message quotes what the caller wrote
        check_positive("--days", data.get("days"))
        check_positive("--time-limit", data.get("time_limit_s"), " (seconds)")
        check_price("--price-per-gpu-hour", data.get("price_per_gpu_hour"))
        check_positive("--power-mw", data.get("power_mw"), " (MW)")
        for flag, key in (("--max-gpus", "max_gpus"), ("--gpus", "gpus")):
            n = data.get(key)
            if n is not None and (not is_count(n) or not 1 <= n <= MAX_GPUS):
                raise InvalidInput(f"{flag} must be a whole number from 1 to 2^53, got {n!r}")
        if "workers" in data:
            check_workers(data["workers"])
        if data.get("memory_headroom_GB") is not None:
            check_headroom(data["memory_headroom_GB"])
        if "fixed" in data:
            fixed = data["fixed"] or {}
            for name, value in fixed.items():
                if not isinstance(name, str):
                    raise InvalidInput(f"fixed: a dimension name must be a string, got {name!r}")
                if not is_count(value):
                    raise InvalidInput(f"--{name} must be a whole number, got {value!r}")
            data["fixed"] = dict(fixed)
        if "overrides" in data:
            texts = data["overrides"]
            if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
                raise InvalidInput(f"overrides must be a list of 'FIELD=VALUE' strings, got {type(texts).__name__} "
                                   f"{str(texts)[:60]!r}")
            for raw in texts:
                if not isinstance(raw, str):
                    raise InvalidInput(f"overrides must be 'FIELD=VALUE' strings, got {type(raw).__name__} {raw!r}")
            data["overrides"] = tuple(texts)
        return data

    @model_validator(mode="after")
    def _check_values(self) -> PlanRequest:
        _choice("solver", self.solver, [s.value for s in Solver])
        _choice("schedule", self.schedule, [s.value for s in ScheduleChoice])
        if self.batch_scaling not in [b.value for b in BatchScaling]:
            raise InvalidInput(f"unknown batch scaling '{self.batch_scaling}'; choose one of "
                               f"{', '.join(b.value for b in BatchScaling)}")
        if self.budget not in [b.value for b in Budget]:
            raise InvalidInput(f"unknown budget rule '{self.budget}'; choose exact or paper")
        if self.workload is None and self.compute_flop is None:
            raise InvalidInput("give --compute FLOP, a model preset, or an explicit shape")
        if self.workload is not None and self.compute_flop is not None:
            raise InvalidInput("give either --compute or an explicit shape/preset, not both")
        if self.runs_on is not None:
            _choice("framework", self.runs_on, [f.value for f in Framework])
        return self

    # ----------------------------------------------------------------------------------------------
    # Derived values and derived requests
    # ----------------------------------------------------------------------------------------------

    @property
    def deadline_days(self) -> float | None:
        """The deadline the plan must meet: `days`, else 90 days unless `gpus` fixes the cluster (no deadline)."""
        if self.days is None and self.gpus is None:
            return DEFAULT_DAYS
        return self.days

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> PlanRequest:
        """A derived request (a sweep point, a sensitivity re-plan), validated again: pydantic's model_copy would
        take the update unchecked."""
        if not update:
            return super().model_copy(deep=deep)
        return type(self)(**{**{name: getattr(self, name) for name in type(self).model_fields}, **update})

    # ----------------------------------------------------------------------------------------------
    # As a file: JSON and TOML, round-tripping
    # ----------------------------------------------------------------------------------------------

    def to_json(self) -> str:
        """The request as JSON (fields left at their defaults are left out)."""
        return self.model_dump_json(indent=2, exclude_defaults=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> PlanRequest:
        import json

        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidInput(f"a plan request is not valid JSON: {exc}") from None
        return cls(**_table(data))

    def to_toml(self) -> str:
        """The request as TOML: one `key = value` line per field set (documents as tables after them); TOML has no
        null, so fields at None are left out: their default is None; time_limit_s = None (no limit, default 60 s)
        cannot be written and is an InvalidInput."""
        unwritable = [k for k, f in type(self).model_fields.items() if getattr(self, k) is None
                      and f.default is not None]
        if unwritable:
            raise InvalidInput(f"TOML has no null: {', '.join(unwritable)} = None cannot be written (use to_json)")
        data = self.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
        scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
        tables = {k: v for k, v in data.items() if isinstance(v, dict)}
        lines = [f"{k} = {_toml_value(v)}" for k, v in scalars.items()]
        for name, table in tables.items():
            lines.extend(_toml_table([name], table))
        return "\n".join(lines) + "\n"

    @classmethod
    def from_toml(cls, text: str) -> PlanRequest:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidInput(f"a plan request is not valid TOML: {exc}") from None
        return cls(**data)


def _table(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidInput(f"a plan request is a table of fields, got {type(data).__name__}")
    return data


def _toml_value(v: Any) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if math.isnan(v):
            return "nan"
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string (same escapes)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise InvalidInput(f"cannot write {type(v).__name__} {v!r} to TOML")


def _toml_key(k: str) -> str:
    import json

    return k if k.replace("_", "").replace("-", "").isalnum() and k.isascii() else json.dumps(k)


def _toml_table(path: list[str], table: dict[str, Any]) -> list[str]:
    """A [table] (None values left out), its sub-tables after it; lists of tables inline."""
    lines = ["", f"[{'.'.join(_toml_key(p) for p in path)}]"]
    subs = []
    for k, v in table.items():
        if v is None:
            continue
        if isinstance(v, dict):
            subs.append((k, v))
        else:
            lines.append(f"{_toml_key(k)} = {_toml_value(_drop_none(v))}")
    for k, v in subs:
        lines.extend(_toml_table([*path, k], v))
    return lines


def _drop_none(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _drop_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_none(x) for x in v]
    return v


__all__ = ["DEFAULT_DAYS", "MAX_WORKERS", "PlanRequest", "check_headroom", "check_positive", "check_type",
           "check_workers"]
