"""`evaluate`: price a given layout (flags in the registry's or Megatron's words, or a saved plan) with the same
breakdown as `plan`."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from planner.choices import BatchScaling, Budget, LayoutSchedule
from planner.cli.app import app
from planner.cli.options import (
    LAYOUT_PANEL,
    BatchScalingOpt,
    BatchSequencesOpt,
    BatchTokensOpt,
    BudgetOpt,
    BwOpt,
    ComputeOpt,
    DFfOpt,
    DModelOpt,
    DpOverlapOpt,
    ExpertsOpt,
    FailuresOpt,
    GoodputOpt,
    JsonOpt,
    LatencyOpt,
    LayersOpt,
    MemoryHeadroomOpt,
    ModelOpt,
    PrecisionOpt,
    PriceOpt,
    ProfileOpt,
    SeqLenOpt,
    SetOpt,
    SparseOpt,
    TokensOpt,
    check_positive_flag,
    dimension_parser,
    number_option,
    overrides_of,
    whole_option,
)
from planner.cli.output import emit_json, plan_json, stdout_console
from planner.errors import InvalidInput
from planner.parallel.dimensions import DIMENSIONS, Dimension

if TYPE_CHECKING:
    from planner.schema import Workload

# The module level holds what typer reads to build the command line; the body imports the services it calls, so
# that `planner --help` and the light commands do not load the planner.


def _flag(d: Dimension) -> str:
    return "--" + d.name.replace("_", "-")


def _with_dimension_flags(func: Callable[..., None]) -> Callable[..., None]:
    """One `--NAME` option per dimension of the registry (planner.parallel.dimensions) in place of `**dims`, so that a
    new dimension reaches `evaluate` without a new parameter here."""
    sig = inspect.signature(func, eval_str=True)
    fixed = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    extra = []
    for d in DIMENSIONS:
        default = d.label(d.default if d.default is not None else 1)
        help_text = d.help.rstrip(".") + f" (default {default})."
        annotation: Any
        if d.labels:
            annotation = Annotated[int | None, typer.Option(
                _flag(d), parser=dimension_parser(d), metavar="|".join(d.labels), help=help_text,
                rich_help_panel=LAYOUT_PANEL, show_default=False)]
        else:
            annotation = Annotated[int | None, whole_option(_flag(d), help=help_text, rich_help_panel=LAYOUT_PANEL,
                                                              show_default=False)]
        extra.append(inspect.Parameter(d.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation))

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> None:
        return func(**kwargs)

    wrapper.__signature__ = sig.replace(parameters=[*fixed, *extra])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in (*fixed, *extra)} | {"return": None}
    return wrapper


def _megatron_layout(dims: dict[str, int | None], tp: int | None, vpp: int | None, mbs: int | None,
                     gbs: int | None, wl: Workload) -> tuple[dict[str, int | None], list[str]]:
    """Megatron's words (tp, pp, dp, ep, vpp, micro-batch and global batch in sequences) -> the registry's degrees.

    Megatron's data-parallel size counts the expert ranks (the dense layers' replicas): our N_DP = dp / ep. The
    microbatch count is gbs / (dp x mbs)."""
    out = dict(dims)
    for flag, ours, value in (("--tp", "tp_ff", tp), ("--vpp", "interleave", vpp)):
        if value is not None:
            if dims.get(ours) is not None:
                raise InvalidInput(f"{flag} and --{ours.replace('_', '-')} name the same degree; give one")
            out[ours] = value
    ep = dims.get("ep") or 1
    dp_m = dims.get("dp") or 1
    if dp_m % ep:
        raise InvalidInput(f"--dp {dp_m} (Megatron's data-parallel size, which counts the expert ranks) is not a "
                           f"multiple of --ep {ep}")
    out["dp"] = dp_m // ep
    if mbs is not None:
        if dims.get("microbatches") is not None:
            raise InvalidInput("--mbs sets the microbatch count (gbs / (dp x mbs)); drop --microbatches")
        seqs = wl.batch_tokens // wl.seq_len
        if seqs % (dp_m * mbs):
            raise InvalidInput(f"global batch {seqs} sequences is not divisible by dp {dp_m} x mbs {mbs}")
        out["microbatches"] = seqs // (dp_m * mbs)
    note = (f"Megatron layout: tp {out.get('tp_ff') or 1}, pp {dims.get('pp') or 1}, dp {dp_m}"
            + (f" (= expert-dp {dp_m // ep} x ep {ep})" if ep > 1 else "")
            + f", vpp {out.get('interleave') or 1}, micro-batch {mbs or 'n/a'} sequences, global "
            f"batch {wl.batch_tokens // wl.seq_len} sequences -> microbatches {out.get('microbatches') or 1}")
    return out, [note]


@app.command("evaluate")
@_with_dimension_flags
def evaluate_command(
    plan_file: Annotated[Path | None, typer.Option(
        "--plan", help="Re-evaluate a plan printed by `plan --json` (its workload and layout) on --gpu: the what-if "
        "question. Re-placed greedily if --gpu has different network levels.", metavar="FILE.json",
        rich_help_panel=LAYOUT_PANEL, show_default=False, dir_okay=False)] = None,
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="Hardware name or TOML file (default h100, or the plan's hardware with --plan).",
        metavar="NAME|FILE.toml", show_default=False)] = None,
    schedule: Annotated[LayoutSchedule | None, typer.Option(
        "--schedule", help="1f1b (default) or zb-h2.", rich_help_panel=LAYOUT_PANEL, show_default=False)] = None,
    placement: Annotated[str | None, typer.Option(
        "--placement", help="Factors per network level, bottom-up, e.g. 'dp=1,4;tp_ff=8,1'. Degrees left out are "
        "placed greedily (TP first, then CP, PP, DP, EP, lowest level first); with Megatron's flags (--tp, --vpp, "
        "--mbs, --gbs, --etp) and no --placement, in Megatron's rank order (tp-cp-ep-dp-pp).",
        rich_help_panel=LAYOUT_PANEL,
        show_default=False)] = None,
    compute: ComputeOpt = None,
    sparse: SparseOpt = False,
    batch_scaling: BatchScalingOpt = None,
    budget: BudgetOpt = Budget.exact,
    d_model: DModelOpt = None,
    d_ff: DFfOpt = None,
    layers: LayersOpt = None,
    experts: ExpertsOpt = None,
    batch_tokens: BatchTokensOpt = None,
    tokens: TokensOpt = None,
    model: ModelOpt = None,
    batch_sequences: BatchSequencesOpt = None,
    seq_len: SeqLenOpt = None,
    precision: PrecisionOpt = None,
    tp: Annotated[int | None, whole_option(
        "--tp", help="Megatron's tensor-parallel size (= --tp-ff). With --tp, --vpp, --mbs or --gbs, --dp is "
        "Megatron's data-parallel size, which counts the expert ranks.", rich_help_panel=LAYOUT_PANEL,
        show_default=False)] = None,
    vpp: Annotated[int | None, whole_option(
        "--vpp", help="Megatron's virtual pipeline stages per rank (= --interleave).", rich_help_panel=LAYOUT_PANEL,
        show_default=False)] = None,
    mbs: Annotated[int | None, whole_option(
        "--mbs", help="Micro-batch size in sequences (sets microbatches = gbs / (dp x mbs)).",
        rich_help_panel=LAYOUT_PANEL, show_default=False)] = None,
    gbs: Annotated[int | None, whole_option(
        "--gbs", help="Global batch in sequences (as --batch-sequences).", rich_help_panel=LAYOUT_PANEL,
        show_default=False)] = None,
    etp: Annotated[int | None, whole_option(
        "--etp", help="Megatron's expert tensor-parallel size: folds the expert layout, --ep x --etp, over dp x cp x "
        "tp (Megatron's parallel folding; --ep may then exceed --dp). --dp is Megatron's data-parallel size. Equal "
        "to --tp (as --emit megatron writes it) with --dp a multiple of --ep, nothing is folded.",
        rich_help_panel=LAYOUT_PANEL, show_default=False)] = None,
    first_stage_layers: Annotated[int | None, whole_option(
        "--first-stage-layers", help="Layers on the first (virtual) pipeline stage; the other stages split the rest "
        "evenly (Megatron --decoder-first-pipeline-num-layers).", rich_help_panel=LAYOUT_PANEL,
        show_default=False)] = None,
    last_stage_layers: Annotated[int | None, whole_option(
        "--last-stage-layers", help="Layers on the last (virtual) pipeline stage (Megatron "
        "--decoder-last-pipeline-num-layers).", rich_help_panel=LAYOUT_PANEL, show_default=False)] = None,
    days: Annotated[float | None, number_option(
        "--days", help="A deadline to compare against (default: none, or the plan's with --plan).",
        show_default=False)] = None,
    dp_overlap: DpOverlapOpt = None,
    profile: ProfileOpt = None,
    goodput: GoodputOpt = None,
    failures: FailuresOpt = "default",
    set_: SetOpt = None,
    bw: BwOpt = None,
    latency: LatencyOpt = None,
    memory_headroom: MemoryHeadroomOpt = None,
    price_per_gpu_hour: PriceOpt = None,
    json_out: JsonOpt = False,
    **dims: int | None,
) -> None:
    """Price a given layout (same breakdown as `plan`). Exit 1 if it does not fit in GPU memory or misses --days."""
    from planner import api
    from planner.cli.inputs import (
        hardware_of_plan,
        layout_of_plan,
        load_plan_file,
        make_layout,
        with_batch_sequences,
        with_training,
        workload_of_flags,
        workload_of_plan,
    )
    from planner.overrides import parse_overrides
    from planner.parallel.placement import greedy_placement, parse_placement
    from planner.render.plan import print_plan
    from planner.schema import DEGREES

    check_positive_flag("--days", days)
    check_positive_flag("--price-per-gpu-hour", price_per_gpu_hour)

    sets = parse_overrides(overrides_of(set_, bw, latency, memory_headroom))
    layout_flags: dict[str, object] = {_flag(d): dims.get(d.name) for d in DIMENSIONS}
    layout_flags.update({"--schedule": schedule, "--placement": placement, "--tp": tp, "--vpp": vpp, "--mbs": mbs,
                         "--gbs": gbs, "--batch-sequences": batch_sequences, "--etp": etp,
                         "--first-stage-layers": first_stage_layers, "--last-stage-layers": last_stage_layers})
    if gbs is not None and batch_sequences is not None and gbs != batch_sequences:
        raise InvalidInput(f"--gbs {gbs} and --batch-sequences {batch_sequences} disagree; give one")
    shape = {"--d-model": d_model, "--d-ff": d_ff, "--layers": layers, "--experts": experts,
             "--batch-tokens": batch_tokens, "--tokens": tokens}
    notes: list[str] = []
    if plan_file is not None:
        clash = [f for f, v in {**layout_flags, **shape, "--compute": compute, "--model": model,
                                "--batch-scaling": batch_scaling, "--seq-len": seq_len,
                                "--precision": precision}.items() if v is not None]
        clash += ["--sparse"] if sparse else []
        if clash:
            raise InvalidInput(f"--plan gives the workload and the layout; drop {', '.join(clash)}")
        doc = load_plan_file(plan_file)
        if doc.overrides:  # the plan's what-if holds for its re-evaluation (new --set values come after, and win)
            sets = parse_overrides([*doc.overrides, *[o.text for o in sets]])
        hw_name, prof_name = hardware_of_plan(doc, gpu), profile or doc.profile
        hw = api.resolve(hw_name, prof_name, sets)
        wl = workload_of_plan(doc)
        layout, notes = layout_of_plan(doc, hw, wl)
        if doc.overrides:
            notes.append(f"with the plan's overrides: {', '.join(doc.overrides)}")
        if days is None:
            days = doc.deadline_days
        dp_overlap = doc.dp_overlap if dp_overlap is None else dp_overlap
        notes.insert(0, f"workload and layout from {plan_file} (planned on {doc.hardware})")
    else:
        given = with_training(workload_of_flags(compute, model, sparse, batch_scaling, shape), seq_len, precision)
        hw_name, prof_name = gpu or "h100", api.default_profile(gpu or "h100", profile, given) or "paper"
        hw = api.resolve(hw_name, prof_name, sets)
        if given is not None:
            wl = given
        else:
            from planner.workload import infer_workload

            assert compute is not None  # workload_of_flags returns None only in compute mode
            wl = infer_workload(compute, sparse=sparse, batch_scaling=(batch_scaling or BatchScaling.paper).value,
                                budget=budget.value)
        for flag, v in layout_flags.items():
            least = next((d.minimum for d in DIMENSIONS if _flag(d) == flag), 1)
            if flag in ("--first-stage-layers", "--last-stage-layers"):
                least = 0
            if isinstance(v, int) and v < least:
                raise InvalidInput(f"{flag} must be a whole number >= {least}, got {v}")
        resized = with_batch_sequences(wl, gbs if gbs is not None else batch_sequences,
                                        "--gbs" if gbs is not None else "--batch-sequences")
        assert resized is not None
        wl = resized
        extra: dict[str, int | None] = {"first_stage_layers": first_stage_layers,
                                        "last_stage_layers": last_stage_layers}
        # --etp equal to the tensor-parallel size with dp a multiple of ep is the plain expert layout, as `planner
        # validate` reads a published run and as `--emit megatron` writes one (it always names
        # --expert-tensor-parallel-size); any other --etp folds the expert layout (Megatron's parallel folding)
        tp_size = tp if tp is not None else dims.get("tp_ff") or 1
        if etp is not None and not api.folds_experts(tp_size, dims.get("dp") or 1, dims.get("ep") or 1, etp):
            notes.append(f"--etp {etp} equals the tensor-parallel size: the expert layers keep the attention's "
                         "tensor split (no folding)")
        elif etp is not None:  # parallel folding: the placed degrees are the attention layout, ep 1
            extra.update(expert_ep=dims.get("ep") or 1, etp=etp)
            dims = {**dims, "ep": None}
            notes.append(f"folded expert layout: ep {extra['expert_ep']} x etp {etp} over dp x cp x tp (Megatron's "
                         "parallel folding)")
        megatron = any(v is not None for v in (tp, vpp, mbs, gbs, etp))
        if megatron:
            dims, megatron_notes = _megatron_layout(dict(dims), tp, vpp, mbs, gbs, wl)
            notes.extend(megatron_notes)
        values = {d.name: v if (v := dims.get(d.name)) is not None else (d.default if d.default is not None else 1)
                  for d in DIMENSIONS}
        degrees = {d: values[d] for d in DEGREES}
        fixed = parse_placement(placement, degrees, len(hw.levels)) if placement is not None else None
        # Megatron's words without --placement: the ranks sit where Megatron's default order puts them, as
        # `--emit megatron` and `planner validate` place them (so the emitted flags price as emitted)
        ranked = api.megatron_placement(hw, degrees) if megatron and not fixed else None
        layout = make_layout(values, (schedule or LayoutSchedule.one_f_one_b).value,
                              ranked or greedy_placement(hw, degrees, fixed), extra)
        if ranked is not None:
            if any(degrees[d] > 1 for d in DEGREES):
                notes.append("placement in Megatron's default rank order (tp-cp-ep-dp-pp, tp innermost); --placement "
                             "sets another")
        elif any(degrees[d] > 1 for d in DEGREES if d not in (fixed or {})):
            notes.append("placement completed greedily (TP first, then CP, PP, DP, EP, lowest level first)")

    doc = api.evaluate_plan(layout, hw_name, wl, days=days, profile=prof_name, overrides=[o.text for o in sets],
                            dp_overlap=dp_overlap, goodput=goodput, failures=failures,
                            price_per_gpu_hour=price_per_gpu_hour, notes=notes)
    why = doc.explanation
    if json_out:
        emit_json(plan_json(doc))
    else:
        print_plan(stdout_console(), doc, evaluated=True)
    if why:
        if not json_out:  # with --json the document's explanation says it
            sys.stderr.write(f"infeasible: {why}\n")
        raise typer.Exit(1)
