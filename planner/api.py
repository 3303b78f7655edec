"""The library API for scripts: `plan` and `evaluate` take and return validated pydantic objects.

Errors are typed (planner.errors): InvalidInput for bad values, Infeasible (carrying a Plan with
status 'infeasible' and an explanation) when no layout satisfies the request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from planner.choices import ScheduleChoice, Solver
from planner.cost.step import SECONDS_PER_DAY, peak_flops
from planner.cost.step import evaluate as _evaluate
from planner.errors import Infeasible, InvalidInput
from planner.goodput import FailureModel, get_failure_model, goodput_at, goodput_fraction
from planner.hardware import get_hardware, with_profile
from planner.overrides import Override, parse_overrides
from planner.parallel.dimensions import BY_NAME, DEGREES, OPTIONS, stage_split
from planner.parallel.space import SearchOptions, check_layout, divisors, rack_use
from planner.profile import entry_for, get_profile
from planner.request import PlanRequest, check_headroom, check_type
from planner.schema import (
    LAYOUT_EXTRA,
    DependsOn,
    Evaluation,
    Hardware,
    Layout,
    LayoutReport,
    MemoryReport,
    Plan,
    SolverReport,
    Workload,
    WorkloadReport,
)
from planner.search.result import SearchResult
from planner.workload import infer_workload

SOLVERS = tuple(s.value for s in Solver)
SCHEDULES = tuple(s.value for s in ScheduleChoice)


def resolve_hardware(gpu: str | Hardware, overrides: Sequence[Override] = ()) -> Hardware:
    check_type("gpu", gpu, (str, Hardware), "a hardware name, a TOML path or a Hardware")
    if isinstance(gpu, Hardware):
        if any(o.target == "hardware" for o in overrides):
            raise InvalidInput("--set on hardware fields needs the hardware by name or file, not a Hardware object")
        return gpu
    return get_hardware(gpu, overrides)


DEFAULT_PROFILE_RULE = ("the paper's toy workload (--compute, the paper's question) is priced by the 'paper' "
                        "profile; a real transformer (--model, a preset or shape) and any launch configuration "
                        "(--emit, export) by the 'realistic' one; --profile chooses")
"""The default execution profile, as every output states it."""


def default_profile(gpu: str | Hardware, profile: str | None, workload: Workload | None, launch: bool = False
                    ) -> str | None:
    """The profile a request is priced by when none is named (DEFAULT_PROFILE_RULE): 'realistic' for a transformer
    or a launch configuration, else the hardware's own (the paper's). A Hardware object that already carries a
    non-paper profile keeps it."""
    if profile is not None:
        return profile
    if isinstance(gpu, Hardware) and gpu.profile.name != "paper":
        return None
    if launch or (workload is not None and workload.transformer is not None):
        return "realistic"
    return None


def resolve(gpu: str | Hardware, profile: str | None, overrides: Sequence[Override] = ()) -> Hardware:
    """The hardware priced under `profile` (None: the hardware's own, the paper's by default), both with the --set
    overrides that name their fields."""
    hw = resolve_hardware(gpu, overrides)
    if profile is not None or any(o.target == "profile" for o in overrides):
        base = profile if profile is not None else hw.profile.name
        hw = with_profile(hw, get_profile(base, overrides))
    return hw


def workload_report(wl: Workload) -> WorkloadReport:
    return WorkloadReport(
        compute_flop=wl.compute_flop, requested_compute_flop=wl.requested_compute_flop, d_model=wl.d_model,
        d_ff=wl.d_ff, layers=wl.layers, experts=wl.experts, batch_tokens=wl.batch_tokens, tokens=wl.tokens,
        params=wl.params, active_params=wl.active_params, steps=wl.steps, label=wl.label, seq_len=wl.seq_len,
        model_flop_per_token=wl.model_flop_per_token, attention_flop_per_token=wl.attention_flop_per_token,
        transformer=wl.transformer, precision=wl.precision, recipe=wl.recipe_name,
    )


def with_memory_headroom(hw: Hardware, memory_headroom_GB: float | None) -> Hardware:
    """`hw` with its profile's headroom replaced (None: unchanged): a layout fits when total + headroom <= HBM."""
    if memory_headroom_GB is None:
        return hw
    check_headroom(memory_headroom_GB)
    return with_profile(hw, hw.profile.model_copy(update={"memory_headroom_bytes": memory_headroom_GB * 1e9}))


