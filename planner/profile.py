"""Execution profiles: how a training framework runs on the hardware, as data beside the hardware files.

A hardware file says what the system *is* (FLOP/s, bandwidths, sizes); an execution profile says how training
*runs* on it: how fast GEMMs and attention kernels go against peak, how much of each kind of communication hides
under compute, what bus bandwidth and per-collective latency NCCL achieves on each network level, what the
element-wise kernels and the optimizer step cost. Two ship in `profiles/`:

* `paper`: the paper's idealised model (App. 8.1.1-8.1.2): GEMMs by the roofline of the memory hierarchy at the
  sustained clock, every TP, PP and EP transfer hidden under the GEMMs, collectives at the link rate with the
  hardware file's latency, nothing else on the GPU. The reproduction profile and the default.
* `realistic`: what published runs show (docs/validation.md): cuBLAS's measured share of peak with tile and wave
  quantization, TP traffic exposed (stock Megatron), NCCL's bus bandwidth and tens of microseconds per collective,
  element-wise work and optimizer step priced.

File format: every number is `{ value = ..., source = "..." }` (optionally `note`), as in the hardware files; a
user file may give plain values. Sections and keys are those of `FIELDS` below.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import InvalidInput
from planner.overrides import Override
from planner.sourced import Spread, load_sourced, load_toml, spreads_of, unwrap

Fraction = Annotated[float, Field(gt=0, le=1)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
TileSide = Annotated[int, Field(ge=1, le=2**16)]


GemmPass = Literal["fprop", "dgrad", "wgrad"]
RECIPE_PASSES: tuple[GemmPass, ...] = ("fprop", "dgrad", "wgrad")
"""A GEMM's three passes per microbatch: forward, activation gradient, weight gradient."""


