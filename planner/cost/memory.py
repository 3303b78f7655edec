"""Per-GPU memory accounting (docs/model.md §7; ZeRO-1 after paper §3.1.3). Not in the paper's results: a constraint
here. The state bytes per parameter and the optimizer sharding are named once below; reports read them from here."""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping

import numpy as np

from planner.schema import Hardware, Workload

RESERVE_BYTES = 2e9
"""Fixed reserve per GPU for the CUDA context, communication buffers and GEMM workspace."""

WEIGHT_BYTES_PER_PARAM = 2.0  # 16-bit weights
GRAD_BYTES_PER_PARAM = 2.0  # 16-bit gradients
OPTIMIZER_BYTES_PER_PARAM = 12.0  # fp32 master copy + Adam m and v, sharded over DP (ZeRO-1)
OPTIMIZER_SHARDING = "ZeRO-1"
"""The paper's toy model: the optimizer state is split over the data-parallel ranks (weights and gradients are
not). A transformer's layout chooses its ZeRO stage (the `zero` option)."""
STATE_BYTES_PER_PARAM = WEIGHT_BYTES_PER_PARAM + GRAD_BYTES_PER_PARAM + OPTIMIZER_BYTES_PER_PARAM
"""Weights, gradients and optimizer state per parameter: a lower bound on bytes per parameter over all GPUs."""


def layout_memory(hw: Hardware, wl: Workload, cols: Mapping[str, np.ndarray], nanobatch, in_flight
                  ) -> dict[str, np.ndarray]:
    """Bytes per GPU by component for degree-tuple columns (planner.cost.terms.Cols), from the workload's
    operations: the parameters a GPU holds are its shards of every GEMM weight of its layers and experts; a token
    keeps `saved_words` per layer (each sharded as declared) for the backward pass."""
    from planner.cost.terms import device_layers, params_per_gpu, split_params_per_gpu

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
        comp = _transformer_memory(hw, wl, cols, nanobatch, in_flight, f, device_layers(wl, cols),
                                   split_params_per_gpu(wl, cols))
    comp["reserve_bytes"] = np.full_like(comp["weights_bytes"], RESERVE_BYTES)
    comp["total_bytes"] = functools.reduce(operator.add, comp.values())
    return comp


KEPT_ROLES: dict[int, tuple[str, ...]] = {
    0: ("input", "gemm_input", "core", "other"),  # no recomputation: everything
    1: ("input", "gemm_input", "other"),  # selective: the attention core's own tensors are recomputed
    2: ("input",),  # full: only each layer's input
}
"""Roles of the kept tensors (planner.workload.ops.Saved) each recomputation level keeps, by its value."""

ZERO_TRANSIENT_WEIGHTS = 2
"""ZeRO-3 gathers each weight matrix just before its GEMM while the next one is prefetched: two of the layer's
largest weight shards, unsharded over the data-parallel ranks, are resident at once (DeepSpeed gathers per
parameter, capped by stage3_max_live_parameters; FSDP per wrapped block holds more, so this is the lighter
convention: docs/model.md §7b). ZeRO-2 and -3 also hold one such matrix's full gradient before its
reduce-scatter."""


def sharding_degrees(cols) -> tuple[np.ndarray, np.ndarray]:
    """(dense, expert) data-parallel ranks a weight's optimizer state (and, under ZeRO-2/3, gradients and weights) is
    sharded over: N_DP N_EP N_CP for dense weights, N_DP N_CP for expert weights (Megatron's distributed optimizer
    over each weight's data-parallel group, context-parallel ranks included)."""
    f = {k: np.asarray(cols[k], dtype=np.float64) for k in ("dp", "ep", "cp")}
    if "etp" in cols:  # a folded expert layout: expert weights over N_EDP (planner.cost.terms.expert_dp)
        tp = np.asarray(cols["tp_ff"], dtype=np.float64) * np.asarray(cols["tp_model"], dtype=np.float64)
        folded = np.asarray(cols["expert_ep"], dtype=np.float64) * np.asarray(cols["etp"], dtype=np.float64)
        return f["dp"] * f["ep"] * f["cp"], f["dp"] * f["ep"] * f["cp"] * tp / folded
    return f["dp"] * f["ep"] * f["cp"], f["dp"] * f["cp"]


def _transformer_memory(hw: Hardware, wl: Workload, cols, nanobatch, in_flight, f, layers_here, params):
    """A transformer's busiest device (docs/model.md §7b): its i c layers (an end stage holds no more), the larger
    of the embedding and LM-head shards. ZeRO-1 shards the optimizer state, ZeRO-2 also the gradients, ZeRO-3 also
    the weights, over each weight's data-parallel ranks (`sharding_degrees`); ZeRO-2/3 hold one weight matrix's full
    gradient and ZeRO-3 two full weight matrices transiently (ZERO_TRANSIENT_WEIGHTS). Activations: the tensors the
    recomputation level keeps (KEPT_ROLES), each per token (sequence parallelism shards those outside the TP
    regions, FP8 keeps GEMM inputs in one byte); the first stage holds the most microbatches in flight, the last one
    microbatch plus the logits; full recomputation adds one layer's whole set for the layer being recomputed."""
    mo = wl.model_ops
    assert mo is not None
    dense, expert = params
    p = dense + expert
    n_dense, n_expert = sharding_degrees(cols)
    zero = np.asarray(cols["zero"], dtype=np.int64)
    recompute = np.asarray(cols["recompute"], dtype=np.int64)
    fp8 = wl.precision != "bf16"  # FP8 and FP4 recipes keep GEMM inputs in (at most) one byte
    shard = dense / n_dense + expert / n_expert
    largest = np.zeros(len(zero))
    for g in (*mo.layer.gemms, *mo.head.gemms):
        largest = np.maximum(largest, np.asarray(g.out.per_gpu(cols), dtype=np.float64) * g.inp.per_gpu(cols))
    weights = np.where(zero >= 3, WEIGHT_BYTES_PER_PARAM * (shard + ZERO_TRANSIENT_WEIGHTS * largest),
                       WEIGHT_BYTES_PER_PARAM * p)
    grads = np.where(zero >= 2, GRAD_BYTES_PER_PARAM * (shard + largest), GRAD_BYTES_PER_PARAM * p)

    def per_token(roles: tuple[str, ...]) -> np.ndarray:
        return (mo.layer.saved_bytes_per_token(cols, roles, fp8)
                + mo.top_k * mo.layer.saved_bytes_per_token(cols, roles, fp8, routed=True))

    kept = np.zeros(len(zero))
    for level, roles in KEPT_ROLES.items():
        kept = np.where(recompute == level, per_token(roles), kept)
    whole_layer = per_token(KEPT_ROLES[0]) * nanobatch
    one_mb = kept * nanobatch * layers_here + np.where(recompute == 2, whole_layer, 0.0)
    logits = mo.head.saved_bytes_per_token(cols) * nanobatch
    acts = np.where(f["pp"] == 1, one_mb + logits,
                    np.maximum(one_mb * in_flight, one_mb + logits))
    return {
        "weights_bytes": weights,
        "grads_bytes": grads,
        "optimizer_bytes": OPTIMIZER_BYTES_PER_PARAM * shard,
        "activations_bytes": acts,
    }
