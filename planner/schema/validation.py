"""The validation documents: a published run as validation/runs.toml records it, and one row of `planner validate`
(planner.validation prices the runs)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class PublishedRun(BaseModel):
    """One published run (validation/runs.toml)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    id: str = Field(description="Short identifier of the run.")
    source: str = Field(description="Paper or repository, table or page.")
    gpu: Literal["a100-40gb", "a100-80gb", "h100-80gb", "h100-96gb", "h800", "h200", "b200", "b300", "gb200",
                 "gb300"] = Field(description="The GPU the run used (mapped to a shipped hardware file).")
    gpus: int = Field(gt=0, description="GPUs of the run.")
    precision: Literal["bf16", "fp16", "fp8", "fp4"] = Field("bf16", description="GEMM precision of the run.")
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
    recompute_norm_act: bool = Field(False, description="The run recomputes its norms and its experts' activation "
                                     "(Megatron recompute_modules ['layernorm', 'moe_act']): memory only.")
    activation_offload_layers: int | None = Field(None, ge=0, description="Layers whose activations the run "
                                                  "offloads to host memory (Megatron --cpu-offloading-num-layers, "
                                                  "cpu_offloading_num_layers in Megatron-Bridge's recipes; pp 1 "
                                                  "only): memory only.")
    pipeline_microbatch_group: int | None = Field(None, ge=1, description="Microbatches run contiguously per "
                                                  "virtual stage under the interleaved schedule (Megatron "
                                                  "microbatch_group_size_per_vp_stage; the Llama 3 paper's tunable "
                                                  "N): how many microbatches a rank holds in flight, and below N_PP "
                                                  "the schedule's dependency stalls; None: N_PP.")
    bf16_layers: int | None = Field(None, ge=0, description="Layers a low-precision run keeps entirely in 16-bit "
                                    "(Megatron first_last_layers_bf16 with num_layers_at_start_in_bf16 + "
                                    "num_layers_at_end_in_bf16); None: the recipe's kept_layer_fraction.")
    optimizer_state_bytes_per_param: float | None = Field(None, gt=0, description="Optimizer state bytes per "
                                                          "parameter when the run's differ from the profile's 12 "
                                                          "(fp32 master + Adam m, v): memory only.")
    unknown: list[Literal["vpp", "sp", "recompute", "micro_batch", "zero", "tp_comm_overlap",
                       "pipeline_microbatch_group"]] = Field(
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
    layers: int = Field(gt=0, description="Transformer layers.")
    d_model: int = Field(gt=0, description="Model (residual stream) width.")
    heads: int = Field(gt=0, description="Query attention heads.")
    kv_heads: int | None = Field(None, gt=0, description="Key/value heads (None: = heads).")
    head_dim: int | None = Field(None, gt=0, description="Per-head width (None: d_model / heads).")
    ffn: Literal["gelu", "swiglu", "relu2"] = Field("gelu", description="MLP kind: 'gelu', 'swiglu' or 'relu2'.")
    d_ff: int = Field(gt=0, description="Dense MLP hidden width.")
    vocab: int = Field(gt=0, description="Vocabulary size.")
    seq_len: int = Field(gt=0, description="Sequence length, tokens.")
    experts: int = Field(1, gt=0, description="Routed experts per MoE layer (1: dense).")
    top_k: int | None = Field(None, gt=0, description="MoE: routed experts per token (None: 1).")
    expert_d_ff: int | None = Field(None, ge=0, description="MoE: hidden width of each expert (None: d_ff).")
    shared_experts: int | None = Field(None, ge=0, description="MoE: always-active experts per MoE layer (None: 0).")
    dense_layers: int | None = Field(None, ge=0, description="MoE: leading layers with a dense MLP (None: 0).")
    attention: Literal["gqa", "mla"] = Field(
        "gqa", description="'gqa' (MHA, GQA, MQA) or 'mla' (DeepSeek's latent attention).")
    sliding_window: int | None = Field(None, ge=0, description="Sliding-window attention: keys a windowed layer's "
                                       "query attends to, itself included (None: no windowed layers).")
    sliding_window_layers: int | None = Field(None, ge=0, description="Layers that use the sliding window (None: "
                                              "none).")
    attention_kernel: Literal["flash", "unfused"] = Field("flash", description="'unfused': the run's attention "
                                                          "writes its score matrices to HBM (Megatron before 2023).")
    dropout: bool = Field(False, description="The run used dropout.")
    ep_comm_overlap: bool | None = Field(None, description="The run overlapped the expert-parallel all-to-all with "
                                         "compute (Megatron overlap_moe_expert_parallel_comm): the profile's "
                                         "overlap_ep_comm prices it; false or None: the framework's overlap_ep.")
    cuda_graph_impl: Literal["none", "local", "transformer_engine", "full_iteration"] | None = Field(
        None, description="CUDA graphs the run captured (Megatron cuda_graph_impl, as the recipe the source cites "
        "sets it): 'none' (every kernel launched eagerly: the profile's host_eager_moe_layer_s floors its MoE "
        "layers), 'local' or 'transformer_engine' (the modules cuda_graph_scope names), 'full_iteration' (the "
        "whole forward and backward step); None: not known (no floor).")
    cuda_graph_scope: list[str] | None = Field(None, description="The modules captured in CUDA graphs (Megatron "
                                               "cuda_graph_scope: 'attn', 'mlp', 'moe', 'moe_router', "
                                               "'moe_preprocess', 'full_iteration'; empty with 'full_iteration' "
                                               "or 'none'); None: not known.")
    tp_comm_overlap: bool = Field(False, description="The run overlapped TP communication with GEMMs (Megatron "
                                  "--tp-comm-overlap, torchtitan async TP).")
    framework: str = Field("megatron", description="Training framework (an execution profile may price it "
                           "differently: planner.profile.ExecutionProfile.frameworks).")
    q_lora_rank: int | None = Field(None, ge=0, description="MLA: query latent width (None: 0).")
    kv_lora_rank: int | None = Field(None, ge=0, description="MLA: key/value latent width.")
    rope_head_dim: int | None = Field(None, ge=0, description="MLA: rotary key/query width per head.")
    v_head_dim: int | None = Field(None, ge=0, description="MLA: value width per head.")
    global_batch_sequences: int = Field(gt=0, description="Global batch, sequences per optimizer step.")
    tp: int = Field(1, gt=0, description="Tensor-parallel size.")
    pp: int = Field(1, gt=0, description="Pipeline-parallel size.")
    dp: int = Field(gt=0, description="Data-parallel size as the framework counts it (expert ranks included).")
    cp: int = Field(1, gt=0, description="Context-parallel size.")
    ep: int = Field(1, gt=0, description="Expert-parallel size.")
    vpp: int = Field(1, gt=0, description="Virtual pipeline stages per rank.")
    micro_batch: int | None = Field(None, gt=0, description="Sequences per microbatch (None: 1).")
    sp: bool = Field(False, description="Sequence parallelism on.")
    recompute: Literal["none", "selective", "full"] = Field(
        "none", description="Activation recomputation: 'none', 'selective' or 'full'.")
    zero: int = Field(1, ge=1, le=3, description="ZeRO stage (1-3; distributed optimizer = 1).")
    tflops_per_gpu: float | None = Field(
        None, gt=0, description="Reported model TFLOP/s per GPU (under flop_convention).")
    tokens_per_s_per_gpu: float | None = Field(
        None, gt=0, description="Reported training throughput, tokens/s per GPU.")
    mfu: float | None = Field(None, gt=0, lt=1, description="Reported MFU, fraction (0-1).")
    hfu: float | None = Field(None, gt=0, lt=1, description="Reported HFU, fraction (0-1).")
    flop_convention: str = Field("", description="How the source counts FLOPs for its TFLOP/s or MFU.")
    notes: str = Field("", description="Anything else about the record.")


class ValidationRow(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str = Field(description="Short identifier of the run.")
    split: Literal["calibration", "held-out"] = Field(
        description="'calibration' (the profile was fitted to it) or 'held-out'.")
    gpu: str = Field(description="The GPU the run used (mapped to a shipped hardware file).")
    gpus: int = Field(description="GPUs of the run.")
    model: str = Field(description="The run's model, in words.")
    precision: str = Field(description="GEMM precision of the run.")
    layout: str = Field(description="The run's layout, in Megatron's words.")
    reported_tokens_per_s: float | None = Field(
        description="Reported throughput, tokens/s per GPU (from the record's figure).")
    predicted_tokens_per_s: float | None = Field(description="Predicted throughput, tokens/s per GPU.")
    reported_mfu: float | None = Field(description="Reported MFU, fraction (0-1), in the planner's FLOP convention.")
    predicted_mfu: float | None = Field(description="Predicted MFU, fraction (0-1).")
    ratio: float | None = Field(description="Predicted / reported throughput.")
    fits: bool | None = Field(description="Whether the predicted memory fits the GPU with the profile's headroom "
                              "left free, the rule plans keep (null: not priced).")
    fits_device: bool | None = Field(None, description="Whether the predicted memory fits the GPU, headroom aside "
                                     "(null: not priced). fits false and fits_device true: 'tight'.")
    framework: str = Field("megatron", description="Training framework.")
    compiled: bool = Field(False, description="The run used torch.compile or equivalent fused kernels (its "
                           "record's compiled).")
    source: str = Field(description="Paper or repository, table or page.")
    problem: str = Field("", description="Why the run could not be priced (empty when it was).")
    assumed: str = Field("", description="Values taken for the fields the source does not give (the fastest that "
                         "fits), e.g. 'vpp=4, sp=on'.")
    predicted_peak_GiB: float | None = Field(None, description="Predicted peak of the caching allocator (what "
                                             "torch.cuda.max_memory_reserved reads), GiB: planner.cost.memory."
                                             "allocator_peak_bytes.")
    reported_peak_GiB: float | None = Field(None, description="The record's peak_memory_GiB.")
    memory_GB: float | None = Field(None, description="Predicted total per GPU (GB), headroom not included.")
