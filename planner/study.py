"""Studies: many plan requests from one file, planned on local worker processes or on a Ray cluster, journalled as
they finish (`planner study FILE.toml`, docs/study.md; issue 27 parts 3 and 4).

The steps, each its own function:

1. `load_study` reads the file into a StudyFile document (planner.schema.study).
2. `expand` turns it into scenarios: one PlanRequest each, in a fixed order (a grid's cartesian product, first
   field slowest; a sample's points in draw order), each named by `scenario_id`, a hash of its canonical JSON.
   `check_inputs` then reads every distinct hardware, profile, failure model and --set combination once, here, so a
   typo is one error line before any plan starts.
3. `run` plans them in batches (`solve_batch`, the only code that runs in a worker) on `jobs` local processes or on
   Ray, calling back as each batch finishes; the caller journals the rows (`journal_line`, fsynced) before it waits
   for the next batch, so a Ctrl-C, a SIGTERM, a kill or a crash loses no finished scenario, and `read_journal`
   gives them back on --resume.

A row is flat and holds no wall time: scenario index, id, the varied inputs (`in_<field>`), then StudyOutcome's
columns. Every scenario is planned with one CP-SAT worker under its fixed seed, so a row is the same bytes whichever
engine, worker count or batch planned it (as long as no search hits its time limit).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.errors import MAX_TOML_BYTES, Infeasible, InvalidInput, parse_toml, read_text_file, validation_message
from planner.schema.request import PlanRequest
from planner.schema.study import (
    ALIASES,
    FORCED,
    MAX_SCENARIOS,
    OUTCOME_COLUMNS,
    STUDY_FIELDS,
    JournalHeader,
    SampleRange,
    StudyFile,
    StudyOutcome,
)
from planner.workers import MAX_JOBS as MAX_JOBS  # the engine, re-exported from its first home
from planner.workers import _import_ray as _import_ray
from planner.workers import _probe as _probe
from planner.workers import check_jobs as check_jobs
from planner.workers import check_ray as check_ray
from planner.workers import default_batch as default_batch
from planner.workers import execute as execute
from planner.workers import map_tasks as map_tasks

Row = dict[str, Any]
"""One result row: scenario, id, in_<field>..., then OUTCOME_COLUMNS."""

BatchDone = Callable[[list[tuple[str, Row]]], None]
"""Called in this process with (scenario id, outcome) of every scenario of a batch that finished."""


# --------------------------------------------------------------------------------------------------
# 1. The file
# --------------------------------------------------------------------------------------------------


def load_study(path: str | Path) -> StudyFile:
    """A study file, validated: every problem is one InvalidInput line naming the file."""
    text = read_text_file(path, "study file", MAX_TOML_BYTES)
    return parse_study(parse_toml(text, f"study file {path}"), str(path))


def parse_study(data: Mapping[str, Any], origin: str = "study") -> StudyFile:
    try:
        return StudyFile.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{origin}: {validation_message(exc, strip_kind=True)}") from None
    except ValueError as exc:  # a validator's own message
        raise InvalidInput(f"{origin}: {exc}") from None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def study_hash(study: StudyFile) -> str:
    """SHA-256 of the study's canonical JSON: a comment or the key order does not change it, any value does."""
    return hashlib.sha256(_canonical(study.model_dump(mode="json")).encode()).hexdigest()


def sweep_study(gpus: Sequence[str], compute_flop: Sequence[float], name: str = "sweep",
                **base: Any) -> StudyFile:
    """A compute sweep (`planner sweep`) as the study it is: the grid gpu x compute_flop, every other request field
    in `[base]` (e.g. `sweep_study(["h100"], planner.sweep.compute_grid(1e24, 1e26, 5), days=90)`)."""
    return parse_study({"study": {"name": name}, "base": base,
                        "grid": {"gpu": list(gpus), "compute_flop": [float(c) for c in compute_flop]}}, "sweep")


# --------------------------------------------------------------------------------------------------
# 2. Scenarios
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One request of a study: its place in the study's order, its id and the values of the varied fields."""

    index: int
    id: str
    request: PlanRequest
    inputs: tuple[tuple[str, Any], ...]
    """(column, value) of each varied field: in_gpu, in_compute_flop, in_set, ..."""
    confidence: float | None = None
    """P: plan the cluster that meets the deadline with this probability (planner.confidence); None: the point
    estimate."""


