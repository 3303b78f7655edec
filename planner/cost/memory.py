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
"""How the optimizer state is split: over the data-parallel ranks (weights and gradients are not)."""
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


def _transformer_memory(hw: Hardware, wl: Workload, cols, nanobatch, in_flight, f, layers_here, params):
    """A transformer's busiest device (docs/model.md §7b): its i c layers (an end stage holds no more), the larger
    of the embedding and LM-head shards; optimizer state of dense weights sharded over N_DP N_EP ranks and of expert
    weights over N_DP (Megatron's distributed optimizer over each weight's data-parallel group). Activations: the
    first stage holds the most microbatches in flight, the last one microbatch plus the logits."""
    mo = wl.model_ops
    assert mo is not None
    dense, expert = params
    p = dense + expert
    per_token = mo.layer.saved_words_per_token(cols) + mo.top_k * sum(
        (np.asarray(d.per_gpu(cols), dtype=np.float64) for d in mo.layer.routed_saved_words), np.zeros(1))
    one_mb = per_token * nanobatch * layers_here * hw.gpu.word_bytes
    logits = mo.head.saved_words_per_token(cols) * nanobatch * hw.gpu.word_bytes
    acts = np.where(f["pp"] == 1, one_mb + logits, np.maximum(one_mb * in_flight, one_mb + logits))
    return {
        "weights_bytes": WEIGHT_BYTES_PER_PARAM * p,
        "grads_bytes": GRAD_BYTES_PER_PARAM * p,
        "optimizer_bytes": OPTIMIZER_BYTES_PER_PARAM * (dense / (f["dp"] * f["ep"]) + expert / f["dp"]),
        "activations_bytes": acts,
    }
