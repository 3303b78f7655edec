"""Per-GPU memory accounting (docs/model.md §7; ZeRO-1 after paper §3.1.3). Not in the paper's results: a constraint
here. The state bytes per parameter and the optimizer sharding are named once, with the documents (planner.schema)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping

import numpy as np

from planner.cost.rows import DistinctRows
from planner.cost.terms import (
    custom_stage_layers,
    custom_stages,
    device_layers,
    params_per_gpu,
    rates,
    sharding_degrees,
    split_params_per_gpu,
    stage_layers,
)
from planner.profile import ExecutionProfile
from planner.schema import (  # the state bytes per parameter, named with the documents (checkpoints read them too)
    GRAD_BYTES_PER_PARAM,
    OPTIMIZER_BYTES_PER_PARAM,
    WEIGHT_BYTES_PER_PARAM,
    Hardware,
    Workload,
)

RESERVE_BYTES = 2e9
"""The paper profile's fixed reserve per GPU for the CUDA context, communication buffers and GEMM workspace
(ExecutionProfile.memory_reserve_bytes; the realistic profile prices each of them instead)."""

ALLOCATOR_COMPONENTS = ("weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes")
"""What the framework's caching allocator serves (and fragments): torch.cuda.max_memory_reserved measures these plus
the fragmentation; the CUDA context and NCCL's buffers lie outside it."""

def layout_memory(hw: Hardware, wl: Workload, cols: Mapping[str, np.ndarray], nanobatch, in_flight
                  ) -> dict[str, np.ndarray]:
    """Bytes per GPU by component for degree-tuple columns (planner.cost.terms.Cols), from the workload's
    operations: the parameters a GPU holds are its shards of every GEMM weight of its layers and experts; a token
    keeps `saved_words` per layer (each sharded as declared) for the backward pass."""
    f = {k: np.asarray(cols[k], dtype=np.float64) for k in ("dp", "pp", "ep")}
    if wl.transformer is None:
        p = params_per_gpu(wl, cols)
        layers_here = wl.layers / f["pp"]
        experts_here = wl.experts / f["ep"]
        comp = {
            "weights_bytes": WEIGHT_BYTES_PER_PARAM * p,
            "grads_bytes": GRAD_BYTES_PER_PARAM * p,
            "optimizer_bytes": OPTIMIZER_BYTES_PER_PARAM * p / f["dp"],
            "activations_bytes": wl.ops.saved_words_per_token(cols) * nanobatch * experts_here * layers_here
            * in_flight * hw.gpu.word_bytes,
        }
    else:
        # A GPU's layers and parameter shards depend on its stage and shard degrees only: once per distinct value.
        stage = DistinctRows(cols, SHARD_KEYS + STAGE_KEYS)
        comp = _transformer_memory(hw, wl, cols, nanobatch, in_flight, f,
                                   stage.apply(lambda c: device_layers(wl, c)),
                                   stage.apply(lambda c: split_params_per_gpu(wl, c)))
    prof = hw.profile
    ones = np.ones_like(comp["weights_bytes"])
    comp["fragmentation_bytes"] = prof.memory_fragmentation * functools.reduce(
        operator.add, (comp[k] for k in ALLOCATOR_COMPONENTS))
    comp["workspace_bytes"] = prof.memory_workspace_bytes * ones
    comp["nccl_bytes"] = nccl_bytes(prof, cols) * ones
    comp["context_bytes"] = prof.memory_context_bytes * ones
    comp["reserve_bytes"] = prof.memory_reserve_bytes * ones
    comp["total_bytes"] = functools.reduce(operator.add, comp.values())
    comp["headroom_bytes"] = prof.memory_headroom_bytes * ones
    return comp


SHARD_KEYS = ("tp_ff", "tp_model", "sp", "cp", "ep", "etp", "expert_ep")
"""The degrees a GPU's shard of a weight or of a kept tensor reads (planner.workload.ops.Dim, sequence parallelism,
a folded expert layout)."""

STAGE_KEYS = ("pp", "interleave", "first_layers", "last_layers")
"""The degrees that say how many layers the busiest pipeline device holds (planner.cost.terms.device_layers)."""


