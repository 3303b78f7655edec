"""Shared command-line options: number parsers and the option types several commands take (one definition each,
so a flag reads the same in `plan` and `evaluate`; `sweep` shares the number parsers)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer

from planner.choices import BatchScaling, Budget, Precision
from planner.errors import InvalidInput
from planner.parallel.dimensions import Dimension


def parse_number(text: str) -> float:
    """Parse a number the way a shell user writes it (1e28, 90, 0.5); name the bad text otherwise.

    NaN, infinities, zero and negatives parse here on purpose: the library rejects them with messages that say
    what is accepted."""
    try:
        return float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number") from None


MAX_WHOLE = 2**53
"""Largest whole-number option (--gpus, --dp, ...) accepted; larger ones would overflow the int64 cost arrays."""


def parse_whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a whole number") from None
    if abs(value) > MAX_WHOLE:
        raise typer.BadParameter(f"{text!r} is too large (at most 2^53 = {MAX_WHOLE})")
    return value


def dimension_parser(d: Dimension) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            return d.parse(text)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return parse


def number_option(*decls: str, **kwargs):
    return typer.Option(*decls, parser=parse_number, metavar=kwargs.pop("metavar", "NUMBER"), **kwargs)


def whole_option(*decls: str, **kwargs):
    return typer.Option(*decls, parser=parse_whole, metavar=kwargs.pop("metavar", "INT"), **kwargs)


WORKLOAD_PANEL = "Workload (one of: --compute, --model, or a shape)"
SEARCH_PANEL = "Search"
OUTPUT_PANEL = "Output"
COMPARE_PANEL = "Several accelerators (--gpu A,B,... or --gpu all)"
LAYOUT_PANEL = "Layout (or --plan FILE.json)"

ComputeOpt = Annotated[float | None, number_option(
    "--compute", help="Training compute T in FLOP, e.g. 1e28; the model shape is inferred from the paper's "
    "scaling laws (App. 8.1.4).", rich_help_panel=WORKLOAD_PANEL, show_default=False)]
ModelOpt = Annotated[str | None, typer.Option(
    "--model", help="A model preset name (see models/) or a path to a preset TOML file.", metavar="PRESET|FILE.toml",
    rich_help_panel=WORKLOAD_PANEL, show_default=False)]
ModelFamilyOpt = Annotated[str | None, typer.Option(
    "--model-family", help="With --compute: scale a published family (llama3, qwen3-moe, deepseek-v3; "
    "models/families/) to the budget by its rules and plan it as a real transformer (docs/families.md).",
    metavar="NAME",
    rich_help_panel=WORKLOAD_PANEL, show_default=False)]
SparseOpt = Annotated[bool, typer.Option(
    "--sparse", help="With --compute: a sparse (mixture-of-experts) model, E = 8 sqrt(d_model d_ff / (4 12288^2)).",
    rich_help_panel=WORKLOAD_PANEL)]
BatchScalingOpt = Annotated[BatchScaling | None, typer.Option(
    "--batch-scaling", help="With --compute: the batch-size law (default paper; deepseek and fixed are §6.3.2's "
    "alternatives).", rich_help_panel=WORKLOAD_PANEL, show_default=False, case_sensitive=False)]
BudgetOpt = Annotated[Budget, typer.Option(
    "--budget", help="With --compute: 'exact' trains the compute asked for (the training tokens absorb the shape's "
    "hardware-friendly rounding, in whole optimizer steps); 'paper' takes D = 20 N_p of the rounded shape, as the "
    "paper's tables do (about 0.7x to 1.5x of the request).", rich_help_panel=WORKLOAD_PANEL, case_sensitive=False)]
DModelOpt = Annotated[float | None, number_option("--d-model", help="Explicit shape: d_model.",
                                                  rich_help_panel=WORKLOAD_PANEL,
                                                 show_default=False)]
DFfOpt = Annotated[float | None, number_option("--d-ff", help="Explicit shape: d_ff.", rich_help_panel=WORKLOAD_PANEL,
                                              show_default=False)]
LayersOpt = Annotated[float | None, number_option("--layers", help="Explicit shape: L, MLP blocks.",
                                                 rich_help_panel=WORKLOAD_PANEL, show_default=False)]
ExpertsOpt = Annotated[float | None, number_option("--experts", help="Explicit shape: E (default 1 = dense).",
                                                  rich_help_panel=WORKLOAD_PANEL, show_default=False)]
BatchTokensOpt = Annotated[float | None, number_option(
    "--batch-tokens", help="Explicit shape: global batch b in tokens (a multiple of E).",
    rich_help_panel=WORKLOAD_PANEL, show_default=False)]
TokensOpt = Annotated[float | None, number_option(
    "--tokens", help="Explicit shape: training tokens D (default 20 N_p, Chinchilla).", rich_help_panel=WORKLOAD_PANEL,
    show_default=False)]
BatchSequencesOpt = Annotated[int | None, whole_option(
    "--batch-sequences", help="With a transformer --model: the global batch in sequences (replaces the preset's).",
    rich_help_panel=WORKLOAD_PANEL, show_default=False)]
SeqLenOpt = Annotated[int | None, whole_option(
    "--seq-len", help="With a transformer --model: the sequence length (the batch keeps its tokens).",
    rich_help_panel=WORKLOAD_PANEL, show_default=False)]
PrecisionOpt = Annotated[Precision | None, typer.Option(
    "--precision", help="With a transformer --model: GEMM precision and recipe: bf16 (default), fp8 (= fp8-current, "
    "per-tensor current scaling), fp8-delayed, fp8-rowwise (torchao), fp8-blockwise, mxfp8 (Blackwell), fp4 "
    "(= nvfp4, Blackwell).",
    rich_help_panel=WORKLOAD_PANEL,
    show_default=False, case_sensitive=False)]
GpuOpt = Annotated[str, typer.Option(
    "--gpu", help="Hardware name (see `planner hardware list`) or a path to a hardware TOML file; for `plan`, several "
    "comma-separated (e.g. h100,b200) or 'all' plan each and rank them (--objective).",
    metavar="NAME|FILE.toml")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (a Plan) and nothing else on stdout; "
                                       "a failure is a JSON document too (an infeasible Plan, or {\"status\": "
                                       "\"error\", ...}), nothing on stderr, and a non-zero exit code.",
                                       rich_help_panel=OUTPUT_PANEL)]
PriceOpt = Annotated[float | None, number_option(
    "--price-per-gpu-hour", help="Price in USD per GPU-hour (at most 1,000), in place of the hardware file's dated "
    "market figure; with several accelerators, for all of them (--gpu-price sets one).", rich_help_panel=OUTPUT_PANEL,
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
WHAT_IF_PANEL = "What-if (no file editing)"
RAY_HELP = ("Run on a Ray cluster instead of local processes (the study engine, as `planner study --ray`): auto (the "
            "cluster this machine joined), HOST:6379, ray://HOST:10001, or local (a private one here). Needs pip "
            "install 'planner\\[ray]'.")
"""--ray's help, shared by `sweep` and `plan --sensitivity`."""

SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="Change one hardware, profile or failure-model field for this run, as an edited copy of its file "
    "would, e.g. levels.InfiniBand.bw_bidir_GBps=200, gpu.hbm_GB=96, profile.overlap.tp=0.5, "
    "goodput.restart_minutes=2 (repeatable; keys in docs/reference/). Echoed in the output and the JSON.",
    metavar="FIELD=VALUE", rich_help_panel=WHAT_IF_PANEL, show_default=False)]
BwOpt = Annotated[list[str] | None, typer.Option(
    "--bw", help="A network level's bidirectional bandwidth per GPU in GB/s, e.g. InfiniBand=200 (= --set "
    "levels.InfiniBand.bw_bidir_GBps=200; repeatable).", metavar="LEVEL=GBPS", rich_help_panel=WHAT_IF_PANEL,
    show_default=False)]
LatencyOpt = Annotated[float | None, number_option(
    "--latency", help="One-way latency of every network level, µs, in the hardware file and the profile (= --set "
    "levels.*.lat_us=US profile.network.latency_us=[US]).", metavar="US", rich_help_panel=WHAT_IF_PANEL,
    show_default=False)]
MemoryHeadroomOpt = Annotated[float | None, number_option(
    "--memory-headroom", help="GB of HBM a layout must leave free: it fits when its total + headroom <= HBM (= --set "
    "profile.memory.headroom_GB=GB; default: the profile's, 0 in the paper profile, 2 in the realistic one).",
    metavar="GB", rich_help_panel=WHAT_IF_PANEL, show_default=False)]
ProfileOpt = Annotated[str | None, typer.Option(
    "--profile", help="Execution profile that prices layouts: 'paper' (the paper's idealised model) or 'realistic' "
    "(validated against published runs, docs/validation.md), 'realistic/torchtitan' (as torchtitan runs it: the "
    "profile's \\[framework.torchtitan] values), or a profile TOML file. Default: 'paper' for the paper's toy workload "
    "(--compute), 'realistic' for a transformer (--model, shapes with --heads), --emit and validate "
    "('realistic/torchtitan' for --emit torchtitan); evaluate --plan takes the plan's.",
    metavar="paper|realistic|NAME/FRAMEWORK|FILE.toml",
    show_default=False)]


OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="Write into this directory instead (needed when planner is installed as a package, where the "
    "repository's docs/ is not beside the code).", metavar="DIR", show_default=False, file_okay=False)]


def overrides_of(sets: list[str] | None, bw: list[str] | None, latency: float | None,
               memory_headroom: float | None = None) -> list[str]:
    """--set strings, the shortcuts' expansions after them."""
    from planner.overrides import shortcuts

    check_positive_flag("--latency", latency)
    if memory_headroom is not None and not (math.isfinite(memory_headroom) and memory_headroom >= 0):
        raise InvalidInput(f"--memory-headroom must be a finite number of GB >= 0, got {memory_headroom!r}")
    extra = [] if memory_headroom is None else [f"profile.memory.headroom_GB={memory_headroom!r}"]
    return list(sets or []) + shortcuts(bw or [], latency) + extra


def as_typed(message: str, argv: Sequence[str]) -> str:
    """An error about a shortcut's expansion ('--set levels.NVLink.bw_bidir_GBps=0: ...') said of the flag the user
    typed ('--bw NVLink=0: ...')."""
    from planner.overrides import shortcuts

    for k, arg in enumerate(argv):
        value = arg.removeprefix("--bw=") if arg.startswith("--bw=") else (
            argv[k + 1] if arg == "--bw" and k + 1 < len(argv) else None)
        if value is None:
            continue
        try:
            expanded = shortcuts([value])[0]
        except InvalidInput:
            continue
        message = message.replace(f"--set {expanded}:", f"--bw {value}:")
    return message


def check_positive_flag(flag: str, value: float | None) -> None:
    """CLI-only numbers (not validated by the library) get the same one-line rule."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InvalidInput(f"{flag} must be a positive finite number, got {value!r}")
