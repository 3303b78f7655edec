"""The validation documents: a published run as validation/runs.toml records it, and one row of `planner validate`
(planner.validation prices the runs)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class PublishedRun(BaseModel):
    """One published run (validation/runs.toml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    source: str = Field(description="Paper or repository, table or page.")
    gpu: Literal["a100-40gb", "a100-80gb", "h100-80gb", "h100-96gb", "h800", "h200", "b200", "b300", "gb200", "gb300"]
    gpus: int = Field(gt=0)
    precision: Literal["bf16", "fp16", "fp8", "fp4"] = "bf16"
    recipe: Literal["delayed", "current", "rowwise", "blockwise", "mxfp8", "nvfp4"] | None = Field(
        None, description="Low-precision scaling recipe as Transformer Engine names it: per-tensor 'delayed' or "
        "'current' scaling, DeepSeek-style 'blockwise' (1x128 / 128x128), Blackwell 'mxfp8', 'nvfp4' (None: the "
        "precision's default, or 16-bit).")
    compiled: bool = Field(False, description="The run used torch.compile (torchtitan) or equivalent fused kernels.")
    moe_dispatch_dedup: bool | None = Field(None, description="The run's token dispatcher sends a token once per "
                                            "destination rank / node (DeepEP, HybridEP: true) or once per expert "
                                            "(Megatron's alltoall dispatcher: false); None: the framework's profile "
                                            "value.")
    compiled_loss: bool = Field(False, description="The run compiles its loss function as well as the model "
                                "(torchtitan with training.compile since 2025): the profile's compiled_logits_bytes "
                                "applies.")
    mla_recompute_up_proj: bool = Field(False, description="The run rebuilds MLA's up-projected q, k and v in the "
                                        "backward pass (Megatron recompute_modules 'mla_up_proj'): memory only.")
    activation_offload_layers: int | None = Field(None, ge=0, description="Layers whose activations the run "
                                                  "offloads to host memory (Megatron --cpu-offloading-num-layers, "
                                                  "cpu_offloading_num_layers in Megatron-Bridge's recipes; pp 1 "
                                                  "only): memory only.")
    optimizer_state_bytes_per_param: float | None = Field(None, gt=0, description="Optimizer state bytes per "
                                                          "parameter when the run's differ from the profile's 12 "
                                                          "(fp32 master + Adam m, v): memory only.")
    unknown: list[Literal["vpp", "sp", "recompute", "micro_batch", "zero", "tp_comm_overlap"]] = Field(
        default_factory=list, description="Layout fields the source does not give: validation prices the best "
        "feasible value over them with the planner's own search and says which it took.")
    peak_memory_GiB: float | None = Field(None, gt=0, description="Peak GPU memory the source reports (GiB), "
                                          "e.g. torch.cuda.max_memory_reserved.")
    etp: int | None = Field(None, gt=0, description="Expert tensor-parallel size (Megatron MoE parallel folding: "
                            "the expert layout ep x etp is carved from dp x cp x tp; None: etp = tp).")
    first_stage_layers: int | None = Field(None, ge=0, description="Layers on the first pipeline stage when the "
                                           "source gives a custom layout (Megatron --decoder-first-pipeline-num-"
                                           "layers; with vpp > 1 the first virtual stage, as "
                                           "--pipeline-model-parallel-layout gives it); None: an even split.")
    last_stage_layers: int | None = Field(None, ge=0, description="Layers on the last pipeline stage (Megatron "
                                          "--decoder-last-pipeline-num-layers); None: an even split.")
    layers: int = Field(gt=0)
    d_model: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int | None = Field(None, gt=0)
    head_dim: int | None = Field(None, gt=0)
    ffn: Literal["gelu", "swiglu", "relu2"] = "gelu"
    d_ff: int = Field(gt=0)
    vocab: int = Field(gt=0)
    seq_len: int = Field(gt=0)
    experts: int = Field(1, gt=0)
    top_k: int | None = Field(None, gt=0)
    expert_d_ff: int | None = Field(None, ge=0)
    shared_experts: int | None = Field(None, ge=0)
    dense_layers: int | None = Field(None, ge=0)
    attention: Literal["gqa", "mla"] = "gqa"
    attention_kernel: Literal["flash", "unfused"] = Field("flash", description="'unfused': the run's attention "
                                                          "writes its score matrices to HBM (Megatron before 2023).")
    dropout: bool = False
    tp_comm_overlap: bool = Field(False, description="The run overlapped TP communication with GEMMs (Megatron "
                                  "--tp-comm-overlap, torchtitan async TP).")
    framework: str = Field("megatron", description="Training framework (an execution profile may price it "
                           "differently: planner.profile.ExecutionProfile.frameworks).")
    q_lora_rank: int | None = Field(None, ge=0)
    kv_lora_rank: int | None = Field(None, ge=0)
    rope_head_dim: int | None = Field(None, ge=0)
    v_head_dim: int | None = Field(None, ge=0)
    global_batch_sequences: int = Field(gt=0)
    tp: int = Field(1, gt=0)
    pp: int = Field(1, gt=0)
    dp: int = Field(gt=0, description="Data-parallel size as the framework counts it (expert ranks included).")
    cp: int = Field(1, gt=0)
    ep: int = Field(1, gt=0)
    vpp: int = Field(1, gt=0)
    micro_batch: int | None = Field(None, gt=0, description="Sequences per microbatch (None: 1).")
    sp: bool = False
    recompute: Literal["none", "selective", "full"] = "none"
    zero: int = Field(1, ge=1, le=3)
    tflops_per_gpu: float | None = Field(None, gt=0)
    tokens_per_s_per_gpu: float | None = Field(None, gt=0)
    mfu: float | None = Field(None, gt=0, lt=1)
    hfu: float | None = Field(None, gt=0, lt=1)
    flop_convention: str = ""
    notes: str = ""


class ValidationRow(BaseModel):
    id: str
    split: Literal["calibration", "held-out"]
    gpu: str
    gpus: int
    model: str
    precision: str
    layout: str
    reported_tokens_per_s: float | None
    predicted_tokens_per_s: float | None
    reported_mfu: float | None
    predicted_mfu: float | None
    ratio: float | None = Field(description="Predicted / reported throughput.")
    fits: bool | None
    framework: str = "megatron"
    source: str
    problem: str = ""
    assumed: str = Field("", description="Values taken for the fields the source does not give (the fastest that "
                         "fits), e.g. 'vpp=4, sp=on'.")
    predicted_peak_GiB: float | None = Field(None, description="Predicted peak of the caching allocator (what "
                                             "torch.cuda.max_memory_reserved reads), GiB: planner.cost.memory."
                                             "allocator_peak_bytes.")
    reported_peak_GiB: float | None = Field(None, description="The record's peak_memory_GiB.")
    memory_GB: float | None = Field(None, description="Predicted total per GPU (GB), headroom not included.")
