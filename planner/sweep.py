"""Sweep a compute range: one full `planner.api.plan` per (hardware, compute) point (paper §6.2-6.3).

The points are independent: they are the scenarios of a study over the grid (planner.study.sweep_study), solved on
the study engine (planner.workers.execute: `jobs` local worker processes, or a Ray cluster with `ray`; each CP-SAT
search single-threaded); the output order is deterministic (hardware in the order given, compute
ascending) whatever order the points finish in. A point with no feasible layout is recorded as the infeasible
Plan that `planner.errors.Infeasible` carries, with its explanation; the sweep itself does not fail.

Per hardware the result summarises the two numbers the paper reads off Figs. 6, 8 and 9:

- `end_of_linear_scaling_flop` (Tables 3 and 4): the compute at which MFU falls below 80 % of the hardware's
  ceiling, the MFU a single GPU sustains: the share of peak the cost model grants a large GEMM
  (planner.cost.terms.gemm_peak_fraction: the sustained clock under the paper's roofline, since MFU is measured
  against the max-clock peak; the measured large-GEMM fraction under the realistic profile).
  Rounded model shapes make MFU jitter from point to point, so the crossing is read off the
  trend: the least-squares non-increasing fit to the feasible points (`non_increasing_fit`), interpolated
  linearly in log10(compute) between the two grid points around it. Where the raw points dip below earlier,
  that is reported as `first_dip_flop`.
- `last_feasible_flop`: the largest compute of the grid with a feasible plan (the latency wall, §5.2, when the
  grid extends past it).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from planner import api
from planner.cost.terms import gemm_peak_fraction
from planner.economics import fmt_g3, fmt_pct
from planner.errors import Infeasible, InvalidInput
from planner.schema import Hardware, Plan, SolverReport
from planner.schema.request import PlanRequest
from planner.schema.sweep import HardwareSummary, SweepResult
from planner.workers import worker_pool  # re-exported (its old home)
from planner.workload.scaling import check_compute

LINEAR_SCALING_FRACTION = 0.8
"""Linear scaling ends where MFU < 0.8 x the single-GPU ceiling (paper Tables 3 and 4)."""

THREE_MONTHS_DAYS = 365.25 / 4
"""The paper's three-month runs."""

ProgressCallback = Callable[[int, int, Plan], None]
"""progress(done, total, plan_just_finished), called in the calling process as points complete."""


# --------------------------------------------------------------------------------------------------
# The grid and the crossing
# --------------------------------------------------------------------------------------------------


MAX_POINTS = 1000
"""Most compute points per hardware in one sweep (each is a full plan: 1000 points take tens of minutes)."""


def compute_grid(compute_from: float, compute_to: float, points: int) -> list[float]:
    """`points` log-spaced values from compute_from to compute_to inclusive (rounded to 6 significant figures so
    the grid prints and serialises cleanly)."""
    for name, v in (("--from", compute_from), ("--to", compute_to)):
        check_compute(v, name)
    if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= MAX_POINTS:
        raise InvalidInput(f"--points must be a whole number from 1 to {MAX_POINTS}, got {points!r}")
    if compute_to < compute_from:
        raise InvalidInput(f"--to ({fmt_g3(compute_to)}) must not be below --from ({fmt_g3(compute_from)})")
    if points == 1:
        if compute_to != compute_from:
            raise InvalidInput(f"--points 1 gives one point, but --from ({compute_from:g}) and --to ({compute_to:g}) "
                               "differ; give --points 2 or more, or equal --from and --to")
        return [float(compute_from)]
    lo, hi = math.log10(compute_from), math.log10(compute_to)
    return [float(f"{10 ** (lo + (hi - lo) * k / (points - 1)):.6g}") for k in range(points)]


def crossing_below(xs: Sequence[float], ys: Sequence[float], threshold: float) -> float | None:
    """First x at which y drops below `threshold`, interpolating linearly in log10(x) between neighbours.

    xs ascending, positive. If the first point is already below, that x is returned (the crossing is at or before
    the start of the data); None if y never drops below.
    """
    for k, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if y < threshold:
            if k == 0:
                return float(x)
            x0, y0 = xs[k - 1], ys[k - 1]
            frac = (y0 - threshold) / (y0 - y) if y0 != y else 1.0
            return float(10 ** (math.log10(x0) + frac * (math.log10(x) - math.log10(x0))))
    return None