def evaluate(layout: Layout, gpu: str | Hardware, workload: Workload, dp_overlap: bool = False,
             memory_headroom_GB: float | None = None) -> Evaluation:
    """Price a given layout on given hardware. Raises InvalidInput naming every rule the layout breaks.
    `memory_headroom_GB` replaces the profile's headroom (the memory a layout must leave free)."""
    check_type("layout", layout, (Layout,), "a Layout")
    check_type("workload", workload, (Workload,), "a Workload")
    check_type("dp_overlap", dp_overlap, (bool,), "true or false")
    hw = with_memory_headroom(resolve_hardware(gpu), memory_headroom_GB)
    problems = check_layout(hw, workload, layout)
    if problems:
        raise InvalidInput("impossible layout: " + "; ".join(problems))
    return _evaluate(hw, workload, layout, dp_overlap=dp_overlap)


def _rack_fields(hw: Hardware, gpus: int) -> dict[str, Any]:
    """The Plan's racks, rack_level, gpus_per_rack and spare_gpus (planner.parallel.space.rack_use)."""
    use = rack_use(hw, gpus)
    if use is None:
        return {}
    return {"racks": use.groups, "rack_level": use.level, "gpus_per_rack": use.gpus_per_group,
            "spare_gpus": use.spare_gpus}


def plan_from_evaluation(hw: Hardware, wl: Workload, ev: Evaluation, result: SearchResult,
                         deadline_days: float | None, price_per_gpu_hour: float | None = None,
                         notes: list[str] | None = None, dp_overlap: bool = False,
                         fixed_gpus: bool = False, failures: FailureModel | None = None,
                         overrides: Sequence[str] = ()) -> Plan:
    """The Plan document of an evaluated layout. `failures` (a failure model) adds the goodput and wall-clock days."""
    lay = ev.layout
    good = None if failures is None else goodput_at(failures, ev.gpus, wl.params)
    wall = ev.training_days if good is None else (ev.training_days / good.goodput if good.goodput > 0 else math.inf)
    gpu_hours = ev.gpus * ev.training_s / 3600.0
    cost = None if price_per_gpu_hour is None else gpu_hours * price_per_gpu_hour
    if cost is not None and not math.isfinite(cost):
        raise InvalidInput(f"--price-per-gpu-hour {price_per_gpu_hour:g} makes the cost of {gpu_hours:.3g} GPU-hours "
                           "overflow; give a price a float can multiply")
    mem = ev.memory
    return Plan(
        status="optimal" if result.status == "optimal" else "feasible",
        hardware=hw.name, gpu=hw.gpu.name, profile=hw.profile.name, peak_flops=peak_flops(hw, wl),
        deadline_days=deadline_days,
        fixed_gpus=fixed_gpus, dp_overlap=dp_overlap, gpus=ev.gpus, nodes=ev.nodes, gpu_hours=gpu_hours,
        **_rack_fields(hw, ev.gpus),
        cost_usd=cost,
        mfu=ev.mfu, hfu=ev.hfu, flop_convention=wl.flop_convention, training_days=ev.training_days,
        step_time_s=ev.step.step_s, bottleneck=ev.bottleneck,
        workload=workload_report(wl),
        layout=LayoutReport(
            **{d: lay.degree(d) for d in (*DEGREES, *OPTIONS)}, **{k: getattr(lay, k) for k in LAYOUT_EXTRA},
            schedule=lay.schedule,
            nanobatch_tokens=ev.nanobatch_tokens,
            placement={k: list(v) for k, v in lay.placement.items()}, levels=[lv.name for lv in hw.levels],
        ),
        breakdown=ev.step,
        memory=MemoryReport(**mem.model_dump(exclude={"capacity_bytes"}), capacity=mem.capacity_bytes),
        solver=solver_report(result),
        ops=ev.ops,
        notes=(notes or []) + _estimate_note(hw) + _transformer_notes(wl, lay),
        goodput=good, wall_clock_days=wall, overrides=list(overrides),
        depends_on=depends_on(hw, failures, wl),
    )


def failure_model(failures: str | FailureModel, overrides: Sequence[Override] = ()) -> FailureModel:
    if isinstance(failures, FailureModel):
        if any(o.target == "goodput" for o in overrides):
            raise InvalidInput("--set goodput.* needs the failure model by name or file, not a FailureModel object")
        return failures
    return get_failure_model(failures, overrides)


