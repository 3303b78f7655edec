"""The documents: every file the planner reads and every document it writes, validated (pydantic).

This package is the bottom layer but one (README, "Code layout"): it imports only pydantic, numpy and the base
(planner.errors, the dimension registry planner.parallel.dimensions), never logic. Here: hardware, workload,
layout, evaluation, plan and error documents; beside it the workload's operations (`ops`), the execution profile
(`profile`), the failure model and goodput (`goodput`), sensitivity, sweep, limits, validation runs, model
presets, model families (`family`) and the plan request (`request`: the question `plan` answers). The modules
that read or produce them (planner.profile, planner.sweep, ...) re-export them.

Every quantity is stored in SI units (seconds, bytes, bytes/s, FLOP/s) with the unit in its name.
Derived quantities are properties, computed on access, so they can never go stale when a field changes.

Every model is declared with `defer_build=True`: pydantic builds its validator when it is first used, not when this
package is imported, so a command pays only for the documents it reads or writes (tests/test_startup.py checks).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from planner import derived
from planner.errors import MAX_PRICE_PER_GPU_HOUR, is_number
from planner.parallel.dimensions import DEGREES, DIMENSIONS  # the registry (base layer: vocabulary, no logic)
from planner.schema.goodput import FailureModel, Goodput
from planner.schema.ops import LayerOps, ModelOps, toy_mlp_ops, transformer_ops
from planner.schema.profile import PAPER, ExecutionProfile, Spread
from planner.schema.sensitivity import Sensitivity
from planner.schema.uncertainty import Confidence, UncertainInput

# The failure model's spreads (its module cannot import a sibling: the package would run first)
FailureModel.model_rebuild(_types_namespace={"Spread": Spread})

Schedule = Literal["1f1b", "zb-h2"]

RecipeName = Literal["delayed", "current", "rowwise", "blockwise", "mxfp8", "nvfp4"]
"""Low-precision recipes, as Transformer Engine names them (planner.profile.Recipe prices each)."""
RECIPE_PRECISION: dict[str, str] = {"delayed": "fp8", "current": "fp8", "rowwise": "fp8", "blockwise": "fp8",
                                    "mxfp8": "fp8", "nvfp4": "fp4"}
DEFAULT_RECIPE: dict[str, RecipeName] = {"fp8": "current", "fp4": "nvfp4"}
"""The recipe a precision runs when none is named: per-tensor current scaling for FP8 (torchao's 'tensorwise' and
Megatron-Bridge's 'FP8-CS' default), NVFP4 for FP4."""

class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


MAX_TRANSFORMER_LAYERS = 512
"""Most layers of a transformer workload: each (N_PP, i) with N_PP i <= L is a candidate, so the search grows with L
log L (Llama 3 405B has 126). The paper's toy model takes any L up to 2^40: its (N_PP, i) pairs are the divisor pairs
of L. Measured bounds: docs/reliability.md, "Bounded work"."""
MAX_EXPERTS = 4096
"""Most experts (E) of the paper's toy model (its sparse scaling law reaches 1,280 at 1e40 FLOP)."""
MAX_TRANSFORMER_EXPERTS = 512
"""Most experts of a transformer (DeepSeek-V3 has 256, Kimi K2 384)."""
MAX_TRANSFORMER_LAYER_EXPERTS = 24576
"""Most layers x experts of a transformer (DeepSeek-V3: 61 x 256 = 15,616; Kimi K2: 61 x 384 = 23,424): the
candidate tables grow with both."""
MAX_HEADS = 1024
"""Most attention heads (and KV heads) of a transformer: real models have at most a few hundred."""
MAX_NAME_CHARS = 200
"""Longest name (hardware, GPU, network level, profile) accepted."""


def check_name(value: str) -> str:
    """A name that reaches emitted files (bash comments, TOML, CSV cells, file names): no control characters (a
    newline would end a comment in a sourced bash file), at most MAX_NAME_CHARS (docs/reliability.md)."""
    bad = next((c for c in value if ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029"), None)
    if bad is not None:
        raise ValueError(f"the name {value[:40]!r} has a control character ({bad!r}); names are printable text")
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"a name has at most {MAX_NAME_CHARS} characters, got {len(value)}")
    return value


# --------------------------------------------------------------------------------------------------
# Hardware (hardware_specs/*.toml and their sources, paper App. 8.1.1-8.1.2)
# --------------------------------------------------------------------------------------------------


class Gpu(_Frozen):
    """One GPU: compute, on-chip memory hierarchy and HBM, as the matmul model of App. 8.1.1 needs them."""

    name: str = Field(description="Marketing name, e.g. 'H100 SXM5'.")
    _name = field_validator("name")(check_name)
    sms: int = Field(gt=0, description="Streaming multiprocessors.")
    threads_per_sm: int = Field(128, gt=0, description="Tensor-core threads per SM (4 processing blocks x 32).")
    flop_per_clock_per_thread: float = Field(gt=0, description="Dense 16-bit FLOP per clock per thread.")
    max_clock_Hz: float = Field(gt=0, description="Boost clock at which the peak FLOP/s is quoted.")
    sustained_clock_factor: float = Field(
        gt=0, le=1, description="Sustained / max clock under long GEMM sequences (thermal throttling, §8.1.1 item 3)."
    )
    hbm_Bps: float = Field(gt=0, description="HBM bandwidth, bytes/s (both directions together).")
    l2_Bps: float = Field(gt=0, description="L2 bandwidth, bytes/s.")
    l2_bytes: float = Field(gt=0, description="L2 capacity, bytes.")
    register_file_per_block_bytes: float = Field(gt=0, description="Register file per processing block (4 per SM).")
    l1_per_sm_bytes: float = Field(gt=0, description="L1 / shared memory per SM, bytes (only for SRAM totals).")
    hbm_bytes: float = Field(gt=0, description="HBM capacity, bytes.")
    matmul_latency_s: float = Field(ge=0, description="Fixed latency added to every GEMM kernel "
        "(launch, setup, teardown).")
    dsmem: bool = Field(description="Hopper-style distributed shared memory (multicast of redundant L2->SM loads).")
    word_bytes: int = Field(2, gt=0, description="Bytes per word; 2 for the 16-bit training the paper models.")
    fp8_flop_per_clock_per_thread: float | None = Field(
        None, gt=0, description="Dense FP8 FLOP per clock per thread; None: no FP8 tensor cores.")
    fp4_flop_per_clock_per_thread: float | None = Field(
        None, gt=0, description="Dense FP4 (NVFP4) FLOP per clock per thread, not the 2:4 sparse headline; None: no "
        "FP4 tensor cores.")

    @property
    def fp8(self) -> Gpu | None:
        """The same GPU running FP8 GEMMs: FP8 FLOP rate and 1-byte operands (None without FP8 tensor cores)."""
        if self.fp8_flop_per_clock_per_thread is None:
            return None
        return self.model_copy(update={"flop_per_clock_per_thread": self.fp8_flop_per_clock_per_thread,
                                       "word_bytes": 1, "fp8_flop_per_clock_per_thread": None,
                                       "fp4_flop_per_clock_per_thread": None})

    @property
    def fp4(self) -> Gpu | None:
        """The same GPU running FP4 (NVFP4) GEMMs at its dense FP4 FLOP rate (None without FP4 tensor cores).

        Operands stay 1 byte in the GEMM byte model: `word_bytes` counts whole bytes, and an NVFP4 operand is 4 bits
        plus one 8-bit scale per 16 elements (0.5625 byte); large GEMMs are FLOP-bound, so the over-count rarely
        binds. The recipe (planner.profile.Recipe) prices the quantization itself."""
        if self.fp4_flop_per_clock_per_thread is None:
            return None
        return self.model_copy(update={"flop_per_clock_per_thread": self.fp4_flop_per_clock_per_thread,
                                       "word_bytes": 1, "fp8_flop_per_clock_per_thread": None,
                                       "fp4_flop_per_clock_per_thread": None})

    def at_precision(self, precision: str) -> Gpu | None:
        """This GPU as its GEMMs run in `precision` ('bf16', 'fp8', 'fp4'); None where it has no such rate."""
        if precision == "fp8":
            return self.fp8
        if precision == "fp4":
            return self.fp4
        return self

    def instead_of(self, precision: str) -> str:
        """The precisions with a rate on this GPU, in words ('fp8 or bf16'), for a message about `precision`'s
        missing one: the lower-precision ones first, 16-bit (every GPU's) last."""
        return " or ".join(p for p in ("fp8", "bf16") if p != precision and self.at_precision(p) is not None)

    @property
    def peak_flops(self) -> float:
        """Peak dense FLOP/s at max clock; MFU is always reported against this."""
        return derived.peak_flops(self)

    @property
    def sustained_clock_Hz(self) -> float:
        return derived.sustained_clock_Hz(self)

    @property
    def sustained_flops(self) -> float:
        return derived.sustained_flops(self)

    @property
    def shared_mem_Bps(self) -> float:
        """32 banks x 4 bytes per clock per SM, at the sustained clock (hardware_specs/*.toml and their sources)."""
        return derived.shared_mem_Bps(self)

    @property
    def sram_bytes(self) -> float:
        """On-chip SRAM: L2 + register files + L1/shared memory (Table 2's S, per GPU)."""
        return derived.sram_bytes(self)


class NetworkLevel(_Frozen):
    """One level of the network hierarchy (App. 8.1.2)."""

    name: str = Field(description="e.g. 'NVLink', 'InfiniBand'.")
    _name = field_validator("name")(check_name)
    size: int | None = Field(
        None, gt=0, description="GPUs per group at this level (cumulative, e.g. 8 per node); None = "
            "unbounded (top level)."
    )
    bw_bidir_Bps: float = Field(gt=0, description="Per-GPU bidirectional bandwidth; the cost model "
        "uses half per direction. May be inf.")
    lat_s: float = Field(ge=0, description="One-way latency of one message at this level (at most 1 s: a slower "
                         "level is not a training network, and larger values only make the search slow).")
    unit: int | None = Field(
        None, gt=0, description="Lowest level only: GPUs per unit that a job takes whole inside one group (4 for a "
        "GB200 NVL72 compute tray). Set (or `usable` set): a job uses the same number of GPUs, a multiple of the unit, "
        "in each group it touches, up to `usable` (docs/model.md, 'The search space'); None: 1 when `usable` is set.")
    usable: int | None = Field(
        None, gt=0, description="Lowest level only: the most GPUs a job uses in one group (64 = 16 of a GB200 NVL72 "
        "rack's 18 trays; the rest are spares). A multiple of the unit, at most `size`; None: `size` when `unit` is "
        "set. Neither set: the group is filled exactly, as every other level.")

    switch_W_per_gpu: float = Field(0.0, ge=0, description="Power of this level's switches per GPU it connects, "
                                    "watts (switches outside the node or tray: InfiniBand fabric, NVLink Switch "
                                    "trays); 0 when the node's own power already counts them (NVSwitch in a DGX).")

    @property
    def bw_unidir_Bps(self) -> float:
        return self.bw_bidir_Bps / 2

    @property
    def subdivided(self) -> bool:
        """Whether a job may use part of each group (in whole units, up to `usable`) instead of filling it."""
        return derived.subdivided(self)

    @property
    def unit_gpus(self) -> int:
        """GPUs a job takes whole in one group: `unit`, else 1."""
        return derived.unit_gpus(self)

    @property
    def usable_gpus(self) -> int | None:
        """The most GPUs a job uses in one group: `usable`, else the group size (None: unbounded)."""
        return derived.usable_gpus(self)

    @field_validator("lat_s")
    @classmethod
    def _latency_bound(cls, v: float) -> float:
        if v > 1.0:
            raise ValueError(f"{v * 1e6:.3g} us is more than 1 s (1,000,000 us) per message: not a training network")
        return v


class Economics(_Frozen):
    """What a system costs to rent and draws from the wall (a hardware file's [economics] table; planner.economics
    turns it into a plan's megawatts, megawatt-hours and dollars). Switch power lives on each network level."""

    price_per_gpu_hour_usd: float | None = Field(
        None, gt=0, le=MAX_PRICE_PER_GPU_HOUR, description="Rental price per GPU-hour, USD (a dated list price or "
        "market index; its source says which). None: no default price, a plan is priced only with "
        "--price-per-gpu-hour.")
    board_W: float | None = Field(None, gt=0, description="GPU board power (TDP), watts per GPU. None: no power "
                                  "figure for this system.")
    node_overhead_W: float = Field(0.0, ge=0, description="Power of one node (gpus_per_node GPUs: a DGX server or an "
                                   "NVL72 compute tray) beyond its GPUs' boards: CPUs, memory, NICs, fans, on-board "
                                   "NVSwitches, power conversion; watts per node.")


class Facility(_Frozen):
    """The site a cluster sits in (facility/*.toml): its power usage effectiveness and the largest build announced,
    the bound past which a plan is flagged as implausible."""

    name: str = Field(description="Short name, e.g. 'default'.")
    description: str = Field("", description="What the site is, in words.")
    pue: float = Field(ge=1.0, le=10.0, description="Power usage effectiveness: facility power / IT power (>= 1).")
    largest_site_MW: float = Field(gt=0, description="Facility power of the largest training site announced, MW: "
                                   "a plan above it is flagged as beyond any announced build.")
    largest_site_name: str = Field("", description="Which site that is, and when it was announced.")
    sources: dict[str, str] = Field(default_factory=dict, description="Field -> where the number comes from.")


class Hardware(_Frozen):
    """A system: one GPU type and an ordered list of network levels, bottom (fastest) first."""

    name: str = Field(description="Short name used on the command line, e.g. 'h100'.")
    _name = field_validator("name")(check_name)
    description: str = Field("", description="What system this describes.")
    gpu: Gpu = Field(description="The GPU every node of the system carries.")
    levels: tuple[NetworkLevel, ...] = Field(min_length=1, description="Bottom-up; only the last may be unbounded.")
    gpus_per_node: int = Field(8, gt=0, description="GPUs per physical node, for the node count in reports.")
    sources: dict[str, str] = Field(default_factory=dict, description="Field path -> where the number comes from.")
    spreads: dict[str, Spread] = Field(default_factory=dict, description="Field -> how far its value may be off "
                                       "(estimated and fitted values whose file states a range; --confidence).")
    profile: ExecutionProfile = Field(PAPER, description="How training runs on it (planner.profile); the paper's "
                                      "idealised model unless a profile is applied.")
    economics: Economics | None = Field(None, description="Price and power ([economics] table); None: the file "
                                        "gives neither (no default price, no power figures).")

    @model_validator(mode="after")
    def _check_levels(self) -> Hardware:
        prev = 1
        for k, lvl in enumerate(self.levels):
            last = k == len(self.levels) - 1
            if lvl.subdivided:
                if k > 0:
                    raise ValueError(f"network level '{lvl.name}': unit and usable are for the lowest level only (the "
                                     "NVLink domain a job uses in whole trays)")
                if lvl.size is None:
                    raise ValueError(f"network level '{lvl.name}' is unbounded: unit and usable need a size")
                usable = lvl.usable_gpus
                assert usable is not None
                if usable > lvl.size or usable % lvl.unit_gpus:
                    raise ValueError(f"network level '{lvl.name}': usable ({usable}) must be a multiple of unit "
                                     f"({lvl.unit_gpus}) and at most size ({lvl.size})")
            if lvl.size is None:
                if not last:
                    raise ValueError(f"network level '{lvl.name}' is unbounded but is not the top level")
                continue
            if lvl.size <= prev or lvl.size % prev:
                raise ValueError(
                    f"network level '{lvl.name}' has size {lvl.size}; sizes must increase bottom-up and each must be a "
                    f"multiple of the one below ({prev})"
                )
            prev = lvl.size
        return self

    @property
    def level_caps(self) -> tuple[int | None, ...]:
        """Factor capacity of each level: size(h) / size(h-1) (groups of the level below per group), the lowest
        level's `usable` GPUs if it has one; None for an unbounded level."""
        caps: list[int | None] = []
        prev = 1
        for lvl in self.levels:
            if lvl.size is None:
                caps.append(None)
            else:
                caps.append((lvl.usable_gpus if lvl.subdivided else lvl.size) // prev)  # type: ignore[operator]
                prev = lvl.size
        return tuple(caps)

    @property
    def max_gpus(self) -> int | None:
        """Largest cluster the hierarchy allows (None if the top level is unbounded): the top group's size, less the
        spares when the lowest level has a `usable` below its size."""
        caps = self.level_caps
        return None if caps[-1] is None else math.prod(c for c in caps if c is not None)


# --------------------------------------------------------------------------------------------------
# Workload (docs/model.md §1, paper §2 and App. 8.1.4)
# --------------------------------------------------------------------------------------------------


FfnKind = Literal["gelu", "relu2", "swiglu"]


class TransformerShape(_Frozen):
    """What a real transformer adds to the toy shape (docs/model.md §1b). `Workload.d_model`, `d_ff` (the dense MLP
    width), `layers`, `experts` and `seq_len` keep their meaning; every other size lives here."""

    heads: int = Field(gt=0, description="Query attention heads.")
    kv_heads: int = Field(gt=0, description="Key/value heads: = heads (MHA), fewer (GQA), 1 (MQA). Must divide heads.")
    head_dim: int = Field(gt=0, description="Per-head query/key width (MLA: the non-rotary part, qk_nope_head_dim).")
    ffn: FfnKind = Field("swiglu", description="MLP kind: 'swiglu' (gate, up, down: 3 matrices), 'gelu' or 'relu2' "
                         "(squared ReLU): 2 matrices.")
    vocab: int = Field(gt=0, description="Vocabulary size (embedding rows and LM-head outputs).")
    tied_embeddings: bool = Field(False, description="Input embedding and LM head share one matrix.")
    attention: Literal["gqa", "mla"] = Field("gqa", description="'gqa' (covers MHA and MQA) or 'mla' (DeepSeek's "
                                             "multi-head latent attention: low-rank query and key/value projections).")
    q_lora_rank: int = Field(0, ge=0, description="MLA: query latent width (0: no query compression).")
    kv_lora_rank: int = Field(0, ge=0, description="MLA: key/value latent width.")
    rope_head_dim: int = Field(0, ge=0, description="MLA: decoupled rotary key/query width per head.")
    v_head_dim: int = Field(0, ge=0, description="MLA: value width per head (0: head_dim).")
    top_k: int = Field(1, gt=0, description="MoE: routed experts per token.")
    expert_d_ff: int = Field(0, ge=0, description="MoE: hidden width of each routed (and shared) expert "
                             "(0: d_ff).")
    shared_experts: int = Field(0, ge=0, description="MoE: always-active experts of width expert_d_ff per MoE layer.")
    dense_layers: int = Field(0, ge=0, description="MoE: leading layers with a dense MLP of width d_ff.")
    dropout: bool = Field(False, description="Dropout after attention and MLP (keeps a 1-byte mask per element; "
                          "Megatron's GPT-3 era runs). Modern pre-training runs use none.")
    attention_kernel: Literal["flash", "unfused"] = Field(
        "flash", description="'flash' (FlashAttention: no s x s tensor kept) or 'unfused' (scores, softmax and "
        "attention dropout kept per head: Korthikanti et al. 2022's 5 a s^2 b bytes per layer).")
    sliding_window: int = Field(0, ge=0, description="Sliding-window attention: keys a query of a windowed layer "
                                "attends to, itself included (GPT-OSS: 128); 0: every layer attends to the whole "
                                "causal prefix.")
    sliding_window_layers: int = Field(0, ge=0, description="How many of the layers use the sliding window (GPT-OSS "
                                       "alternates: 18 of 36); the others attend to the whole causal prefix.")

    @model_validator(mode="after")
    def _check(self) -> TransformerShape:
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads {self.kv_heads} must divide heads {self.heads} (GQA groups)")
        if self.attention == "mla" and self.kv_lora_rank == 0:
            raise ValueError("attention 'mla' needs kv_lora_rank > 0")
        if bool(self.sliding_window) != bool(self.sliding_window_layers):
            raise ValueError("sliding_window and sliding_window_layers go together (both 0: no windowed layers)")
        if self.attention == "gqa" and (self.q_lora_rank or self.kv_lora_rank or self.rope_head_dim or self.v_head_dim):
            raise ValueError("q_lora_rank, kv_lora_rank, rope_head_dim and v_head_dim are for attention = 'mla' only")
        return self

    @property
    def value_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    @property
    def qk_dim(self) -> int:
        """Query/key width per head that the attention scores contract over."""
        return self.head_dim + self.rope_head_dim


class Workload(_Frozen):
    """What is trained. `transformer` None: the paper's toy model, L sparse MLP blocks of E experts, each two
    matrices d_ff x d_model, top-1 routing, attention folded in (§2). Otherwise a real transformer (docs/model.md
    §1b): attention, the MLP kind, vocabulary, and MoE with top-k routing."""

    d_model: int = Field(gt=0, description="Model (residual stream) width.")
    d_ff: int = Field(gt=0, description="MLP hidden width (toy: of each expert; transformer: of the dense MLP).")
    layers: int = Field(gt=0, description="L, MLP blocks.")
    experts: int = Field(1, gt=0, description="E; 1 = dense. Top-1 balanced routing.")
    batch_tokens: int = Field(gt=0, description="Global batch b in tokens.")
    tokens: float = Field(gt=0, description="Training tokens D.")
    seq_len: int = Field(2048, gt=0, description="Sequence length (reported; the batch is counted in tokens).")
    requested_compute_flop: float | None = Field(
        None, description="The compute the user asked for, when the shape was inferred from it."
    )
    label: str = Field("", description="Where the shape came from (scaling law, preset name, flags).")
    family: str | None = Field(None, description="The model family (models/families/) the shape was scaled from "
                               "by its rules (--model-family); None otherwise.")
    transformer: TransformerShape | None = Field(None, description="Real-transformer sizes; None: the paper's toy "
                                                 "model.")
    precision: Literal["bf16", "fp8", "fp4"] = Field(
        "bf16", description="GEMM precision: 'bf16', or 'fp8' / 'fp4' (the transformer layers' GEMMs at the GPU's "
        "FP8 / FP4 rate under `recipe`, with low-precision copies of their saved inputs; attention, the LM head, "
        "weights, gradients and optimizer state stay as in bf16).")
    recipe: RecipeName | None = Field(
        None, description="Low-precision scaling recipe (Transformer Engine's names): 'delayed' or 'current' "
        "per-tensor scaling, 'rowwise' (torchao: one scale per row), 'blockwise' (1 x 128 / 128 x 128), 'mxfp8', "
        "'nvfp4'. None: the precision's default "
        "('current' for fp8, 'nvfp4' for fp4; none for bf16). The execution profile prices it "
        "(planner.profile.Recipe).")

    @field_validator("tokens")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("tokens must be finite")
        return v

    @model_validator(mode="after")
    def _check_search_sizes(self) -> Workload:
        """The sizes that grow the search, within the documented ranges (docs/reliability.md, "Bounded work")."""
        if self.experts > MAX_EXPERTS:
            raise ValueError(f"experts {self.experts} is more than the {MAX_EXPERTS} accepted")
        tr = self.transformer
        if tr is not None:
            if self.experts > MAX_TRANSFORMER_EXPERTS:
                raise ValueError(f"a transformer with {self.experts} experts: at most {MAX_TRANSFORMER_EXPERTS} are "
                                 "accepted")
            if self.layers * self.experts > MAX_TRANSFORMER_LAYER_EXPERTS:
                raise ValueError(f"{self.layers} layers x {self.experts} experts = {self.layers * self.experts}: at "
                                 f"most {MAX_TRANSFORMER_LAYER_EXPERTS} are accepted")
            if self.layers > MAX_TRANSFORMER_LAYERS:
                raise ValueError(f"a transformer of {self.layers} layers: at most {MAX_TRANSFORMER_LAYERS} are "
                                 "accepted "
                                 "(every pipeline split of them is priced)")
            if max(tr.heads, tr.kv_heads) > MAX_HEADS:
                raise ValueError(f"{max(tr.heads, tr.kv_heads)} attention heads: at most {MAX_HEADS} are accepted")
            if tr.sliding_window_layers > self.layers:
                raise ValueError(f"sliding_window_layers {tr.sliding_window_layers} is more than the {self.layers} "
                                 "layers")
        return self

    @model_validator(mode="after")
    def _check_transformer(self) -> Workload:
        tr = self.transformer
        if tr is None:
            return self
        if self.batch_tokens % self.seq_len:
            raise ValueError(f"batch_tokens {self.batch_tokens} is not a whole number of sequences of {self.seq_len}")
        if self.experts == 1 and (tr.top_k != 1 or tr.shared_experts or tr.dense_layers):
            raise ValueError("top_k, shared_experts and dense_layers need experts > 1")
        if tr.top_k > self.experts:
            raise ValueError(f"top_k {tr.top_k} exceeds experts {self.experts}")
        if tr.dense_layers >= self.layers:
            raise ValueError(f"dense_layers {tr.dense_layers} must be fewer than layers {self.layers}")
        return self

    @model_validator(mode="after")
    def _check_precision(self) -> Workload:
        if self.precision != "bf16" and self.transformer is None:
            raise ValueError(f"precision '{self.precision}' needs a transformer workload (the paper's toy model is "
                             "16-bit)")
        if self.recipe is not None and RECIPE_PRECISION[self.recipe] != self.precision:
            raise ValueError(f"recipe '{self.recipe}' is a {RECIPE_PRECISION[self.recipe]} recipe, the precision is "
                             f"'{self.precision}'")
        return self

    @property
    def recipe_name(self) -> RecipeName | None:
        """The low-precision recipe in force: the one given, or the precision's default (None for bf16)."""
        if self.precision == "bf16":
            return None
        return self.recipe or DEFAULT_RECIPE[self.precision]

    @property
    def is_transformer(self) -> bool:
        return self.transformer is not None

    @property
    def ops(self) -> LayerOps:
        """What one layer (of one expert, for the toy) runs per token (planner.schema.ops). For a transformer:
        the layer every pipeline stage is priced with (the MoE layer when there are experts)."""
        if self.transformer is not None:
            return transformer_ops(self).layer
        return toy_mlp_ops(self.d_model, self.d_ff)

    @property
    def model_ops(self) -> ModelOps | None:
        """A transformer's layers, embedding and LM head as operations (None for the toy model)."""
        return transformer_ops(self) if self.transformer is not None else None

    @property
    def params(self) -> float:
        """N_p: every GEMM weight (toy: 2 L E d_model d_ff, Eq. 1; transformer: every layer of its kind, the
        embedding and the LM head, once if tied)."""
        if self.transformer is not None:
            return float(self.model_ops.params(active=False))  # type: ignore[union-attr]
        return float(self.layers * self.experts * self.ops.params)

    @property
    def active_params(self) -> float:
        """Parameters one token meets (toy: N_p / E; transformer: top-k and shared experts, embeddings included)."""
        if self.transformer is not None:
            return float(self.model_ops.params(active=True))  # type: ignore[union-attr]
        return self.params / self.experts

    @property
    def non_embedding_active_params(self) -> float:
        """Active parameters without the embedding and LM head: the 6 N of the FLOP convention."""
        if self.transformer is not None:
            return float(self.model_ops.params(active=True, embeddings=False))  # type: ignore[union-attr]
        return self.active_params

    @property
    def windowed_context(self) -> float:
        """Mean keys per query of a sliding-window layer under the causal mask: W - W (W - 1) / (2 s) for a window of
        W < s keys (the first W - 1 queries see fewer), s / 2 otherwise, as a full causal layer (Megatron-Bridge
        training/utils/flop_utils.py counts windowed layers the same way)."""
        tr = self.transformer
        s = float(self.seq_len)
        w = 0 if tr is None else tr.sliding_window
        if w <= 0 or w >= s:
            return s / 2.0
        return w - w * (w - 1) / (2.0 * s)

    @property
    def windowed_share(self) -> float:
        """Share of the layers that attend through a sliding window (0: none)."""
        tr = self.transformer
        return 0.0 if tr is None else tr.sliding_window_layers / self.layers

    @property
    def attention_flop_per_token(self) -> float:
        """Attention scores and values, forward and backward, per token, not halved for causal masking (the PaLM /
        Megatron convention): 6 L s heads (d_qk + d_v) / 2, i.e. 12 L s heads head_dim for MHA/GQA. A sliding-window
        layer counts twice its mean causal context (`windowed_context`) in place of s."""
        tr = self.transformer
        if tr is None:
            return 0.0
        f = self.windowed_share
        context = (1.0 - f) * self.seq_len + f * 2.0 * self.windowed_context
        return 6.0 * self.layers * context * tr.heads * (tr.qk_dim + tr.value_dim)

    @property
    def head_flop_per_token(self) -> float:
        """LM head, forward and backward: 6 d_model vocab per token."""
        tr = self.transformer
        return 0.0 if tr is None else 6.0 * self.d_model * tr.vocab

    @property
    def model_flop_per_token(self) -> float:
        """Model FLOPs per token: 6 x non-embedding active params + attention scores + LM head (toy: 6 N_p / E)."""
        if self.transformer is None:
            return 6.0 * self.active_params
        return 6.0 * self.non_embedding_active_params + self.attention_flop_per_token + self.head_flop_per_token

    @property
    def flop_convention(self) -> str:
        if self.transformer is None:
            return "6 * active_params * tokens"
        windows = ("; a sliding-window layer counts twice its mean causal context in place of seq"
                   if self.windowed_share > 0 else "")
        return ("(6 * non-embedding active params + 12 * layers * seq * attention width (causal mask not halved, "
                "as PaLM and Megatron count) + 6 * d_model * vocab) * tokens; recomputed FLOPs are not model FLOPs "
                f"(they count in HFU only){windows}")

    def recompute_flop_per_token(self, level: int) -> float:
        """FLOPs recomputation adds per token: selective (1) the attention core's forward, full (2) every layer's
        forward (a third of its training FLOPs; the LM head is not recomputed)."""
        if self.transformer is None or level == 0:
            return 0.0
        if level == 1:
            return self.attention_flop_per_token / 3.0
        return (6.0 * self.non_embedding_active_params + self.attention_flop_per_token) / 3.0

    @property
    def compute_flop(self) -> float:
        """Training compute, the FLOP-counting convention used for MFU everywhere (toy: T = 6 (N_p / E) D)."""
        if self.transformer is None:
            return 6.0 * self.active_params * self.tokens
        return self.model_flop_per_token * self.tokens

    @property
    def steps(self) -> float:
        """Optimizer steps D / b."""
        return self.tokens / self.batch_tokens


# --------------------------------------------------------------------------------------------------
# Layout and its evaluation (docs/model.md §2-§7 and "The search space")
# --------------------------------------------------------------------------------------------------


class _LayoutBase(_Frozen):
    """A parallel layout: every dimension of the registry (planner.parallel.dimensions), each degree's factor on
    each network level, and the pipeline schedule. The integer fields are generated from the registry."""

    if TYPE_CHECKING:  # declared by create_model below; pydantic never sees this
        placement: dict[str, tuple[int, ...]]

    # Megatron's MoE parallel folding and custom pipeline stages (docs/model.md §1c, §5b): options outside the degree
    # registry, so the search's space (which leaves them at None) is unchanged.
    etp: int | None = Field(None, ge=1, description="N_ETP, expert tensor parallelism of a folded expert layout "
                            "(Megatron --expert-tensor-parallel-size): the routed experts' GEMMs are split over etp "
                            "ranks instead of tp_ff. None: not folded (unless expert_ep is set: then etp = tp_ff).")
    expert_ep: int | None = Field(None, ge=1, description="N_EP of a folded expert layout (Megatron "
                                  "--expert-model-parallel-size under parallel folding): on every pipeline stage "
                                  "expert_ep x etp x edp = dp x cp x tp_ff, ranks in Megatron's order (etp innermost, "
                                  "then expert_ep, then the expert data-parallel edp). Needs the placed ep = 1 and "
                                  "tp_model = 1. None: not folded (unless etp is set: then expert_ep = 1).")
    first_stage_layers: int | None = Field(None, ge=0, description="Layers on the first virtual pipeline stage "
                                           "(Megatron --decoder-first-pipeline-num-layers when interleave = 1); the "
                                           "other stages split the rest evenly. None: the automatic split.")
    last_stage_layers: int | None = Field(None, ge=0, description="Layers on the last virtual pipeline stage "
                                          "(Megatron --decoder-last-pipeline-num-layers when interleave = 1). None: "
                                          "the automatic split.")

    @property
    def folded(self) -> bool:
        """The expert layout is folded over dp x cp x tp_ff (Megatron's parallel folding)."""
        return self.etp is not None or self.expert_ep is not None

    @property
    def expert_degrees(self) -> tuple[int, int]:
        """(N_EP, N_ETP) of the expert layers: the folded pair, or (the placed ep, tp_ff)."""
        if not self.folded:
            return self.degree("ep"), self.degree("tp_ff")
        return (self.expert_ep or 1), (self.etp if self.etp is not None else self.degree("tp_ff"))

    @property
    def custom_stages(self) -> bool:
        return self.first_stage_layers is not None or self.last_stage_layers is not None

    @property
    def gpus(self) -> int:
        return math.prod(self.degree(d) for d in DEGREES)

    def degree(self, name: str) -> int:
        return int(getattr(self, name))

    @model_validator(mode="before")
    @classmethod
    def _unplaced_ones(cls, data: Any) -> Any:
        """A degree of 1 left out of the placement sits at 1 on every level (layouts written before the degree
        existed, e.g. without cp, stay valid)."""
        if isinstance(data, dict) and isinstance(data.get("placement"), dict) and data["placement"]:
            placement = dict(data["placement"])
            levels = len(next(iter(placement.values())))
            for d in DEGREES:
                if d not in placement and data.get(d, 1) == 1:
                    placement[d] = (1,) * levels
            data = {**data, "placement": placement}
        return data

    @model_validator(mode="after")
    def _check_placement(self) -> _LayoutBase:
        if set(self.placement) != set(DEGREES):
            raise ValueError(f"placement must name exactly the degrees {', '.join(DEGREES)}")
        lengths = {len(v) for v in self.placement.values()}
        if len(lengths) != 1:
            raise ValueError("placement lists must all have one factor per network level")
        for name in DEGREES:
            factors = self.placement[name]
            if any(f < 1 for f in factors):
                raise ValueError(f"placement of {name} has a factor below 1: {list(factors)}")
            if math.prod(factors) != self.degree(name):
                raise ValueError(
                    f"placement of {name} multiplies to {math.prod(factors)} ({' * '.join(map(str, factors))}) "
                    f"but {name} = {self.degree(name)}"
                )
        return self


LAYOUT_EXTRA: tuple[str, ...] = ("etp", "expert_ep", "first_stage_layers", "last_stage_layers")
"""Layout fields outside the degree registry (a folded expert layout, custom end stages): None unless given."""


def _dimension_fields() -> dict[str, Any]:
    return {d.name: (int, Field(... if d.default is None else d.default, ge=d.minimum, description=d.help))
            for d in DIMENSIONS}


_SCHEDULE_FIELD = (Schedule, Field("1f1b", description="'1f1b' (interleaved) or 'zb-h2' (zero bubble, i = 1)."))


if TYPE_CHECKING:
    class _Dimensions:
        """For mypy only: the integer fields create_model adds from the registry (one line per entry)."""

        dp: int
        tp_ff: int
        tp_model: int
        pp: int
        interleave: int
        ep: int
        microbatches: int
        cp: int
        sp: int
        recompute: int
        zero: int

    class Layout(_LayoutBase, _Dimensions):
        schedule: Schedule
        placement: dict[str, tuple[int, ...]]

        def __init__(self, **kwargs: Any) -> None: ...
else:
    Layout = create_model(
        "Layout", __base__=_LayoutBase, __module__=__name__, **_dimension_fields(), schedule=_SCHEDULE_FIELD,
        placement=(dict[str, tuple[int, ...]], Field(description="Degree name -> its factor on each network level, "
                                                     "bottom-up; the factors multiply to the degree.")))


class StepBreakdown(_Frozen):
    """Seconds per optimizer step, by component (Eq. 21 plus the critical-path floor)."""

    matmul_s: float = Field(description="Per-GPU GEMM time for one step (all microbatches, layers, experts).")
    tp_s: float = Field(description="Tensor-parallel all-reduce bandwidth time (overlapped with matmuls).")
    pp_ep_s: float = Field(description="Pipeline/expert point-to-point bandwidth time (overlapped with matmuls).")
    dp_s: float = Field(description="Data-parallel gradient all-reduce bandwidth time (the phase after the last "
                        "microbatch).")
    zero_s: float = Field(0.0, description="ZeRO-2/3 reduce-scatters and all-gathers during the microbatches "
                          "(overlapped with matmuls).")
    cp_s: float = Field(0.0, description="Context parallelism's ring exchange of keys and values (hidden under the "
                        "attention kernels only).")
    exposed_comm_s: float = Field(0.0, description="Communication the execution profile leaves exposed (not hidden "
                                  "under GEMMs): its share of TP, PP, EP and ZeRO traffic, added to the compute.")
    optimizer_s: float = Field(0.0, description="The optimizer step (priced by the execution profile; 0 in the "
                               "paper's).")
    latency_s: float = Field(description="Serial latency counted in Eq. 21's t_lat (DP always; TP/PP/EP under 1f1b).")
    bubble_fraction: float = Field(description="Pipeline bubble fraction f_b (Eq. 22; 0 under zb-h2).")
    bubble_s: float = Field(description="Time lost to the bubble.")
    critical_path_s: float = Field(description="One microbatch forward+backward through all L "
        "blocks, latencies included.")
    eq21_s: float = Field(description="Step time by Eq. 21 alone.")
    floor_s: float = Field(description="DP time + critical path: the latency floor (docs/model.md §6).")
    step_s: float = Field(description="max(Eq. 21, floor).")
    network_s: float = Field(description="All network time (bandwidth + latency), hidden or not: "
        "the paper's tie-break.")


# Training state per parameter (App. 8.1.3): what a GPU holds (planner.cost.memory) and what a checkpoint saves
# (planner.goodput) both count it, so it is named here, below both.
WEIGHT_BYTES_PER_PARAM = 2.0  # 16-bit weights
GRAD_BYTES_PER_PARAM = 2.0  # 16-bit gradients
OPTIMIZER_BYTES_PER_PARAM = 12.0  # fp32 master copy + Adam m and v, sharded over DP (ZeRO-1); a transformer's
# profile may say otherwise (ExecutionProfile.optimizer_state_bytes_per_param, default 12)
OPTIMIZER_SHARDING = "ZeRO-1"
"""The paper's toy model: the optimizer state is split over the data-parallel ranks (weights and gradients are
not). A transformer's layout chooses its ZeRO stage (the `zero` option)."""
STATE_BYTES_PER_PARAM = WEIGHT_BYTES_PER_PARAM + GRAD_BYTES_PER_PARAM + OPTIMIZER_BYTES_PER_PARAM
"""Weights, gradients and optimizer state per parameter: a lower bound on bytes per parameter over all GPUs."""


def memory_verdict(total: float, headroom: float, capacity: float) -> str:
    """The memory verdict on a layout: 'fits' when total + headroom <= capacity (the rule a search keeps), 'tight'
    when only the headroom is missing (the model predicts it runs, with less margin than plans keep for what the model
    leaves out), 'does not fit' when the total alone exceeds the capacity."""
    if total + headroom <= capacity:
        return "fits"
    return "tight" if total <= capacity else "does not fit"


def headroom_shortfall(total: float, headroom: float, capacity: float) -> str:
    """How a tight layout misses the headroom, in words: what it leaves free against the headroom (bytes in)."""
    return (f"which leaves {(capacity - total) / 1e9:.2f} GB free, less than the {headroom / 1e9:,.2f} GB of "
            "headroom a plan keeps for what the model leaves out")


class _MemoryParts(_Frozen):
    """Bytes per GPU by component (docs/model.md §7): what MemoryBreakdown and the plan's MemoryReport share."""

    weights_bytes: float = Field(description="Model weights held by one GPU, bytes (its shard; 16-bit, or the "
                                 "precision's copies).")
    grads_bytes: float = Field(description="Gradients held by one GPU, bytes (ZeRO-2/3 shard them).")
    optimizer_bytes: float = Field(description="Optimizer state held by one GPU, bytes (fp32 master weights and Adam "
                                   "moments; ZeRO shards them).")
    activations_bytes: float = Field(description="Activations saved for the backward pass on one GPU at the pipeline's "
                                     "peak (microbatches in flight), bytes.")
    fragmentation_bytes: float = Field(0.0, description="Bytes the caching allocator reserves beyond what it "
                                       "serves (the profile's fragmentation x weights, gradients, optimizer state "
                                       "and activations).")
    workspace_bytes: float = Field(0.0, description="cuBLAS / Transformer Engine GEMM workspaces, bytes.")
    nccl_bytes: float = Field(0.0, description="NCCL communicator buffers, bytes: communicators the layout opens x "
                              "channels x buffers per channel x NCCL_BUFFSIZE.")
    context_bytes: float = Field(0.0, description="CUDA context and the framework's per-process baseline, bytes.")
    reserve_bytes: float = Field(description="The profile's fixed reserve, bytes (the paper profile's 2 GB for "
                                 "everything above).")
    total_bytes: float = Field(description="Sum of the components above, bytes per GPU (headroom not included).")
    headroom_bytes: float = Field(0.0, description="Bytes a plan must leave free: it fits when total + headroom <= "
                                  "capacity (the profile's memory.headroom_GB or --memory-headroom).")


class MemoryBreakdown(_MemoryParts):
    """Bytes per GPU (docs/model.md §7)."""

    capacity_bytes: float = Field(description="HBM capacity per GPU, bytes.")

    @property
    def fits(self) -> bool:
        """The planner's rule: total + headroom <= capacity (what a search accepts)."""
        return self.total_bytes + self.headroom_bytes <= self.capacity_bytes

    @property
    def verdict(self) -> str:
        """'fits' (with the headroom), 'tight' (fits the device, not the headroom) or 'does not fit' (the device)."""
        return memory_verdict(self.total_bytes, self.headroom_bytes, self.capacity_bytes)


class OpTime(_Frozen):
    """One operation's share of a step on the busiest device (the op-level breakdown)."""

    name: str = Field(description="The operation, e.g. 'qkv', 'attention core', 'mlp down'.")
    kind: Literal["gemm", "attention", "elementwise", "recompute", "overhead"] = Field(
        description="What kind of work it is: a GEMM, the attention core, element-wise ops, recomputation or fixed "
        "overhead.")
    where: str = Field(description="'every layer', 'first stage' (embedding) or 'last stage' (LM head).")
    seconds: float = Field(description="Seconds per optimizer step, all microbatches and passes, before overlap.")


class Evaluation(_Frozen):
    """A layout run through the cost model."""

    layout: Layout = Field(description="The layout that was priced.")
    gpus: int = Field(description="GPUs the layout uses: the product of its degrees.")
    nodes: int = Field(description="Physical nodes those GPUs occupy (gpus / gpus_per_node, rounded up).")
    step: StepBreakdown = Field(description="Seconds per optimizer step, by component.")
    memory: MemoryBreakdown = Field(description="Bytes per GPU, by component, against HBM capacity.")
    training_s: float = Field(description="Training time, seconds: step time x optimizer steps (no failures).")
    training_days: float = Field(description="Training time, days (training_s / 86,400).")
    mfu: float = Field(description="Model FLOP utilisation, fraction (0-1): T / (N_GPU x peak x t_run), against peak "
                       "(max-clock) dense FLOP/s, counting flop_convention's FLOPs.")
    bottleneck: str = Field(description="What binds the step time, in words.")
    nanobatch_tokens: float = Field(description="Toy: tokens per expert per microbatch per data-parallel rank. "
                                    "Transformer: tokens per microbatch on one GPU's dense layers.")
    hfu: float = Field(description="Hardware FLOP utilisation, fraction (0-1): model FLOPs plus recomputed FLOPs, "
                       "against the same peak.")
    ops: list[OpTime] = Field(default_factory=list, description="Op-level breakdown of the busiest device's work.")


# --------------------------------------------------------------------------------------------------
# Plan: the JSON contract with provisioning scripts (README.md, "Commands")
# --------------------------------------------------------------------------------------------------


class WorkloadReport(_Frozen):
    compute_flop: float = Field(description="Training compute: model FLOPs per token x tokens (flop_convention).")
    requested_compute_flop: float | None = Field(description="What was asked for (differs from "
        "compute_flop by rounding).")
    d_model: int = Field(description="Model (residual stream) width.")
    d_ff: int = Field(description="MLP hidden width (toy: of each expert; transformer: of the dense MLP).")
    layers: int = Field(description="L, layers (MLP blocks of the toy model).")
    experts: int = Field(description="E, experts per MoE layer; 1 = dense.")
    batch_tokens: int = Field(description="Global batch b, tokens per optimizer step.")
    tokens: float = Field(description="Training tokens D.")
    params: float = Field(description="Total parameters N_p (every expert counted).")
    active_params: float = Field(description="Parameters one token meets (toy: N_p / E).")
    steps: float = Field(description="Optimizer steps, D / b.")
    label: str = Field(description="Where the shape came from (scaling law, preset name, flags).")
    seq_len: int = Field(2048, description="Sequence length, tokens.")
    precision: Literal["bf16", "fp8", "fp4"] = Field("bf16", description="GEMM precision the plan was priced in.")
    recipe: RecipeName | None = Field(None, description="Low-precision recipe the plan was priced with (null: bf16).")
    model_flop_per_token: float = Field(0.0, description="Model FLOPs per token (flop_convention).")
    attention_flop_per_token: float = Field(0.0, description="Of which attention scores and values (transformer).")
    transformer: TransformerShape | None = Field(None, description="Real-transformer sizes; null for the paper's toy "
                                                 "model.")
    family: str | None = Field(None, description="The model family (models/families/) the shape was scaled from "
                               "(--model-family); null otherwise.")


class _LayoutReportBase(_Frozen):
    etp: int | None = Field(None, description="Expert tensor parallelism of a folded expert layout (None: not "
                            "folded).")
    expert_ep: int | None = Field(None, description="Expert parallelism of a folded expert layout (None: not "
                                  "folded).")
    first_stage_layers: int | None = Field(None, description="Layers on the first virtual pipeline stage (None: "
                                           "the automatic split).")
    last_stage_layers: int | None = Field(None, description="Layers on the last virtual pipeline stage (None: the "
                                          "automatic split).")


if TYPE_CHECKING:
    class LayoutReport(_LayoutReportBase, _Dimensions):
        schedule: Schedule
        nanobatch_tokens: float
        placement: dict[str, list[int]]
        levels: list[str]

        def __init__(self, **kwargs: Any) -> None: ...
else:
    LayoutReport = create_model(
        "LayoutReport", __base__=_LayoutReportBase, __module__=__name__,
        **{d.name: (int, Field(... if d.default is None else d.default, description=d.help)) for d in DIMENSIONS},
        schedule=(Schedule, Field(description="Pipeline schedule: '1f1b' (interleaved when interleave > 1) or "
                                  "'zb-h2' (zero bubble).")),
        nanobatch_tokens=(float, Field(description="Toy: tokens per expert per microbatch per data-parallel rank. "
                                       "Transformer: tokens per microbatch on one GPU's dense layers.")),
        placement=(dict[str, list[int]], Field(description="Degree -> factor per network level, bottom-up.")),
        levels=(list[str], Field(description="Network level names, bottom-up, matching the placement lists.")))


class MemoryReport(_MemoryParts):
    capacity: float = Field(description="HBM bytes per GPU.")
    verdict: Literal["fits", "tight", "does not fit"] = Field(
        "fits", description="'fits' when total + headroom <= capacity (what a search accepts), 'tight' when only the "
        "headroom is missing (predicted to run, without the margin plans keep), 'does not fit' when the total alone "
        "exceeds the capacity. Always recomputed from the three numbers (a value read from a file is not trusted).")

    @model_validator(mode="before")
    @classmethod
    def _verdict(cls, data: Any) -> Any:
        if isinstance(data, dict) and is_number(data.get("total_bytes")) and is_number(data.get("capacity")):
            headroom = data.get("headroom_bytes", 0.0)
            data = {**data, "verdict": memory_verdict(data["total_bytes"], headroom if is_number(headroom) else 0.0,
                                                      data["capacity"])}
        return data


class SolverReport(_Frozen):
    name: Literal["cpsat", "exhaustive", "none"] = Field(description="'none' when a given layout was only evaluated.")
    status: Literal["optimal", "feasible", "infeasible", "unknown"] = Field(
        description="The search's verdict: optimal (proven), feasible (not proven), infeasible (proven none), "
        "unknown (stopped before any layout).")
    wall_s: float = Field(description="Search wall time, seconds (the only field that varies between identical runs).")
    space_size: int = Field(description="Valid degree tuples in the space (each also has several placements).")
    evaluated: int = Field(description="cpsat: tuples and (tuple, factor vectors) pairs put into CP-SAT models, all "
                           "models together; exhaustive: layouts (tuple x placement) priced.")
    gap: float | None = Field(description="Relative optimality gap; 0 when proven optimal, null if unknown.")
    bound: float | None = Field(None, description="Proven lower bound of the objective stage cut short.")
    stage: str = Field("", description="Objective stage the gap refers to.")
    detail: str = Field("", description="Raw CP-SAT status names per stage, or enumerator notes.")
    cpsat_s: float = Field(0.0, description="Wall time inside CP-SAT's solves; the rest of wall_s is presolve (tables, "
                           "bounds, model building). Varies between identical runs, like wall_s.")
    candidates: int = Field(0, description="Degree tuples in the CP-SAT model that made the decision (every "
                            "candidate presolve could not exclude on its own).")
    candidate_pairs: int = Field(0, description="(tuple, factor vectors) pairs in that model: its placement choices.")
    models: int = Field(0, description="CP-SAT models solved (incumbent batches, counts proven infeasible, decision).")


class DependsOn(_Frozen):
    """What a plan's answer rests on (docs/model.md §10)."""

    modelled: list[str] = Field(description="What the cost model prices.")
    not_modelled: list[str] = Field(description="What it leaves out.")
    estimated_inputs: list[str] = Field(description="Input fields whose sources call them estimates or fits and "
                                        "that can change this plan, as --set names them (gpu.*, levels.NAME.*, "
                                        "profile.*, goodput.*).")
    uncertain: list[UncertainInput] = Field(default_factory=list, description="How far each estimated or fitted "
                                            "input may be off, and the step-time model's measured error "
                                            "(docs/confidence.md); --confidence samples the rows marked sampled.")


class ClusterSize(_Frozen):
    """One cluster size other than the plan's, and why it does not do (issue 26: sizes jump for a reason)."""

    gpus: int = Field(description="GPUs of the size considered.")
    status: Literal["no_layout", "too_slow", "no_fit", "unknown", "feasible"] = Field(
        description="no_layout: no degree tuple multiplies to this many GPUs (or they cannot fill the network "
        "levels); too_slow: the fastest layout on it misses the deadline; no_fit: no layout fits in memory; unknown: "
        "its search stopped at the time limit; feasible: a layout on it meets the deadline (the plan was not proven "
        "smallest).")
    training_days: float | None = Field(None, description="Days of compute of the fastest layout on this size "
                                        "(null: none was found).")
    wall_clock_days: float | None = Field(None, description="Expected wall-clock days of that layout (goodput "
                                          "included when failures are modelled; null: none was found).")
    why: str = Field(description="The reason, in words, with the numbers.")


class Infeasibility(_Frozen):
    """What an infeasible (or unknown) plan can still say, as numbers: the facts behind its explanation."""

    reason: Literal["latency_wall", "deadline", "memory", "no_layout", "fixed_cluster", "failures",
                    "time_limit"] = Field(
        description="latency_wall: even the critical-path lower bound misses the deadline; deadline: the search "
        "proved no cluster meets it; memory: the model fits on no cluster (or not on the fixed one); no_layout: the "
        "fixed --gpus cannot be formed or split; fixed_cluster: the fastest layout on --gpus misses the deadline; "
        "failures: goodput rules every cluster out; time_limit: the search stopped before any layout (not proven).")
    shortest_days: float | None = Field(None, description="Lower bound on the training days (compute, failures "
                                        "not included) of any layout of this workload on this hardware: the "
                                        "critical path of one microbatch through every layer times the steps, "
                                        "raised to the deadline when the search proved the deadline unreachable; "
                                        "the real shortest can be longer. Null: not computed.")
    largest_compute_flop: float | None = Field(None, description="Largest training compute, FLOP, whose inferred "
                                               "shape (same scaling law) the same lower bound lets finish within "
                                               "the deadline: an upper estimate to ~1 %. Null unless the request gave "
                                               "--compute and is past the latency wall.")
    fewest_gpus_that_fit: int | None = Field(None, description="Fewest GPUs on which some layout fits in memory, "
                                             "when that was looked for (null: not looked for or none found).")
    nearest_gpus_below: int | None = Field(None, description="Fixed cluster (--gpus): the nearest smaller GPU count "
                                           "that some layout can use (null: none within reach or not a fixed "
                                           "cluster).")
    nearest_gpus_above: int | None = Field(None, description="Fixed cluster: the nearest larger GPU count that some "
                                           "layout can use.")
    between: str = Field("", description="Why the counts between the nearest usable ones fail, in words.")


class Plan(_Frozen):
    """One planning answer. `status` is 'optimal' only when the search proved it."""

    status: Literal["optimal", "feasible", "infeasible", "unknown"] = Field(
        description="optimal: proven; feasible: a layout, not proven optimal (time limit); infeasible: proven that "
                    "no layout exists; unknown: the time limit stopped the search before any layout was found.")
    hardware: str = Field(description="Hardware name as given (a shipped system or a user file's `name`).")
    gpu: str = Field(description="The GPU's marketing name, e.g. 'H100 SXM5'.")
    _names = field_validator("hardware", "gpu", "profile")(check_name)
    profile: str = Field("paper", description="The execution profile that priced the plan (planner.profile): 'paper' "
                         "(the paper's idealised model) or 'realistic' (validated against published runs, "
                         "docs/validation.md).")
    peak_flops: float = Field(description="Peak dense FLOP/s per GPU at max clock in the workload's precision (16-bit, "
                              "or FP8): MFU's denominator.")
    flop_convention: str = Field("6 * active_params * tokens", description="How model FLOPs are counted for "
                                 "compute_flop and MFU.")
    deadline_days: float | None = Field(description="The deadline asked for, days (null: none, --gpus alone).")
    fixed_gpus: bool = Field(False, description="Fixed-cluster mode (--gpus N): the objective was the least step time "
                             "on exactly `gpus` GPUs; deadline_days, if set, was then checked, not minimised over.")
    dp_overlap: bool = Field(False, description="Whether the DP all-reduce was allowed to overlap with compute.")
    gpus: int | None = Field(description="GPUs the job uses (the smallest cluster that meets the deadline, or the "
                             "fixed --gpus); null when infeasible without a fixed cluster.")
    nodes: int | None = Field(description="Physical nodes those GPUs occupy (gpus_per_node each); null when "
                              "infeasible.")
    racks: int | None = Field(None, description="Groups of the lowest bounded network level the cluster touches "
                              "(NVLink domains: racks on GB200 NVL72, nodes on DGX systems); each is bought whole.")
    rack_level: str | None = Field(None, description="The network level whose groups `racks` counts.")
    gpus_per_rack: int | None = Field(None, description="GPUs the job uses in each of those racks (the same in every "
                                      "one; docs/model.md, 'The search space').")
    spare_gpus: int | None = Field(None, description="GPUs in the racks bought that the job leaves idle: racks x rack "
                                   "size - gpus (GB200 NVL72 at 64 of 72 per rack: 8 per rack; 0 on whole DGX nodes). "
                                   "Not in gpu_hours or compute_cost_usd; where racks are taken whole (GB200/GB300 "
                                   "NVL72) they are held: in held_gpus, cost_usd and the power figures.")
    gpu_hours: float | None = Field(description="GPU-hours of compute: gpus x training_days x 24 (no failures, no "
                                    "spares).")
    held_gpus: int | None = Field(None, description="GPUs the run holds and pays for: gpus + spare_gpus where racks "
                                  "are taken whole (GB200/GB300 NVL72: a lowest level with unit/usable), else gpus (a "
                                  "job smaller than a DGX node rents its GPUs alone).")
    fewest_gpus: int | None = Field(None, description="Deadline mode on racks bought whole (GB200/GB300 NVL72): the "
                                    "fewest GPUs that meet the deadline when the plan takes more GPUs in fewer racks "
                                    "(docs/model.md, 'Racks bought whole'); null when the plan's gpus are the fewest.")
    held_days: float | None = Field(None, description="Days the cluster is held: wall_clock_days (training_days / "
                                    "goodput when failures are modelled, else training_days).")
    price_per_gpu_hour: float | None = Field(None, description="USD per GPU-hour that priced cost_usd and "
                                             "compute_cost_usd: --price-per-gpu-hour, else the hardware file's.")
    price_source: str | None = Field(None, description="Where that price comes from (with its date), or "
                                     "'--price-per-gpu-hour'.")
    cost_usd: float | None = Field(None, description="USD for the time the cluster is held: price x held_gpus x "
                                   "held_days x 24 (wall-clock, spares included). Null without a price.")
    compute_cost_usd: float | None = Field(None, description="USD for the compute alone: price x gpu_hours (no "
                                           "failures, restarts or spare GPUs). Null without a price.")
    it_power_MW: float | None = Field(None, description="IT power of the held cluster, MW: held GPUs x (board power "
                                      "+ every level's switch power per GPU) + nodes x node overhead. Null when the "
                                      "hardware file has no [economics] board power.")
    pue: float | None = Field(None, description="Power usage effectiveness that scaled it (facility.pue).")
    facility_power_MW: float | None = Field(None, description="Facility power, MW: it_power_MW x pue.")
    energy_MWh: float | None = Field(None, description="Facility energy for the time held, MWh: facility_power_MW x "
                                     "held_days x 24.")
    warnings: list[str] = Field(default_factory=list, description="Why the answer, optimal under the cost model, may "
                                "not be buildable: facility power above the largest announced site (the bound and its "
                                "source named). Empty when nothing is flagged.")
    mfu: float | None = Field(description="Model FLOP utilisation, fraction (0-1), text prints it as %: "
                              "compute_flop / (gpus x peak_flops x training time).")
    hfu: float | None = Field(None, description="Hardware FLOP utilisation, fraction (0-1): model + recomputed FLOPs "
                              "against peak.")
    training_days: float | None = Field(description="Training time in days of compute (step_time_s x steps / 86,400), "
                                        "failures not included (wall_clock_days adds them).")
    step_time_s: float | None = Field(description="Seconds per optimizer step.")
    bottleneck: str | None = Field(description="What binds the step time, in words.")
    workload: WorkloadReport = Field(description="What is trained: the model shape, tokens and compute.")
    layout: LayoutReport | None = Field(description="The parallel layout: every degree, the schedule and the placement "
                                        "on the network levels; null when there is none.")
    breakdown: StepBreakdown | None = Field(description="Seconds per optimizer step by component; null without a "
                                            "layout.")
    memory: MemoryReport | None = Field(description="Bytes per GPU by component; null without a layout.")
    solver: SolverReport = Field(description="Which search ran, its status, proof and effort.")
    ops: list[OpTime] = Field(default_factory=list, description="Op-level breakdown of the busiest device's step.")
    explanation: str = Field("", description="For infeasible plans: why, and what would be feasible.")
    infeasibility: Infeasibility | None = Field(None, description="For infeasible and unknown plans: the facts "
                                                "behind the explanation, as numbers; null for a plan with a layout.")
    smaller_clusters: list[ClusterSize] = Field(default_factory=list, description="For a plan that sized the "
                                                "cluster: why the next smaller sizes fail (the nearest one some "
                                                "layout can use, searched on its own, and the nearest sizes between "
                                                "that no layout can use); empty otherwise.")
    notes: list[str] = Field(default_factory=list, description="Caveats and facts about this answer, one sentence "
                             "each.")
    goodput: Goodput | None = Field(None, description="Failures, checkpoints and restarts (planner.goodput) when the "
                                    "plan models them; null otherwise.")
    wall_clock_days: float | None = Field(None, description="Expected wall-clock days: training_days / goodput when "
                                          "failures are modelled, else training_days. The deadline bounds it.")
    overrides: list[str] = Field(default_factory=list, description="--set FIELD=VALUE overrides the plan was made "
                                 "with, as given (hardware, profile and failure-model fields).")
    depends_on: DependsOn | None = Field(None, description="What the answer models, leaves out, and which of its "
                                         "inputs are estimates.")
    sensitivity: Sensitivity | None = Field(None, description="With --sensitivity: the answer re-planned with each "
                                            "uncertain input moved down and up (planner.sensitivity).")
    confidence: Confidence | None = Field(None, description="With --confidence P: the cluster that meets the "
                                          "deadline with probability P and the spread of its wall-clock days.")


class ErrorDetail(_Frozen):
    code: Literal["bad_input", "usage", "infeasible", "interrupted", "internal"] = Field(
        description="Stable error code: bad_input and usage exit 2, infeasible 1, interrupted 130 (SIGINT) or 143 "
                    "(SIGTERM), internal 3.")
    message: str = Field(description="The one-line message; without --json it is the line written to stderr.")
    exit_code: int = Field(description="The process exit status (see code).")


class ErrorDocument(_Frozen):
    """What `--json` prints on stdout when a command fails before it has a result document (bad input, usage
    errors, interruption, internal errors). An infeasible plan is a Plan with status 'infeasible' instead."""

    status: Literal["error"] = Field("error", description="Always 'error': tells this document from a Plan.")
    error: ErrorDetail = Field(description="What went wrong.")


class LaunchDocument(_Frozen):
    """What `plan --emit megatron|torchtitan --json` prints: the plan and the launch configuration made from it."""

    status: Literal["optimal", "feasible", "infeasible", "unknown"] = Field(description="The plan's status (launch "
                                                                            "fields are null unless it has a layout).")
    target: Literal["megatron", "torchtitan"] = Field(description="The framework the configuration is for.")
    release: str = Field(description="The framework release whose names the configuration uses.")
    plan: Plan = Field(description="The plan, exactly as `plan --json` prints it.")
    text: str | None = Field(None, description="The configuration exactly as `--emit` prints it: a bash array to "
                             "source (megatron) or TOML (torchtitan), with the prediction in comment lines.")
    megatron_args: list[list[str | None]] | None = Field(None, description="Megatron-LM: [flag, value] pairs in "
                                                         "order (value null for a switch).")
    torchtitan_config: dict[str, dict[str, Any]] | None = Field(None, description="torchtitan: TOML section -> key "
                                                                "-> value.")


Objective = Literal["cost", "gpus", "days", "energy"]


class AcceleratorOption(_Frozen):
    """One accelerator of a comparison (`plan --gpu h100,h200,...`): its plan, the figures it is ranked by, and its
    rank, or why it has none."""

    hardware: str = Field(description="Hardware name as given (a shipped system or a user file).")
    rank: int | None = Field(description="1 = best by the objective; null when the option has no plan that meets "
                             "the request or lacks the objective's figure (see why).")
    status: Literal["optimal", "feasible", "infeasible", "unknown", "error"] = Field(
        description="The plan's status (optimal: proven optimal on this accelerator), or 'error' when the request "
        "cannot be planned on it at all (e.g. no FP8 rate).")
    why: str = Field("", description="Why the option is unranked: the first line of the plan's explanation, the "
                     "error, or the missing figure; empty for a ranked option.")
    gpus: int | None = Field(None, description="GPUs the job uses.")
    racks: int | None = Field(None, description="NVLink domains the job touches (racks on NVL72, nodes on DGX).")
    nodes: int | None = Field(None, description="Physical nodes.")
    wall_clock_days: float | None = Field(None, description="Expected wall-clock days (failures included when "
                                          "modelled).")
    cost_usd: float | None = Field(None, description="USD for the wall-clock time the cluster is held (price x GPUs "
                                   "held x wall-clock hours); null without a price.")
    compute_cost_usd: float | None = Field(None, description="USD for the compute alone (price x GPU-hours of "
                                           "training, no failures or spares); null without a price.")
    price_per_gpu_hour: float | None = Field(None, description="USD per GPU-hour that priced the costs.")
    facility_power_MW: float | None = Field(None, description="Facility power, MW (null without power figures).")
    energy_MWh: float | None = Field(None, description="Facility energy for the wall-clock time, MWh (null without "
                                     "power figures).")
    mfu: float | None = Field(None, description="Model FLOP utilisation, fraction (0-1).")
    warnings: list[str] = Field(default_factory=list, description="The plan's warnings (e.g. facility power beyond "
                                "any announced build), one sentence each; a ranked option may carry them.")
    plan: Plan | None = Field(None, description="The full plan document, as `plan --json` prints it for this "
                              "accelerator (infeasible ones included); null for an error.")


class Comparison(_Frozen):
    """What `plan --gpu A,B,... --json` prints: one plan per accelerator, each proven optimal on its own hardware,
    ranked by one objective."""

    objective: Objective = Field(description="What the ranking minimises: cost (cost_usd, wall-clock), gpus, days "
                                 "(wall_clock_days) or energy (energy_MWh).")
    ranked_by: str = Field(description="The ranking key and its tie-breaks, in words.")
    best: str | None = Field(description="The hardware ranked first; null when no option is ranked.")
    options: list[AcceleratorOption] = Field(description="Every accelerator asked for: the ranked ones best first, "
                                             "then the unranked in the order given.")
    notes: list[str] = Field(default_factory=list, description="Caveats about the comparison, one sentence each.")