def scenario_id(request: PlanRequest, confidence: float | None = None) -> str:
    """16 hex digits of the SHA-256 of the request's canonical JSON (fields at their defaults left out, so a new
    request field with a default keeps old ids), with `confidence` beside its fields when given."""
    doc = request.model_dump(mode="json", exclude_defaults=True)
    if confidence is not None:
        doc["confidence"] = confidence
    return hashlib.sha256(_canonical(doc).encode()).hexdigest()[:16]


def _cell(value: Any) -> Any:
    """A varied value as a row cell: scalars as they are, lists and tables as compact JSON text."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return _canonical(value)


def scenario_count(study: StudyFile) -> int:
    if study.sample is not None:
        return study.sample.n
    return math.prod(len(v) for v in study.grid.values())


def _points(study: StudyFile) -> Iterator[dict[str, Any]]:
    """The varied values of each scenario, in the study's order (study-file names)."""
    if study.sample is None:
        names = list(study.grid)
        for values in itertools.product(*(study.grid[n] for n in names)):
            yield dict(zip(names, values))
        return
    names = list(study.sample.axes)
    u = scrambled_halton(study.sample.n, len(names), study.study.seed)
    for k in range(study.sample.n):
        yield {name: _draw(study.sample.axes[name], float(u[k][j])) for j, name in enumerate(names)}


def _draw(spec: SampleRange | list[Any], u: float) -> Any:
    """The value of one sampled field at u in [0, 1): a list's element, or a point of the range rounded to 6
    significant figures (so that rows print cleanly and ids do not depend on the last bit of a power)."""
    if isinstance(spec, list):
        return spec[min(int(u * len(spec)), len(spec) - 1)]
    if spec.scale == "log":
        lo, hi = math.log10(spec.min), math.log10(spec.max)
        x = 10 ** (lo + (hi - lo) * u)
    else:
        x = spec.min + (spec.max - spec.min) * u
    x = min(max(float(f"{x:.6g}"), spec.min), spec.max)
    return int(round(x)) if spec.whole else x


_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)


def scrambled_halton(n: int, dims: int, seed: int) -> list[list[float]]:
    """n points of the Halton sequence in [0, 1)^dims (radical inverses in the first primes), each coordinate
    shifted by a seeded random offset modulo 1 (a Cranley-Patterson rotation): evenly spread, reproducible."""
    if dims > len(_PRIMES):
        raise InvalidInput(f"a sample varies at most {len(_PRIMES)} fields, got {dims}")
    import numpy as np

    shift = np.random.default_rng(seed).random(dims)
    out = []
    for k in range(1, n + 1):
        row = []
        for j in range(dims):
            base, f, r, i = _PRIMES[j], 1.0, 0.0, k
            while i:
                f /= base
                r += f * (i % base)
                i //= base
            row.append((r + float(shift[j])) % 1.0)
        out.append(row)
    return out


def expand(study: StudyFile) -> list[Scenario]:
    """Every scenario of the study, validated as a PlanRequest, in the study's order. A grid listing a value twice
    is an error; a sample drawing a scenario twice keeps it once."""
    count = scenario_count(study)
    if count > MAX_SCENARIOS:
        raise InvalidInput(f"the study has {count:,} scenarios; at most {MAX_SCENARIOS:,} run in one study (split it)")
    for name, values in study.grid.items():
        seen = [_canonical(v) for v in values]
        if len(set(seen)) != len(seen):
            dup = next(v for v in seen if seen.count(v) > 1)
            raise InvalidInput(f"grid.{name} lists {dup} twice")
    base = {ALIASES.get(k, k): v for k, v in study.base.items()}
    out: list[Scenario] = []
    ids: set[str] = set()
    for point in _points(study):
        fields = {**base, **FORCED}
        for name, value in point.items():
            field = ALIASES.get(name, name)
            if field == "overrides":
                if not isinstance(value, list):
                    raise InvalidInput(f"{study.study.mode}.set: each value is a list of 'FIELD=VALUE' strings, "
                                       f"got {_canonical(value)[:60]}")
                value = [*base.get("overrides", []), *value]
            fields[field] = value
        extra = {k: fields.pop(k) for k in STUDY_FIELDS if k in fields}
        try:
            request = PlanRequest(**fields)
            confidence = extra.get("confidence")
            if confidence is not None:
                from planner.confidence import DEFAULT_SAMPLES, DEFAULT_SEED, check_request

                check_request(confidence, DEFAULT_SAMPLES, DEFAULT_SEED, request.gpus)
                confidence = float(confidence)
        except InvalidInput as exc:
            where = ", ".join(f"{k}={_canonical(v)[:40]}" for k, v in point.items())
            raise InvalidInput(f"scenario {len(out) + 1} ({where or 'base'}): {exc}") from None
        sid = scenario_id(request, confidence)
        if sid in ids:
            if study.sample is None:  # the figures index a grid's scenarios by position: no gap allowed
                raise InvalidInput(f"grid: scenario {len(out) + 1} is the same request as an earlier one (a value "
                                   "listed twice in another spelling, e.g. 90 and 90.0)")
            continue
        ids.add(sid)
        out.append(Scenario(len(out), sid, request, tuple((f"in_{k}", _cell(v)) for k, v in point.items()),
                            confidence))
    return out