MODELLED = (
    "GEMM, attention and element-wise time per operation (the profile's efficiencies)",
    "TP, CP, PP, EP, DP and ZeRO traffic per network level, with the profile's overlap",
    "pipeline bubbles of 1F1B / interleaved 1F1B / ZB-H2",
    "memory per GPU: weights, gradients, optimizer state, activations, recomputation",
)
NOT_MODELLED = (
    "stragglers, load imbalance between experts (routing is balanced), and congestion between jobs",
    "data loading, evaluation, and the first steps' warm-up",
    "power, cooling and clock throttling beyond the sustained-clock factor",
)


def set_path(hw: Hardware, key: str) -> str:
    """A hardware file key as --set spells it: levels[1].lat_us -> levels.InfiniBand.lat_us."""
    if key.startswith("levels["):
        k, rest = key[len("levels["):].split("]", 1)
        return f"levels.{hw.levels[int(k)].name}{rest}"
    return key


def _applies(hw: Hardware, wl: Workload | None, key: str) -> bool:
    """Whether a profile value can change this plan: not another framework's override, not another GPU family's
    or precision's GEMM efficiency, no GEMM efficiency under the roofline model."""
    prof = hw.profile
    if key.startswith("framework."):
        return False
    tables = {"bf16": ("gemm.peak_fraction.", prof.gemm_peak_fraction),
              "fp8": ("gemm.fp8_peak_fraction.", prof.gemm_fp8_peak_fraction),
              "fp4": ("gemm.fp4_peak_fraction.", prof.gemm_fp4_peak_fraction)}
    if key.startswith("recipe."):
        return wl is not None and key.split(".")[1] == wl.recipe_name
    if key.startswith("gemm.sustained_by_family."):
        mine = entry_for(prof.gemm_sustained_by_family, hw.gpu.name)
        return (prof.gemm_model == "measured" and mine is not None
                and key[len("gemm.sustained_by_family."):].upper() == mine.upper())
    for precision, (table, entries) in tables.items():
        if key.startswith(table):
            # a low-precision recipe's kept layers and LM head still run 16-bit GEMMs
            if prof.gemm_model != "measured" or (wl is not None and precision not in ("bf16", wl.precision)):
                return False
            mine = entry_for(entries, hw.gpu.name)  # the one entry this GPU reads
            return mine is not None and key[len(table):].upper() == mine.upper()
    if key.startswith("gemm.") and key != "gemm.model" and prof.gemm_model != "measured":
        return False
    return True


def depends_on(hw: Hardware, failures: FailureModel | None, wl: Workload | None = None) -> DependsOn:
    """What the plan rests on: its model's scope and the inputs whose sources call them estimates or fits, named as
    --set spells them (gpu.l2_GBps, profile.overlap.tp, goodput.restart_minutes)."""
    from planner.hardware import estimated_fields

    est = [set_path(hw, k) for k in estimated_fields(hw)]
    est += [f"profile.{k}" for k, src in sorted(hw.profile.sources.items())
            if ("estimate" in src.lower() or "fitted" in src.lower()) and _applies(hw, wl, k)]
    if failures is not None:
        est += [f"goodput.{k}" for k, src in sorted(failures.sources.items()) if "estimate" in src.lower()]
    not_modelled = list(NOT_MODELLED)
    if failures is None:
        not_modelled.insert(0, "failures, checkpoints and restarts (--goodput models them)")
    modelled = list(MODELLED) + (["failures, checkpoints and restarts (goodput, planner.goodput)"] if failures
                                 else [])
    return DependsOn(modelled=modelled, not_modelled=not_modelled, estimated_inputs=est)


