"""The library API for scripts: `plan` and `evaluate` take and return validated pydantic objects.

Errors are typed (planner.errors): InvalidInput for bad values, Infeasible (carrying a Plan with
status 'infeasible' and an explanation) when no layout satisfies the request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from pydantic import ValidationError

from planner import recent
from planner.choices import ScheduleChoice, Solver
from planner.cost.step import SECONDS_PER_DAY, peak_flops
from planner.cost.step import evaluate as _evaluate
from planner.cost.terms import HOST_FLOOR_UNPRICED
from planner.economics import facility_power_MW, fmt_MW, fmt_pct, get_facility, max_gpus_within_power, plan_economics
from planner.errors import Infeasible, InvalidInput, validation_message
from planner.goodput import FailureModel, get_failure_model, goodput_at, goodput_fraction, wall_clock_days
from planner.hardware import get_hardware, with_profile
from planner.overrides import Override, parse_overrides
from planner.parallel.dimensions import BY_NAME, DEGREES, OPTIONS, stage_split
from planner.parallel.space import SearchOptions, check_layout, divisors, precision_problem, rack_use
from planner.profile import entry_for, get_profile
from planner.schema import (
    LAYOUT_EXTRA,
    ClusterSize,
    DependsOn,
    Evaluation,
    Facility,
    Hardware,
    Infeasibility,
    Layout,
    LayoutReport,
    MemoryBreakdown,
    MemoryReport,
    Plan,
    SolverReport,
    Workload,
    WorkloadReport,
    headroom_shortfall,
)
from planner.schema.request import PlanRequest, check_headroom, check_positive, check_type
from planner.search.result import SearchResult
from planner.uncertainty import uncertain_inputs
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
                        "(--emit, export) by the 'realistic' one (--emit torchtitan: 'realistic/torchtitan', as "
                        "torchtitan runs it); --profile chooses")
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
        transformer=wl.transformer, precision=wl.precision, recipe=wl.recipe_name, family=wl.family,
    )


def with_memory_headroom(hw: Hardware, memory_headroom_GB: float | None) -> Hardware:
    """`hw` with its profile's headroom replaced (None: unchanged): a layout fits when total + headroom <= HBM."""
    if memory_headroom_GB is None:
        return hw
    check_headroom(memory_headroom_GB)
    return with_profile(hw, hw.profile.model_copy(update={"memory_headroom_bytes": memory_headroom_GB * 1e9}))


def evaluate(layout: Layout, gpu: str | Hardware, workload: Workload, dp_overlap: bool | None = None,
             memory_headroom_GB: float | None = None, *, profile: str | None = None,
             overrides: Sequence[str] = ()) -> Evaluation:
    """Price a given layout on given hardware. Raises InvalidInput naming every rule the layout breaks.

    As `planner evaluate`: `profile` prices it under an execution profile (None: DEFAULT_PROFILE_RULE for a hardware
    name; a Hardware object keeps its own), `overrides` are --set FIELD=VALUE strings on hardware and profile fields,
    `memory_headroom_GB` replaces the profile's headroom (the memory a layout must leave free), `dp_overlap` None
    takes the profile's default. `megatron_layout` builds the layout from Megatron's arguments; `evaluate_plan`
    returns the document `evaluate --json` prints."""
    hw = _evaluation_hardware(gpu, workload, profile, overrides, memory_headroom_GB)
    check_type("layout", layout, (Layout,), "a Layout")
    check_type("dp_overlap", dp_overlap, (bool, type(None)), "true, false or None")
    problems = check_layout(hw, workload, layout)
    if problems:
        raise InvalidInput("impossible layout: " + "; ".join(problems))
    return _evaluate(hw, workload, layout, dp_overlap=hw.profile.dp_overlap if dp_overlap is None else dp_overlap)


def _evaluation_hardware(gpu: str | Hardware, workload: Workload, profile: str | None, overrides: Sequence[str],
                         memory_headroom_GB: float | None) -> Hardware:
    check_type("workload", workload, (Workload,), "a Workload")
    check_type("profile", profile, (str, type(None)), "a profile name, a TOML path or None")
    sets = parse_overrides(overrides)
    if isinstance(gpu, Hardware) and profile is None and not any(o.target == "profile" for o in sets):
        hw = resolve_hardware(gpu, sets)
    else:
        hw = resolve(gpu, default_profile(gpu, profile, workload), sets)
    return with_memory_headroom(hw, memory_headroom_GB)


def megatron_layout(workload: Workload, gpu: str | Hardware = "h100", *, tp: int = 1, pp: int = 1, dp: int = 1,
                    cp: int = 1, ep: int = 1, vpp: int = 1, mbs: int = 1, etp: int | None = None, sp: bool = False,
                    recompute: str = "none", zero: int = 1, schedule: str = "1f1b",
                    placement: str | Mapping[str, Sequence[int]] | None = None,
                    first_stage_layers: int | None = None, last_stage_layers: int | None = None) -> Layout:
    """A Layout from Megatron-LM's arguments, as `planner evaluate --tp --pp --dp --vpp --mbs` reads them.

    `dp` is Megatron's data-parallel size, which counts the expert ranks (our N_DP = dp / ep); the microbatch count
    is the global batch in sequences / (dp x mbs); `etp` folds the expert layout (ep x etp over dp x cp x tp,
    Megatron's parallel folding) unless it equals `tp` with `dp` a multiple of `ep` (the plain expert layout).
    `placement` ('dp=1,4;tp_ff=8,1' or a mapping) fixes factors per network level, bottom-up; degrees left out are
    placed greedily (TP first, then CP, PP, DP, EP, lowest level first). Without `placement` the degrees sit where
    Megatron's default rank order puts them (`megatron_placement`), greedily only where that order cannot place
    them."""
    from planner.parallel.placement import greedy_placement, parse_placement

    check_type("workload", workload, (Workload,), "a Workload")
    args = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "vpp": vpp, "mbs": mbs, "zero": zero}
    for name, value in args.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInput(f"{name} must be a whole number >= 1, got {value!r}")
    for name, opt in (("etp", etp), ("first_stage_layers", first_stage_layers),
                        ("last_stage_layers", last_stage_layers)):
        if opt is not None and (isinstance(opt, bool) or not isinstance(opt, int) or opt < 0):
            raise InvalidInput(f"{name} must be a whole number >= 0 or None, got {opt!r}")
    if schedule not in ("1f1b", "zb-h2"):
        raise InvalidInput(f"unknown schedule '{schedule}'; choose 1f1b or zb-h2")
    check_type("sp", sp, (bool,), "true or false")
    check_type("recompute", recompute, (str,), "'none', 'selective' or 'full'")
    placed_ep = ep
    extra: dict[str, int | None] = {"first_stage_layers": first_stage_layers, "last_stage_layers": last_stage_layers}
    if etp is not None and folds_experts(tp, dp, ep, etp):  # the placed degrees are the attention layout, ep 1
        extra.update(expert_ep=ep, etp=etp)
        placed_ep = 1
    if dp % placed_ep:
        raise InvalidInput(f"dp {dp} (Megatron's data-parallel size, which counts the expert ranks) is not a "
                           f"multiple of ep {placed_ep}")
    seqs = workload.batch_tokens // workload.seq_len
    if seqs % (dp * mbs):
        raise InvalidInput(f"global batch {seqs} sequences is not divisible by dp {dp} x mbs {mbs}")
    try:
        values = {"dp": dp // placed_ep, "tp_ff": tp, "tp_model": 1, "pp": pp, "interleave": vpp, "ep": placed_ep,
                  "microbatches": seqs // (dp * mbs), "cp": cp, "sp": 1 if sp else 0,
                  "recompute": BY_NAME["recompute"].parse(recompute), "zero": zero}
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    hw = resolve_hardware(gpu)
    degrees = {d: values[d] for d in DEGREES}
    fixed = placement
    if isinstance(placement, str):
        fixed = parse_placement(placement, degrees, len(hw.levels))
    placed = megatron_placement(hw, degrees) if not fixed else None
    try:
        return Layout(**values, **extra, schedule=schedule,
                      placement=placed or greedy_placement(hw, degrees, fixed))  # type: ignore[arg-type]
    except ValidationError as exc:
        raise InvalidInput(f"impossible layout: {validation_message(exc)}") from None


