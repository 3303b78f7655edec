"""The execution profile document (profiles/*.toml, validated): how training runs on a system, every field's paper
value leaving the paper's model unchanged. planner.profile reads the files into it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.errors import InvalidInput

Fraction = Annotated[float, Field(gt=0, le=1)]
# Upper bounds far above any real run that keep the cost model's arithmetic finite: bytes per element, parameter or
# logit (16-bit Adam with fp32 master weights is 16), one GPU's memory (today's largest devices hold under 0.3 TB),
# and ratios or counts per communicator (NCCL opens at most 64 channels; routing imbalance is at most the EP degree).
PER_ITEM_BYTES_CAP = 256.0
MEMORY_BYTES_CAP = 1e13
COUNT_CAP = 1024.0
# nvidia-smi's MiB against the datasheet's GB: 1.068-1.07x on A100, H100, H200, B200 and GB200 (profiles/realistic.toml)
DEVICE_READING_BAND = 1.10
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
TileSide = Annotated[int, Field(ge=1, le=2**16)]


GemmPass = Literal["fprop", "dgrad", "wgrad"]
RECIPE_PASSES: tuple[GemmPass, ...] = ("fprop", "dgrad", "wgrad")
"""A GEMM's three passes per microbatch: forward, activation gradient, weight gradient."""


SHAPES = ("uniform", "triangular", "loguniform")