def _transformer_notes(wl: Workload, lay: Layout) -> list[str]:
    """What a transformer layout does that the words alone do not say (Megatron's conventions)."""
    tr = wl.transformer
    if tr is None:
        return []
    notes = []
    if tr.attention == "gqa" and lay.tp_ff > tr.kv_heads:
        notes.append(f"tp_ff={lay.tp_ff} exceeds kv_heads={tr.kv_heads}: each KV head is replicated on "
                     f"{lay.tp_ff // tr.kv_heads} tensor-parallel ranks")
    if wl.experts > 1:
        notes.append(f"expert parallelism is carved out of data parallelism: the dense layers see dp x ep = "
                     f"{lay.dp * lay.ep} data-parallel ranks (Megatron's data-parallel size), the expert layers "
                     f"regroup the same GPUs as expert-tp {lay.tp_ff} x ep {lay.ep} x expert-dp {lay.dp}")
    c, r = stage_split(wl.layers, lay.pp, lay.interleave)
    if lay.pp > 1 and r:
        notes.append(f"{wl.layers} layers on {lay.pp * lay.interleave} virtual stages of {c}: the first and last "
                     f"virtual stages hold {r} fewer between them (they also run the embedding and the LM head)")
    return notes


def _estimate_note(hw: Hardware) -> list[str]:
    """Say which hardware numbers behind the result are estimates (their sources say so), so a comparison across
    hardware is read with that in mind."""
    from planner.hardware import estimated_fields

    est = estimated_fields(hw)
    if not est:
        return []
    return [f"{hw.name}: {len(est)} hardware value{'s' if len(est) > 1 else ''} behind this result "
            f"{'are estimates' if len(est) > 1 else 'is an estimate'} ({', '.join(est)}); "
            f"`planner hardware show` with the same --gpu (name or file) gives the sources"]


def solver_report(result: SearchResult) -> SolverReport:
    return SolverReport(name=result.solver, status=result.status, wall_s=result.wall_s,
                        space_size=result.space_size, evaluated=result.evaluated, gap=result.gap,
                        bound=result.bound, stage=result.stage,
                        detail=result.cpsat_status or "; ".join(result.notes), cpsat_s=result.cpsat_s,
                        candidates=result.cpsat_tuples, candidate_pairs=result.cpsat_pairs,
                        models=result.cpsat_models)


def run_search(hw: Hardware, wl: Workload, options: SearchOptions, deadline_s: float | None,
               solver: str = "cpsat", time_limit_s: float | None = 60.0, workers: int = 2,
               goodput: Callable[[float], float] | None = None) -> SearchResult:
    """`goodput` g(N): the deadline of N GPUs is deadline x g(N) of compute (planner.goodput)."""
    if solver == "exhaustive":
        from planner.search.exhaustive import solve_exhaustive

        return solve_exhaustive(hw, wl, options, deadline_s, time_limit_s=time_limit_s, goodput=goodput)
    from planner.search.cpsat import solve_cpsat

    return solve_cpsat(hw, wl, options, deadline_s, time_limit_s=time_limit_s, workers=workers, goodput=goodput)


def _past_latency_wall(hw: Hardware, wl: Workload, options: SearchOptions, deadline_s: float | None,
                       solver: str) -> SearchResult | None:
    """An 'infeasible' result without a search when the critical-path lower bound alone misses the deadline."""
    if deadline_s is None:
        return None
    import time

    from planner.explain import floor_bound
    from planner.parallel.space import build_space, space_size

    t0 = time.perf_counter()
    fb = floor_bound(hw, wl, options)
    if not fb.days * SECONDS_PER_DAY > deadline_s * (1.0 + 1e-9):
        return None
    return SearchResult(solver, "infeasible", None, time.perf_counter() - t0,
                        space_size(build_space(hw, wl, options)), gap=0.0,
                        notes=[f"proven without a search: no layout can be faster than {fb.days:.4g} days "
                               "(critical-path lower bound)"])


FIXABLE = ("tp_model", "cp", "sp", "recompute", "zero")
"""Dimensions `plan` lets the user pin (the rest are fixed with `evaluate`)."""


