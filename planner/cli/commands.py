"""Command line: a thin typer skin over `planner.api` (parse, call the library, render). README.md, "Commands".

Two console scripts share these commands:

    plan --compute 1e28 --gpu h100 --days 90 [--json]        (same as `planner plan ...`)
    planner plan | evaluate | limits | hardware list|show | schema

Exit codes, for scripts: 0 success; 1 infeasible (the explanation on stderr; with --json the infeasible Plan
document on stdout) or a given layout that does not fit in memory or misses --days; 2 bad input (one line
`error: ...` on stderr naming the bad value: unknown GPU, non-positive or non-finite numbers, malformed TOML or JSON,
impossible layouts, contradictory flags, unparsable options); 3 an internal error (a bug: one line
`internal error: ...`); 141 the reader of stdout went away (`plan | head -1`), as for a SIGPIPE. No traceback
is ever printed. `--json` writes exactly one JSON document on stdout.

The commands run through `run()` with click's standalone mode off, so that usage errors, library errors and
bugs all end up in the one place that turns them into one-line messages and exit codes.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import pydantic_core
import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console

try:  # typer >= 0.2x vendors click as typer._click; older typer (pyproject allows >= 0.12) depends on click
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import exceptions as click_exc  # type: ignore[no-redef]  # the same name, from the fallback

from planner import api
from planner.choices import BatchScaling, Budget, Framework, LayoutSchedule, Precision, ScheduleChoice, Solver
from planner.errors import Infeasible, InvalidInput, PlannerError, read_text_file, validation_message
from planner.hardware import get_hardware, hardware_names
from planner.limits import (
    DAY_S,
    PAPER_BATCH_TOKENS,
    PAPER_LATENCY_S,
    PAPER_LAYERS,
    THREE_MONTHS_S,
    inferred_wall,
    limits_for,
)
from planner.parallel.dimensions import BY_NAME, DIMENSIONS, Dimension
from planner.parallel.placement import greedy_placement, parse_placement
from planner.parallel.space import check_layout
from planner.render import StdoutConsole
from planner.render.limits import assumptions_text, fmt_sci, inferred_table, limits_table
from planner.render.plan import hardware_list_table, hardware_show_renderables, print_plan
from planner.schema import DEGREES, LAYOUT_EXTRA, Hardware, Layout, Plan, Workload
from planner.search.result import SearchResult
from planner.workload import load_model_preset, workload_from_shape

SCHEMA_PATH = Path(__file__).resolve().parent.parent.parent / "docs" / "plan.schema.json"
"""Where the published Plan JSON Schema lives in the repository (regenerate: `planner schema --write`)."""

DEFAULT_LIMITS_HARDWARE = ("v100", "a100", "h100", "h100-superpod")
"""Table 2's four systems: DGX-1, DGX A100, DGX H100 and the hypothetical H100 SuperPOD."""


app = typer.Typer(
    name="planner",
    help="Provably optimal parallel layouts for frontier-scale training runs (Erdil & Schneider-Joseph cost model).",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
hardware_app = typer.Typer(help="The hardware library: shipped systems and user TOML files.", no_args_is_help=True)
app.add_typer(hardware_app, name="hardware")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"planner {version('planner')}")
        except PackageNotFoundError:
            print("planner (not installed as a package)")
        raise typer.Exit(0)


@app.callback()
def _main(version_flag: Annotated[bool, typer.Option(
        "--version", help="Print the version and exit.", callback=_print_version, is_eager=True)] = False) -> None:
    """Provably optimal parallel layouts for frontier-scale training runs (Erdil & Schneider-Joseph cost model)."""


# `planner sweep` (a compute range: table, CSV/JSON, PNG plots, progress bar) lives with its rendering.
from planner.render.sweep import sweep_command  # noqa: E402

app.command("sweep", help=sweep_command.__doc__)(sweep_command)

# `plan` is also its own console script; a one-command Typer app gives it usage lines that read `plan ...`.
plan_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


# --------------------------------------------------------------------------------------------------
# Number parsing
# --------------------------------------------------------------------------------------------------


def _number(text: str) -> float:
    """Parse a number the way a shell user writes it (1e28, 90, 0.5); name the bad text otherwise.

    NaN, infinities, zero and negatives parse here on purpose: the library rejects them with messages that say
    what is accepted."""
    try:
        return float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number") from None


MAX_WHOLE = 2**53
"""Largest whole-number option (--gpus, --dp, ...) accepted; larger ones would overflow the int64 cost arrays."""


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a whole number") from None
    if abs(value) > MAX_WHOLE:
        raise typer.BadParameter(f"{text!r} is too large (at most 2^53 = {MAX_WHOLE})")
    return value


def _dimension_parser(d: Dimension) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            return d.parse(text)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return parse


def _number_option(*decls: str, **kwargs):
    return typer.Option(*decls, parser=_number, metavar=kwargs.pop("metavar", "NUMBER"), **kwargs)


def _whole_option(*decls: str, **kwargs):
    return typer.Option(*decls, parser=_whole, metavar=kwargs.pop("metavar", "INT"), **kwargs)


# --------------------------------------------------------------------------------------------------
# Shared option types
# --------------------------------------------------------------------------------------------------

_W = "Workload (one of: --compute, --model, or a shape)"
_S = "Search"
_O = "Output"

ComputeOpt = Annotated[float | None, _number_option(
    "--compute", help="Training compute T in FLOP, e.g. 1e28; the model shape is inferred from the paper's "
    "scaling laws (App. 8.1.4).", rich_help_panel=_W, show_default=False)]
ModelOpt = Annotated[str | None, typer.Option(
    "--model", help="A model preset name (see models/) or a path to a preset TOML file.", metavar="PRESET|FILE.toml",
    rich_help_panel=_W, show_default=False)]
SparseOpt = Annotated[bool, typer.Option(
    "--sparse", help="With --compute: a sparse (mixture-of-experts) model, E = 8 sqrt(d_model d_ff / (4 12288^2)).",
    rich_help_panel=_W)]
BatchScalingOpt = Annotated[BatchScaling | None, typer.Option(
    "--batch-scaling", help="With --compute: the batch-size law (default paper; deepseek and fixed are §6.3.2's "
    "alternatives).", rich_help_panel=_W, show_default=False, case_sensitive=False)]
BudgetOpt = Annotated[Budget, typer.Option(
    "--budget", help="With --compute: 'exact' trains the compute asked for (the training tokens absorb the shape's "
    "hardware-friendly rounding, in whole optimizer steps); 'paper' takes D = 20 N_p of the rounded shape, as the "
    "paper's tables do (about 0.7x to 1.5x of the request).", rich_help_panel=_W, case_sensitive=False)]
DModelOpt = Annotated[float | None, _number_option("--d-model", help="Explicit shape: d_model.", rich_help_panel=_W,
                                                 show_default=False)]
DFfOpt = Annotated[float | None, _number_option("--d-ff", help="Explicit shape: d_ff.", rich_help_panel=_W,
                                              show_default=False)]