class Recipe(BaseModel):
    """A low-precision training recipe as Transformer Engine and torchao run it (docs/model.md §1c): which GEMM passes
    of the transformer layers run in low precision, what quantizing their inputs costs in HBM traffic, what stays in
    16-bit, and what the recipe changes in memory and communication. The recipe names are Transformer Engine's:
    per-tensor 'delayed' and 'current' scaling, 'blockwise' (1 x 128 activation and 128 x 128 weight tiles),
    Blackwell 'mxfp8' (one scale per 32 elements) and 'nvfp4'."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    precision: Literal["fp8", "fp4"] = Field(description="Element format of the low-precision GEMM operands.")
    passes: tuple[GemmPass, ...] = Field(
        RECIPE_PASSES, description="GEMM passes run in low precision (the others in 16-bit).")
    gemm_efficiency: Fraction = Field(
        1.0, description="Low-precision GEMM throughput with this recipe's scaling / per-tensor scaling's (block "
        "scales applied inside the GEMM's main loop cost throughput on GPUs without hardware block scaling).")
    quantize_bytes_per_element: float = Field(
        0.0, ge=0, description="HBM bytes a GEMM input's quantization moves per element of the 16-bit tensor: read "
        "it, write the low-precision copies the passes need (row- and column-wise), their scales, and the extra "
        "read of an amax pass (current scaling). Priced as element-wise work at HBM bandwidth, once per GEMM input "
        "per pass that consumes it.")
    weight_cast_bytes_per_param: float = Field(
        0.0, ge=0, description="HBM bytes per parameter to refresh the low-precision weight copies once per step "
        "(after the optimizer), priced with the optimizer step.")
    weight_copy_bytes_per_param: float = Field(
        0.0, ge=0, description="Memory: bytes per parameter of the low-precision weight copies kept beside the "
        "16-bit weights (row- and column-wise where the GPU needs both).")
    kept_layer_fraction: float = Field(
        0.0, ge=0, lt=1, description="Share of the transformer layers the recipe keeps entirely in 16-bit (e.g. "
        "the last layers under NVFP4); their GEMMs run at the 16-bit rate.")
    param_gather_bytes: float = Field(
        2.0, gt=0, le=4, description="Bytes per parameter of ZeRO-3 / FSDP / distributed-optimizer parameter "
        "all-gathers (1: gathered in FP8, Megatron --fp8-param-gather, torchtitan float8 all-gather; 2: 16-bit).")


def entry_for(table: Mapping[str, float], gpu_name: str) -> str | None:
    """The key of a per-GPU table (peak fractions, sustained factors) that a GPU reads: its full name (a variant
    such as a power-capped part), else its family (the name's first word, e.g. 'H100'), else 'default'; keys match
    without regard to case. None: no entry applies."""
    keys = {key.upper(): key for key in table}
    words = gpu_name.split()
    for wanted in (gpu_name.upper(), words[0].upper() if words else "", "DEFAULT"):
        if wanted in keys:
            return keys[wanted]
    return None


class ExecutionProfile(BaseModel):
    """How training runs on a system (see the module docstring). Every field's paper value leaves the paper's model
    unchanged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    gemm_model: Literal["roofline", "measured"] = Field(
        "roofline", description="'roofline': App. 8.1.1's memory-hierarchy model at the sustained clock; 'measured': "
        "peak x the measured large-GEMM fraction x tile and wave quantization, or HBM-bound.")
    gemm_peak_fraction: dict[str, Fraction] = Field(
        default_factory=dict, description="'measured': 16-bit large-GEMM FLOP/s / peak, by GPU family (the first "
        "word of the GPU's name, e.g. 'H100'), and 'default'.")
    gemm_fp8_peak_fraction: dict[str, Fraction] = Field(
        default_factory=dict, description="'measured': the same for FP8 GEMMs against the FP8 peak.")
    gemm_fp4_peak_fraction: dict[str, Fraction] = Field(
        default_factory=dict, description="'measured': the same for FP4 GEMMs against the FP4 peak.")
    recipes: dict[str, Recipe] = Field(
        default_factory=dict, description="Low-precision recipes by name ('delayed', 'current', 'blockwise', "
        "'mxfp8', 'nvfp4'); a recipe the profile does not list runs its GEMMs at the low-precision rate with no "
        "other cost (the paper profile's idealisation).")
    gemm_tile: tuple[TileSide, TileSide] = Field(
        (128, 256), description="Output tile of a GEMM kernel (rows, columns): tile and wave quantization.")
    gemm_launch_s: float | None = Field(None, ge=0, description="Fixed time per GEMM kernel (None: the hardware "
                                        "file's matmul_latency).")
    attention_fwd_fraction: float = Field(0.70, gt=0, le=1, description="FlashAttention forward FLOP/s / peak.")
    attention_bwd_fraction: float = Field(0.50, gt=0, le=1, description="FlashAttention backward FLOP/s / peak.")
    attention_unfused_fraction: float = Field(
        0.70, gt=0, le=1, description="Unfused attention's batched score and context GEMMs: FLOP/s / peak.")
    elementwise_hbm_fraction: float = Field(1.0, gt=0, le=1, description="Element-wise kernels' achieved HBM "
                                            "bandwidth / peak.")
    layer_overhead_s: float = Field(0.0, ge=0, description="Fixed time per layer per microbatch, forward and "
                                    "backward (kernel launches and small kernels the operation list leaves out).")
    compiled_elementwise_fraction: float = Field(
        1.0, gt=0, le=1, description="Share of the element-wise HBM traffic left when the model runs compiled "
        "(`compiled`: torch.compile fuses norms, activations and residual adds into fewer kernels).")
    collective_bw_fraction: tuple[Fraction, ...] = Field(
        (1.0,), min_length=1, description="Achieved bus bandwidth / link bandwidth, per network level bottom-up "
        "(the last value repeats for higher levels).")
    collective_latency_s: tuple[Seconds, ...] | None = Field(
        None, min_length=1, description="One-way latency per network level bottom-up, replacing the hardware "
        "file's (None: the hardware file's; the last value repeats).")
    overlap_tp: float = Field(1.0, ge=0, le=1, description="Share of tensor-parallel traffic hidden under GEMMs.")
    overlap_tp_comm: float = Field(1.0, ge=0, le=1, description="The same with the framework's TP communication "
                                   "overlap on (Megatron --tp-comm-overlap, torchtitan async TP).")
    overlap_cp: float = Field(1.0, ge=0, le=1, description="Share of context parallelism's ring exchange hidden "
                              "under the attention kernels.")
    overlap_pp: float = Field(1.0, ge=0, le=1, description="Share of pipeline point-to-point traffic hidden.")
    overlap_ep: float = Field(1.0, ge=0, le=1, description="Share of expert all-to-all traffic hidden.")
    moe_imbalance: float = Field(1.0, ge=1, description="Routing imbalance: the busiest expert rank's routed load / "
                                 "the mean. Multiplies the expert GEMMs and the all-to-all bytes of that rank (1: "
                                 "uniform routing, the paper's).")
    overlap_zero: float = Field(1.0, ge=0, le=1, description="Share of ZeRO-2/3 traffic during the microbatches "
                                "hidden.")
    dp_overlap: bool = Field(False, description="Default for --dp-overlap: the gradient reduction runs under the "
                             "backward pass.")
    dp_exposed: float = Field(0.0, ge=0, le=1, description="With DP overlap: share of the data-parallel phase that "
                              "stays exposed.")
    zero_bubble_hides_latency: bool = Field(
        True, description="Under zb-h2 the serial latencies hide behind other microbatches (App. 8.1.5); False: "
        "every GPU still waits out its own collectives' latency.")
    optimizer_bytes_per_param: float = Field(0.0, ge=0, description="HBM bytes the optimizer step moves per "
                                             "parameter it updates (0: not priced).")
    ring_step_latency_s: tuple[Seconds, ...] = Field(
        (0.0,), min_length=1, description="Latency of one step of a ring collective per network level bottom-up "
        "(NCCL's per-hop latency; the last value repeats): prices ZeRO-3's per-microbatch gathers. 0: not priced.")
    zero_flat: bool = Field(False, description="ZeRO-2/3 collectives run as one flat ring over the whole data-parallel "
                            "group, at the slowest spanned level's per-GPU bandwidth, instead of hierarchically.")
    gemm_sustained_factor: float = Field(1.0, gt=0, le=1, description="'measured': GEMM throughput inside a training "
                                         "step / the isolated benchmark's (power and clocks under a full node's "
                                         "load, SMs shared with communication kernels).")
    gemm_sustained_by_family: dict[str, Fraction] = Field(
        default_factory=dict, description="'measured': the sustained factor for a GPU family where it differs from "
        "`gemm_sustained_factor` (e.g. Blackwell under a full rack's power draw).")
    goodput: bool = Field(False, description="Plan with failures, checkpoints and restarts (planner.goodput): the "
                          "deadline is wall-clock time, compute time / goodput.")
    # [memory] (docs/model.md §7b): what a GPU holds beside the model state and activations, how ZeRO-3 gathers, and
    # what compiled kernels save. The paper's values keep its 2 GB reserve and nothing else.
    memory_reserve_bytes: float = Field(2e9, ge=0, description="Fixed reserve per GPU (bytes; TOML GB) for whatever "
                                        "the components below leave out (the paper's profile: 2 GB for all of it).")
    memory_context_bytes: float = Field(0.0, ge=0, description="CUDA context and the framework's per-process "
                                        "baseline (bytes; TOML GB): outside the caching allocator.")
    memory_workspace_bytes: float = Field(0.0, ge=0, description="cuBLAS / Transformer Engine GEMM workspaces "
                                          "(bytes; TOML GB).")
    nccl_buffer_bytes: float = Field(0.0, ge=0, description="NCCL_BUFFSIZE: one protocol buffer per channel and "
                                     "peer connection (bytes; TOML MiB; 0: NCCL buffers not counted).")
    nccl_channels: float = Field(0.0, ge=0, description="Channels NCCL opens per communicator.")
    nccl_buffers_per_channel: float = Field(0.0, ge=0, description="Buffers of NCCL_BUFFSIZE per channel (peer "
                                            "connections x protocols, LL / LL128 counted in buffer equivalents).")
    memory_fragmentation: float = Field(0.0, ge=0, le=1, description="The caching allocator's reserved / allocated "
                                        "- 1: a fraction of what it serves (weights, gradients, optimizer state, "
                                        "activations).")
    memory_headroom_bytes: float = Field(0.0, ge=0, description="Memory a plan must leave free (bytes; TOML GB): a "
                                         "layout fits when total + headroom <= HBM (--memory-headroom).")
    zero3_unit: Literal["matrix", "layer"] = Field(
        "matrix", description="What ZeRO-3 gathers at once: 'matrix' (DeepSpeed: per parameter, the largest weight "
        "matrices) or 'layer' (FSDP: a whole transformer block).")
    zero3_live_units: float = Field(2.0, ge=1, description="Gathered units resident at once (the one computing and "
                                    "the one prefetched); ZeRO-2/3 also hold one unit's full gradient.")
    zero3_max_live_params: float | None = Field(None, gt=0, description="Cap on gathered parameters resident at once "
                                                "(DeepSpeed stage3_max_live_parameters; None: no cap).")
    zero3_pp_unsharded: bool = Field(False, description="With pipeline parallelism ZeRO-3 keeps the stage's weights "
                                     "gathered after the forward pass and their gradients unsharded until the last "
                                     "microbatch (torchtitan: reshard_after_forward = not pp_enabled).")
    zero3_pp_grad_bytes: float = Field(2.0, gt=0, description="Bytes per parameter of the unsharded gradients "
                                       "held across the microbatches under zero3_pp_unsharded (FSDP2 accumulates "
                                       "them in its reduce dtype: 4 for fp32).")
    optimizer_state_bytes_per_param: float = Field(12.0, gt=0, description="Optimizer state bytes per "
                                                   "parameter, sharded as ZeRO says: 12 for an fp32 master copy and "
                                                   "fp32 Adam m and v; 4 for Adam's m and v in the 16-bit parameters' "
                                                   "own dtype and no master copy.")
    loss_freed_before_recompute: bool = Field(False, description="The loss's bytes are freed before the last "
                                              "layer is recomputed: the last stage holds the larger of the two, not "
                                              "their sum (planner.cost.memory; the paper profile adds them).")
    logits_bytes: float = Field(4.0, gt=0, description="Bytes per vocabulary entry per token the LM head and loss "
                                "hold at their peak (logits, their fp32 copy, softmax, gradient).")
    selective_policy: Literal["megatron", "op"] = Field(
        "megatron", description="What selective recomputation keeps: 'megatron' (all but the attention core's own "
        "tensors) or 'op' (torchtitan's per-op policy: the layer input, the attention output and every other GEMM's "
        "output).")
    mla_recompute_up_proj: bool = Field(False, description="MLA's up-projected per-head q, k and v are rebuilt from "
                                        "the kept latents in the backward pass instead of kept (DeepSeek-V3).")
    compiled: bool = Field(False, description="The model runs compiled (torch.compile, fused kernels): "
                           "`compiled_fuses` applies.")
    compiled_fuses: bool = Field(False, description="Compiled kernels recompute the fusible element-wise outputs "
                                 "(norm outputs, the SwiGLU product) in the backward pass instead of keeping them.")
    frameworks: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per training framework, fields that differ from this profile (e.g. "
        "'deepspeed': ZeRO-3 traffic exposed); `for_framework` applies them.")
    sources: dict[str, str] = Field(default_factory=dict, description="Field -> where the value comes from.")
    spreads: dict[str, Spread] = Field(default_factory=dict, description="Field -> how far its value may be off "
                                       "(estimated and fitted values whose file states a range; --confidence).")

    def gemm_fraction(self, gpu_name: str, precision: str = "bf16") -> float:
        """The measured large-GEMM fraction of peak for this GPU family and element format ('bf16', 'fp8',
        'fp4'; the 16-bit table serves 'bf16')."""
        table = {"fp8": self.gemm_fp8_peak_fraction, "fp4": self.gemm_fp4_peak_fraction}.get(
            precision, self.gemm_peak_fraction)
        key = entry_for(table, gpu_name)
        if key is not None:
            return table[key]
        label = precision if precision in ("fp8", "fp4") else "16-bit"
        raise InvalidInput(f"profile '{self.name}' has no GEMM efficiency for {gpu_name} ({label}) and no default")

    def sustained_factor(self, gpu_name: str) -> float:
        """`gemm_sustained_by_family` for this GPU (`entry_for`: a variant such as a power-capped part by its full
        name, else its family), else `gemm_sustained_factor`."""
        key = entry_for(self.gemm_sustained_by_family, gpu_name)
        return self.gemm_sustained_factor if key is None else self.gemm_sustained_by_family[key]

    def recipe(self, name: str | None) -> Recipe | None:
        """The profile's recipe of that name (None: 16-bit, or a recipe the profile does not price)."""
        return None if name is None else self.recipes.get(name)

    def for_framework(self, framework: str) -> ExecutionProfile:
        """This profile as `framework` runs it (its overrides applied; unchanged for a framework without any)."""
        extra = self.frameworks.get(framework)
        if not extra:
            return self
        return self.model_copy(update={**extra, "name": f"{self.name}/{framework}", "frameworks": {}})

    def per_level(self, values: tuple[float, ...], levels: int) -> list[float]:
        """`values` stretched to `levels` entries (the last repeats)."""
        return [values[min(k, len(values) - 1)] for k in range(levels)]


FIELDS: dict[str, str] = {
    "gemm.model": "gemm_model",
    "gemm.tile": "gemm_tile",
    "gemm.launch_us": "gemm_launch_s",
    "attention.flash_fwd_fraction": "attention_fwd_fraction",
    "attention.flash_bwd_fraction": "attention_bwd_fraction",
    "attention.unfused_fraction": "attention_unfused_fraction",
    "elementwise.hbm_fraction": "elementwise_hbm_fraction",
    "elementwise.layer_overhead_us": "layer_overhead_s",
    "elementwise.compiled_fraction": "compiled_elementwise_fraction",
    "network.bus_bw_fraction": "collective_bw_fraction",
    "network.latency_us": "collective_latency_s",
    "overlap.tp": "overlap_tp",
    "overlap.pp": "overlap_pp",
    "overlap.tp_comm_overlap": "overlap_tp_comm",
    "overlap.cp": "overlap_cp",
    "overlap.ep": "overlap_ep",
    "overlap.zero": "overlap_zero",
    "moe.imbalance": "moe_imbalance",
    "overlap.dp": "dp_overlap",
    "overlap.dp_exposed": "dp_exposed",
    "overlap.zero_bubble_hides_latency": "zero_bubble_hides_latency",
    "optimizer.bytes_per_param": "optimizer_bytes_per_param",
    "overlap.zero_flat": "zero_flat",
    "network.ring_step_latency_us": "ring_step_latency_s",
    "gemm.sustained_factor": "gemm_sustained_factor",
    "goodput.enabled": "goodput",
    "memory.reserve_GB": "memory_reserve_bytes",
    "memory.cuda_context_GB": "memory_context_bytes",
    "memory.workspace_GB": "memory_workspace_bytes",
    "memory.nccl_buffsize_MiB": "nccl_buffer_bytes",
    "memory.nccl_channels": "nccl_channels",
    "memory.nccl_buffers_per_channel": "nccl_buffers_per_channel",
    "memory.fragmentation": "memory_fragmentation",
    "memory.headroom_GB": "memory_headroom_bytes",
    "memory.zero3_unit": "zero3_unit",
    "memory.zero3_live_units": "zero3_live_units",
    "memory.zero3_max_live_params": "zero3_max_live_params",
    "memory.zero3_pp_unsharded": "zero3_pp_unsharded",
    "memory.zero3_pp_grad_bytes": "zero3_pp_grad_bytes",
    "memory.logits_bytes": "logits_bytes",
    "memory.loss_freed_before_recompute": "loss_freed_before_recompute",
    "memory.optimizer_state_bytes_per_param": "optimizer_state_bytes_per_param",
    "memory.selective_policy": "selective_policy",
    "memory.mla_recompute_up_proj": "mla_recompute_up_proj",
    "memory.compiled": "compiled",
    "memory.compiled_fuses": "compiled_fuses",
}
"""TOML key (section.key) -> field. Keys ending in _us are microseconds, _GB gigabytes (1e9 bytes), _MiB
mebibytes. [gemm.peak_fraction] and
[gemm.fp8_peak_fraction] are tables of GPU family -> fraction."""

TABLES = {"gemm.peak_fraction": "gemm_peak_fraction", "gemm.fp8_peak_fraction": "gemm_fp8_peak_fraction",
          "gemm.fp4_peak_fraction": "gemm_fp4_peak_fraction", "gemm.sustained_by_family": "gemm_sustained_by_family"}

RECIPE_KEYS = {"precision", *Recipe.model_fields} - {"model_config"}
"""Keys of a [recipe.NAME] table (the Recipe fields)."""


def _parse_recipes(raw: Any, origin: str, sources: dict[str, str], require_source: bool) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise InvalidInput(f"{origin}: [recipe] must hold one table per recipe name")
    out: dict[str, dict[str, Any]] = {}
    for name, body in raw.items():
        if not isinstance(body, dict):
            raise InvalidInput(f"{origin}: [recipe.{name}] must be a table")
        unknown = set(body) - RECIPE_KEYS
        if unknown:
            raise InvalidInput(f"{origin}: [recipe.{name}]: unknown key(s) {sorted(unknown)}; expected "
                               f"{', '.join(sorted(RECIPE_KEYS))}")
        out[name] = {k: _leaf(v, f"recipe.{name}.{k}", sources, require_source) for k, v in body.items()}
    return out


def _leaf(raw: Any, path: str, sources: dict[str, str], require_source: bool) -> Any:
    return unwrap(raw, path, sources, require_source, "every value in a shipped profile")


def parse_profile(doc: dict[str, Any], origin: str, require_source: bool = False) -> ExecutionProfile:
    sources: dict[str, str] = {}
    fields: dict[str, Any] = {}
    for key in ("name", "description"):
        if key in doc:
            fields[key] = doc[key]
    if "name" not in doc:
        raise InvalidInput(f"{origin}: missing required 'name'")
    sections = {"gemm", "attention", "elementwise", "network", "overlap", "optimizer", "goodput", "moe", "memory"}
    frameworks = doc.get("framework", {})
    if not isinstance(frameworks, dict):
        raise InvalidInput(f"{origin}: [framework] must hold one table per framework")
    for fw, body in frameworks.items():
        if not isinstance(body, dict) or set(body) - sections:
            raise InvalidInput(f"{origin}: [framework.{fw}] may hold only the sections {', '.join(sorted(sections))}")
        over = parse_profile({"name": fw, **body}, f"{origin} [framework.{fw}]", require_source)
        fields.setdefault("frameworks", {})[fw] = {k: getattr(over, k) for k in over.model_fields_set
                                                   if k not in ("name", "sources", "spreads")}
        sources.update({f"framework.{fw}.{k}": v for k, v in over.sources.items()})
    if "recipe" in doc:
        fields["recipes"] = _parse_recipes(doc["recipe"], origin, sources, require_source)
    unknown = set(doc) - sections - {"name", "description", "framework", "recipe"}
    if unknown:
        raise InvalidInput(f"{origin}: unknown top-level key(s) {sorted(unknown)}; expected name, description and "
                           f"the sections {', '.join(sorted(sections))} and [recipe.NAME] tables")
    for section in sections & set(doc):
        body = doc[section]
        if not isinstance(body, dict):
            raise InvalidInput(f"{origin}: [{section}] must be a table")
        for key, raw in body.items():
            path = f"{section}.{key}"
            if path in TABLES:
                if not isinstance(raw, dict):
                    raise InvalidInput(f"{origin}: [{path}] must be a table of GPU family = fraction")
                fields[TABLES[path]] = {k: _leaf(v, f"{path}.{k}", sources, require_source) for k, v in raw.items()}
                continue
            if path not in FIELDS:
                close = difflib.get_close_matches(path, [*FIELDS, *TABLES], n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise InvalidInput(f"{origin}: unknown key '{path}'{hint}")
            value = _leaf(raw, path, sources, require_source)
            if path.endswith("_us") and value is not None:
                value = [v * 1e-6 for v in value] if isinstance(value, list) else value * 1e-6
            elif path.endswith(("_GB", "_MiB")) and isinstance(value, (int, float)) and not isinstance(value, bool):
                value = value * (1e9 if path.endswith("_GB") else 2.0**20)
            fields[FIELDS[path]] = value
    try:
        return ExecutionProfile(**fields, sources=sources, spreads=spreads_of(doc))
    except ValidationError as exc:  # name the TOML key (overlap.tp), not the field (overlap_tp)
        keys = {field: key for key, field in {**FIELDS, **TABLES}.items()}
        err = exc.errors()[0]
        loc = ".".join(keys.get(str(p), str(p)) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise InvalidInput(f"{origin}: {loc}: {msg}" if loc else f"{origin}: {msg}") from None


def profile_dir() -> Path:
    return Path(str(resources.files("planner.profiles")))


def profile_names() -> list[str]:
    return sorted(p.stem for p in profile_dir().glob("*.toml"))


def load_profile_file(path: str | Path, require_source: bool = False) -> ExecutionProfile:
    return parse_profile(load_toml(path, "profile file"), str(path), require_source=require_source)


@cache
def _shipped(name: str) -> ExecutionProfile:
    return load_profile_file(profile_dir() / f"{name}.toml", require_source=True)


def get_profile(name_or_path: str, overrides: Sequence[Override] = ()) -> ExecutionProfile:
    """A shipped profile ('paper', 'realistic') or a path to a user TOML file, with `overrides` (--set profile.*)
    applied to its document before validation."""
    return load_sourced(name_or_path, profile_names(), profile_dir(), "execution profile", "profile file", "profile",
                        parse_profile, _shipped, overrides)


PAPER = ExecutionProfile(name="paper", description="The paper's idealised model (App. 8.1.1-8.1.2).")
"""The default profile of every Hardware; equal in every priced field to profiles/paper.toml (tests check)."""