def _fixed_dimensions(wl: Workload, fixed: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """Validated (name, value) pins for SearchOptions.fixed."""
    out = []
    for name, value in sorted(fixed.items()):
        if name not in FIXABLE:
            raise InvalidInput(f"cannot fix '{name}' in a plan; fixable: {', '.join(FIXABLE)}")
        d = BY_NAME[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < d.minimum:
            raise InvalidInput(f"--{name} must be a whole number >= {d.minimum}, got {value!r}")
        allowed = d.candidates(wl) if d.candidates is not None else divisors(d.divides(wl))  # type: ignore[misc]
        if value not in allowed:
            if d.transformer_only and wl.transformer is None and value != d.default:
                raise InvalidInput(f"--{name} {d.label(value)} needs a transformer workload (--model PRESET); the "
                                   "paper's toy model has no attention or sequences")
            raise InvalidInput(f"--{name} {d.label(value)} is not possible for this workload; choose one of "
                               f"{', '.join(d.label(v) for v in allowed)}")
        out.append((name, int(value)))
    return tuple(out)


def plan(request: PlanRequest | float | None = None, /, *args: Any, **fields: Any) -> Plan:
    """Smallest cluster and optimal layout that trains the workload within `days` (or the fastest on `gpus`).

    The question is a PlanRequest (planner.request: every field with its meaning and unit). The keyword form
    `plan(1e28, "h100", 90, sparse=True, ...)`, compute_flop, gpu and days then any PlanRequest field by name, builds
    that request: one code path. With `gpus` and `days`, the fastest layout on that cluster must also meet the
    deadline: if it does not, Infeasible is raised, and its plan (status "infeasible") carries that layout. No
    feasible layout at all: Infeasible carrying a plan with the explanation.
    """
    if isinstance(request, PlanRequest):
        if args or fields:
            raise InvalidInput("give a PlanRequest or keyword fields, not both")
        return _plan(request)
    if len(args) > 2:
        raise InvalidInput(f"plan takes compute_flop, gpu and days by position, then keywords; got {len(args) + 1} "
                           "positional arguments")
    given = dict(zip(("gpu", "days"), args))
    clash = sorted(set(given) & set(fields))
    if clash or "compute_flop" in fields and request is not None:
        raise InvalidInput(f"plan got {', '.join(clash or ['compute_flop'])} twice (by position and by name)")
    if request is not None or "compute_flop" not in fields:
        given["compute_flop"] = request
    return _plan(PlanRequest(**given, **fields))


def _plan(request: PlanRequest) -> Plan:
    """The plan of a validated request (see `plan`)."""
    r = request
    workload, gpu, gpus, days, schedule = r.workload, r.gpu, r.gpus, r.deadline_days, r.schedule
    overrides: Sequence[str] = r.overrides
    if r.memory_headroom_GB is not None:
        overrides = [*overrides, f"profile.memory.headroom_GB={r.memory_headroom_GB!r}"]
    sets = parse_overrides(overrides)
    profile = default_profile(gpu, r.profile, workload, r.runs_on is not None)
    hw = resolve(gpu, profile, sets)
    dp_overlap = hw.profile.dp_overlap if r.dp_overlap is None else r.dp_overlap
    fm: FailureModel | None = failure_model(r.failures, sets)  # validated (and its overrides) even when goodput is off
    ignored = []
    if not (hw.profile.goodput if r.goodput is None else r.goodput):
        fm = None
        if r.failures != "default" or any(o.target == "goodput" for o in sets):
            ignored.append(f"goodput is off ({hw.profile.name} profile{', --no-goodput' if r.goodput is False else ''}"
                           "): the failure model and --set goodput.* do not change this plan; --goodput applies them")
    if workload is None:
        assert r.compute_flop is not None  # PlanRequest: one of the two
        workload = infer_workload(r.compute_flop, sparse=r.sparse, batch_scaling=r.batch_scaling, budget=r.budget)
    if gpus is not None and hw.max_gpus is not None and gpus > hw.max_gpus:
        raise InvalidInput(f"--gpus {gpus} exceeds the largest cluster {hw.name} allows ({hw.max_gpus})")
    runs_on, solver, time_limit_s, workers, price_per_gpu_hour = (r.runs_on, r.solver, r.time_limit_s, r.workers,
                                                                  r.price_per_gpu_hour)

    pins = dict(r.fixed)
    excluded: tuple[tuple[str, int], ...] = ()
    if runs_on is not None:
        if schedule == "zb-h2":
            raise InvalidInput(f"{runs_on} has no ZB-H2 schedule: use --schedule 1f1b or auto")
        schedule = "1f1b"
        clash = {"tp_model": (1, "it has no second tensor-parallel axis")}
        if runs_on == "torchtitan":
            clash.update({"zero": (3, "it shards data parallelism with FSDP (ZeRO-3)"),
                          "sp": (1, "its tensor parallelism always shards the sequence")})
            if pins.get("recompute") == 1:
                raise InvalidInput("--emit torchtitan: it has no attention-core-only recomputation; drop "
                                   "--recompute selective")
        for name, (value, why) in clash.items():
            if name in pins and pins[name] != value:
                raise InvalidInput(f"--emit {runs_on}: {why}; drop --{name.replace('_', '-')} {pins[name]}")
        pins.setdefault("tp_model", 1)
        if runs_on == "torchtitan" and workload.is_transformer:
            pins.setdefault("zero", 3)
            excluded = (("recompute", 1),)
        tr = workload.transformer
        if tr is not None and tr.attention == "gqa":
            # Both frameworks split the KV heads over the TP ranks (no replication): tp must divide kv_heads.
            size = BY_NAME["tp_ff"].divides(workload)  # type: ignore[misc]
            excluded += tuple(("tp_ff", v) for v in divisors(size) if tr.kv_heads % v)
    from planner.export import RANK_ORDER

    options = SearchOptions(schedule=schedule, gpus=gpus, dp_overlap=dp_overlap,
                            fixed=_fixed_dimensions(workload, pins), excluded=excluded,
                            rank_order=RANK_ORDER if runs_on is not None else (), whole_rounds=runs_on is not None)
    if hw.gpu.at_precision(workload.precision) is None:
        raise InvalidInput(f"{hw.gpu.name} has no {workload.precision.upper()} rate in its hardware file; use "
                           "precision bf16")
    deadline_s = None if gpus is not None or days is None else days * SECONDS_PER_DAY
    result = _past_latency_wall(hw, workload, options, deadline_s, solver)
    if result is None:
        result = run_search(hw, workload, options, deadline_s, solver=solver, time_limit_s=time_limit_s,
                            workers=workers, goodput=None if fm is None else goodput_fraction(fm, workload.params))
    if result.layout is None:
        from planner.explain import explain_infeasible

        explanation = explain_infeasible(hw, workload, options, days, result, fm)
        doc = Plan(
            status="unknown" if result.status == "unknown" else "infeasible", hardware=hw.name, gpu=hw.gpu.name,
            profile=hw.profile.name,
            peak_flops=peak_flops(hw, workload), flop_convention=workload.flop_convention, deadline_days=days,
            fixed_gpus=gpus is not None, dp_overlap=dp_overlap,
            gpus=gpus, nodes=None, gpu_hours=None, mfu=None, training_days=None, step_time_s=None, bottleneck=None,
            workload=workload_report(workload),
            layout=None, breakdown=None, memory=None, solver=solver_report(result), explanation=explanation,
            depends_on=depends_on(hw, fm, workload), overrides=[o.text for o in sets],
        )
        raise Infeasible(explanation.splitlines()[0] if explanation else "no feasible layout", explanation,
                         plan=doc)
    ev = _evaluate(hw, workload, result.layout, dp_overlap=dp_overlap)
    notes = list(ignored)
    if workload.requested_compute_flop:
        ratio = workload.compute_flop / workload.requested_compute_flop
        if abs(ratio - 1.0) > 0.005:
            notes.append(f"the rounded shape trains {workload.compute_flop:.3g} FLOP, {ratio:.3f}x the requested "
                         f"{workload.requested_compute_flop:.3g} (paper budget: tokens = 20 N_p of the rounded shape; "
                         f"--budget exact trains the request)")
    doc = plan_from_evaluation(hw, workload, ev, result, days, price_per_gpu_hour, notes, dp_overlap=dp_overlap,
                               fixed_gpus=gpus is not None, failures=fm, overrides=[o.text for o in sets])
    if gpus is not None and days is not None and (doc.wall_clock_days or ev.training_days) > days:
        # Fixed-cluster mode with a deadline: the fastest layout on these GPUs is the best there is, so missing the
        # deadline means no layout on this cluster meets it.
        proven = "proven fastest" if result.status == "optimal" else "fastest found (not proven)"
        took = (f"{ev.training_days:.4g} days" if fm is None else
                f"{doc.wall_clock_days:.4g} wall-clock days ({ev.training_days:.4g} of compute at goodput "
                f"{doc.goodput.goodput:.1%})" if doc.goodput else "")
        explanation = (f"on {gpus} GPUs of {hw.name} the {proven} layout takes {took}, more "
                       f"than the {days:g} days asked; drop --gpus to find the fewest GPUs that meet the deadline")
        doc = doc.model_copy(update={"status": "infeasible", "explanation": explanation})
        raise Infeasible(explanation, explanation, plan=doc)
    return doc