def folds_experts(tp: int, dp: int, ep: int, etp: int | None) -> bool:
    """Whether Megatron's sizes fold the expert layout (parallel folding: ep x etp over dp x cp x tp): an expert
    tensor-parallel size other than tp, or an ep that Megatron's dp does not hold. etp equal to tp (what --emit
    megatron writes) or unset, with dp a multiple of ep, is the plain expert layout carved from the data-parallel
    ranks. One rule for `megatron_layout`, `planner evaluate`'s flags and validate's published runs."""
    return (etp is not None and etp != tp) or dp % ep != 0


def megatron_placement(hw: Hardware, degrees: Mapping[str, int]) -> dict[str, tuple[int, ...]] | None:
    """The placement Megatron-LM gives these degrees under its default rank order 'tp-cp-ep-dp-pp' (consecutive
    ranks share the lowest network level), as `--emit megatron` and `planner validate` place them; None when that
    order cannot place them (a degree's ranks would straddle a level's groups), where the caller places greedily."""
    import numpy as np

    from planner.export import RANK_ORDER
    from planner.parallel.space import rank_order_factors

    cols = {d: np.array([int(degrees.get(d, 1))], dtype=np.int64) for d in DEGREES}
    factors, ok = rank_order_factors(hw, cols, RANK_ORDER)
    if not ok[0]:
        return None
    return {d: tuple(int(x) for x in factors[d][0]) for d in DEGREES}


def evaluate_plan(layout: Layout, gpu: str | Hardware, workload: Workload, *, days: float | None = None,
                  profile: str | None = None, overrides: Sequence[str] = (), memory_headroom_GB: float | None = None,
                  dp_overlap: bool | None = None, goodput: bool | None = None,
                  failures: str | FailureModel = "default", price_per_gpu_hour: float | None = None,
                  notes: Sequence[str] = ()) -> Plan:
    """The Plan document `planner evaluate --json` prints for a given layout: status 'feasible', or 'infeasible'
    with the explanation when it does not fit in memory or misses `days` (no exception: the document says so)."""
    check_positive("--days", days)
    check_positive("--price-per-gpu-hour", price_per_gpu_hour)
    if memory_headroom_GB is not None:  # as api.plan and the CLI: echoed among the overrides
        check_headroom(memory_headroom_GB)
        overrides = [*overrides, f"profile.memory.headroom_GB={memory_headroom_GB!r}"]
    sets = parse_overrides(overrides)
    hw = _evaluation_hardware(gpu, workload, profile, overrides, None)
    if dp_overlap is None:
        dp_overlap = hw.profile.dp_overlap
    ev = evaluate(layout, hw, workload, dp_overlap=dp_overlap)
    notes = [*notes, *unread_override_notes(sets, workload, hw.profile.name)]
    fits, memory_why = ev.memory.fits, memory_verdict_words(ev.memory, hw.name)
    if not fits:
        notes.append(f"{ev.memory.verdict.upper()}: {memory_why}")
    if dp_overlap:
        notes.append("DP all-reduce overlapped with compute (--dp-overlap)")
    result = SearchResult("none", "feasible", layout, 0.0, 0, evaluated=1, gap=None,
                          notes=["no search: the layout was given and only evaluated"])
    fm = failure_model(failures, sets) if (hw.profile.goodput if goodput is None else goodput) else None
    doc = plan_from_evaluation(hw, workload, ev, result, days, price_per_gpu_hour, notes, dp_overlap=dp_overlap,
                               failures=fm, overrides=[o.text for o in sets])
    why = ""
    wall = doc.wall_clock_days if doc.wall_clock_days is not None else ev.training_days
    if not fits:
        why = f"the layout {'is tight: it ' if ev.memory.verdict == 'tight' else ''}{memory_why}"
    elif days is not None and wall > days:
        why = (f"the layout trains in {ev.training_days:.4g} days, more than the {days:g} days asked"
               if fm is None else f"the layout trains in {wall:.4g} wall-clock days ({ev.training_days:.4g} of "
               f"compute at {fmt_pct(doc.goodput.goodput if doc.goodput else 1.0)} goodput), more than the {days:g} "
               "days asked")
    if why:  # it cannot run, or not in time: the document says so, not only the exit code
        doc = doc.model_copy(update={"status": "infeasible", "explanation": why})
    return doc


def memory_verdict_words(m: MemoryBreakdown, hw_name: str) -> str:
    """Why an evaluated layout's memory verdict is not 'fits', in words (empty when it fits with the headroom)."""
    need, have = m.total_bytes / 1e9, m.capacity_bytes / 1e9
    if m.verdict == "does not fit":
        return f"needs {need:,.2f} GB per GPU but {hw_name} has {have:.2f} GB of HBM"
    if m.verdict == "tight":
        return (f"needs {need:,.2f} GB per GPU of {hw_name}'s {have:.2f} GB of HBM, "
                f"{headroom_shortfall(m.total_bytes, m.headroom_bytes, m.capacity_bytes)}: predicted to run, without "
                "that margin (--memory-headroom sets it)")
    return ""


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
                         overrides: Sequence[str] = (), facility: Facility | None = None) -> Plan:
    """The Plan document of an evaluated layout. `failures` (a failure model) adds the goodput and wall-clock days;
    `facility` (default: facility/default.toml) the PUE and the plausibility bound of its power figures
    (planner.economics). The price defaults to the hardware file's."""
    lay = ev.layout
    good = None if failures is None else goodput_at(failures, ev.gpus, wl.params)
    wall = wall_clock_days(ev.training_days, None if good is None else good.goodput)
    gpu_hours = ev.gpus * ev.training_s / 3600.0
    racks = _rack_fields(hw, ev.gpus)
    # Racks a job takes in part (GB200/GB300 NVL72: `unit`/`usable` on the lowest level) are held whole; a job smaller
    # than a DGX node rents its GPUs alone (clouds sell 1-, 2- and 4-GPU instances).
    held = ev.gpus + (racks.get("spare_gpus", 0) if hw.levels[0].subdivided else 0)
    money = plan_economics(hw, facility or get_facility(), ev.gpus, held, ev.training_days, wall, price_per_gpu_hour)
    money_notes = _economics_notes(hw, ev.gpus, money)
    mem = ev.memory
    return Plan(
        status="optimal" if result.status == "optimal" else "feasible",
        hardware=hw.name, gpu=hw.gpu.name, profile=hw.profile.name, peak_flops=peak_flops(hw, wl),
        deadline_days=deadline_days,
        fixed_gpus=fixed_gpus, dp_overlap=dp_overlap, gpus=ev.gpus, nodes=ev.nodes, gpu_hours=gpu_hours,
        **racks, **money,
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
        notes=(notes or []) + _estimate_note(hw) + _transformer_notes(wl, lay) + money_notes,
        goodput=good, wall_clock_days=wall, overrides=list(overrides),
        depends_on=depends_on(hw, failures, wl),
    )