def check_inputs(scenarios: Sequence[Scenario]) -> None:
    """Read each distinct hardware, profile, failure model and --set list of the scenarios once: an unknown name,
    a bad file or a bad --set is one InvalidInput now, not an error row per scenario later."""
    from planner import api
    from planner.overrides import parse_overrides

    seen: set[str] = set()
    for sc in scenarios:
        r = sc.request
        key = _canonical([r.model_dump(mode="json", include={"gpu", "profile", "failures", "overrides"})])
        if key in seen:
            continue
        seen.add(key)
        try:
            sets = parse_overrides(r.overrides)
            api.resolve(r.gpu, r.profile, sets)
            api.failure_model(r.failures, sets)
        except InvalidInput as exc:
            where = ", ".join(f"{c.removeprefix('in_')}={str(v)[:40]}" for c, v in sc.inputs)
            raise InvalidInput(f"scenario {sc.index + 1} ({where or 'base'}): {exc}") from None


# --------------------------------------------------------------------------------------------------
# 3. Planning: one batch in a worker, batches on an engine
# --------------------------------------------------------------------------------------------------


def outcome_of(plan: Any) -> StudyOutcome:
    """A Plan as the flat outcome columns (no wall times)."""
    from planner.parallel.dimensions import DEGREES, OPTIONS

    lay = plan.layout
    layout = None if lay is None else " ".join(
        [f"{d}={getattr(lay, d)}" for d in (*DEGREES, *OPTIONS)] + [f"schedule={lay.schedule}"])
    explanation = (plan.explanation or "").strip().splitlines()
    conf = plan.confidence
    sure = {} if conf is None else {"point_gpus": conf.point_gpus, "met": conf.met, "days_p10": conf.days_p10,
                                    "days_p50": conf.days_p50, "days_p90": conf.days_p90}
    return StudyOutcome(
        status=plan.status, hardware=plan.hardware, profile=plan.profile, gpus=plan.gpus, nodes=plan.nodes,
        mfu=plan.mfu, training_days=plan.training_days, wall_clock_days=plan.wall_clock_days,
        goodput=None if plan.goodput is None else plan.goodput.goodput, gpu_hours=plan.gpu_hours,
        cost_usd=plan.cost_usd, compute_cost_usd=plan.compute_cost_usd,
        facility_power_MW=plan.facility_power_MW, energy_MWh=plan.energy_MWh, step_time_s=plan.step_time_s,
        bottleneck=plan.bottleneck,
        params=plan.workload.params, tokens=plan.workload.tokens, layout=layout,
        solver_status=plan.solver.status, gap=plan.solver.gap,
        explanation=explanation[0][:300] if explanation else None, **sure,
    )