class Spread(BaseModel):
    """How far an estimated or fitted value may be off: a range of factors on the file's value, with its shape and
    the reason (`spread = { low = 0.9, high = 1.1, shape = "uniform", why = "..." }` next to `value`). --confidence
    samples it; depends_on shows it."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    low: float = Field(gt=0, description="Smallest factor on the value (0.9: 10 % below it).")
    high: float = Field(gt=0, description="Largest factor on the value.")
    shape: Literal["uniform", "triangular", "loguniform"] = Field(
        "uniform", description="uniform: every factor in [low, high] equally likely; triangular: most likely 1 (the "
        "file's value), falling to 0 at low and high; loguniform: uniform in log(factor).")
    why: str = Field(min_length=1, description="Where the range comes from.")

    @model_validator(mode="after")
    def _ordered(self) -> Spread:
        if not (self.low <= 1.0 <= self.high) or self.low == self.high:
            raise ValueError(f"spread needs low <= 1 <= high and low < high (factors on the value), got "
                             f"low={self.low!r}, high={self.high!r}")
        return self

    def factor(self, u: float) -> float:
        """The factor at quantile `u` in (0, 1) (the inverse of the shape's distribution function)."""
        lo, hi = self.low, self.high
        if self.shape == "uniform":
            return lo + (hi - lo) * u
        if self.shape == "loguniform":
            return float(lo * (hi / lo) ** u)
        # triangular on [lo, hi] with its mode at 1
        c = (1.0 - lo) / (hi - lo)
        if u < c:
            return lo + ((hi - lo) * (1.0 - lo) * u) ** 0.5
        return hi - ((hi - lo) * (hi - 1.0) * (1.0 - u)) ** 0.5


def _at_most(v: Any, cap: float, what: str, scale: float = 1.0, unit: str = "", limit: str | None = None) -> Any:
    """`v` (a number, None, or a tuple of them) when no part is above `cap`; else a one-line error naming what the
    value is. A value far beyond any real run (a typo of units, 1e300) overflowed the cost model's float arithmetic
    and came out as an absurd plan or a misleading reason. `scale` and `unit`: how the files write it (1e-9, ' GB');
    `limit`: the cap in words (default: the cap in the files' unit)."""
    for x in v if isinstance(v, tuple) else (v,):
        if x is not None and x > cap:
            stated = f"{cap * scale:,.0f}{unit}" if limit is None else limit
            raise ValueError(f"{x * scale:.3g}{unit} is more than {stated}: not {what}")
    return v


class Recipe(BaseModel):
    """A low-precision training recipe as Transformer Engine and torchao run it (docs/model.md §1c): which GEMM passes
    of the transformer layers run in low precision, what quantizing their inputs costs in HBM traffic, what stays in
    16-bit, and what the recipe changes in memory and communication. The recipe names are Transformer Engine's:
    per-tensor 'delayed' and 'current' scaling, 'blockwise' (1 x 128 activation and 128 x 128 weight tiles),
    Blackwell 'mxfp8' (one scale per 32 elements) and 'nvfp4'."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, allow_inf_nan=False)

    precision: Literal["fp8", "fp4"] = Field(description="Element format of the low-precision GEMM operands.")
    passes: tuple[GemmPass, ...] = Field(
        RECIPE_PASSES, description="GEMM passes run in low precision (the others in 16-bit).")
    gemm_efficiency: Fraction = Field(
        1.0, description="Low-precision GEMM throughput with this recipe's scaling / per-tensor scaling's (block "
        "scales applied inside the GEMM's main loop cost throughput on GPUs without hardware block scaling).")
    grouped_gemm_efficiency: tuple[Fraction, Fraction, Fraction] = Field(
        (1.0, 1.0, 1.0), description="Low-precision grouped GEMM throughput (the routed experts' GEMMs) over the "
        "dense large-GEMM rate, per pass (fprop, dgrad, wgrad): a grouped kernel with per-block scales reaches less "
        "of the peak than one large GEMM, the weight gradient's (both operands grouped along the tokens) least.")
    quantize_bytes_per_element: float = Field(
        0.0, ge=0, description="HBM bytes a GEMM input's quantization moves per element of the 16-bit tensor: read "
        "it, write the low-precision copies the passes need (row- and column-wise), their scales, and the extra "
        "read of an amax pass (current scaling). Priced as element-wise work at HBM bandwidth, once per GEMM input "
        "per pass that consumes it.")
    cast_per_linear: bool = Field(
        False, description="Whether every weight matrix (torch.nn.Linear) quantizes its own input, so an input shared "
        "by separate projections (torchtitan's wq, wk, wv; w1, w3) is cast once per projection: torchao's float8 "
        "Linear outside its tensorwise TP path. False: one quantization per GEMM input (Transformer Engine's fused "
        "modules; torchao's tensorwise TP casts the module input once, PrepareFloat8ModuleInput).")
    rescale_bytes_per_element: float = Field(
        0.0, ge=0, description="HBM bytes per element of a backward GEMM's output for scaling it after the GEMM "
        "(read and write the 16-bit output): torchao's row-wise recipe runs its activation- and weight-gradient "
        "GEMMs on the tensor-wise kernel with unit scales and multiplies the row and column scales in afterwards. "
        "Priced as element-wise work on each module's input gradient (tokens x input width) and weight gradient.")
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

    @field_validator("quantize_bytes_per_element", "rescale_bytes_per_element", "weight_cast_bytes_per_param",
                     "weight_copy_bytes_per_param")
    @classmethod
    def _bytes_bound(cls, v: Any) -> Any:
        return _at_most(v, PER_ITEM_BYTES_CAP, "a byte count per element or parameter")


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

    # no infinity or NaN in any number: an infinite time or size priced every layout out with a misleading reason
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(description="Profile name: 'paper', 'realistic', or the user file's.")
    description: str = Field("", description="What the profile describes, in words.")
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
    tp_gather_low_precision: bool = Field(
        False, description="Under a low-precision recipe that casts each module input once (Recipe.cast_per_linear "
        "false) with sequence parallelism: the framework casts the tensor-parallel GEMMs' inputs on the rank's "
        "sequence shard and all-gathers them in FP8 (torchtitan's Float8ColwiseParallel, Float8RowwiseParallel and "
        "PrepareFloat8ModuleInput): the forward input and backward output-gradient all-gathers move 1 byte per "
        "element, and only a transposed FP8 copy for the weight gradient is made on the gathered tensor.")
    overlap_cp: float = Field(1.0, ge=0, le=1, description="Share of context parallelism's ring exchange hidden "
                              "under the attention kernels.")
    cp_kv_expanded: bool = Field(False, description="Context parallelism's ring carries the keys and values after "
                                 "grouped-query attention's KV heads are repeated to the query heads (torchtitan's "
                                 "Llama calls repeat_kv before SDPA): query-head words instead of KV-head words.")
    cp_grad_bytes: float | None = Field(None, gt=0, description="Bytes per element of the key/value gradients the "
                                        "backward ring passes on (None: the GPU's word size).")
    cp_grad_returns: bool = Field(False, description="The key/value gradients travel the whole ring back to their "
                                  "owner: N_CP hops instead of N_CP - 1.")
    cp_merge_fwd_bytes: float = Field(0.0, ge=0, description="HBM bytes of element-wise work per ring step and "
                                      "element of the rank's attention output in the forward pass (casting and "
                                      "merging each step's partial output by its log-sum-exp, concatenating the "
                                      "keys and values); 0: not priced.")
    cp_merge_bwd_bytes: float = Field(0.0, ge=0, description="The same in the backward pass (accumulating the "
                                      "query, key and value gradients, concatenating the gradients sent on).")
    overlap_pp: float = Field(1.0, ge=0, le=1, description="Share of pipeline point-to-point traffic hidden.")
    overlap_ep: float = Field(1.0, ge=0, le=1, description="Share of expert all-to-all traffic hidden.")
    overlap_ep_comm: float = Field(1.0, ge=0, le=1, description="The same with the framework's expert-parallel "
                                   "all-to-all overlap on (Megatron overlap_moe_expert_parallel_comm: one "
                                   "microbatch's dispatch and combine run under another's compute).")
    overlap_ep_stages: bool = Field(False, description="The expert all-to-all hides stage by stage, as Megatron's "
                                    "expert-parallel overlap runs it (one microbatch's forward sub-modules against "
                                    "another's backward: the backward combine under the attention forward, the "
                                    "forward dispatch under the MLP's activation gradient, the backward dispatch "
                                    "under the MLP's forward and weight gradient, the forward combine under the "
                                    "attention's activation gradient): each quarter of the all-to-all is exposed "
                                    "by what exceeds its partner's compute (planner.cost.terms.ep_stage_times). It "
                                    "applies to the hidden share (overlap_ep); the rest stays exposed.")
    overlap_ep_comm_stages: bool = Field(False, description="overlap_ep_stages for runs with the framework's "
                                         "expert-parallel overlap on (validation records' ep_comm_overlap).")
    host_moe_layer_s: float = Field(0.0, ge=0, description="Host-bound floor: CPU time to issue one MoE layer's "
                                    "kernels for one microbatch, forward and backward, when they are launched "
                                    "eagerly (no CUDA graph). A pipeline stage then takes at least its MoE layers x "
                                    "microbatches x this (planner.cost.terms 'host' branch); 0: no floor.")
    host_eager_moe_layer_s: float = Field(0.0, ge=0, description="host_moe_layer_s for runs that capture no CUDA "
                                          "graph (validation records' cuda_graph_impl = 'none'); records with "
                                          "graphs or without the field keep host_moe_layer_s. Read only by "
                                          "`planner validate`: a plan, evaluate or sweep prices host_moe_layer_s "
                                          "(--set profile.moe.host_layer_us=... prices an eager run).")
    moe_imbalance: float = Field(1.0, ge=1, description="Routing imbalance: the busiest expert rank's routed load / "
                                 "the mean. Multiplies the expert GEMMs and the all-to-all bytes of that rank (1: "
                                 "uniform routing, the paper's).")
    moe_dispatch_dedup: bool = Field(False, description="The token dispatcher sends a token once to each expert "
                                     "rank (and once over the network to each node) that its top-k experts live on, "
                                     "not once per expert (DeepEP / HybridEP; Megatron's alltoall dispatcher sends one "
                                     "copy per expert): the all-to-all's bytes at each level count distinct "
                                     "destinations (planner.cost.terms).")
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
    memory_device_bytes: dict[str, float] = Field(
        default_factory=dict, description="Per GPU (entry_for: full name, family, default): the device memory the "
        "driver reports (nvidia-smi's total; bytes, TOML MiB) where it differs from the datasheet's decimal GB of the "
        "hardware file; no entry: the hardware file's capacity.")
    memory_driver_reserved_bytes: float = Field(0.0, ge=0, description="Device memory the CUDA driver keeps "
                                                "from the runtime's total (cudaMemGetInfo) below nvidia-smi's total "
                                                "(bytes; TOML GB); read with memory_device_bytes.")
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
    saved_input_high_precision: bool = Field(
        False, description="Low-precision Linears save their module input as they received it for the backward pass "
        "(torchao's Float8Linear: save_for_backward of the 16-bit input, cast again in the backward pass): saved GEMM "
        "inputs keep their 16-bit bytes, unless the framework cast them to FP8 before the module (tp_gather_low_"
        "precision with sequence parallelism over N_TP,ff > 1 under a recipe casting once per module), or, compiled, "
        "unless the recipe casts once per module (the compiler may share the per-tensor forward cast with the "
        "backward's and save it in 1 byte; row-wise's column-wise backward cast needs the 16-bit input). False: saved "
        "GEMM inputs take 1 byte under every low-precision recipe (Transformer Engine keeps its FP8 copies).")
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
    compiled_logits_bytes: float | None = Field(None, gt=0, description="`logits_bytes` when the loss function "
                                                "itself is compiled (torchtitan since 2025 compiles it with the "
                                                "model): the fused kernels keep no fp32 copies over the vocabulary. "
                                                "None: a compiled loss holds what an eager one does.")
    per_stage_memory: bool = Field(False, description="Price each pipeline rank as it is (the first with the "
                                   "embedding and its first virtual stage's layers, the second with the most chunks in "
                                   "flight among full stages, the last with the LM head and the loss) and take the "
                                   "busiest, instead of the busiest device's layers with an end's parameters and the "
                                   "first stage's microbatches in flight (the paper profile's bound).")
    parallel_logits_bytes: float | None = Field(None, gt=0, description="`logits_bytes` where the vocabulary is "
                                                "split over N_TP,ff > 1 and the loss runs on the shards (torchtitan's "
                                                "loss_parallel: DTensor's log-softmax and its fused nll backward are "
                                                "unfused fp32 element-wise ops with fp32 temporaries). None: as "
                                                "logits_bytes.")
    head_input_gathered: bool = Field(False, description="Under sequence parallelism the LM head keeps its "
                                      "all-gathered input (d words a token) for its weight gradient, not the "
                                      "sequence shard (torchtitan: the output projection's ColwiseParallel gathers "
                                      "its Shard(1) input and nn.Linear saves what it multiplied; Megatron keeps the "
                                      "shard and gathers again in the backward pass).")
    selective_policy: Literal["megatron", "op"] = Field(
        "megatron", description="What selective recomputation keeps: 'megatron' (all but the attention core's own "
        "tensors) or 'op' (torchtitan's per-op policy: the layer input, the attention output and every other GEMM's "
        "output).")
    mla_recompute_up_proj: bool = Field(False, description="MLA's up-projected per-head q, k and v are rebuilt from "
                                        "the kept latents in the backward pass instead of kept (DeepSeek-V3).")
    recompute_norm_act: bool = Field(False, description="The norms' outputs and the MLP's activation output are "
                                     "rebuilt in the backward pass instead of kept (Megatron recompute_modules "
                                     "'layernorm' and 'moe_act', for models whose every MLP is a mixture of experts). "
                                     "Memory only: the rebuild is element-wise work the pricing does not add.")
    pipeline_microbatch_group: int | None = Field(None, ge=1, description="Microbatches an interleaved pipeline "
                                                  "runs contiguously on each virtual stage before moving to the "
                                                  "next (Megatron's microbatch_group_size_per_vp_stage, the N of the "
                                                  "Llama 3 paper's schedule; None: N_PP, Megatron's default). A rank "
                                                  "warms up "
                                                  "2 (N_PP - rank - 1) + (i - 1) N chunk forwards, so a smaller N "
                                                  "holds fewer in flight; a group smaller than N_PP stalls at each "
                                                  "move to the next virtual stage (pipeline.bubble_fraction_1f1b).")
    activation_offload_layers: int = Field(0, ge=0, description="Layers whose kept activations go to host memory in "
                                           "the forward pass and come back for the backward pass (Megatron "
                                           "--cpu-offloading-num-layers; no pipeline parallelism): at its peak the "
                                           "device keeps the other layers' sets only. Memory only: the copies run "
                                           "beside the compute (docs/model.md §7b).")
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

    @field_validator("gemm_launch_s", "layer_overhead_s", "collective_latency_s", "ring_step_latency_s",
                     "host_moe_layer_s", "host_eager_moe_layer_s")
    @classmethod
    def _time_bound(cls, v: Any) -> Any:
        """The per-kernel, per-layer and per-collective times at most 1 s, as the hardware files' level latencies: a
        larger one (a typo of units) overflowed the search's time range and was reported as a layout rule."""
        return _at_most(v, 1.0, "a kernel, layer or collective time", 1e6, " us", "1 s (1,000,000 us)")

    @field_validator("cp_grad_bytes", "cp_merge_fwd_bytes", "cp_merge_bwd_bytes", "optimizer_bytes_per_param",
                     "zero3_pp_grad_bytes", "optimizer_state_bytes_per_param", "logits_bytes",
                     "compiled_logits_bytes", "parallel_logits_bytes")
    @classmethod
    def _per_item_bytes_bound(cls, v: Any) -> Any:
        return _at_most(v, PER_ITEM_BYTES_CAP, "a byte count per element, parameter or logit")

    @field_validator("memory_reserve_bytes", "memory_context_bytes", "memory_workspace_bytes", "nccl_buffer_bytes",
                     "memory_driver_reserved_bytes", "memory_headroom_bytes")
    @classmethod
    def _memory_bound(cls, v: Any) -> Any:
        return _at_most(v, MEMORY_BYTES_CAP, "a per-GPU memory size", 1e-9, " GB")

    @field_validator("moe_imbalance", "nccl_channels", "nccl_buffers_per_channel")
    @classmethod
    def _ratio_bound(cls, v: Any) -> Any:
        return _at_most(v, COUNT_CAP, "a load ratio or a per-communicator count")

    @field_validator("zero3_live_units", "zero3_max_live_params", "activation_offload_layers",
                     "pipeline_microbatch_group")
    @classmethod
    def _size_bound(cls, v: Any) -> Any:
        return _at_most(v, 1e15, "a count of units, parameters, layers or microbatches")

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

    def device_bytes(self, gpu_name: str, datasheet_bytes: float) -> float:
        """Device memory a GPU's processes share: `memory_device_bytes` for this GPU (`entry_for`) less the driver's
        reservation, else the hardware file's datasheet capacity. The table's reading describes the datasheet's
        memory (decimal GB that are nearer GiB: the reading is 1.00-1.10x the datasheet bytes on every GPU listed);
        a capacity outside that band (`--set gpu.hbm_GB=12`, a user's file with another memory size under a listed
        name) is a different device, priced at its own capacity rather than silently at the listed one."""
        key = entry_for(self.memory_device_bytes, gpu_name)
        if key is None:
            return datasheet_bytes
        reading = self.memory_device_bytes[key]
        if not datasheet_bytes <= reading <= DEVICE_READING_BAND * datasheet_bytes:
            return datasheet_bytes
        return reading - self.memory_driver_reserved_bytes

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


PAPER = ExecutionProfile(name="paper", description="The paper's idealised model (App. 8.1.1-8.1.2).")
"""The default profile of every Hardware; equal in every priced field to profiles/paper.toml (tests check)."""