def capacity_bytes(hw: Hardware) -> float:
    """Device memory of one GPU as the profile reads it (ExecutionProfile.device_bytes): what the driver reports
    where the profile knows it (the datasheet's decimal GB undercount HBM sized in GiB), else the hardware file's."""
    return hw.profile.device_bytes(hw.gpu.name, hw.gpu.hbm_bytes)


def usable_bytes(hw: Hardware) -> float:
    """HBM a plan may fill: a layout fits when its total <= capacity - the profile's headroom."""
    return capacity_bytes(hw) - hw.profile.memory_headroom_bytes


def communicators(cols: Mapping[str, np.ndarray]) -> np.ndarray:
    """NCCL communicators a rank opens for its layout: one per parallel group of more than one rank (tp_ff, tp_model,
    pp, cp, ep, dp), and one more for the dense weights' gradient group N_DP N_EP N_CP when it differs from the
    data-parallel group (`sharding_degrees`)."""
    f = {k: np.asarray(cols[k] if k in cols else 1, dtype=np.float64)  # a toy space may lack cp or tp_model
         for k in ("tp_ff", "tp_model", "pp", "cp", "ep", "dp")}
    n = sum(((f[k] > 1).astype(np.float64) for k in f), np.zeros(1))
    return n + ((f["ep"] * f["cp"] > 1) & (f["dp"] * f["ep"] * f["cp"] > f["dp"])).astype(np.float64)


def nccl_bytes(prof: ExecutionProfile, cols: Mapping[str, np.ndarray]) -> np.ndarray:
    """NCCL's buffers per GPU: communicators x channels x buffers per channel x NCCL_BUFFSIZE."""
    return communicators(cols) * prof.nccl_channels * prof.nccl_buffers_per_channel * prof.nccl_buffer_bytes


def allocator_peak_bytes(m) -> float:
    """What torch.cuda.max_memory_reserved would read for a MemoryBreakdown: the caching allocator's components, its
    fragmentation and the GEMM workspaces (which it also serves), not the CUDA context or NCCL's buffers."""
    return (sum(getattr(m, k) for k in ALLOCATOR_COMPONENTS) + m.fragmentation_bytes + m.workspace_bytes)


KEPT_ROLES: dict[int, tuple[str, ...]] = {
    0: ("input", "gemm_input", "core", "other"),  # no recomputation: everything
    1: ("input", "gemm_input", "other"),  # selective: the attention core's own tensors are recomputed
    2: ("input",),  # full: only each layer's input
}
"""Roles of the kept tensors (planner.schema.ops.Saved) each recomputation level keeps, by its value."""