def solve_batch(batch: Sequence[tuple[str, str, float | None]]) -> list[tuple[str, Row]]:
    """Plan each (id, request JSON, confidence) of a batch, in this process: (id, outcome columns). The only function
    that runs in a worker (a local process or a Ray task); the hardware and profile files it reads are parsed once
    per process (their loaders cache them). A scenario that is bad input gives an 'error' row, not a failed batch."""
    from planner import api

    out = []
    for sid, text, confidence in batch:
        try:
            request = PlanRequest.from_json(text)
            plan = api.plan(request)
            if confidence is not None:
                from planner.confidence import with_confidence

                plan = with_confidence(plan, request, confidence, jobs=1)  # one process: this worker
        except Infeasible as exc:
            if exc.plan is None:
                out.append((sid, StudyOutcome(status="infeasible", explanation=str(exc)[:300]).model_dump()))
                continue
            plan = exc.plan
            if not plan.explanation and (exc.explanation or str(exc)):
                plan = plan.model_copy(update={"explanation": exc.explanation or str(exc)})
        except InvalidInput as exc:
            out.append((sid, StudyOutcome(status="error", error=str(exc).splitlines()[0][:300]).model_dump()))
            continue
        out.append((sid, outcome_of(plan).model_dump()))
    return out


def batches(scenarios: Sequence[Scenario], size: int) -> list[list[tuple[str, str, float | None]]]:
    """The scenarios as (id, request JSON, confidence) in batches of `size`, in the study's order."""
    items = [(sc.id, sc.request.model_dump_json(exclude_defaults=True), sc.confidence) for sc in scenarios]
    return [items[k:k + size] for k in range(0, len(items), size)]


def run(scenarios: Sequence[Scenario], done: BatchDone, jobs: int = 2, ray: str | None = None,
        batch: int | None = None) -> None:
    """Plan every scenario: on `jobs` local worker processes (1: here, in order), or on the Ray cluster at `ray`
    ('auto': the one this machine belongs to; 'HOST:PORT' or 'ray://HOST:PORT'; 'local': a private one of `jobs`
    CPUs on this machine). `done` is called here as each batch finishes, in whatever order they finish."""
    items = [(sc.id, sc.request.model_dump_json(exclude_defaults=True), sc.confidence) for sc in scenarios]
    execute(items, solve_batch, done, jobs=jobs, ray=ray, batch=batch)


# --------------------------------------------------------------------------------------------------
# Rows and the journal
# --------------------------------------------------------------------------------------------------


def row(scenario: Scenario, outcome: Mapping[str, Any]) -> Row:
    """The full result row of a scenario: scenario, id, in_<field>..., then the outcome columns."""
    return {"scenario": scenario.index, "id": scenario.id, **dict(scenario.inputs),
            **{c: outcome.get(c) for c in OUTCOME_COLUMNS}}


def columns(scenarios: Sequence[Scenario]) -> list[str]:
    first = scenarios[0].inputs if scenarios else ()
    return ["scenario", "id", *(c for c, _ in first), *OUTCOME_COLUMNS]


def header(study: StudyFile, scenarios: Sequence[Scenario]) -> JournalHeader:
    return JournalHeader(study=study.study.name, study_hash=study_hash(study), scenarios=len(scenarios))


def journal_line(sid: str, outcome: Mapping[str, Any], plan: Mapping[str, Any] | None = None) -> str:
    """One finished scenario: its id and outcome (and the whole plan document, when given: a sweep's), one JSON line
    (planner.schema.study.JournalRecord)."""
    rec: dict[str, Any] = {"id": sid, "outcome": dict(outcome)}
    if plan is not None:
        rec["plan"] = dict(plan)
    return json.dumps(rec, separators=(",", ":")) + "\n"


def read_journal(path: Path, head: JournalHeader, scenarios: Sequence[Scenario]) -> dict[str, Row]:
    """The finished scenarios a journal holds, by id (outcome columns). Its header must name this study (the same
    hash): a journal of another study, or of this one edited, is an InvalidInput (resuming would mix them). A line
    cut short by a kill, an id the study does not have or an outcome that does not validate is skipped (that
    scenario is planned again): the journal is a file anyone with write access to --out could edit."""
    text = read_text_file(path, "study journal", 2**30)
    lines = text.splitlines()
    if not lines:
        return {}
    try:
        got = JournalHeader.model_validate_json(lines[0])
    except ValueError:
        raise InvalidInput(f"--resume: {path} does not start with a study journal header; give another --out") from None
    if got.study_hash != head.study_hash:
        raise InvalidInput(f"--resume: {path} is the journal of another study ('{got.study}', or this file since "
                           "edited); give another --out, or drop --resume and remove the journal")
    wanted = {sc.id for sc in scenarios}
    out: dict[str, Row] = {}
    for line in lines[1:]:
        try:
            rec = json.loads(line)
            sid = rec["id"]
            outcome = StudyOutcome.model_validate(rec["outcome"]).model_dump()
        except (ValueError, KeyError, TypeError, RecursionError):
            continue
        if isinstance(sid, str) and sid in wanted:
            out[sid] = outcome
    return out