def _economics_notes(hw: Hardware, gpus: int, money: Mapping[str, Any]) -> list[str]:
    """What the money and power figures rest on: spares counted, no power data, estimated inputs."""
    from planner.hardware import estimated_fields

    notes = []
    if money["held_gpus"] > gpus:
        notes.append(f"the run holds {money['held_gpus']:,} GPUs ({money['held_gpus'] - gpus:,} spare in the racks it "
                     "takes whole): cost_usd and the power figures count them, compute_cost_usd does not")
    if money.get("it_power_MW") is None:
        notes.append(f"{hw.name}: no board power in its hardware file ([economics] board_W), so no power or energy "
                     "figures and no --power-mw")
    if money.get("price_per_gpu_hour") is None:
        notes.append(f"{hw.name}: no price in its hardware file ([economics] price_per_gpu_hour_USD); "
                     "--price-per-gpu-hour prices the plan")
    est = [k for k in estimated_fields(hw, economic=True)
           if not (k == "economics.price_per_gpu_hour_USD" and money.get("price_source") == "--price-per-gpu-hour")]
    if est and money.get("it_power_MW") is not None:
        notes.append(f"power and price rest on {len(est)} estimated value{'s' if len(est) > 1 else ''} "
                     f"({', '.join(set_path(hw, k) for k in est)}) and the facility's PUE; `planner hardware show` "
                     "gives the sources")
    return notes


def _facility(facility: str | Facility, overrides: Sequence[Override]) -> Facility:
    if isinstance(facility, Facility):
        if any(o.target == "facility" for o in overrides):
            raise InvalidInput("--set facility.* needs the facility by name or file, not a Facility object")
        return facility
    return get_facility(facility, overrides)


def buyer_cap(hw: Hardware, site: Facility, power_mw: float | None, max_gpus: int | None) -> tuple[int | None, str]:
    """(the most GPUs a buyer's limits allow, the limits in words): --max-gpus and the GPUs whose facility power fits
    --power-mw (planner.economics.max_gpus_within_power); (None, '') without limits."""
    caps, words = [], []
    if max_gpus is not None:
        caps.append(max_gpus)
        words.append(f"--max-gpus {max_gpus}")
    if power_mw is not None:
        n = max_gpus_within_power(hw, site, power_mw)
        if n is None:
            raise InvalidInput(f"--power-mw needs the board power of {hw.name}: its hardware file has no [economics] "
                               "board_W (add one, or --set economics.board_W=W)")
        if n < 1:
            one = facility_power_MW(hw, site, 1) or 0.0
            raise InvalidInput(f"--power-mw {power_mw:g}: not even one GPU of {hw.name} fits (one needs "
                               f"{fmt_MW(one)} of facility power at PUE {site.pue:g})")
        caps.append(n)
        words.append(f"--power-mw {power_mw:g} ({fmt_MW(power_mw)} at PUE {site.pue:g})")
    return (min(caps) if caps else None), " and ".join(words)


def _explain_limit(cap: int, limit_words: str, hw: Hardware, site: Facility, days: float | None, why: str,
                   request: PlanRequest) -> str:
    """Why no plan within a buyer's limit meets the deadline, and what would fit: the GPUs (and MW) the deadline needs
    without the limit, and the fastest layout on the largest cluster the limit allows."""
    from planner.parallel.space import nearest_cluster_sizes

    lines = [f"within {limit_words}, at most {cap:,} GPUs of {hw.name}, no layout trains this in {days:g} days"]
    try:
        need = _plan(request.model_copy(update={"power_mw": None, "max_gpus": None, "why_smaller": False}))
        mw = f" = {fmt_MW(need.facility_power_MW)} of facility power" if need.facility_power_MW else ""
        lines.append(f"the deadline needs {need.gpus:,} GPUs{mw}")
    except Infeasible:
        lines.append("no cluster of any size meets the deadline: " + (why.splitlines()[0] if why else ""))
    # The fastest within the limit is on one of the largest counts the model's shape divides: try the largest
    # f x 2^k (f odd and 3-5-7-smooth, up to 225: the shapes' own rounding, planner.workload, and its products) that
    # fill the levels, largest first.
    odd = {3**a * 5**b * 7**c for a in range(5) for b in range(4) for c in range(3)}
    counts = sorted({f << k for f in odd if f <= 225 for k in range(64) if (f << k) <= cap}, reverse=True)
    # The three largest with a layout; a count the shape cannot split (a factor 5 where the batch has none) has
    # none and is answered at once, so up to a dozen are tried before giving up.
    tried: list[int] = []
    found = 0
    best: tuple[float, Plan] | None = None
    for n in (c for c in counts if nearest_cluster_sizes(hw, c)[0] == c):
        if found == 3 or len(tried) == 12:
            break
        tried.append(n)
        try:  # an upper bound on the fastest: more GPUs is not always faster (goodput, divisibility)
            fast = _plan(request.model_copy(update={"power_mw": None, "max_gpus": None, "gpus": n, "days": None,
                                                     "why_smaller": False}))
        except Infeasible:
            continue
        found += 1
        took = fast.wall_clock_days or fast.training_days
        if took is not None and (best is None or took < best[0]):
            best = (took, fast)
    if best is None:
        lines.append(f"no layout found on {', '.join(f'{n:,}' for n in tried) or 'any count'} GPUs within the "
                     "limit")
        return "; ".join(lines)
    # Then the fastest over every count within the limit: bisect the deadline of the capped search (a deadline is met
    # within the cap iff some count within it meets it) to 0.5 %.
    lo, (hi, fast) = (days or 0.0), best
    for _ in range(8):
        if lo <= 0 or hi / lo <= 1.005:
            break
        mid = math.sqrt(lo * hi)
        try:
            p = _plan(request.model_copy(update={"days": mid, "power_mw": None, "max_gpus": cap,
                                                  "why_smaller": False}),
                      explain_limits=False)
            fast, hi = p, (
                p.wall_clock_days or p.training_days or mid)
        except Infeasible:
            lo = mid
    mw = f", {fmt_MW(fast.facility_power_MW)}" if fast.facility_power_MW else ""
    lines.append(f"within the limit the fastest plan found takes {hi:.4g} days on {fast.gpus:,} GPUs{mw} (and no plan "
                 f"within the limit finishes in {lo:.4g} days, so the fastest possible lies between the two): ask "
                 f"--days {math.ceil(hi * 100) / 100:g}")
    return "; ".join(lines)


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
    "facility power, energy and cost of the cluster for the time it is held (planner.economics)",
)
NOT_MODELLED = (
    "stragglers, load imbalance between experts (routing is balanced), and congestion between jobs",
    "data loading, evaluation, and the first steps' warm-up",
    "clock throttling beyond the sustained-clock factor, and power limits on speed (facility power and energy are "
    "reported from the hardware file's [economics] and the site's PUE, planner.economics, but never slow the run)",
)