def non_increasing_fit(ys: Sequence[float]) -> list[float]:
    """The least-squares non-increasing fit to ys (isotonic regression, pool-adjacent-violators).

    Rounding each grid point's model to hardware-friendly integers (docs/model.md §1) makes MFU jitter from point to
    point by a few points of utilisation; the fit keeps the trend and averages a dip with the recovery that follows it.
    """
    blocks: list[list[float]] = []  # [mean, count]
    for y in ys:
        blocks.append([float(y), 1.0])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            m2, n2 = blocks.pop()
            m1, n1 = blocks.pop()
            blocks.append([(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2])
    out: list[float] = []
    for mean, count in blocks:
        out += [mean] * int(count)
    return out


def _unproven(p: Plan) -> bool:
    if p.status == "feasible":
        return True
    return p.status == "unknown" or (p.status == "infeasible" and p.solver.status == "unknown")


def summarise(hw: Hardware, grid: Sequence[float], plans: Sequence[Plan]) -> HardwareSummary:
    ceiling = gemm_peak_fraction(hw)
    threshold = LINEAR_SCALING_FRACTION * ceiling
    feas: list[tuple[float, Plan]] = []
    ys: list[float] = []  # MFU of each feasible point
    for c, p in zip(grid, plans, strict=True):
        if p.status != "infeasible" and p.mfu is not None:
            feas.append((c, p))
            ys.append(p.mfu)
    notes: list[str] = []
    xs = [c for c, _ in feas]
    end = crossing_below(xs, non_increasing_fit(ys), threshold)
    first = crossing_below(xs, ys, threshold)
    # the raw points' first dip, when it is materially (> 1.5x) earlier than the trend's crossing
    dip = first if first is not None and (end is None or first < end / 1.5) else None
    if dip is not None:
        notes.append(f"the MFU points first dip below {fmt_pct(threshold)} near {fmt_g3(dip)} FLOP, but the trend (the "
                     "non-increasing fit) crosses "
                     + (f"at {fmt_g3(end)} FLOP" if end is not None else "nowhere in the feasible grid"))
    if feas and end is not None and end == feas[0][0]:
        notes.append(f"MFU is already below {fmt_pct(threshold)} at the first feasible point {fmt_g3(end)} FLOP: "
                     "linear scaling ends at or before it")
    last = feas[-1][0] if feas else None
    if not feas:
        notes.append("no point of the grid has a plan; each point's explanation says why (e.g. past the latency "
                     "wall: lower --from/--to or raise --days)")
    if end is None and feas:
        notes.append(f"MFU stays >= {fmt_pct(threshold)} up to the last feasible point {fmt_g3(feas[-1][0])} FLOP: "
                     "linear scaling ends at the feasibility wall or beyond the grid")
    unproven = sum(_unproven(p) for p in plans)
    if unproven:
        notes.append(f"{unproven} point(s) hit the solver time limit (not proven optimal/infeasible)")
    # an unproven infeasible point below the last feasible one makes a gap in the curve; say so
    gaps = [c for c, p in zip(grid, plans, strict=True)
            if p.status in ("infeasible", "unknown") and last is not None and c < last]
    if gaps:
        notes.append("no plan found below the last feasible point at " + ", ".join(fmt_g3(c) for c in gaps)
                     + " FLOP (interpolated over)")
    return HardwareSummary(
        hardware=hw.name, ceiling_mfu=ceiling, threshold_mfu=threshold, end_of_linear_scaling_flop=end,
        last_feasible_flop=last, first_dip_flop=dip, feasible_points=len(feas),
        infeasible_points=len(plans) - len(feas),
        unproven_points=unproven, notes=notes,
    )


# --------------------------------------------------------------------------------------------------
# One point (runs in a worker process)
# --------------------------------------------------------------------------------------------------


def _infeasible_doc(hw: Hardware, exc: Exception, compute: float, days: float) -> Plan:
    """Fallback when an Infeasible carries no plan (should not happen): a minimal infeasible Plan."""
    from planner.workload import infer_workload

    return Plan(status="infeasible", hardware=hw.name, gpu=hw.gpu.name, peak_flops=hw.gpu.peak_flops,
                deadline_days=days, gpus=None, nodes=None, gpu_hours=None, mfu=None, training_days=None,
                step_time_s=None, bottleneck=None, workload=api.workload_report(infer_workload(compute)),
                layout=None, breakdown=None, memory=None,
                solver=SolverReport(name="cpsat", status="unknown", wall_s=0.0, space_size=0, evaluated=0, gap=None),
                explanation=str(exc))


def solve_point(request: PlanRequest) -> Plan:
    """One full plan of a sweep point; Infeasible becomes the infeasible Plan it carries."""
    try:
        return api.plan(request)
    except Infeasible as exc:
        doc = exc.plan
        if isinstance(doc, Plan):
            if not doc.explanation:
                doc = doc.model_copy(update={"explanation": exc.explanation or str(exc)})
            return doc
        hw = api.resolve_hardware(request.gpu) if isinstance(request.gpu, str) else request.gpu
        assert request.compute_flop is not None and request.days is not None  # a sweep point: compute and deadline
        return _infeasible_doc(hw, exc, request.compute_flop, request.days)


def plan_all(requests: Sequence[PlanRequest], jobs: int = 2,
             finished: Callable[[int, Plan], None] | None = None, ray: str | None = None) -> list[Plan]:
    """Every request planned on the study engine (planner.workers.execute): `jobs` at a time in local worker processes
    (one process: in order, here), or on the Ray cluster at `ray` (as `planner study --ray`); an infeasible request
    gives its infeasible Plan (`solve_point`). `finished(k, plan)` is called in this process as request k finishes,
    in whatever order they finish; the list returned is in the order of `requests`."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InvalidInput(f"--jobs must be a whole number >= 1, got {jobs!r}")
    from planner.workers import map_tasks

    return map_tasks(solve_point, requests, jobs=jobs, ray=ray, batch=1, finished=finished)


# --------------------------------------------------------------------------------------------------
# The sweep
# --------------------------------------------------------------------------------------------------


def sweep(
    gpus: Sequence[str | Hardware],
    compute_from: float,
    compute_to: float,
    points: int,
    days: float = 90.0,
    sparse: bool = False,
    batch_scaling: str = "paper",
    schedule: str = "auto",
    time_limit_s: float | None = 30.0,
    workers: int = 1,
    jobs: int = 2,
    progress: ProgressCallback | None = None,
    solver: str = "cpsat",
    dp_overlap: bool | None = False,
    price_per_gpu_hour: float | None = None,
    finished: Mapping[tuple[str, float], Plan] | None = None,
    budget: str = "exact",
    profile: str | None = None,
    goodput: bool | None = None,
    overrides: Sequence[str] = (),
    ray: str | None = None,
) -> SweepResult:
    """Plan every (hardware, compute) point of a log-spaced grid; see the module docstring.

    `workers` is CP-SAT's thread count per plan, `jobs` the number of plans solved at once (processes). Use
    days=365.25/4 (`THREE_MONTHS_DAYS`) for the paper's three-month runs. `finished` holds plans of earlier runs
    by (hardware name, compute) (`read_journal`): those points are not solved again. The points are the scenarios
    of the study `sweep_study` makes of the grid, planned on the study engine: local processes, or the Ray cluster
    at `ray` ('auto', 'local', 'HOST:PORT'; planner.workers.execute).
    """
    if isinstance(gpus, (str, Hardware)):
        gpus = [gpus]
    if not gpus:
        raise InvalidInput("give at least one --gpu")
    from planner.overrides import parse_overrides

    sets = parse_overrides(overrides)
    if (profile is not None or sets) and not all(isinstance(g, str) for g in gpus):
        raise InvalidInput("a sweep with a profile or --set needs the hardware by name or file")
    hws = [api.resolve(g, profile, sets) for g in gpus]
    sources = {h.name: g for h, g in zip(hws, gpus)}  # what each worker re-reads (with the overrides)
    names = [h.name for h in hws]
    if len(set(names)) != len(names):
        raise InvalidInput(f"hardware listed twice: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
    grid = compute_grid(compute_from, compute_to, points)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InvalidInput(f"--jobs must be a whole number >= 1, got {jobs!r}")
    if dp_overlap is None and hws:  # the profile's default, as `plan`
        dp_overlap = hws[0].profile.dp_overlap
    # One request, validated once in this process (a bad value is one error, not N); each point derives its own.
    base = PlanRequest(compute_flop=grid[0], gpu=gpus[0], days=days, sparse=sparse, batch_scaling=batch_scaling,
                       budget=budget, schedule=schedule, solver=solver, time_limit_s=time_limit_s, workers=workers,
                       dp_overlap=dp_overlap, price_per_gpu_hour=price_per_gpu_hour, profile=profile,
                       goodput=goodput, overrides=overrides,
                       why_smaller=False)  # a sweep's points want the answer, not one more search each
    tasks = [(hw, c) for hw in hws for c in grid]
    results: list[Plan | None] = [None] * len(tasks)

    def point(k: int) -> PlanRequest:
        """Task k's request: on the hardware's name or file when a profile or overrides apply to its document."""
        hw, c = tasks[k]
        return base.model_copy(update={"compute_flop": c, "gpu": sources[hw.name] if (profile is not None or sets)
                                       else hw})
    done = 0
    for k, (hw, c) in enumerate(tasks):
        earlier = (finished or {}).get((hw.name, c))
        if earlier is not None:
            results[k] = earlier
            done += 1
    todo = [k for k in range(len(tasks)) if results[k] is None]

    def finished_one(j: int, plan: Plan) -> None:
        nonlocal done
        results[todo[j]] = plan
        done += 1
        if progress:
            progress(done, len(tasks), plan)

    plan_all([point(k) for k in todo], jobs, finished_one, ray=ray)

    plans: list[Plan] = [p for p in results if p is not None]
    n = len(grid)
    summaries = [summarise(hw, grid, plans[i * n:(i + 1) * n]) for i, hw in enumerate(hws)]
    return SweepResult(
        hardware=names, compute_flop=grid, days=float(days), sparse=sparse, batch_scaling=batch_scaling, budget=budget,
        profile=hws[0].profile.name if hws else "paper", overrides=list(overrides),
        schedule=schedule, dp_overlap=bool(dp_overlap), price_per_gpu_hour=price_per_gpu_hour,
        time_limit_s=time_limit_s, plans=plans, summaries=summaries,
        end_of_linear_scaling_flop={s.hardware: s.end_of_linear_scaling_flop for s in summaries},
        last_feasible_flop={s.hardware: s.last_feasible_flop for s in summaries},
    )


SWEEP_JOURNAL = "sweep"
"""The study name a sweep's journal header carries."""


def _settings_json(settings: Mapping[str, object]) -> dict:
    return json.loads(json.dumps(dict(settings)))


def point_id(hardware: str, compute_flop: float, settings: Mapping[str, object]) -> str:
    """The scenario id of a sweep point in its journal: 16 hex digits of the SHA-256 of the canonical JSON of its
    hardware, compute and the sweep's settings."""
    from planner.study import _canonical

    doc = {"hardware": hardware, "compute_flop": float(compute_flop), "settings": _settings_json(settings)}
    return hashlib.sha256(_canonical(doc).encode()).hexdigest()[:16]


def journal_header(settings: Mapping[str, object], points: int) -> str:
    """The first line of a sweep's journal: the study journal's header (planner.schema.study.JournalHeader), hashing
    the sweep's settings and carrying them, so that a --resume with others is refused naming them."""
    from planner.schema.study import JournalHeader
    from planner.study import _canonical

    wanted = _settings_json(settings)
    head = JournalHeader(study=SWEEP_JOURNAL, study_hash=hashlib.sha256(_canonical(wanted).encode()).hexdigest(),
                         scenarios=points, settings=wanted)
    return head.model_dump_json() + "\n"


def journal_line(plan: Plan, settings: Mapping[str, object]) -> str:
    """One finished point of a sweep journal, as a study journal line (planner.schema.study.JournalRecord): the
    point's id (`point_id`), its row's outcome columns and the whole plan (the sweep's --json, table and CSV need
    it)."""
    from planner.study import journal_line as study_line
    from planner.study import outcome_of

    compute = plan.workload.requested_compute_flop
    sid = point_id(plan.hardware, compute if compute is not None else math.nan, settings)
    return study_line(sid, outcome_of(plan).model_dump(), json.loads(plan.model_dump_json()))


def read_journal(path: Path, settings: Mapping[str, object], hardware: Sequence[str],
                 grid: Sequence[float]) -> dict[tuple[str, float], Plan]:
    """The finished points a journal holds, by (hardware, compute). The journal is a study journal: its header must
    carry this sweep's settings (other settings are an InvalidInput naming them: resuming would mix two sweeps); a
    line cut short by an interruption, or whose id is not a point of `hardware` x `grid`, is ignored.

    The journal is a file anyone with write access to the directory can edit, so each plan is checked again before
    it is kept (`_journal_plan_ok`): the plan's own hardware and compute must be its id's point; a status with a
    layout must carry a complete one. A line that fails is ignored (that point is solved again), as a cut line is."""
    from planner.errors import read_text_file
    from planner.schema.study import JournalHeader

    out: dict[tuple[str, float], Plan] = {}
    if not path.exists():
        return out
    lines = read_text_file(path, "sweep journal", 512 * 2**20).splitlines()
    if not lines:
        return out
    wanted = _settings_json(settings)
    try:
        head = JournalHeader.model_validate_json(lines[0])
    except ValueError:
        raise InvalidInput(f"--resume: {path} does not start with a sweep journal header (an older planner's, or "
                           "another file); drop --resume or give another --csv") from None
    if head.study != SWEEP_JOURNAL or head.settings != wanted:
        got = head.settings or {}
        diff = sorted(k for k in wanted if got.get(k) != wanted[k]) if head.study == SWEEP_JOURNAL else []
        raise InvalidInput(f"--resume: {path} holds points of a sweep with other settings "
                           f"({', '.join(diff) or 'unrecorded'}); drop --resume or give another --csv")
    points = {point_id(h, c, settings): (h, float(c)) for h in hardware for c in grid}
    for line in lines[1:]:
        try:
            rec = json.loads(line)
            key = points.get(rec["id"])
            if key is None:
                continue
            plan = Plan.model_validate(rec["plan"])
        except (ValueError, KeyError, TypeError, RecursionError):
            continue
        if _journal_plan_ok(key, plan):
            out[key] = plan
    return out


def _journal_plan_ok(key: tuple[str, float], plan: Plan) -> bool:
    """A journal plan that answers its key: same hardware and requested compute; a layout exactly when the status
    says there is one, with as many GPUs as its degrees multiply to."""
    if plan.hardware != key[0] or plan.workload.requested_compute_flop != key[1]:
        return False
    lay = plan.layout
    if plan.status in ("optimal", "feasible"):
        if lay is None or plan.gpus is None or plan.mfu is None or plan.breakdown is None:
            return False
        from planner.parallel.dimensions import DEGREES

        return math.prod(int(getattr(lay, d)) for d in DEGREES) == plan.gpus and 0 < plan.mfu <= 1
    return plan.mfu is None or plan.status == "infeasible"


__all__ = [
    "MAX_POINTS",
    "worker_pool",
    "plan_all",
    "solve_point",
    "journal_header",
    "journal_line",
    "point_id",
    "read_journal",
    "THREE_MONTHS_DAYS",
    "HardwareSummary",
    "SweepResult",
    "compute_grid",
    "crossing_below",
    "summarise",
    "sweep",
]