LayersOpt = Annotated[float | None, _number_option("--layers", help="Explicit shape: L, MLP blocks.",
                                                 rich_help_panel=_W, show_default=False)]
ExpertsOpt = Annotated[float | None, _number_option("--experts", help="Explicit shape: E (default 1 = dense).",
                                                  rich_help_panel=_W, show_default=False)]
BatchTokensOpt = Annotated[float | None, _number_option(
    "--batch-tokens", help="Explicit shape: global batch b in tokens (a multiple of E).", rich_help_panel=_W,
    show_default=False)]
TokensOpt = Annotated[float | None, _number_option(
    "--tokens", help="Explicit shape: training tokens D (default 20 N_p, Chinchilla).", rich_help_panel=_W,
    show_default=False)]
BatchSequencesOpt = Annotated[int | None, _whole_option(
    "--batch-sequences", help="With a transformer --model: the global batch in sequences (replaces the preset's).",
    rich_help_panel=_W, show_default=False)]
SeqLenOpt = Annotated[int | None, _whole_option(
    "--seq-len", help="With a transformer --model: the sequence length (the batch keeps its tokens).",
    rich_help_panel=_W, show_default=False)]
PrecisionOpt = Annotated[Precision | None, typer.Option(
    "--precision", help="With a transformer --model: GEMM precision and recipe: bf16 (default), fp8 (= fp8-current, "
    "per-tensor current scaling), fp8-delayed, fp8-rowwise (torchao), fp8-blockwise, mxfp8 (Blackwell), fp4 "
    "(= nvfp4, Blackwell).",
    rich_help_panel=_W,
    show_default=False, case_sensitive=False)]
GpuOpt = Annotated[str, typer.Option(
    "--gpu", help="Hardware name (see `planner hardware list`) or a path to a hardware TOML file.",
    metavar="NAME|FILE.toml")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (a Plan) and nothing else on stdout.",
                                       rich_help_panel=_O)]
PriceOpt = Annotated[float | None, _number_option(
    "--price-per-gpu-hour", help="Price in USD per GPU-hour; adds the run's cost.", rich_help_panel=_O,
    show_default=False)]
DpOverlapOpt = Annotated[bool | None, typer.Option(
    "--dp-overlap/--no-dp-overlap", help="Let the DP gradient all-reduce overlap with compute (default: the "
    "profile's: its own phase in the paper's, overlapped in the realistic one).", show_default=False)]
GoodputOpt = Annotated[bool | None, typer.Option(
    "--goodput/--no-goodput", help="Plan with failures, checkpoints and restarts: the deadline bounds wall-clock time "
    "(default: the profile's: on in the realistic one, off in the paper's).", show_default=False)]
FailuresOpt = Annotated[str, typer.Option(
    "--failures", help="Failure model for --goodput: a shipped name (default) or a TOML file (docs/model.md §9).",
    metavar="NAME|FILE.toml")]
_WI = "What-if (no file editing)"
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="Change one hardware, profile or failure-model field for this run, as an edited copy of its file "
    "would, e.g. levels.InfiniBand.bw_bidir_GBps=200, gpu.hbm_GB=96, profile.overlap.tp=0.5, "
    "goodput.restart_minutes=2 (repeatable; keys in docs/reference/). Echoed in the output and the JSON.",
    metavar="FIELD=VALUE", rich_help_panel=_WI, show_default=False)]
BwOpt = Annotated[list[str] | None, typer.Option(
    "--bw", help="A network level's bidirectional bandwidth per GPU in GB/s, e.g. InfiniBand=200 (= --set "
    "levels.InfiniBand.bw_bidir_GBps=200; repeatable).", metavar="LEVEL=GBPS", rich_help_panel=_WI,
    show_default=False)]
LatencyOpt = Annotated[float | None, _number_option(
    "--latency", help="One-way latency of every network level, µs, in the hardware file and the profile (= --set "
    "levels.*.lat_us=US profile.network.latency_us=[US]).", metavar="US", rich_help_panel=_WI, show_default=False)]
MemoryHeadroomOpt = Annotated[float | None, _number_option(
    "--memory-headroom", help="GB of HBM a layout must leave free: it fits when its total + headroom <= HBM (= --set "
    "profile.memory.headroom_GB=GB; default: the profile's, 0 in the paper profile, 2 in the realistic one).",
    metavar="GB", rich_help_panel=_WI, show_default=False)]
ProfileOpt = Annotated[str | None, typer.Option(
    "--profile", help="Execution profile that prices layouts: 'paper' (the paper's idealised model) or 'realistic' "
    "(validated against published runs, docs/validation.md), or a profile TOML file. Default: 'paper' for the "
    "paper's toy workload (--compute), 'realistic' for a transformer (--model, shapes with --heads), --emit and "
    "validate; evaluate --plan takes the plan's.", metavar="paper|realistic|FILE.toml",
    show_default=False)]


# --------------------------------------------------------------------------------------------------
# Helpers: validation, workload, placement
# --------------------------------------------------------------------------------------------------


def _overrides(sets: list[str] | None, bw: list[str] | None, latency: float | None,
               memory_headroom: float | None = None) -> list[str]:
    """--set strings, the shortcuts' expansions after them."""
    from planner.overrides import shortcuts

    _check_positive("--latency", latency)
    if memory_headroom is not None and not (math.isfinite(memory_headroom) and memory_headroom >= 0):
        raise InvalidInput(f"--memory-headroom must be a finite number of GB >= 0, got {memory_headroom!r}")
    extra = [] if memory_headroom is None else [f"profile.memory.headroom_GB={memory_headroom!r}"]
    return list(sets or []) + shortcuts(bw or [], latency) + extra