def _transformer_memory(hw: Hardware, wl: Workload, cols, nanobatch, in_flight, f, layers_here, params):
    """A transformer's busiest device (docs/model.md §7b): its i c layers (an end stage holds no more), the larger
    of the embedding and LM-head shards. ZeRO-1 shards the optimizer state, ZeRO-2 also the gradients, ZeRO-3 also
    the weights, over each weight's data-parallel ranks (`sharding_degrees`); ZeRO-2/3 hold one gathered unit's full
    gradient and ZeRO-3 the profile's live units of gathered weights (`zero3_unit_params`: the paper's two largest
    matrices, FSDP's blocks), or, under pipeline parallelism when the profile says so, the whole stage.
    Activations: the tensors the recomputation level keeps (KEPT_ROLES, or torchtitan's per-op policy), each per
    token (sequence parallelism shards those outside the TP regions, FP8 keeps GEMM inputs in one byte, compiled
    kernels drop the fusible ones); the first stage holds the most microbatches in flight, the last one microbatch
    plus the loss's bytes over the vocabulary; a recomputing policy adds one layer's whole set, once (on the last
    stage instead of the loss's bytes, whichever is larger, when the profile's loss_freed_before_recompute says the
    backward pass frees those before it recomputes)."""
    mo = wl.model_ops
    assert mo is not None
    dense, expert = params
    n_dense, n_expert = sharding_degrees(cols)
    zero = np.asarray(cols["zero"], dtype=np.int64)
    recompute = np.asarray(cols["recompute"], dtype=np.int64)
    fp8 = wl.precision != "bf16"  # FP8 and FP4 recipes keep GEMM inputs in (at most) one byte
    prof = hw.profile
    rate = rates(hw, wl)

    def cast_before_module(c) -> np.ndarray:
        """Per row: the framework hands the Linears an FP8 input (its TP plan casts on the sequence shard and
        gathers in FP8: `Rates.tp_gather` over more than one rank), so what they save is that 1-byte copy even where
        they save their input as received. Compiled, a per-tensor recipe's backward cast of the input is the
        forward's own (same tensor, same scale), which the compiler may share and save in 1 byte: only a recipe
        casting per module (row-wise: its backward's column-wise cast is another op that needs the 16-bit input)
        keeps 16 bits there."""
        if prof.compiled and not (rate.recipe is not None and rate.recipe.cast_per_linear):
            return np.ones(1, dtype=bool)
        return np.asarray(rate.tp_gather(c) > 1.0)
    shards = DistinctRows(cols, SHARD_KEYS)  # what a GPU keeps per token depends on its shard degrees only
    unit = shards.apply(lambda c: zero3_unit_params(wl, c, prof))
    live = prof.zero3_live_units * unit
    if prof.zero3_max_live_params is not None:
        live = np.minimum(live, np.maximum(prof.zero3_max_live_params, unit))

    n_rows = len(zero)

    def at(x, ix):
        """x at the rows ix (a per-row array) or x itself (a scalar or a broadcast length-1 array)."""
        if isinstance(ix, slice):
            return x
        return x[ix] if isinstance(x, np.ndarray) and x.ndim == 1 and len(x) == n_rows else x

    def state(dense, expert, ix: np.ndarray | slice = slice(None)):
        """(weights, gradients, optimizer state) bytes of a GPU holding these parameters (at the rows ix)."""
        p = dense + expert
        shard = dense / at(n_dense, ix) + expert / at(n_expert, ix)
        z = zero[ix]
        weights = np.where(z >= 3, WEIGHT_BYTES_PER_PARAM * (shard + at(live, ix)), WEIGHT_BYTES_PER_PARAM * p)
        grads = np.where(z >= 2, GRAD_BYTES_PER_PARAM * (shard + at(unit, ix)), GRAD_BYTES_PER_PARAM * p)
        if prof.zero3_pp_unsharded:  # the stage's weights stay gathered, its gradients unsharded over the microbatches
            pp_held = (z >= 3) & (at(f["pp"], ix) > 1)
            weights = np.where(pp_held, WEIGHT_BYTES_PER_PARAM * (shard + p), weights)
            grads = np.where(pp_held, GRAD_BYTES_PER_PARAM * shard + prof.zero3_pp_grad_bytes * p, grads)
        return weights, grads, prof.optimizer_state_bytes_per_param * shard

    weights, grads, optimizer = state(dense, expert)

    # Compiled kernels and Megatron's 'layernorm' + 'moe_act' recomputation drop the same tensors: the norm outputs
    # and the activation output, rebuilt in the backward pass from the kept norm input and up-projection output.
    fused = (prof.compiled and prof.compiled_fuses) or prof.recompute_norm_act

    up_proj = prof.mla_recompute_up_proj

    def per_token(roles: tuple[str, ...], rebuilt: bool = False) -> np.ndarray:
        """Kept bytes per token and layer (rebuilt: the set of the layer being recomputed, MLA's q, k, v included)."""
        drop = up_proj and not rebuilt

        def saved(c, low: bool) -> np.ndarray:
            return (mo.layer.saved_bytes_per_token(c, roles, low, fused=fused, up_proj=drop)
                    + mo.top_k * mo.layer.saved_bytes_per_token(c, roles, low, routed=True, fused=fused,
                                                                up_proj=drop))

        if not (fp8 and prof.saved_input_high_precision):
            return shards.apply(lambda c: saved(c, fp8))
        return shards.apply(lambda c: np.where(cast_before_module(c), saved(c, True), saved(c, False)))

    kept = np.zeros(len(zero))
    for level, roles in KEPT_ROLES.items():
        kept = np.where(recompute == level, per_token(roles), kept)
    if prof.selective_policy == "op":
        kept = np.where(recompute == 1, shards.apply(lambda c: op_policy_bytes_per_token(mo, c)), kept)
    whole_layer = per_token(KEPT_ROLES[0], rebuilt=True) * nanobatch
    # The layer being recomputed holds its whole set: under full recomputation, and under the per-op policy's.
    rebuilt = (recompute == 2) | ((recompute == 1) & (prof.selective_policy == "op"))
    # Offloaded layers (pp 1 only) keep their sets in host memory. The first layers are the offloaded ones: each copy
    # out finishes while a later layer runs and each copy back starts once the backward pass has freed the layers
    # after it, so at the peak (the forward pass's end) the device holds the other layers' sets only.
    offload = min(prof.activation_offload_layers, wl.layers)
    resident = np.where(f["pp"] == 1, np.maximum(layers_here - offload, 0), layers_here)
    one_mb = kept * nanobatch * resident
    rebuilding = np.where(rebuilt, whole_layer, 0.0)  # one layer of one microbatch at a time, however many in flight
    logits = shards.apply(lambda c: head_saved_bytes_per_token(mo, c, prof)) * nanobatch
    # The loss's bytes are freed once the LM head's backward pass is done, before the last layer is recomputed: the
    # last stage holds the larger of the two on top of its kept tensors, never both (the paper profile adds them).
    last = one_mb + (np.maximum(logits, rebuilding) if prof.loss_freed_before_recompute else logits + rebuilding)
    acts = np.where(f["pp"] == 1, last, np.maximum(one_mb * in_flight + rebuilding, last))
    comp = {"weights_bytes": weights, "grads_bytes": grads, "optimizer_bytes": optimizer, "activations_bytes": acts}
    if not prof.per_stage_memory:
        return comp
    # Each pipeline rank as it is: the first (embedding, its first virtual stage's layers), the second (the most
    # chunks in flight among the ranks of full stages) and the last (LM head, loss); the busiest of them. Rows
    # without pipeline parallelism (or under ZB-H2) keep the bound above; only the others are priced again.
    rows = np.nonzero((f["pp"] > 1) & ~np.asarray(cols["zero_bubble"], dtype=bool))[0]
    if rows.size == 0:
        return comp
    ix: np.ndarray | slice = slice(None) if rows.size == n_rows else rows
    sub = {k: at(np.asarray(cols[k]), ix) for k in (*SHARD_KEYS, *STAGE_KEYS, "microbatches") if k in cols}
    staged = DistinctRows(sub, STAGE_KEYS + ("microbatches",))
    first_l, c, last_l = staged.apply(lambda c_: stage_ends(wl, c_))
    ends = DistinctRows(sub, SHARD_KEYS).apply(lambda c_: end_params(wl, c_))
    here = np.maximum(at(layers_here, ix), 1.0)
    layer_dense, layer_expert = (at(dense, ix) - ends) / here, at(expert, ix) / here
    kept_mb = at(kept, ix) * at(nanobatch, ix)
    rebuilt_here = at(rebuilding, ix)
    logits_here = at(logits, ix)
    tail = (np.maximum(logits_here, rebuilt_here) if prof.loss_freed_before_recompute else logits_here + rebuilt_here)
    pp = np.asarray(sub["pp"], dtype=np.float64)
    i = np.asarray(sub["interleave"], dtype=np.float64)
    ranks = [("first", first_l, c, ends, rebuilt_here), ("second", c, c, 0.0, rebuilt_here),
             ("last", c, last_l, ends, tail)]
    best = np.full(rows.size, -np.inf)
    out: dict[str, np.ndarray] = {}
    for which, first_r, last_r, end, top in ranks:
        held = (i - 1.0) * c + first_r + last_r - c
        w, g, o = state(layer_dense * held + end, layer_expert * held, ix)
        a = kept_mb * staged.apply(functools.partial(rank_layer_microbatches, wl, which=which,
                                                     group=prof.pipeline_microbatch_group)) + top
        total = np.where(pp >= 3, w + g + o + a, -np.inf) if which == "second" else w + g + o + a
        more = total > best
        best = np.maximum(best, total)
        for k, v in (("weights_bytes", w), ("grads_bytes", g), ("optimizer_bytes", o), ("activations_bytes", a)):
            out[k] = np.where(more, v, out[k]) if k in out else v
    if isinstance(ix, slice):
        return out
    result = {k: np.broadcast_to(np.asarray(v, dtype=np.float64), (n_rows,)).copy() for k, v in comp.items()}
    for k, v in result.items():
        v[ix] = out[k]
    return result