def set_path(hw: Hardware, key: str) -> str:
    """A hardware file key as --set spells it: levels[1].lat_us -> levels.InfiniBand.lat_us."""
    if key.startswith("levels["):
        k, rest = key[len("levels["):].split("]", 1)
        return f"levels.{hw.levels[int(k)].name}{rest}"
    return key


VALIDATE_ONLY = {
    "overlap.tp_comm_overlap": ("a published run that overlapped TP communication", "overlap.tp"),
    "overlap.ep_comm_overlap": ("a published run that overlapped the expert all-to-all", "overlap.ep"),
    "overlap.ep_comm_stages": ("a published run that overlapped the expert all-to-all", "overlap.ep_stages"),
    "moe.eager_host_layer_us": ("a published run that captured no CUDA graph", "moe.host_layer_us"),
}
"""Profile keys only `planner validate` reads: the run each prices, and the key a plan reads in its place."""


def unread_override_notes(sets: Sequence[Override], wl: Workload, profile: str = "") -> list[str]:
    """A note for each --set that cannot change a plan or an evaluation: a key only `validate` reads, a
    [framework.NAME] value (validate applies a record's framework; plans price the profile as it is, unless it is
    'NAME/FRAMEWORK', the profile as that framework runs it), an expert routing value on a model without experts, a
    host-bound floor on the paper's toy model. `profile`: the name of the profile that prices the plan."""
    priced_as = profile.partition("/")[2]
    notes = []
    for o in (o for o in sets if o.target == "profile"):
        key = ".".join(o.keys)
        if key.startswith("moe.") and wl.experts <= 1:
            notes.append(f"--set profile.{key} does not change this plan: the model has no experts")
        elif key == "moe.host_layer_us" and wl.transformer is None:
            notes.append(f"--set profile.{key} does not change this plan: the paper's toy model prices no "
                         "host-bound floor (a transformer --model does)")
        elif key in VALIDATE_ONLY:
            run, instead = VALIDATE_ONLY[key]
            notes.append(f"--set profile.{key} does not change this plan: only `planner validate` reads it, for "
                         f"{run}; --set profile.{instead}=... prices it here")
        elif o.keys[0] == "framework" and len(o.keys) > 1 and o.keys[1] != priced_as:
            notes.append(f"--set profile.{key} does not change this plan: `planner validate` applies "
                         f"[framework.{o.keys[1]}] to that framework's published runs; a plan prices the profile's "
                         "own values")
    return notes


def _applies(hw: Hardware, wl: Workload | None, key: str) -> bool:
    """Whether a profile value can change this plan: not another framework's override, not another GPU family's
    or precision's GEMM efficiency, no GEMM efficiency under the roofline model."""
    prof = hw.profile
    if key.startswith("framework."):
        return False
    # Values read only by work this plan does not have: expert routing (a dense model), attention and context
    # parallelism (the paper's toy model folds attention into the MLP), compiled element-wise kernels (a run that is
    # not compiled).
    if key.startswith("moe.") and wl is not None and wl.experts <= 1:
        return False
    if key.startswith("attention.") and wl is not None and wl.transformer is None:
        return False
    if key == "elementwise.compiled_fraction" and not prof.compiled:
        return False
    if key == "overlap.cp" and wl is not None and wl.transformer is None:
        return False  # context parallelism splits sequences: transformers only
    if key in VALIDATE_ONLY:
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
    moe = wl is not None and wl.experts > 1
    if moe and hw.profile.moe_imbalance != 1:  # the profile prices a routing imbalance: say so, not "balanced"
        not_modelled[0] = (f"stragglers, routing imbalance beyond the profile's (the busiest expert rank at "
                           f"{hw.profile.moe_imbalance:g}x the mean: profile.moe.imbalance), and congestion between "
                           "jobs")
    if moe and wl is not None and wl.transformer is not None and hw.profile.host_moe_layer_s == 0:
        not_modelled.append(HOST_FLOOR_UNPRICED)
    if failures is None:
        not_modelled.insert(0, "failures, checkpoints and restarts (--goodput models them)")
    modelled = list(MODELLED) + (["failures, checkpoints and restarts (goodput, planner.goodput)"] if failures
                                 else [])
    return DependsOn(modelled=modelled, not_modelled=not_modelled, estimated_inputs=est,
                     uncertain=uncertain_inputs(hw, failures, wl, est))


def _transformer_notes(wl: Workload, lay: Layout) -> list[str]:
    """What a transformer layout does that the words alone do not say (Megatron's conventions)."""
    tr = wl.transformer
    if tr is None:
        return []
    notes = []
    if tr.attention == "gqa" and lay.tp_ff > tr.kv_heads:
        notes.append(f"tp_ff={lay.tp_ff} exceeds kv_heads={tr.kv_heads}: each KV head is replicated on "
                     f"{lay.tp_ff // tr.kv_heads} tensor-parallel ranks")
    if wl.experts > 1 and lay.folded:  # Megatron's parallel folding: the expert degrees are etp and expert_ep
        ep, etp = lay.expert_degrees
        ranks = lay.dp * lay.cp * lay.tp_ff
        notes.append(f"the expert layout is folded: the dense layers see dp = {lay.dp} data-parallel ranks, the "
                     f"expert layers regroup each stage's dp x cp x tp = {ranks} ranks as expert-tp {etp} x ep {ep} "
                     f"x expert-dp {ranks // (ep * etp)}")
    elif wl.experts > 1:
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
               goodput: Callable[[float], float] | None = None, exclude: Layout | None = None,
               seed_q: int | None = None, base_hw: Hardware | None = None) -> SearchResult:
    """`goodput` g(N): the deadline of N GPUs is deadline x g(N) of compute (planner.goodput). `exclude`: a layout
    the search may not choose (CP-SAT only: a runner-up search, `runner_up_quanta`). `seed_q`: a seed's integer step
    on options.min_gpus (CP-SAT only: cpsat.solve_cpsat, `_seed_quanta`); `base_hw`: see cpsat.solve_cpsat (a
    SkipProof's `base`)."""
    if exclude is not None and solver != "cpsat":
        raise InvalidInput("a runner-up search (exclude) needs the CP-SAT solver")
    if solver == "exhaustive":
        from planner.search.exhaustive import solve_exhaustive

        return solve_exhaustive(hw, wl, options, deadline_s, time_limit_s=time_limit_s, goodput=goodput)
    from planner.search.cpsat import solve_cpsat

    return solve_cpsat(hw, wl, options, deadline_s, time_limit_s=time_limit_s, workers=workers, goodput=goodput,
                       exclude=exclude, seed_q=seed_q if solver == "cpsat" else None, base_hw=base_hw)


