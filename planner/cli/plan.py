"""`plan` (and the `plan` console script): flags -> a PlanRequest -> planner.api.plan -> tables, JSON or a launch
configuration."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from planner.choices import BatchScaling, Budget, Framework, RankBy, ScheduleChoice, Solver
from planner.cli.app import app, plan_app, print_version
from planner.cli.options import (
    COMPARE_PANEL,
    OUTPUT_PANEL,
    RAY_HELP,
    SEARCH_PANEL,
    WHAT_IF_PANEL,
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
    GpuOpt,
    LatencyOpt,
    LayersOpt,
    MemoryHeadroomOpt,
    ModelFamilyOpt,
    ModelOpt,
    PrecisionOpt,
    PriceOpt,
    ProfileOpt,
    SeqLenOpt,
    SetOpt,
    SparseOpt,
    TokensOpt,
    dimension_parser,
    number_option,
    overrides_of,
    whole_option,
)
from planner.cli.output import emit_json, plan_json, searching, stdout_console, to_json
from planner.errors import Infeasible, InvalidInput
from planner.parallel.dimensions import BY_NAME

if TYPE_CHECKING:
    from planner.schema.request import PlanRequest

# The module level holds what typer reads to build the command line (option declarations, choice enums), so that
# `planner --help` and the light commands do not load the planner; the body imports the services it calls.


def plan_command(
    compute: ComputeOpt = None,
    gpu: GpuOpt = "h100",
    days: Annotated[float | None, number_option(
        "--days", help="Deadline in days (default 90 unless --gpus fixes the cluster).", show_default=False)] = None,
    gpus: Annotated[int | None, whole_option(
        "--gpus", help="Fix the cluster size: fastest layout on exactly N GPUs.", rich_help_panel=SEARCH_PANEL,
        show_default=False)] = None,
    sparse: SparseOpt = False,
    batch_scaling: BatchScalingOpt = None,
    budget: BudgetOpt = Budget.exact,
    schedule: Annotated[ScheduleChoice, typer.Option(
        "--schedule", help="Pipeline schedule; auto lets the solver choose.",
        rich_help_panel=SEARCH_PANEL)] = ScheduleChoice.auto,
    solver: Annotated[Solver, typer.Option(
        "--solver", help="cpsat (proves optimality) or exhaustive (brute-force enumeration of the same space).",
        rich_help_panel=SEARCH_PANEL)] = Solver.cpsat,
    time_limit: Annotated[float, number_option(
        "--time-limit", help="Search time limit in seconds; a stopped search reports its bound and gap.",
        rich_help_panel=SEARCH_PANEL)] = 60.0,
    workers: Annotated[int, whole_option("--workers", help="CP-SAT worker threads.", rich_help_panel=SEARCH_PANEL)] = 2,
    dp_overlap: DpOverlapOpt = None,
    profile: ProfileOpt = None,
    goodput: GoodputOpt = None,
    failures: FailuresOpt = "default",
    set_: SetOpt = None,
    bw: BwOpt = None,
    latency: LatencyOpt = None,
    memory_headroom: MemoryHeadroomOpt = None,
    sensitivity: Annotated[bool, typer.Option(
        "--sensitivity", help="Re-plan with each estimated input (and latency, top-level bandwidth, failure rate, "
        "restart time) moved down and up; show the change in GPUs and days, largest first (re-plans here, or on "
        "one process per core when they are long enough to repay starting them).",
        rich_help_panel=WHAT_IF_PANEL)] = False,
    ray: Annotated[str | None, typer.Option(
        "--ray", help="With --sensitivity: " + RAY_HELP, metavar="auto|ADDRESS|local",
        rich_help_panel=WHAT_IF_PANEL, show_default=False)] = None,
    tornado: Annotated[Path | None, typer.Option(
        "--tornado", help="With --sensitivity: also write a tornado chart PNG.", metavar="FILE.png",
        rich_help_panel=WHAT_IF_PANEL, show_default=False, dir_okay=False)] = None,
    confidence: Annotated[float | None, number_option(
        "--confidence", help="Plan the fewest GPUs that meet the deadline with probability P (0 < P < 1) under the "
        "uncertain inputs and the model's measured error; shows the days' P10/P50/P90 (docs/confidence.md).",
        metavar="P", rich_help_panel=WHAT_IF_PANEL, show_default=False)] = None,
    samples: Annotated[int, whole_option("--samples", help="With --confidence: quasi-Monte Carlo samples.",
                                         rich_help_panel=WHAT_IF_PANEL)] = 64,
    seed: Annotated[int, whole_option("--seed", help="With --confidence: seed of the sample points.",
                                      rich_help_panel=WHAT_IF_PANEL)] = 0,
    price_per_gpu_hour: PriceOpt = None,
    power_mw: Annotated[float | None, number_option(
        "--power-mw", help="A buyer's limit: facility power at most MW (GPU boards, nodes, switches x PUE; "
        "planner.economics). The fewest GPUs within it that meet --days, or why not and what fits.",
        metavar="MW", rich_help_panel=SEARCH_PANEL, show_default=False)] = None,
    max_gpus: Annotated[int | None, whole_option(
        "--max-gpus", help="A buyer's limit: at most N GPUs. The fewest within it that meet --days, or why not and "
        "what fits.", rich_help_panel=SEARCH_PANEL, show_default=False)] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print one JSON document and nothing else on stdout: a Plan; with several accelerators a "
        "Comparison, with --emit a LaunchDocument (`planner schema`; docs/api.md). A failure too is one document (an "
        "infeasible Plan, or {\"status\": \"error\", ...} for bad input), with nothing on stderr and a non-zero exit "
        "code.", rich_help_panel=OUTPUT_PANEL)
    ] = False,
    d_model: DModelOpt = None,
    d_ff: DFfOpt = None,
    layers: LayersOpt = None,
    experts: ExpertsOpt = None,
    batch_tokens: BatchTokensOpt = None,
    tokens: TokensOpt = None,
    model: ModelOpt = None,
    model_family: ModelFamilyOpt = None,
    batch_sequences: BatchSequencesOpt = None,
    seq_len: SeqLenOpt = None,
    precision: PrecisionOpt = None,
    cp: Annotated[int | None, whole_option(
        "--cp", help="Fix context parallelism N_CP (default: the search chooses).", rich_help_panel=SEARCH_PANEL,
        show_default=False)] = None,
    sp: Annotated[int | None, typer.Option(
        "--sp", parser=dimension_parser(BY_NAME["sp"]), metavar="off|on",
        help="Fix sequence parallelism: 'on' splits the activations that tensor parallelism leaves whole (layer "
        "norms, dropout, residuals) along the sequence over the TP ranks, trading each "
        "TP all-reduce for a reduce-scatter and an all-gather of the same volume and cutting that activation memory "
        "by the TP degree (Megatron's --sequence-parallel; needs a transformer and TP > 1) (default: "
        "the search chooses).", rich_help_panel=SEARCH_PANEL, show_default=False)] = None,
    recompute: Annotated[int | None, typer.Option(
        "--recompute", parser=dimension_parser(BY_NAME["recompute"]), metavar="none|selective|full",
        help="Fix activation recomputation (default: the search chooses).", rich_help_panel=SEARCH_PANEL,
        show_default=False)] = None,
    zero: Annotated[int | None, whole_option(
        "--zero", help="Fix the ZeRO stage 1, 2 or 3 (default: the search chooses).", rich_help_panel=SEARCH_PANEL,
        show_default=False)] = None,
    tp_model: Annotated[int | None, whole_option(
        "--tp-model", help="Fix the paper's second tensor-parallel axis N_TP,model (1: Megatron's 1D TP).",
        rich_help_panel=SEARCH_PANEL, show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress spinner on stderr.",
                                        rich_help_panel=OUTPUT_PANEL)] = False,
    version: Annotated[bool, typer.Option(
        "--version", help="Print the version (one JSON document with --json) and exit.", callback=print_version,
        is_eager=True)] = False,
    emit: Annotated[Framework | None, typer.Option(
        "--emit", help="Search only layouts this framework runs and print its launch configuration (Megatron-LM "
        "arguments or a torchtitan TOML job config, the prediction in comment lines) instead of the tables; with "
        "--json, one document with the plan and the configuration.", rich_help_panel=OUTPUT_PANEL,
        show_default=False, case_sensitive=False)] = None,
    objective: Annotated[RankBy | None, typer.Option(
        "--objective", help="With several accelerators (--gpu h100,h200,b200,gb200-nvl72 or --gpu all): rank their "
        "plans by cost (USD for the wall-clock time held; default), gpus, days (wall-clock) or energy (MWh).",
        rich_help_panel=COMPARE_PANEL, show_default=False, case_sensitive=False)] = None,
    gpu_price: Annotated[list[str] | None, typer.Option(
        "--gpu-price", help="With several accelerators: the price of one of them, USD per GPU-hour, e.g. h100=2.5 "
        "(repeatable, or h100=2.5,b200=6; the others keep --price-per-gpu-hour or their hardware file's).",
        metavar="NAME=USD",
        rich_help_panel=COMPARE_PANEL, show_default=False)] = None,
) -> None:
    """Smallest cluster and optimal layout that trains the model within --days (or the fastest on --gpus)."""
    from planner import api
    from planner.cli.inputs import with_batch_sequences, with_training, workload_of_flags, workload_of_plan
    from planner.render.plan import print_plan
    from planner.schema.request import PlanRequest

    shape = {"--d-model": d_model, "--d-ff": d_ff, "--layers": layers, "--experts": experts,
             "--batch-tokens": batch_tokens, "--tokens": tokens}
    given = workload_of_flags(compute, model, sparse, batch_scaling, shape, model_family, budget)
    if model_family is not None:
        compute = None  # the family's workload carries the budget (requested_compute_flop)
    workload = with_batch_sequences(with_training(given, seq_len, precision), batch_sequences)
    fixed = {name: v for name, v in (("cp", cp), ("sp", sp), ("recompute", recompute), ("zero", zero),
                                     ("tp_model", tp_model)) if v is not None}
    if tornado is not None and not sensitivity:
        raise InvalidInput("--tornado draws the --sensitivity table: add --sensitivity")
    if ray is not None and not sensitivity:
        raise InvalidInput("--ray runs the --sensitivity re-plans on a Ray cluster: add --sensitivity")
    if ray is not None:
        from planner.workers import check_ray

        check_ray(ray)  # missing or unreachable: one line now, not after the plan
    if tornado is not None:
        if tornado.suffix.lower() != ".png":
            raise InvalidInput(f"--tornado {tornado}: the chart is a PNG; give a FILE.png")
        from planner.files import check_output

        check_output(tornado, "--tornado")  # a FIFO, device or link is refused now, not after the re-plans
    if sensitivity and emit is not None:
        raise InvalidInput("--sensitivity and --emit: give one")
    several = "," in gpu or gpu.strip() == "all" or objective is not None or bool(gpu_price)
    if several and (emit is not None or sensitivity):
        raise InvalidInput(f"{'--emit' if emit is not None else '--sensitivity'} takes one accelerator; several "
                           "(--gpu A,B, --gpu all, --objective, --gpu-price) rank plans instead")
    if several:
        from planner.compare import accelerator_names

        names = accelerator_names(gpu)
    else:
        names = [gpu]
    if confidence is None and (samples, seed) != (64, 0):  # the defaults above: a changed one asks for sampling
        raise InvalidInput("--samples and --seed set the sampling of --confidence P: add --confidence (e.g. 0.9)")
    if confidence is not None:
        from planner.confidence import check_request

        check_request(confidence, samples, seed, gpus=gpus, sensitivity=sensitivity, emit=emit is not None,
                      limits=power_mw is not None or max_gpus is not None)
        if several:
            raise InvalidInput("--confidence takes one accelerator; several (--gpu A,B, --gpu all, --objective, "
                               "--gpu-price) rank point plans")
    if workers < 1:
        raise InvalidInput(f"--workers must be a whole number >= 1, got {workers}")
    request = PlanRequest(
        compute_flop=compute, gpu=names[0], days=days, gpus=gpus, workload=workload, sparse=sparse,
        batch_scaling=(batch_scaling or BatchScaling.paper).value, budget=budget.value, schedule=schedule.value,
        dp_overlap=dp_overlap, solver=solver.value, time_limit_s=time_limit, workers=workers,
        price_per_gpu_hour=price_per_gpu_hour, fixed=fixed, runs_on=emit.value if emit else None, profile=profile,
        goodput=goodput, failures=failures, overrides=overrides_of(set_, bw, latency, memory_headroom),
        power_mw=power_mw, max_gpus=max_gpus)
    if several:
        _compare(names, request, (objective or RankBy.cost).value, gpu_price or [], json_out, quiet)
        return
    try:
        with searching(enabled=not (json_out or quiet)):
            result = api.plan(request)
    except Infeasible as exc:
        doc = exc.plan
        if doc is not None:
            if json_out and emit is not None:
                from planner.export import launch_document

                emit_json(to_json(launch_document(doc, api.resolve_hardware(gpu), workload_of_plan(doc), emit.value)))
            elif json_out:
                emit_json(plan_json(doc))
            else:
                print_plan(stdout_console(), doc)
        raise
    if confidence is not None:
        from planner.confidence import with_confidence

        with searching(enabled=not (json_out or quiet)):
            result = with_confidence(result, request, confidence, samples, seed)
    if sensitivity:
        from planner.sensitivity import sensitivity as replan
        from planner.sensitivity import tornado_png

        with searching(enabled=not (json_out or quiet)):
            sens = replan(result, request, ray=ray)
        result = result.model_copy(update={"sensitivity": sens})
        if tornado is not None:
            from typing import cast

            from planner.files import write_atomic

            title = f"{result.hardware}: what moves the answer ({result.profile} profile)"
            # rendered into an exclusively created temporary file and renamed (planner.files): no link followed
            write_atomic(tornado, lambda fh: tornado_png(sens, cast(str, fh), title), "--tornado", binary=True)
    if emit is not None:
        from planner.export import export_text, launch_document

        wl = workload if workload is not None else workload_of_plan(result)
        if json_out:
            emit_json(to_json(launch_document(result, api.resolve_hardware(gpu), wl, emit.value)))
        else:
            sys.stdout.write(export_text(result, api.resolve_hardware(gpu), wl, emit.value) + "\n")
    elif json_out:
        emit_json(plan_json(result))
    else:
        print_plan(stdout_console(), result)


def _compare(names: list[str], request: PlanRequest, objective: str, gpu_price: list[str], json_out: bool,
             quiet: bool) -> None:
    """`plan --gpu A,B,...`: every accelerator planned, one table (or one Comparison document); exit 1 when none
    meets the request."""
    from planner.compare import compare, parse_prices
    from planner.render.compare import comparison_renderables

    with searching(enabled=not (json_out or quiet)):
        result = compare(names, objective=objective, prices=parse_prices(gpu_price),  # type: ignore[arg-type]
                         request=request)
    if json_out:
        emit_json(to_json(result))
    else:
        console = stdout_console()
        for item in comparison_renderables(result, console.width):
            console.print(item)
    if not any(o.status in ("optimal", "feasible") for o in result.options):
        if not json_out:  # with --json the Comparison says it (each option's status and why)
            sys.stderr.write(f"infeasible: no accelerator of {', '.join(names)} meets the request (each option "
                             "says why)\n")
        raise typer.Exit(1)


app.command("plan", help=plan_command.__doc__)(plan_command)
plan_app.command("plan", help=plan_command.__doc__)(plan_command)