def _check_positive(flag: str, value: float | None) -> None:
    """CLI-only numbers (not validated by the library) get the same one-line rule."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InvalidInput(f"{flag} must be a positive finite number, got {value!r}")


def _workload_options(compute: float | None, model: str | None, sparse: bool, batch_scaling: BatchScaling | None,
                      shape: Mapping[str, float | None]) -> Workload | None:
    """The workload the flags describe, or None for compute mode (the library infers the shape from --compute).

    Exactly one source is allowed: --compute (with optional --sparse / --batch-scaling), --model, or the shape
    flags (--d-model, --d-ff, --layers, --batch-tokens required; --experts, --tokens optional).
    """
    given_shape = [flag for flag, v in shape.items() if v is not None]
    sources = [name for name, on in (("--compute", compute is not None), ("--model", model is not None),
                                     (", ".join(given_shape), bool(given_shape))) if on]
    if len(sources) > 1:
        raise InvalidInput(f"contradictory workload flags: {' and '.join(sources)}; give only one of --compute, "
                           "--model, or an explicit shape")
    if not sources:
        raise InvalidInput("no workload: give --compute FLOP, --model PRESET|FILE.toml, or an explicit shape "
                           "(--d-model --d-ff --layers --batch-tokens)")
    if compute is None and (sparse or batch_scaling is not None):
        used = " and ".join(f for f, on in (("--sparse", sparse), ("--batch-scaling", batch_scaling is not None)) if on)
        raise InvalidInput(f"{used} {'apply' if ' and ' in used else 'applies'} only with --compute (the scaling "
                           "laws); a preset or an explicit shape fixes E and the batch itself")
    if compute is not None:
        return None
    if model is not None:
        return load_model_preset(model)
    required = ("--d-model", "--d-ff", "--layers", "--batch-tokens")
    d_model, d_ff, layers, batch_tokens = (shape.get(f) for f in required)
    if d_model is None or d_ff is None or layers is None or batch_tokens is None:
        missing = [f for f in required if shape.get(f) is None]
        raise InvalidInput(f"an explicit shape needs --d-model, --d-ff, --layers and --batch-tokens; missing "
                           f"{', '.join(missing)}")
    experts = shape.get("--experts")
    return workload_from_shape(d_model, d_ff, layers, 1 if experts is None else experts, batch_tokens,
                               shape.get("--tokens"), label="explicit shape (command-line flags)")


def _with_training(wl: Workload | None, seq_len: int | None, precision: Precision | None) -> Workload | None:
    """The workload with a new sequence length (the batch keeps its tokens: Llama 3's long-context phase kept 16M
    tokens per step) and GEMM precision (transformers only)."""
    if seq_len is None and precision is None:
        return wl
    flag = "--seq-len" if seq_len is not None else "--precision"
    if wl is None or wl.transformer is None:
        raise InvalidInput(f"{flag} applies to a transformer --model (the paper's toy model has no sequences and "
                           "trains in 16 bits)")
    update: dict[str, object] = {}
    if seq_len is not None:
        if seq_len < 1:
            raise InvalidInput(f"--seq-len must be a whole number >= 1, got {seq_len}")
        if wl.batch_tokens % seq_len:
            raise InvalidInput(f"--seq-len {seq_len} does not divide the batch of {wl.batch_tokens} tokens into whole "
                               "sequences; give --batch-sequences too")
        update["seq_len"] = seq_len
    if precision is not None:
        update["precision"], update["recipe"] = precision.precision_and_recipe
    try:
        return Workload(**{**wl.model_dump(), **update})
    except ValidationError as exc:
        raise InvalidInput(f"{flag}: {validation_message(exc)}") from None


def _with_batch_sequences(wl: Workload | None, sequences: int | None, flag: str = "--batch-sequences"
                          ) -> Workload | None:
    """The workload with its global batch set to `sequences` whole sequences (transformers only)."""
    if sequences is None:
        return wl
    if wl is None or wl.transformer is None:
        raise InvalidInput(f"{flag} applies to a transformer --model (the toy model takes --batch-tokens)")
    if sequences < 1:
        raise InvalidInput(f"{flag} must be a whole number >= 1, got {sequences}")
    try:
        return Workload(**{**wl.model_dump(), "batch_tokens": sequences * wl.seq_len})
    except ValidationError as exc:
        raise InvalidInput(f"{flag} {sequences}: {exc.errors()[0]['msg']}") from None


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


def _make_layout(values: Mapping[str, int], schedule: str, placement: Mapping[str, Sequence[int]],
                 extra: Mapping[str, int | None] | None = None) -> Layout:
    """`extra`: the layout fields outside the registry (etp, expert_ep, first/last_stage_layers)."""
    try:
        return Layout(**values, **(extra or {}), schedule=schedule,
                      placement={d: tuple(placement[d]) for d in DEGREES})
    except ValidationError as exc:
        raise InvalidInput(f"impossible layout: {validation_message(exc)}") from None


def _load_plan_file(path: Path) -> Plan:
    text = read_text_file(path, "plan file")
    try:
        return Plan.model_validate_json(text)
    except ValidationError as exc:
        raise InvalidInput(f"'{path}' is not a plan document as printed by `plan --json`: "
                           f"{validation_message(exc)}") from None


def _hardware_of_plan(doc: Plan, gpu: str | None) -> str:
    """--gpu, else the hardware the plan names; a plan made on a user file names only the file's `name`, which the
    library cannot find again, so say to give the file."""
    if gpu is not None or doc.hardware.lower() in hardware_names():
        return gpu or doc.hardware
    raise InvalidInput(f"the plan was made on '{doc.hardware}', which is not a shipped system (a user hardware file?): "
                       "give it again with --gpu FILE.toml")


def _workload_of_plan(doc: Plan) -> Workload:
    w = doc.workload
    try:
        return Workload(d_model=w.d_model, d_ff=w.d_ff, layers=w.layers, experts=w.experts,
                        batch_tokens=w.batch_tokens, tokens=w.tokens, seq_len=w.seq_len,
                        requested_compute_flop=w.requested_compute_flop, label=w.label, transformer=w.transformer,
                        precision=w.precision)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InvalidInput(f"plan file workload: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def _layout_of_plan(doc: Plan, hw: Hardware, wl: Workload) -> tuple[Layout, list[str]]:
    """The plan's layout on `hw`; re-placed greedily (with a note) if its placement does not fit `hw`'s levels."""
    lay = doc.layout
    if lay is None:
        raise InvalidInput(f"the plan has no layout (status '{doc.status}'); nothing to evaluate")
    values = {d.name: getattr(lay, d.name) for d in DIMENSIONS}
    extra = {k: getattr(lay, k) for k in LAYOUT_EXTRA}
    degrees = {d: values[d] for d in DEGREES}
    n_levels = len(hw.levels)
    kept = None
    if all(len(v) == n_levels for v in lay.placement.values()):
        ones = [1] * n_levels
        kept = _make_layout(values, lay.schedule, {d: lay.placement.get(d, ones) for d in DEGREES}, extra)
        problems = check_layout(hw, wl, kept)
        if not problems:
            return kept, []
        reason = "its placement does not fit: " + "; ".join(problems)
    else:
        reason = (f"the plan has {len(lay.levels)} network level(s) ({', '.join(lay.levels)}) but {hw.name} has "
                  f"{n_levels} ({', '.join(lvl.name for lvl in hw.levels)})")
    replaced = _make_layout(values, lay.schedule, greedy_placement(hw, degrees), extra)
    if kept is not None and check_layout(hw, wl, replaced):
        return kept, []  # not a placement problem: let evaluation report the real one
    note = (f"re-placed on {hw.name}: {reason}; degrees kept, factors assigned greedily (TP first, then CP, PP, DP, "
            f"EP, lowest level first), which is not necessarily the best placement")
    return replaced, [note]


# --------------------------------------------------------------------------------------------------
# Output helpers
# --------------------------------------------------------------------------------------------------


def _stdout_console() -> Console:
    """Rich console on the current stdout; 140 columns when piped (rich would use 80, too narrow for Table 2)
    unless COLUMNS is set."""
    width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 140
    return StdoutConsole(file=sys.stdout, width=width)


def _searching(enabled: bool):
    """A spinner on stderr while the search runs, only for a person at a terminal (never with --json)."""
    if enabled and sys.stderr.isatty():
        return Console(stderr=True).status("searching for the optimal layout ...")
    return contextlib.nullcontext()


def _emit_json(text: str) -> None:
    sys.stdout.write(text.rstrip("\n") + "\n")


def _to_json(model: BaseModel | Sequence[BaseModel]) -> str:
    """Pydantic's JSON (its float formatting, field order), with infinities written as the string "Infinity"
    (as LimitsRow does) so that they survive a round trip instead of becoming null; for finite documents this is
    byte for byte `model.model_dump_json(indent=2)`."""
    data = [m.model_dump() for m in model] if isinstance(model, Sequence) else model.model_dump()
    return pydantic_core.to_json(data, indent=2, inf_nan_mode="strings").decode()


def _plan_json(plan: Plan) -> str:
    return _to_json(plan)


# --------------------------------------------------------------------------------------------------
# plan
# --------------------------------------------------------------------------------------------------


def plan_command(
    compute: ComputeOpt = None,
    gpu: GpuOpt = "h100",
    days: Annotated[float | None, _number_option(
        "--days", help="Deadline in days (default 90 unless --gpus fixes the cluster).", show_default=False)] = None,
    gpus: Annotated[int | None, _whole_option(
        "--gpus", help="Fix the cluster size: fastest layout on exactly N GPUs.", rich_help_panel=_S,
        show_default=False)] = None,
    sparse: SparseOpt = False,
    batch_scaling: BatchScalingOpt = None,
    budget: BudgetOpt = Budget.exact,
    schedule: Annotated[ScheduleChoice, typer.Option(
        "--schedule", help="Pipeline schedule; auto lets the solver choose.",
        rich_help_panel=_S)] = ScheduleChoice.auto,
    solver: Annotated[Solver, typer.Option(
        "--solver", help="cpsat (proves optimality) or exhaustive (brute-force enumeration of the same space).",
        rich_help_panel=_S)] = Solver.cpsat,
    time_limit: Annotated[float, _number_option(
        "--time-limit", help="Search time limit in seconds; a stopped search reports its bound and gap.",
        rich_help_panel=_S)] = 60.0,
    workers: Annotated[int, _whole_option("--workers", help="CP-SAT worker threads.", rich_help_panel=_S)] = 2,
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
        "restart time) moved down and up; show the change in GPUs and days, largest first (in parallel processes).",
        rich_help_panel=_WI)] = False,
    tornado: Annotated[Path | None, typer.Option(
        "--tornado", help="With --sensitivity: also write a tornado chart PNG.", metavar="FILE.png",
        rich_help_panel=_WI, show_default=False, dir_okay=False)] = None,
    price_per_gpu_hour: PriceOpt = None,
    power_mw: Annotated[float | None, _number_option(
        "--power-mw", help="A buyer's limit: facility power at most MW (GPU boards, nodes, switches x PUE; "
        "planner.economics). The fewest GPUs within it that meet --days, or why not and what fits.",
        metavar="MW", rich_help_panel=_S, show_default=False)] = None,
    max_gpus: Annotated[int | None, _whole_option(
        "--max-gpus", help="A buyer's limit: at most N GPUs. The fewest within it that meet --days, or why not and "
        "what fits.", rich_help_panel=_S, show_default=False)] = None,
    json_out: JsonOpt = False,
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
    cp: Annotated[int | None, _whole_option(
        "--cp", help="Fix context parallelism N_CP (default: the search chooses).", rich_help_panel=_S,
        show_default=False)] = None,
    sp: Annotated[int | None, typer.Option(
        "--sp", parser=_dimension_parser(BY_NAME["sp"]), metavar="off|on", help="Fix sequence parallelism (default: "
        "the search chooses).", rich_help_panel=_S, show_default=False)] = None,
    recompute: Annotated[int | None, typer.Option(
        "--recompute", parser=_dimension_parser(BY_NAME["recompute"]), metavar="none|selective|full",
        help="Fix activation recomputation (default: the search chooses).", rich_help_panel=_S,
        show_default=False)] = None,
    zero: Annotated[int | None, _whole_option(
        "--zero", help="Fix the ZeRO stage 1, 2 or 3 (default: the search chooses).", rich_help_panel=_S,
        show_default=False)] = None,
    tp_model: Annotated[int | None, _whole_option(
        "--tp-model", help="Fix the paper's second tensor-parallel axis N_TP,model (1: Megatron's 1D TP).",
        rich_help_panel=_S, show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress spinner on stderr.", rich_help_panel=_O)] = False,
    emit: Annotated[Framework | None, typer.Option(
        "--emit", help="Search only layouts this framework runs and print its launch configuration (Megatron-LM "
        "arguments or a torchtitan TOML job config) instead of the tables.", rich_help_panel=_O,
        show_default=False, case_sensitive=False)] = None,
) -> None:
    """Smallest cluster and optimal layout that trains the model within --days (or the fastest on --gpus)."""
    shape = {"--d-model": d_model, "--d-ff": d_ff, "--layers": layers, "--experts": experts,
             "--batch-tokens": batch_tokens, "--tokens": tokens}
    workload = _with_batch_sequences(_with_training(_workload_options(compute, model, sparse, batch_scaling, shape),
                                                    seq_len, precision), batch_sequences)
    fixed = {name: v for name, v in (("cp", cp), ("sp", sp), ("recompute", recompute), ("zero", zero),
                                     ("tp_model", tp_model)) if v is not None}
    if emit is not None and json_out:
        raise InvalidInput("--emit prints a launch configuration, --json a plan document: give one")
    if tornado is not None and not sensitivity:
        raise InvalidInput("--tornado draws the --sensitivity table: add --sensitivity")
    if tornado is not None:
        if tornado.suffix.lower() != ".png":
            raise InvalidInput(f"--tornado {tornado}: the chart is a PNG; give a FILE.png")
        from planner.files import check_output

        check_output(tornado, "--tornado")  # a FIFO, device or link is refused now, not after the re-plans
    if sensitivity and emit is not None:
        raise InvalidInput("--sensitivity and --emit: give one")
    if workers < 1:
        raise InvalidInput(f"--workers must be a whole number >= 1, got {workers}")
    if days is None and gpus is None:
        days = 90.0
    kwargs: dict[str, Any] = dict(compute_flop=compute, gpu=gpu, days=days, workload=workload, sparse=sparse,
                  batch_scaling=(batch_scaling or BatchScaling.paper).value, budget=budget.value,
                  schedule=schedule.value, gpus=gpus, dp_overlap=dp_overlap, solver=solver.value,
                  time_limit_s=time_limit, workers=workers, price_per_gpu_hour=price_per_gpu_hour, fixed=fixed,
                  profile=profile, goodput=goodput, failures=failures,
                  overrides=_overrides(set_, bw, latency, memory_headroom), power_mw=power_mw, max_gpus=max_gpus)
    try:
        with _searching(enabled=not (json_out or quiet)):
            result = api.plan(**kwargs, runs_on=emit.value if emit else None)
    except Infeasible as exc:
        doc = exc.plan
        if doc is not None:
            if json_out:
                _emit_json(_plan_json(doc))
            else:
                print_plan(_stdout_console(), doc)
        raise
    if sensitivity:
        from planner.sensitivity import sensitivity as replan
        from planner.sensitivity import tornado_png

        with _searching(enabled=not (json_out or quiet)):
            sens = replan(result, kwargs, gpu, profile, failures)
        result = result.model_copy(update={"sensitivity": sens})
        if tornado is not None:
            from typing import cast

            from planner.files import write_atomic

            title = f"{result.hardware}: what moves the answer ({result.profile} profile)"
            # rendered into an exclusively created temporary file and renamed (planner.files): no link followed
            write_atomic(tornado, lambda fh: tornado_png(sens, cast(str, fh), title), "--tornado", binary=True)
    if emit is not None:
        from planner.export import export_text

        wl = workload if workload is not None else _workload_of_plan(result)
        sys.stdout.write(export_text(result, api.resolve_hardware(gpu), wl, emit.value) + "\n")
    elif json_out:
        _emit_json(_plan_json(result))
    else:
        print_plan(_stdout_console(), result)


app.command("plan", help=plan_command.__doc__)(plan_command)
plan_app.command("plan", help=plan_command.__doc__)(plan_command)


@app.command("export")
def export_command(
    plan_file: Annotated[Path, typer.Option(
        "--plan", help="A plan printed by `plan --json`.", metavar="FILE.json", show_default=False, dir_okay=False)],
    to: Annotated[Framework, typer.Option("--to", help="megatron (Megatron-LM arguments) or torchtitan (TOML job "
                                          "config).", case_sensitive=False)],
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="Hardware the plan was priced on, if not a shipped name (a TOML file).",
        metavar="NAME|FILE.toml", show_default=False)] = None,
) -> None:
    """Print the launch configuration of a saved plan's layout; exit 2 naming what to change if the framework cannot
    run it exactly."""
    from planner.export import export_text

    doc = _load_plan_file(plan_file)
    hw = api.resolve_hardware(_hardware_of_plan(doc, gpu))
    sys.stdout.write(export_text(doc, hw, _workload_of_plan(doc), to.value) + "\n")


@app.command("validate")
def validate_command(
    runs: Annotated[Path | None, typer.Option(
        "--runs", help="Published runs (default: the repository's validation/runs.toml).", metavar="FILE.toml",
        show_default=False, dir_okay=False)] = None,
    write: Annotated[bool, typer.Option(
        "--write", help="Also write docs/validation.md and docs/validation-mfu.png (with --profile realistic, and "
        "the paper profile's aggregates beside).")] = False,
    profile: ProfileOpt = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Price every published run's layout and compare with its reported throughput (docs/validation.md)."""
    from planner.files import check_output
    from planner.profile import get_profile
    from planner.validation import RUNS_PATH, load_runs, peak_memory_summary, summary, validate, write_docs

    folder = _docs_dir(write, out, SCHEMA_PATH.parent)
    if folder is not None:
        for name in ("validation.md", "validation-mfu.png"):
            check_output(folder / name, "--write")
    prof = get_profile(profile or "realistic")
    if runs is None and not RUNS_PATH.is_file():  # an installed package: the runs ship as package data
        from importlib import resources

        runs = Path(str(resources.files("planner.published_runs") / "runs.toml"))
    published = load_runs(runs or RUNS_PATH)
    rows = validate(published, prof)
    if json_out:
        _emit_json(json.dumps({"profile": prof.name, "summary": summary(rows),
                               "peak_memory": peak_memory_summary(rows),
                               "runs": [r.model_dump() for r in rows]}, indent=2))
    else:
        from rich.table import Table

        table = Table(title=f"Published runs: predicted ({prof.name} profile) vs reported", title_justify="left")
        for col in ("run", "split", "GPUs", "reported MFU", "predicted MFU", "ratio", "fits", "memory",
                    "peak GiB (pred. / rep.)"):
            table.add_column(col, justify="left" if col in ("run", "split") else "right")
        for r in rows:
            table.add_row(r.id, r.split, f"{r.gpus} {r.gpu}",
                          "—" if r.reported_mfu is None else f"{r.reported_mfu:.1%}",
                          "—" if r.predicted_mfu is None else f"{r.predicted_mfu:.1%}",
                          "—" if r.ratio is None else f"{r.ratio:.2f}", {None: "—", True: "yes", False: "NO"}[r.fits],
                          "—" if r.memory_GB is None else f"{r.memory_GB:.1f} GB",
                          "—" if r.reported_peak_GiB is None or r.predicted_peak_GiB is None
                          else f"{r.predicted_peak_GiB:.1f} / {r.reported_peak_GiB:.1f}")
        console = _stdout_console()
        console.print(table)
        for split, a in summary(rows).items():
            console.print(f"{split}: {int(a['runs'])} runs, mean abs. error {a['mean_abs_error']:.1%}, median "
                          f"{a['median_abs_error']:.1%}, bias {a['bias']:+.1%}, Spearman {a['spearman']:.2f}")
        peak = peak_memory_summary(rows)
        if peak["runs"]:
            console.print(f"peak memory: {int(peak['runs'])} runs report one; predicted allocator peak vs reported: "
                          f"mean abs. error {peak['mean_abs_error']:.1%}, largest {peak['max_abs_error']:.1%}, bias "
                          f"{peak['bias']:+.1%}")
    if folder is not None:
        write_docs(published, prof, folder, rows=rows)