def _rank_order() -> tuple[str, ...]:
    """The frameworks' rank order (planner.export), loaded only for a plan that a framework must run (--emit)."""
    from planner.export import RANK_ORDER

    return RANK_ORDER


def _skip_search(hw: Hardware, wl: Workload, options: SearchOptions, deadline_s: float, solver: str,
                 fm: FailureModel | None, proof: SkipProof) -> SearchResult | None:
    """The search's answer without the search, when `proof` (SkipProof) decides it; None otherwise.

    With the proof's premises (no cluster below N = proof.layout.gpus meets the deadline: options.min_gpus is N; every
    other layout the search can choose on N has an integer step >= runner_up_q), the proof's layout L is the
    answer when, priced here in CP-SAT's integer reading (`_seed_quanta`), its step S_L meets N's deadline cap
    and S_L < runner_up_q: then N has a layout within the deadline, so the search decides N, and L is the only layout
    of least integer step there, so CP-SAT's step stage can only choose L (no tie for the network stage to break)."""
    lay = proof.layout
    s_q = _seed_quanta(hw, wl, options, deadline_s, solver, fm, lay)
    if s_q is None or s_q >= proof.runner_up_q:
        return None
    return SearchResult("cpsat", "optimal", lay, 0.0, 0, step_q=s_q,
                        notes=["proven without a search: the plan's layout stays the only fastest on its count"])


def _seed_quanta(hw: Hardware, wl: Workload, options: SearchOptions, deadline_s: float, solver: str,
                 fm: FailureModel | None, lay: Layout) -> int | None:
    """The integer step (CP-SAT's reading, cpsat.layout_quanta) of `lay` under this hardware when it can seed the
    search of a re-plan bounded at its count (options.min_gpus = lay.gpus, deadline mode, CP-SAT, no other limit):
    `lay` is a layout of the space, fits the memory rule the search applies, and meets its count's deadline cap.
    None otherwise. A seed only lowers that count's cap (cpsat.solve_cpsat's `seed_q`); a skip proof also needs it
    below a runner-up (`_skip_search`)."""
    from planner.cost.memory import usable_bytes
    from planner.search.cpsat import deadline_quanta
    from planner.search.presolve import tuple_memory

    if solver != "cpsat" or options.min_gpus != lay.gpus or options.gpus is not None or options.rank_order:
        return None
    if options.max_gpus is not None or options.below_gpus is not None or check_layout(hw, wl, lay):
        return None
    import numpy as np

    from planner.parallel.space import Tuples

    cols = {d: np.array([lay.degree(d)], dtype=np.int64) for d in (*DEGREES, *OPTIONS)}
    if not tuple_memory(hw, wl, Tuples({**cols, "zero_bubble": np.array([lay.schedule == "zb-h2"])}))[0] <= \
            usable_bytes(hw):
        return None
    g = goodput_fraction(fm, wl.params)(float(lay.gpus)) if fm is not None else 1.0
    cap = deadline_quanta(deadline_s, float(g), wl.steps)
    s_q = layout_quanta_shared(hw, wl, lay, options.dp_overlap)
    return None if cap is not None and s_q > cap else s_q


_QUANTA: dict[tuple[str, Workload, str, bool], int] = {}
QUANTA_ENTRIES = 64


def layout_quanta_shared(hw: Hardware, wl: Workload, lay: Layout, dp_overlap: bool) -> int:
    """cpsat.layout_quanta, kept per process by everything it reads (the hardware and the layout by their repr, the
    workload, the overlap switch; the 64 most recent): the sensitivity's corner proofs price the plan's layout under
    each move, and that move's re-plan prices it again for its skip proof or seed."""
    from planner.search.cpsat import hardware_repr, layout_quanta

    key = (hardware_repr(hw), wl, repr(lay), dp_overlap)
    s_q = recent.recall(_QUANTA, key)
    return recent.keep(_QUANTA, key, layout_quanta(hw, wl, lay, dp_overlap), QUANTA_ENTRIES) if s_q is None else s_q


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

    The question is a PlanRequest (planner.schema.request: every field with its meaning and unit). The keyword form
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


def replan(request: PlanRequest, min_gpus: int | None) -> Plan:
    """`plan(request)` when the caller has proven that no cluster of fewer than `min_gpus` GPUs meets the request's
    deadline (a re-plan whose moved inputs slow every layout: planner.monotone); the search starts at that count.
    None: no bound, the same as `plan`."""
    return _plan(request, min_gpus=min_gpus)


def replan_answer(request: PlanRequest, min_gpus: int | None, proof: SkipProof | None = None,
                  seed: Layout | None = None) -> tuple[int | None, float | None]:
    """(GPUs, wall-clock days) of `replan(request, min_gpus)`, (None, None) where it raises Infeasible: what a
    sensitivity row reads, without the plan document, its notes and the explanation of an infeasible plan. The search
    is the same call; with a proven `min_gpus` the critical-path shortcut (`_past_latency_wall`, which only turns a
    search that would prove every count infeasible into an earlier 'infeasible') is left out. A request with a fixed
    cluster or a power limit checks its answer against the document's figures: it takes the full path.

    `proof` (a SkipProof): when the caller has proven what it states, and `min_gpus` is its layout's count, the
    search is skipped if that layout, priced in CP-SAT's integer reading under this request, meets the deadline on
    that count and its step is below the proof's runner-up step: the answer is then that layout (`_skip_search`).

    `seed` (a layout of `min_gpus` GPUs, the plan's own; a proof's layout serves as one): when it fits and meets the
    deadline on that count under this request, its integer step lowers that count's cap in the search
    (`_seed_quanta`, cpsat.solve_cpsat's `seed_q`): fewer tuples priced and modelled, the same decision."""
    if request.gpus is not None or request.power_mw is not None or request.deadline_days is None:
        try:
            p = replan(request, min_gpus)
        except Infeasible:
            return None, None
        return p.gpus, p.wall_clock_days
    try:
        p = _plan(request, explain_limits=False, min_gpus=min_gpus, lean=True, proof=proof, seed=seed)
    except _Answer as done:
        return done.gpus, done.days
    except Infeasible:
        return None, None
    return p.gpus, p.wall_clock_days  # not reached: a lean _plan always raises