def rank_layer_microbatches(wl: Workload, cols: Mapping[str, np.ndarray], which: str,
                            group: int | None = None) -> np.ndarray:
    """`layer_microbatches_in_flight` of the first, the second or the last pipeline rank (`stage_ends` layers;
    group: the microbatches per virtual stage, None for N_PP)."""
    first, c, last = stage_ends(wl, cols)
    pp = np.asarray(cols["pp"], dtype=np.float64)
    rank, f_, l_ = {"first": (0.0, first, c), "second": (1.0, c, c), "last": (pp - 1.0, c, last)}[which]
    return layer_microbatches_in_flight(pp, cols["interleave"], cols["microbatches"], rank, c, f_, l_, group)


def stage_ends(wl: Workload, cols: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, c, last) layers of the first virtual stage, every other one, the last: the custom counts where the rows
    carry them, else c = ceil(L / (N_PP i)) on every stage (the ends' share of the remainder is a timing choice,
    planner.cost.terms.end_split; memory counts them full)."""
    if custom_stages(cols):
        first, c, last = custom_stage_layers(wl, cols)
        return first.astype(np.float64), c.astype(np.float64), last.astype(np.float64)
    c, _ = stage_layers(wl, cols["pp"], cols["interleave"])
    c = np.asarray(c, dtype=np.float64)
    return c, c, c


def end_params(wl: Workload, cols: Mapping[str, np.ndarray]) -> np.ndarray:
    """Parameters an end device holds beyond its layers: the larger of the embedding and LM-head shards (each end
    holds one; a tied matrix has a copy on each)."""
    mo = wl.model_ops
    assert mo is not None
    return np.maximum(mo.embedding.shard_params(cols), mo.head.shard_params(cols))


def layer_microbatches_in_flight(pp, interleave, microbatches, rank, c, first, last, group=None) -> np.ndarray:
    """Layer-microbatches whose kept tensors pipeline rank `rank` holds when its first backward pass starts, under
    Megatron's 1F1B (interleaved: groups of N microbatches per virtual stage, get_forward_backward_func; N = `group`,
    at most m, N_PP when None: Megatron's microbatch_group_size_per_vp_stage default).

    1F1B: min(m, N_PP - rank) microbatches of the rank's layers. Interleaved: W = min(m i, 2 (N_PP - rank - 1) +
    (i - 1) N + 1) chunk forwards (Megatron's warm-up count plus the first steady-state forward), the k-th on virtual
    stage (k // N) mod i; virtual stage 0 holds `first` layers, stage i - 1 `last`, the others c. At rank 0 with
    full ends and N = N_PP this is the (N_PP (i + 1) - 1) / i stages of microbatches_in_flight."""
    pp = np.asarray(pp, dtype=np.float64)
    i = np.asarray(interleave, dtype=np.float64)
    m = np.asarray(microbatches, dtype=np.float64)
    n = pp if group is None else np.minimum(float(group), m)
    plain = np.minimum(m, np.maximum(pp - rank, 1.0)) * (first + last - c)  # i = 1: the rank's one virtual stage
    w = np.minimum(m * i, 2.0 * np.maximum(pp - rank - 1.0, 0.0) + (i - 1.0) * n + 1.0)
    cycle = n * i
    full, rem = np.floor(w / cycle), w - np.floor(w / cycle) * cycle

    def on_stage(j):
        return full * n + np.clip(rem - j * n, 0.0, n)

    inter = c * w + (first - c) * on_stage(0.0) + (last - c) * on_stage(i - 1.0)
    return np.where(i > 1, inter, plain)


def head_saved_bytes_per_token(mo, cols: Mapping[str, np.ndarray], prof: ExecutionProfile) -> np.ndarray:
    """What the LM head and the loss keep per token at the backward pass's start: `logits_bytes` per vocabulary entry
    of the GPU's N_TP,ff shard (`parallel_logits_bytes` where the shard is a true split, N_TP,ff > 1, and the profile
    names one) and the head's input: the final norm's output, a sequence shard under sequence parallelism unless
    `head_input_gathered` says the head keeps the all-gathered d words."""
    tp = np.asarray(cols["tp_ff"], dtype=np.float64)
    sp = np.asarray(cols["sp"], dtype=bool) if "sp" in cols else np.zeros(1, dtype=bool)
    per_entry = prof.logits_bytes if prof.parallel_logits_bytes is None else np.where(
        tp > 1, prof.parallel_logits_bytes, prof.logits_bytes)
    out = np.zeros(1)
    for t in mo.head.saved:
        if t.name == "logits":
            out = out + per_entry * np.asarray(t.words.per_gpu(cols), dtype=np.float64)
        elif prof.head_input_gathered and t.seq_sharded:
            full = np.asarray(t.words.per_gpu(cols), dtype=np.float64) * t.element_bytes
            out = out + np.where(sp & (tp > 1), full, t.bytes_per_gpu(cols))
        else:
            out = out + t.bytes_per_gpu(cols)
    return out


def zero3_unit_params(wl: Workload, cols: Mapping[str, np.ndarray], prof: ExecutionProfile) -> np.ndarray:
    """Parameters (per GPU, before the data-parallel sharding) of what ZeRO-3 gathers at once: the largest weight
    matrix of a layer or the LM head ('matrix'), or the larger of one whole layer with the experts this GPU holds
    and the LM head, which FSDP wraps as a unit of its own ('layer')."""
    mo = wl.model_ops
    assert mo is not None
    largest = np.zeros(len(np.asarray(cols["tp_ff"])))
    for g in (*mo.layer.gemms, *mo.head.gemms) if prof.zero3_unit == "matrix" else mo.head.gemms:
        largest = np.maximum(largest, np.asarray(g.out.per_gpu(cols), dtype=np.float64) * g.inp.per_gpu(cols))
    if prof.zero3_unit == "layer":
        dense, expert = mo.layer.split_params(cols, wl.experts / np.asarray(cols["ep"], dtype=np.float64))
        largest = np.maximum(largest, dense + expert)
    return largest


def op_policy_bytes_per_token(mo, cols: Mapping[str, np.ndarray]) -> np.ndarray:
    """torchtitan's per-op selective recomputation (ac_mode 'selective', 'op'; its _save_list): a layer keeps its
    input (the checkpointed region's, sharded over N_TP,ff under sequence parallelism), the attention kernel's
    outputs (the output and its fp32 log-sum-exp), every other matmul's output (aten.mm, counted per layer: the 1st,
    3rd, ...; here half of all GEMM output words, each routed GEMM's times top-k, which does not depend on the
    GEMMs' order) and, under sequence parallelism, the reduce-scatters' outputs (_c10d_functional.
    reduce_scatter_tensor: the row-parallel GEMMs' summed outputs, d / N_TP,ff words each), 2 bytes each."""
    layer = mo.layer
    kept = sum((s.bytes_per_gpu(cols) for s in layer.saved
                if s.role == "input" or s.name in ("attention output", "softmax statistics")), np.zeros(1))
    out = sum((np.asarray(g.out.per_gpu(cols), dtype=np.float64) * (mo.top_k if g.routed else 1)
               for g in layer.gemms if g.name != "router"), np.zeros(1))
    sp = np.asarray(cols["sp"], dtype=bool) if "sp" in cols else np.zeros(1, dtype=bool)
    tp = np.asarray(cols["tp_ff"], dtype=np.float64)
    scattered = sum((np.asarray(a.words.per_gpu(cols), dtype=np.float64) * a.copies for a in layer.allreduces
                     if a.group == "tp_ff"), np.zeros(1)) / tp
    return kept + 2.0 * (out / 2.0 + np.where(sp & (tp > 1), scattered, 0.0))