# --------------------------------------------------------------------------------------------------
# evaluate
# --------------------------------------------------------------------------------------------------

_L = "Layout (or --plan FILE.json)"


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
                _flag(d), parser=_dimension_parser(d), metavar="|".join(d.labels), help=help_text,
                rich_help_panel=_L, show_default=False)]
        else:
            annotation = Annotated[int | None, _whole_option(_flag(d), help=help_text, rich_help_panel=_L,
                                                              show_default=False)]
        extra.append(inspect.Parameter(d.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation))

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> None:
        return func(**kwargs)

    wrapper.__signature__ = sig.replace(parameters=[*fixed, *extra])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in (*fixed, *extra)} | {"return": None}
    return wrapper


@app.command("evaluate")
@_with_dimension_flags
def evaluate_command(
    plan_file: Annotated[Path | None, typer.Option(
        "--plan", help="Re-evaluate a plan printed by `plan --json` (its workload and layout) on --gpu: the what-if "
        "question. Re-placed greedily if --gpu has different network levels.", metavar="FILE.json",
        rich_help_panel=_L, show_default=False, dir_okay=False)] = None,
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="Hardware name or TOML file (default h100, or the plan's hardware with --plan).",
        metavar="NAME|FILE.toml", show_default=False)] = None,
    schedule: Annotated[LayoutSchedule | None, typer.Option(
        "--schedule", help="1f1b (default) or zb-h2.", rich_help_panel=_L, show_default=False)] = None,
    placement: Annotated[str | None, typer.Option(
        "--placement", help="Factors per network level, bottom-up, e.g. 'dp=1,4;tp_ff=8,1'. Degrees left out are "
        "placed greedily (TP first, then CP, PP, DP, EP, lowest level first).", rich_help_panel=_L,
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
    tp: Annotated[int | None, _whole_option(
        "--tp", help="Megatron's tensor-parallel size (= --tp-ff). With --tp, --vpp, --mbs or --gbs, --dp is "
        "Megatron's data-parallel size, which counts the expert ranks.", rich_help_panel=_L,
        show_default=False)] = None,
    vpp: Annotated[int | None, _whole_option(
        "--vpp", help="Megatron's virtual pipeline stages per rank (= --interleave).", rich_help_panel=_L,
        show_default=False)] = None,
    mbs: Annotated[int | None, _whole_option(
        "--mbs", help="Micro-batch size in sequences (sets microbatches = gbs / (dp x mbs)).", rich_help_panel=_L,
        show_default=False)] = None,
    gbs: Annotated[int | None, _whole_option(
        "--gbs", help="Global batch in sequences (as --batch-sequences).", rich_help_panel=_L,
        show_default=False)] = None,
    etp: Annotated[int | None, _whole_option(
        "--etp", help="Megatron's expert tensor-parallel size: folds the expert layout, --ep x --etp, over dp x cp x "
        "tp (Megatron's parallel folding; --ep may then exceed --dp). --dp is Megatron's data-parallel size.",
        rich_help_panel=_L, show_default=False)] = None,
    first_stage_layers: Annotated[int | None, _whole_option(
        "--first-stage-layers", help="Layers on the first (virtual) pipeline stage; the other stages split the rest "
        "evenly (Megatron --decoder-first-pipeline-num-layers).", rich_help_panel=_L, show_default=False)] = None,
    last_stage_layers: Annotated[int | None, _whole_option(
        "--last-stage-layers", help="Layers on the last (virtual) pipeline stage (Megatron "
        "--decoder-last-pipeline-num-layers).", rich_help_panel=_L, show_default=False)] = None,
    days: Annotated[float | None, _number_option(
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
    _check_positive("--days", days)
    _check_positive("--price-per-gpu-hour", price_per_gpu_hour)
    from planner.overrides import parse_overrides

    sets = parse_overrides(_overrides(set_, bw, latency, memory_headroom))
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
        doc = _load_plan_file(plan_file)
        if doc.overrides:  # the plan's what-if holds for its re-evaluation (new --set values come after, and win)
            sets = parse_overrides([*doc.overrides, *[o.text for o in sets]])
        hw = api.resolve(_hardware_of_plan(doc, gpu), profile or doc.profile, sets)
        wl = _workload_of_plan(doc)
        layout, notes = _layout_of_plan(doc, hw, wl)
        if doc.overrides:
            notes.append(f"with the plan's overrides: {', '.join(doc.overrides)}")
        if days is None:
            days = doc.deadline_days
        dp_overlap = doc.dp_overlap if dp_overlap is None else dp_overlap
        notes.insert(0, f"workload and layout from {plan_file} (planned on {doc.hardware})")
    else:
        given = _with_training(_workload_options(compute, model, sparse, batch_scaling, shape), seq_len, precision)
        hw = api.resolve(gpu or "h100", api.default_profile(gpu or "h100", profile, given) or "paper", sets)
        if given is not None:
            wl = given
        else:
            from planner.workload import infer_workload

            assert compute is not None  # _workload_options returns None only in compute mode
            wl = infer_workload(compute, sparse=sparse, batch_scaling=(batch_scaling or BatchScaling.paper).value,
                                budget=budget.value)
        for flag, v in layout_flags.items():
            least = next((d.minimum for d in DIMENSIONS if _flag(d) == flag), 1)
            if flag in ("--first-stage-layers", "--last-stage-layers"):
                least = 0
            if isinstance(v, int) and v < least:
                raise InvalidInput(f"{flag} must be a whole number >= {least}, got {v}")
        resized = _with_batch_sequences(wl, gbs if gbs is not None else batch_sequences,
                                        "--gbs" if gbs is not None else "--batch-sequences")
        assert resized is not None
        wl = resized
        extra: dict[str, int | None] = {"first_stage_layers": first_stage_layers,
                                        "last_stage_layers": last_stage_layers}
        if etp is not None:  # parallel folding: the placed degrees are the attention layout, ep 1
            extra.update(expert_ep=dims.get("ep") or 1, etp=etp)
            dims = {**dims, "ep": None}
            notes.append(f"folded expert layout: ep {extra['expert_ep']} x etp {etp} over dp x cp x tp (Megatron's "
                         "parallel folding)")
        if any(v is not None for v in (tp, vpp, mbs, gbs, etp)):
            dims, megatron_notes = _megatron_layout(dict(dims), tp, vpp, mbs, gbs, wl)
            notes.extend(megatron_notes)
        values = {d.name: v if (v := dims.get(d.name)) is not None else (d.default if d.default is not None else 1)
                  for d in DIMENSIONS}
        degrees = {d: values[d] for d in DEGREES}
        fixed = parse_placement(placement, degrees, len(hw.levels)) if placement is not None else None
        layout = _make_layout(values, (schedule or LayoutSchedule.one_f_one_b).value,
                              greedy_placement(hw, degrees, fixed), extra)
        if any(degrees[d] > 1 for d in DEGREES if d not in (fixed or {})):
            notes.append("placement completed greedily (TP first, then CP, PP, DP, EP, lowest level first)")

    if dp_overlap is None:
        dp_overlap = hw.profile.dp_overlap
    ev = api.evaluate(layout, hw, wl, dp_overlap=dp_overlap)
    fits = ev.memory.fits
    room = (f" less {ev.memory.headroom_bytes / 1e9:.2f} GB of headroom" if ev.memory.headroom_bytes else "")
    if not fits:
        notes.append(f"DOES NOT FIT: needs {ev.memory.total_bytes / 1e9:.2f} GB per GPU but {hw.name} has "
                     f"{ev.memory.capacity_bytes / 1e9:.2f} GB{room}")
    if dp_overlap:
        notes.append("DP all-reduce overlapped with compute (--dp-overlap)")
    result = SearchResult("none", "feasible", layout, 0.0, 0, evaluated=1, gap=None,
                          notes=["no search: the layout was given and only evaluated"])
    fm = api.failure_model(failures, sets) if (hw.profile.goodput if goodput is None else goodput) else None
    doc = api.plan_from_evaluation(hw, wl, ev, result, days, price_per_gpu_hour, notes, dp_overlap=dp_overlap,
                                   failures=fm, overrides=[o.text for o in sets])
    why = ""
    wall = doc.wall_clock_days if doc.wall_clock_days is not None else ev.training_days
    if not fits:
        why = (f"the layout needs {ev.memory.total_bytes / 1e9:.2f} GB per GPU but {hw.name} has "
               f"{ev.memory.capacity_bytes / 1e9:.2f} GB of HBM{room}")
    elif days is not None and wall > days:
        why = (f"the layout trains in {ev.training_days:.4g} days, more than the {days:g} days asked"
               if fm is None else f"the layout trains in {wall:.4g} wall-clock days ({ev.training_days:.4g} of "
               f"compute at {doc.goodput.goodput if doc.goodput else 1.0:.1%} goodput), more than the {days:g} "
               "days asked")
    if why:  # it cannot run, or not in time: the document says so, not only the exit code
        doc = doc.model_copy(update={"status": "infeasible", "explanation": why})
    if json_out:
        _emit_json(_plan_json(doc))
    else:
        print_plan(_stdout_console(), doc, evaluated=True)
    if why:
        sys.stderr.write(f"infeasible: {why}\n")
        raise typer.Exit(1)


# --------------------------------------------------------------------------------------------------
# limits
# --------------------------------------------------------------------------------------------------


@app.command("limits")
def limits_command(
    gpu: Annotated[list[str] | None, typer.Option(
        "--gpu", help="Hardware name or TOML file; repeat for several (default: Table 2's v100, a100, h100, "
        "h100-superpod).", metavar="NAME|FILE.toml", show_default=False)] = None,
    batch_tokens: Annotated[float, _number_option("--batch-tokens", help="b, tokens per batch.")] = PAPER_BATCH_TOKENS,
    layers: Annotated[float, _number_option("--layers", help="L, layers.")] = PAPER_LAYERS,
    experts: Annotated[float, _number_option("--experts", help="E, sparsity factor (1 = dense).")] = 1.0,
    days: Annotated[float, _number_option("--days", help="Training duration (the paper's 3 months = 91.3125 days).")
                    ] = THREE_MONTHS_S / DAY_S,
    latency_us: Annotated[float, _number_option(
        "--latency-us", help="t_L, latency of one matmul plus its communication, µs.")] = PAPER_LATENCY_S * 1e6,
    alpha: Annotated[float, _number_option(
        "--alpha", help="App. 8.3: alpha_b - alpha_L (0 = §5; 0.191 with DeepSeek batch scaling).")] = 0.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON list of rows and nothing else.")] = False,
    inferred: Annotated[bool, typer.Option(
        "--inferred/--no-inferred", help="Also find the latency wall `plan` reports for the shape it infers "
        "(about a second per system).")] = True,
) -> None:
    """Closed-form bounds of the paper's §5: d', b', T_critical (Eq. 13) and T_limit (Eq. 18), like Table 2, beside
    the latency wall `plan` reports for the shape it infers."""
    _check_positive("--days", days)
    _check_positive("--latency-us", latency_us)
    _check_positive("--batch-tokens", batch_tokens)
    _check_positive("--layers", layers)
    _check_positive("--experts", experts)
    if not math.isfinite(alpha):
        raise InvalidInput(f"--alpha must be a finite number below 0.5, got {alpha!r}")
    rows = []
    for name in gpu or DEFAULT_LIMITS_HARDWARE:
        hw = get_hardware(name)
        row = limits_for(hw, batch_tokens, layers, experts, days * DAY_S, latency_us * 1e-6, alpha)
        if inferred:  # b, L, E and t_L do not enter: the inferred shape has its own, the hardware its latencies
            row = row.model_copy(update={"inferred": inferred_wall(hw, days * DAY_S, sparse=experts > 1)})
        rows.append(row)
    if json_out:
        _emit_json(_to_json(rows))
        return
    console = _stdout_console()
    console.print(limits_table(rows))
    r = rows[0]
    console.print(assumptions_text(r))
    console.print(f"Latency bounds at these b, L, E, t_L (hardware-independent): utilisation-preserving runs up to "
                  f"{fmt_sci(r.t_critical_latency_flop, 2)} FLOP (Eq. 14); at any utilisation N_p <= "
                  f"{fmt_sci(r.n_params_limit, 2)} (Eq. 17), T <= {fmt_sci(r.t_limit_flop, 2)} FLOP (Eq. 18).")
    if inferred:
        console.print()
        console.print(inferred_table(rows))


# --------------------------------------------------------------------------------------------------
# hardware list | show
# --------------------------------------------------------------------------------------------------


@hardware_app.command("list")
def hardware_list(json_out: Annotated[bool, typer.Option("--json", help="Print a JSON list of hardware specs.")]
                  = False) -> None:
    """The shipped systems: GPU, network levels, peak FLOP/s, HBM."""
    specs = [get_hardware(name) for name in hardware_names()]
    if json_out:
        _emit_json(_to_json(specs))
        return
    _stdout_console().print(hardware_list_table(specs))


@hardware_app.command("show")
def hardware_show(
    name: Annotated[str, typer.Argument(help="Hardware name or path to a TOML file.", metavar="NAME|FILE.toml")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the validated spec as JSON.")] = False,
) -> None:
    """Every field of one hardware spec, with its value and its source."""
    hw = get_hardware(name)
    if json_out:
        _emit_json(_to_json(hw))
        return
    console = _stdout_console()
    for item in hardware_show_renderables(hw):
        console.print(item)


# --------------------------------------------------------------------------------------------------
# schema
# --------------------------------------------------------------------------------------------------


def plan_schema_text() -> str:
    """The JSON Schema of what `--json` prints, as published in docs/plan.schema.json (sorted keys, so diffs stay
    readable): a Plan, or an ErrorDocument when the command failed before it had one."""
    from planner.schema import ErrorDocument

    schema = Plan.model_json_schema()
    error = ErrorDocument.model_json_schema()
    schema.setdefault("$defs", {}).update(error.pop("$defs", {}))
    schema["$defs"]["ErrorDocument"] = error
    schema["$defs"]["Plan"] = {k: v for k, v in schema.items() if k != "$defs"}
    return json.dumps({"$defs": schema["$defs"], "oneOf": [{"$ref": "#/$defs/Plan"}, {"$ref": "#/$defs/ErrorDocument"}],
                       "title": "planner --json output"}, indent=2, sort_keys=True) + "\n"


OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="Write into this directory instead (needed when planner is installed as a package, where the "
    "repository's docs/ is not beside the code).", metavar="DIR", show_default=False, file_okay=False)]


def _docs_dir(write: bool, out: Path | None, default: Path, flag: str = "--write") -> Path | None:
    """Where a `--write` command writes: --out DIR, else the repository's `default` (docs/...) when planner runs from
    a source checkout; from an installed package that would be site-packages, so it is refused (planner.files)."""
    from planner.files import installed_package

    if out is not None:
        if not out.is_dir():
            raise InvalidInput(f"--out {out}: not an existing directory")
        return out
    if not write:
        return None
    if installed_package():
        raise InvalidInput(f"{flag} writes into the repository's docs/, but planner runs from an installed package "
                           f"({Path(__file__).resolve().parent.parent}); give --out DIR")
    return default


@app.command("schema")
def schema_command(
    write: Annotated[bool, typer.Option(
        "--write", help="Also write it to the repository's docs/plan.schema.json.")] = False,
    out: OutOpt = None,
) -> None:
    """Print the JSON Schema of the document `plan --json` prints."""
    from planner.files import write_text

    text = plan_schema_text()
    folder = _docs_dir(write, out, SCHEMA_PATH.parent)
    sys.stdout.write(text)
    if folder is not None:
        write_text(folder / SCHEMA_PATH.name, text, "--write")


@app.command("reference")
def reference_command(
    write: Annotated[bool, typer.Option(
        "--write", help="Write the pages to the repository's docs/reference/ instead of printing them.")] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Exit 1, naming them, if the checked-in pages differ from the code (for CI).")] = False,
    out: OutOpt = None,
) -> None:
    """The hardware, model, profile and failure file formats, field by field with units, generated from the code
    (docs/reference/*.md)."""
    from planner.files import write_text
    from planner.reference import REFERENCE_DIR, pages, stale_pages

    if (write or out is not None) and check:
        raise InvalidInput("--write regenerates the pages, --check compares them: give one")
    folder = _docs_dir(write, out, REFERENCE_DIR)
    if check:
        stale = stale_pages()
        if stale:
            sys.stderr.write(f"stale: docs/reference/{', docs/reference/'.join(stale)} differ from the code; run "
                             "`planner reference --write`\n")
            raise typer.Exit(1)
        sys.stdout.write(f"docs/reference/ is up to date ({len(pages())} pages)\n")
    elif folder is not None:
        if out is None:
            folder.mkdir(parents=True, exist_ok=True)
        for name, text in pages().items():
            path = write_text(folder / name, text, "--write")
            sys.stdout.write(f"wrote {path}\n")
    else:
        sys.stdout.write("\n".join(pages().values()))


# --------------------------------------------------------------------------------------------------
# Entry points: one place maps every outcome to an exit code and at most one line on stderr
# --------------------------------------------------------------------------------------------------


_NO_ARGS_IS_HELP = getattr(click_exc, "NoArgsIsHelpError", ())  # click >= 8.2 signals "help printed" this way


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class Terminated(Exception):
    """SIGTERM arrived: stop like Ctrl-C, with exit code 143."""


def _on_sigterm(signum, frame) -> None:  # pragma: no cover - exercised through a subprocess in the tests
    raise Terminated()


def _wants_json(argv: Sequence[str]) -> bool:
    return "--json" in argv


def _json_error(argv: Sequence[str], code: str, exit_code: int, message: str) -> None:
    """With --json, one ErrorDocument on stdout (a provisioning script reads a status, not an empty document)."""
    from planner.schema import ErrorDetail, ErrorDocument

    if _wants_json(argv):
        with contextlib.suppress(OSError):
            doc = ErrorDocument(error=ErrorDetail(code=code, message=_one_line(message), exit_code=exit_code))
            sys.stdout.write(doc.model_dump_json(indent=2) + "\n")
            sys.stdout.flush()


def _fail(argv: Sequence[str], code: str, exit_code: int, message: str, prefix: str = "error") -> int:
    """One line on stderr and, with --json, one ErrorDocument on stdout. Returns the exit code."""
    sys.stderr.write(f"{prefix}: {_one_line(message)}\n")
    _json_error(argv, code, exit_code, message)
    return exit_code


HELP_WIDTH_PIPED = 140
"""Columns of `--help` when stdout is not a terminal (`planner sweep --help | cat`), as for the tables: rich would
use 80 and cut long words (PREFIX-parallelism-HW.png) in the narrow description column."""


@contextlib.contextmanager
def _help_width() -> Iterator[None]:
    """Widen typer's help console when piped, unless the user set a width (COLUMNS or typer's TERMINAL_WIDTH).

    typer reads TERMINAL_WIDTH when it first imports its help renderer (typer.rich_utils, which loads rich's
    Markdown: a tenth of a second that a command printing no help should not pay), so until then the width goes
    through that variable, for this run only; once the renderer is loaded, its width is set directly."""
    if ({"COLUMNS", "TERMINAL_WIDTH"} & set(os.environ)) or sys.stdout.isatty():
        yield
        return
    rich_utils = sys.modules.get("typer.rich_utils")
    if rich_utils is not None:
        rich_utils.MAX_WIDTH = HELP_WIDTH_PIPED  # type: ignore[attr-defined]
        yield
        return
    os.environ["TERMINAL_WIDTH"] = str(HELP_WIDTH_PIPED)
    try:
        yield
    finally:
        os.environ.pop("TERMINAL_WIDTH", None)


def run(typer_app: typer.Typer, argv: Sequence[str], prog_name: str) -> int:
    """Run a Typer app on `argv` and return the exit code (see the module docstring for their meaning)."""
    import signal

    command = typer.main.get_command(typer_app)
    previous = None
    with contextlib.suppress(ValueError):  # only the main thread may set handlers (tests call run() from others)
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with _help_width():
            rv = command.main(args=list(argv), prog_name=prog_name, standalone_mode=False)
        if rv == 130:  # typer turns a KeyboardInterrupt inside a command into Exit(130) before it reaches us
            raise KeyboardInterrupt
        return rv if isinstance(rv, int) else 0  # an int is the code of a typer.Exit / --help
    except _NO_ARGS_IS_HELP:
        return 2  # typer has already printed the help
    except click_exc.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        return _fail(argv, "usage", 2, f"{exc.format_message()}{hint}")
    except click_exc.ClickException as exc:
        return _fail(argv, "usage", 2, exc.format_message())
    except (typer.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        return _fail(argv, "interrupted", 130, "interrupted (Ctrl-C); nothing after the last finished step was kept")
    except Terminated:
        return _fail(argv, "interrupted", 143, "terminated (SIGTERM); nothing after the last finished step was kept")
    except Infeasible as exc:
        doc = exc.plan
        kind = "unknown" if doc is not None and doc.status == "unknown" else "infeasible"
        text = str(exc.explanation or exc)
        if doc is not None and doc.explanation and sys.stdout.isatty() and sys.stderr.isatty():
            # both streams on one terminal, and the report above says why in full: say it once
            rest = len(text.splitlines()) - 1
            text = text.splitlines()[0] + (f" (and {rest} more line{'s' if rest > 1 else ''} in the report on "
                                           "stdout)" if rest else "")
        sys.stderr.write(f"{kind}: {text}\n")
        if doc is None:  # commands print their infeasible Plan themselves; without one, say it in JSON
            _json_error(argv, "infeasible", 1, str(exc.explanation or exc))
        return 1
    except (InvalidInput, PlannerError) as exc:
        return _fail(argv, "bad_input", 2, str(exc))
    except BrokenPipeError:
        # The reader went away (`plan --json | head`): nothing left to say; keep the interpreter from complaining.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe
    except Exception as exc:  # a bug, not a user error: still one line, distinct exit code
        return _fail(argv, "internal", 3, f"{type(exc).__name__}: {exc}", prefix="internal error")
    finally:
        if previous is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, previous)


def main() -> None:
    """Console script `planner`."""
    sys.exit(run(app, sys.argv[1:], "planner"))


def plan_main() -> None:
    """Console script `plan` (same as `planner plan`)."""
    sys.exit(run(plan_app, sys.argv[1:], "plan"))


if __name__ == "__main__":
    main()