def request_overrides(request: PlanRequest) -> list[Override]:
    """A request's --set overrides, parsed, with --memory-headroom as the profile override it is."""
    overrides: Sequence[str] = request.overrides
    if request.memory_headroom_GB is not None:
        overrides = [*overrides, f"profile.memory.headroom_GB={request.memory_headroom_GB!r}"]
    return parse_overrides(overrides)


def request_hardware(request: PlanRequest, sets: Sequence[Override] | None = None) -> Hardware:
    """The hardware a request's search prices (its profile and --set overrides applied, --memory-headroom too), as
    `_plan` resolves it; `sets`: the request's `request_overrides` when the caller has them."""
    profile = default_profile(request.gpu, request.profile, request.workload, request.runs_on is not None)
    hw = resolve(request.gpu, profile, request_overrides(request) if sets is None else sets)
    if request.runs_on is not None and request.runs_on in hw.profile.frameworks:
        # a launch configuration for a framework the profile describes is priced as that framework runs it
        # ('realistic/torchtitan': its attention kernels, per-layer time, loss memory, FP8 TP gathers)
        hw = with_profile(hw, hw.profile.for_framework(request.runs_on))
    return hw


def request_workload(request: PlanRequest) -> Workload:
    """The workload a request prices: the one it names, else the compute-optimal one at its compute
    (infer_workload), as `_plan` reads it."""
    if request.workload is not None:
        return request.workload
    assert request.compute_flop is not None  # PlanRequest: one of the two
    return infer_workload(request.compute_flop, sparse=request.sparse, batch_scaling=request.batch_scaling,
                          budget=request.budget)


def replan_layout(request: PlanRequest, min_gpus: int, seed: Layout | None = None) -> Layout | None:
    """The layout `replan(request, min_gpus)` chooses (None when infeasible), on the lean path of `replan_answer`
    (deadline mode, no fixed cluster, no power limit; `seed` as there): what a certificate reads
    (planner.sensitivity._certify), without the plan document."""
    if request.gpus is not None or request.power_mw is not None or request.deadline_days is None:
        raise InvalidInput("replan_layout needs a deadline, no --gpus and no --power")
    try:
        _plan(request, explain_limits=False, min_gpus=min_gpus, lean=True, seed=seed)
    except _Answer as done:
        return done.layout
    except Infeasible:
        return None
    return None  # not reached: a lean _plan always raises


class SkipProof(NamedTuple):
    """What planner.sensitivity proves before a re-plan may skip its search (`replan_answer`, `_skip_search`): on
    `layout.gpus` GPUs, every layout but `layout` that the search of the re-planned request can choose has an integer
    step (CP-SAT's reading, quanta) of at least `runner_up_q`, and no smaller cluster meets the deadline. The
    sensitivity gets it from the plan's own request (`runner_up_quanta`) for moves that never shorten any layout's
    integer step nor change which layouts fit or the goodput (planner.monotone, the step family)."""

    layout: Layout
    runner_up_q: int
    base: Hardware | None = None
    """The plan's own hardware (`request_hardware`), when the proof's moves also price no layout faster than it and
    fit the same layouts: the re-plan's search then filters the counts the plan's searches filtered from their
    survivors only (cpsat.solve_cpsat's `base_hw`)."""


class _Answer(Exception):
    """A lean plan's answer (`replan_answer`): the GPUs and wall-clock days, None for both when infeasible; `step_q`
    the search's proven integer step (a runner-up search's, `runner_up_quanta`); `layout` the search's layout
    (`replan_layout`); `status` the search's status (`fewest_below` reads 'optimal' only)."""

    def __init__(self, gpus: int | None, days: float | None, step_q: int | None = None,
                 layout: Layout | None = None, status: str | None = None):
        super().__init__(gpus, days)
        self.gpus, self.days, self.step_q, self.layout, self.status = gpus, days, step_q, layout, status


def runner_up_quanta(request: PlanRequest, layout: Layout) -> int | None:
    """CP-SAT's least integer step (quanta) over every layout of `layout.gpus` GPUs but `layout` that meets the
    request's deadline there, searched as the plan's own search decides that count (its tuples, bounds and models,
    each with `layout` left out: cpsat.Model.exclude); INT_MAX when the search proves that none does; None when it
    did not settle. The runner-up of a SkipProof: `layout` should be the request's own plan's layout."""
    from planner.search.cpsat import INT_MAX

    if request.gpus is not None or request.deadline_days is None or request.solver != "cpsat":
        return None
    try:
        _plan(request, explain_limits=False, min_gpus=layout.gpus, below_gpus=layout.gpus + 1, lean=True,
              exclude=layout)
    except _Answer as found:
        return found.step_q
    except _NoneBelow as stop:
        return INT_MAX if stop.args[0] == "infeasible" else None
    except Infeasible:
        return None
    return None  # not reached: a lean _plan always raises


class _NoneBelow(Exception):
    """A certificate search (`fewest_below`) found no layout: args[0] is its search status."""


def fewest_below(request: PlanRequest, gpus: int, min_gpus: int | None = None) -> int | None:
    """A certificate search for re-plans (planner.sensitivity): the request's search over the GPU counts below `gpus`
    only (from `min_gpus`, a proven bound, when given). `gpus` when it proves that no cluster of fewer GPUs meets the
    deadline; the fewest GPUs that do when one below `gpus` does; None when the search did not settle. Deadline
    mode without --gpus only."""
    if request.gpus is not None or request.deadline_days is None:
        raise InvalidInput("fewest_below needs a deadline and no --gpus")
    try:
        # Without a power limit, the lean path: the count and the search's status, without the plan document.
        p = _plan(request, explain_limits=False, min_gpus=min_gpus, below_gpus=gpus, lean=request.power_mw is None)
    except _NoneBelow as stop:
        return gpus if stop.args[0] == "infeasible" else None
    except _Answer as found:
        return found.gpus if found.status == "optimal" else None
    return p.gpus if p.status == "optimal" else None