# --------------------------------------------------------------------------------------------------
# What the figures show
# --------------------------------------------------------------------------------------------------


def _middle_rows(study: StudyFile, rows: Sequence[Row], keep: Sequence[str]) -> list[Row]:
    """A grid's rows with every varied field except `keep` at its middle value (index (len - 1) // 2: the first
    of two, the second of three)."""
    names = list(study.grid)
    sizes = [len(study.grid[n]) for n in names]
    out = []
    for r in rows:
        k, idx = r["scenario"], []
        for size in reversed(sizes):  # the first field varies slowest
            idx.append(k % size)
            k //= size
        idx.reverse()
        if all(n in keep or i == (s - 1) // 2 for n, i, s in zip(names, idx, sizes)):
            out.append(r)
    return out


def curves(study: StudyFile, rows: Sequence[Row]) -> dict[str, list[Row]]:
    """Rows with a plan, by hardware, compute ascending: for a grid, only those with the fields other than gpu and
    compute at their middle value (one line per accelerator); for a sample, all of them (points)."""
    if study.sample is None:
        rows = _middle_rows(study, rows, ("gpu", "compute_flop"))
    out: dict[str, list[Row]] = {}
    for r in rows:
        if r.get("gpus") is not None and r.get("hardware") and isinstance(r.get("in_compute_flop"), (int, float)):
            out.setdefault(str(r["hardware"]), []).append(r)
    for hw_rows in out.values():
        hw_rows.sort(key=lambda r: float(r["in_compute_flop"]))
    return out


@dataclass(frozen=True)
class TornadoBar:
    field: str
    low: float
    high: float
    low_label: str
    high_label: str


def tornado_families(study: StudyFile, rows: Sequence[Row], outcome: str = "gpus"
                     ) -> list[tuple[str, float | None, list[TornadoBar]]]:
    """(family label, outcome at the middle point, bars) per family of a grid: the scenarios sharing the values of
    `study.families` (default: gpu, when varied). Within a family each other varied field moves over its values
    with the rest at their middle value; its bar spans the smallest to largest outcome, widest bar first. Empty for
    a sample (no field moves alone there)."""
    if study.sample is not None:
        return []
    names = list(study.grid)
    families = study.study.families if study.study.families is not None else (["gpu"] if "gpu" in names else [])
    others = [n for n in names if n not in families and len(study.grid[n]) > 1]
    if not others:
        return []
    out = []
    for values in itertools.product(*(study.grid[f] for f in families)):
        label = ", ".join(f"{f}={_cell(v)}" for f, v in zip(families, values)) or study.study.name
        mine = [r for r in rows if all(r.get(f"in_{f}") == _cell(v) for f, v in zip(families, values))]
        centre = _middle_rows(study, mine, families)
        mid = centre[0].get(outcome) if centre else None
        bars = []
        for name in others:
            line = [r for r in _middle_rows(study, mine, (*families, name)) if isinstance(r.get(outcome), (int, float))]
            if not line:
                continue
            lo = min(line, key=lambda r: r[outcome])
            hi = max(reversed(line), key=lambda r: r[outcome])  # on a tie the ends are the first and last values
            bars.append(TornadoBar(name, float(lo[outcome]), float(hi[outcome]), str(lo[f"in_{name}"]),
                                   str(hi[f"in_{name}"])))
        bars.sort(key=lambda b: -(b.high / b.low if b.low > 0 else math.inf))
        out.append((label, None if mid is None else float(mid), bars))
    return out


__all__ = ["BatchDone", "Row", "Scenario", "batches", "check_inputs", "columns", "expand", "header",
           "journal_line", "load_study",
           "execute", "map_tasks", "outcome_of", "parse_study", "read_journal", "row", "run", "scenario_count",
           "scenario_id", "scrambled_halton", "solve_batch", "study_hash", "sweep_study", "curves",
           "tornado_families", "TornadoBar", "check_ray"]