def _plan(request: PlanRequest, explain_limits: bool = True, min_gpus: int | None = None,
          below_gpus: int | None = None, lean: bool = False, exclude: Layout | None = None,
          proof: SkipProof | None = None, seed: Layout | None = None) -> Plan:
    """The plan of a validated request (see `plan`). `explain_limits` False: an infeasible plan within a buyer's
    limit does not re-plan to say what would fit (the re-plans that say it). `min_gpus`: see `replan`; `below_gpus`:
    see `fewest_below` (raises _NoneBelow when no layout is found below it); `lean`: see `replan_answer` (raises
    _Answer once the count and the days are known; deadline mode without a fixed cluster or a power limit);
    `exclude`: see `runner_up_quanta`; `proof`, `seed`: see `replan_answer`."""
    r = request
    workload, gpus, days, schedule = r.workload, r.gpus, r.deadline_days, r.schedule
    sets = request_overrides(r)
    hw = request_hardware(r, sets)
    dp_overlap = hw.profile.dp_overlap if r.dp_overlap is None else r.dp_overlap
    fm: FailureModel | None = failure_model(r.failures, sets)  # validated (and its overrides) even when goodput is off
    ignored = []
    if not (hw.profile.goodput if r.goodput is None else r.goodput):
        fm = None
        if r.failures != "default" or any(o.target == "goodput" for o in sets):
            ignored.append(f"goodput is off ({hw.profile.name} profile{', --no-goodput' if r.goodput is False else ''}"
                           "): the failure model and --set goodput.* do not change this plan; --goodput applies them")
    if workload is None:
        workload = request_workload(r)
    ignored += unread_override_notes(sets, workload, hw.profile.name)
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
    site = _facility(r.facility, sets)
    cap, limit_words = buyer_cap(hw, site, r.power_mw, r.max_gpus)
    if gpus is not None and cap is not None and gpus > cap:
        raise InvalidInput(f"--gpus {gpus} is more than {limit_words} allows ({cap} GPUs of {hw.name})")
    options = SearchOptions(schedule=schedule, gpus=gpus, dp_overlap=dp_overlap, max_gpus=cap,
                            fixed=_fixed_dimensions(workload, pins), excluded=excluded,
                            rank_order=_rank_order() if runs_on is not None else (), whole_rounds=runs_on is not None,
                            min_gpus=min_gpus if gpus is None and days is not None else None,
                            below_gpus=below_gpus if gpus is None and days is not None else None)
    problem = precision_problem(hw, workload)
    if problem is not None:
        raise InvalidInput(problem)
    deadline_s = None if gpus is not None or days is None else days * SECONDS_PER_DAY
    result = None
    seed_q = None
    if lean and proof is not None and deadline_s is not None:
        result = _skip_search(hw, workload, options, deadline_s, solver, fm, proof)
        seed = proof.layout if seed is None else seed
    if result is None and lean and seed is not None and deadline_s is not None:
        seed_q = _seed_quanta(hw, workload, options, deadline_s, solver, fm, seed)
    if result is None and not (lean and options.min_gpus is not None):
        result = _past_latency_wall(hw, workload, options, deadline_s, solver)
    if result is None:
        result = run_search(hw, workload, options, deadline_s, solver=solver, time_limit_s=time_limit_s,
                            workers=workers, goodput=None if fm is None else goodput_fraction(fm, workload.params),
                            exclude=exclude, seed_q=seed_q, base_hw=proof.base if proof is not None else None)
    if result.layout is None and below_gpus is not None:
        raise _NoneBelow(result.status)
    rack_notes: list[str] = []
    fewest = result.layout.gpus if result.layout is not None else None
    if result.layout is not None and gpus is None and days is not None and below_gpus is None:
        result, rack_notes = _fewest_racks(hw, workload, options, result, days * SECONDS_PER_DAY, solver,
                                           time_limit_s, workers, fm)
    if lean:
        if result.layout is None:
            raise _Answer(None, None)
        ev = _evaluate(hw, workload, result.layout, dp_overlap=dp_overlap)
        good = None if fm is None else goodput_at(fm, ev.gpus, workload.params).goodput
        raise _Answer(ev.gpus, wall_clock_days(ev.training_days, good), result.step_q, result.layout, result.status)
    if result.layout is None:
        from planner.explain import explain_infeasible, infeasibility_facts

        explanation = explain_infeasible(hw, workload, options, days, result, fm)
        facts = infeasibility_facts(hw, workload, options, days, result, fm)
        if cap is not None and gpus is None and explain_limits:
            explanation = _explain_limit(cap, limit_words, hw, site, days, explanation, r)
        doc = Plan(
            status="unknown" if result.status == "unknown" else "infeasible", hardware=hw.name, gpu=hw.gpu.name,
            profile=hw.profile.name,
            peak_flops=peak_flops(hw, workload), flop_convention=workload.flop_convention, deadline_days=days,
            fixed_gpus=gpus is not None, dp_overlap=dp_overlap,
            gpus=gpus, nodes=None, gpu_hours=None, mfu=None, training_days=None, step_time_s=None, bottleneck=None,
            workload=workload_report(workload),
            layout=None, breakdown=None, memory=None, solver=solver_report(result), explanation=explanation,
            infeasibility=facts, depends_on=depends_on(hw, fm, workload), overrides=[o.text for o in sets],
        )
        raise Infeasible(explanation.splitlines()[0] if explanation else "no feasible layout", explanation,
                         plan=doc)
    ev = _evaluate(hw, workload, result.layout, dp_overlap=dp_overlap)
    notes = rack_notes + list(ignored)
    if runs_on is not None:
        # The framework's rules shrink the space (so the cluster can differ from a plain `plan`): say which.
        rules = ["1F1B schedule", "no second tensor-parallel axis"]
        if runs_on == "torchtitan" and workload.is_transformer:
            rules += ["FSDP (ZeRO-3)", "no selective recomputation"]
        if workload.transformer is not None and workload.transformer.attention == "gqa":
            rules.append(f"tensor parallelism dividing the {workload.transformer.kv_heads} KV heads")
        notes.append(f"searched only layouts {runs_on} runs ({', '.join(rules)}): the cluster may differ from a plan "
                     "without --emit")
    if workload.family:
        notes.append(f"model scaled from the {workload.family} family's published configs by its rules "
                     f"(models/families/{workload.family}.toml, docs/families.md): N and D = 20 N for the budget")
    if workload.requested_compute_flop:
        ratio = workload.compute_flop / workload.requested_compute_flop
        if abs(ratio - 1.0) > 0.005:
            notes.append(f"the rounded shape trains {workload.compute_flop:.3g} FLOP, {ratio:.3f}x the requested "
                         f"{workload.requested_compute_flop:.3g} (paper budget: tokens = 20 N_p of the rounded shape; "
                         f"--budget exact trains the request)")
    doc = plan_from_evaluation(hw, workload, ev, result, days, price_per_gpu_hour, notes, dp_overlap=dp_overlap,
                               fixed_gpus=gpus is not None, failures=fm, overrides=[o.text for o in sets],
                               facility=site)
    if (r.power_mw is not None and doc.facility_power_MW is not None
            and doc.facility_power_MW > r.power_mw * (1 + 1e-12)):
        # Whole racks: the spares of the racks a layout takes count in its power, which the GPU cap could not see.
        assert doc.gpus is not None
        return _plan(r.model_copy(update={"max_gpus": doc.gpus - 1}), explain_limits, min_gpus, below_gpus)
    if cap is not None:
        doc = doc.model_copy(update={"notes": [*doc.notes, f"within {limit_words}: at most {cap:,} GPUs"]})
    if gpus is not None and days is not None and (doc.wall_clock_days or ev.training_days) > days:
        # Fixed-cluster mode with a deadline: the fastest layout on these GPUs is the best there is, so missing the
        # deadline means no layout on this cluster meets it.
        proven = "proven fastest" if result.status == "optimal" else "fastest found (not proven)"
        took = (f"{ev.training_days:.4g} days" if fm is None else
                f"{doc.wall_clock_days:.4g} wall-clock days ({ev.training_days:.4g} of compute at goodput "
                f"{fmt_pct(doc.goodput.goodput)})" if doc.goodput else "")
        explanation = (f"on {gpus:,} GPU{'' if gpus == 1 else 's'} of {hw.name} the {proven} layout takes {took}, more "
                       f"than the {days:g} days asked; drop --gpus to find the fewest GPUs that meet the deadline")
        doc = doc.model_copy(update={"status": "infeasible", "explanation": explanation,
                                     "infeasibility": Infeasibility(reason="fixed_cluster")})
        raise Infeasible(explanation, explanation, plan=doc)
    if fewest is not None and doc.gpus is not None and doc.gpus > fewest:
        doc = doc.model_copy(update={"fewest_gpus": fewest})
    if r.why_smaller and gpus is None and days is not None and doc.gpus is not None:
        doc = doc.model_copy(update={"smaller_clusters": _smaller_clusters(  # below the fewest GPUs, not the racks'
            hw, workload, options, fewest or doc.gpus, days, solver, time_limit_s, workers, fm)})
    return doc


RACK_PROBES = 64
"""Most counts the fewest-racks step (`_fewest_racks`) searches after the fewest GPUs; beyond it the plan says which
counts it left undecided and is not 'optimal'."""


def rack_candidates(hw: Hardware, n0: int, cap: int | None = None) -> list[tuple[int, int]]:
    """(racks, GPUs) of the counts above `n0`, up to the GPUs the racks of `n0` hold (and `cap`), that take fewer racks
    than `n0` (planner.parallel.space.rack_use), fewest racks first, then fewest GPUs. Empty unless the lowest level
    is used in part and bought whole (GB200/GB300 NVL72: `unit`/`usable`)."""
    first = hw.levels[0]
    use0 = rack_use(hw, n0)
    if not first.subdivided or first.size is None or use0 is None:
        return []
    top = use0.groups * first.size
    for bound in (cap, hw.max_gpus):
        if bound is not None:
            top = min(top, bound)
    if top <= n0:
        return []
    import numpy as np

    from planner.parallel.space import level_products

    counts = np.arange(n0 + 1, top + 1, dtype=np.int64)
    prods, valid = level_products(hw, counts)
    racks = counts // np.maximum(prods[:, 0], 1)
    keep = valid & (racks < use0.groups)
    return sorted(zip(racks[keep].tolist(), counts[keep].tolist()))


def _fewest_racks(hw: Hardware, wl: Workload, options: SearchOptions, result: SearchResult, deadline_s: float,
                  solver: str, time_limit_s: float | None, workers: int, fm: FailureModel | None
                  ) -> tuple[SearchResult, list[str]]:
    """Deadline mode on hardware whose racks are bought whole: after the fewest GPUs N0 (`result`), the counts between
    N0 and the GPUs its racks hold that take fewer racks (`rack_candidates`), each decided by the plan's own search on
    exactly that many GPUs (its fastest layout, within the deadline or not), fewest racks first, then fewest GPUs; the
    first that meets the deadline is the plan (docs/model.md, "Racks bought whole"). Returns the result to plan from
    and the note that says why the count is larger than the fewest GPUs. A count whose search did not settle (or one
    past RACK_PROBES, or past the plan's --time-limit, which these searches share) is named in a note and the result
    is not 'optimal'."""
    import dataclasses

    assert result.layout is not None
    n0 = result.layout.gpus
    cands = rack_candidates(hw, n0, options.max_gpus)
    if not cands:
        return result, []
    use0 = rack_use(hw, n0)
    assert use0 is not None
    good = None if fm is None else goodput_fraction(fm, wl.params)
    probe_opts = dataclasses.replace(options, min_gpus=None, below_gpus=None)
    undecided: list[int] = []
    spent = 0.0
    for k, (racks, n) in enumerate(cands):
        left = None if time_limit_s is None else time_limit_s - spent
        if k >= RACK_PROBES or (left is not None and left <= 0.0):
            undecided.extend(c for _, c in cands[k:])
            break
        res = run_search(hw, wl, dataclasses.replace(probe_opts, gpus=n), None, solver=solver,
                         time_limit_s=left, workers=workers)
        spent += res.wall_s
        if res.layout is None:
            if res.status != "infeasible":
                undecided.append(n)
            continue
        ev = _evaluate(hw, wl, res.layout, dp_overlap=options.dp_overlap)
        limit = deadline_s * (good(n) if good is not None else 1.0)
        if ev.training_s <= limit * (1.0 + 1e-9):
            status = "optimal" if res.status == "optimal" and result.status == "optimal" and not undecided else \
                "feasible"
            note = (f"{n0:,} GPUs would need {use0.groups} racks; {n:,} GPUs fit in {racks} racks: racks are bought "
                    "whole, so the plan takes the fewest racks that meet the deadline, then the fewest GPUs")
            notes = [note] + _undecided_note(undecided)
            chosen = dataclasses.replace(res, status=status, wall_s=result.wall_s + spent,
                                         notes=[*result.notes, *res.notes, note])
            return chosen, notes
        if res.status != "optimal":  # the fastest layout on n is not proven: n is not decided
            undecided.append(n)
    if undecided:
        return dataclasses.replace(result, status="feasible", wall_s=result.wall_s + spent), _undecided_note(undecided)
    return dataclasses.replace(result, wall_s=result.wall_s + spent), []


def _undecided_note(undecided: Sequence[int]) -> list[str]:
    if not undecided:
        return []
    shown = ", ".join(f"{n:,}" for n in undecided[:8]) + (" ..." if len(undecided) > 8 else "")
    return [f"fewest racks not proven: the search did not settle {len(undecided)} count"
            f"{'s' if len(undecided) > 1 else ''} with fewer racks ({shown})"]


SMALLER_PROBE_LIMIT_S = 10.0
"""Most seconds the fixed-cluster search behind a plan's `smaller_clusters` runs (beyond it the entry says
'unknown')."""


def _smaller_clusters(hw: Hardware, wl: Workload, options: SearchOptions, gpus: int, days: float, solver: str,
                      time_limit_s: float | None, workers: int, fm: FailureModel | None) -> list[ClusterSize]:
    """Why the sizes below the plan's fail (planner.explain.smaller_clusters), the nearest usable one searched with
    the plan's own search on exactly that many GPUs."""
    import dataclasses

    from planner.explain import Probe, smaller_clusters

    def probe(n: int) -> Probe:
        limit = SMALLER_PROBE_LIMIT_S if time_limit_s is None else min(time_limit_s, SMALLER_PROBE_LIMIT_S)
        res = run_search(hw, wl, dataclasses.replace(options, gpus=n), None, solver=solver, time_limit_s=limit,
                         workers=workers)
        if res.layout is None:
            return Probe(res.status, None, None)
        ev = _evaluate(hw, wl, res.layout, dp_overlap=options.dp_overlap)
        good = None if fm is None else goodput_at(fm, ev.gpus, wl.params).goodput
        return Probe(res.status, ev.training_days, wall_clock_days(ev.training_days, good))

    return smaller_clusters(hw, wl, options, gpus, days, probe)
