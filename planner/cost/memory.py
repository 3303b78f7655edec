"""Per-GPU memory accounting (SPEC §5.5; ZeRO-1 after paper §3.1.3). Not in the paper's results: a constraint here."""

from __future__ import annotations

import functools
import operator

import numpy as np

RESERVE_BYTES = 2e9
"""Fixed reserve per GPU for the CUDA context, communication buffers and GEMM workspace."""

WEIGHT_BYTES_PER_PARAM = 2.0  # 16-bit weights
GRAD_BYTES_PER_PARAM = 2.0  # 16-bit gradients
OPTIMIZER_BYTES_PER_PARAM = 12.0  # fp32 master copy + Adam m and v, sharded over DP (ZeRO-1)


def params_per_gpu(params: float, tp_ff, tp_model, pp, ep) -> np.ndarray:
    """Parameters held by one GPU: the model split over tensor, pipeline and expert ranks (replicated over DP)."""
    return params / (np.asarray(tp_ff, dtype=np.float64) * tp_model * pp * ep)


def activation_bytes(d_model: int, d_ff: int, layers: int, experts: int, word_bytes: int,
                     tp_ff, tp_model, pp, ep, nanobatch, in_flight) -> np.ndarray:
    """Activations kept for the backward pass on one GPU.

    Per microbatch, per layer on this stage and per expert on this GPU, each token keeps its block input sharded
    over the model group (d_model / N_TP,model words) and its hidden activation sharded over the ff group
    (d_ff / N_TP,ff words); times nanobatch tokens, times the microbatches in flight.
    """
    per_token_words = d_model / np.asarray(tp_model, dtype=np.float64) + d_ff / np.asarray(tp_ff, dtype=np.float64)
    layers_here = layers / np.asarray(pp, dtype=np.float64)
    experts_here = experts / np.asarray(ep, dtype=np.float64)
    return per_token_words * nanobatch * experts_here * layers_here * in_flight * word_bytes


def memory_components(params: float, d_model: int, d_ff: int, layers: int, experts: int, word_bytes: int,
                      dp, tp_ff, tp_model, pp, ep, nanobatch, in_flight) -> dict[str, np.ndarray]:
    """Bytes per GPU by component; `total_bytes` includes the fixed reserve."""
    p = params_per_gpu(params, tp_ff, tp_model, pp, ep)
    comp = {
        "weights_bytes": WEIGHT_BYTES_PER_PARAM * p,
        "grads_bytes": GRAD_BYTES_PER_PARAM * p,
        "optimizer_bytes": OPTIMIZER_BYTES_PER_PARAM * p / np.asarray(dp, dtype=np.float64),
        "activations_bytes": activation_bytes(d_model, d_ff, layers, experts, word_bytes,
                                              tp_ff, tp_model, pp, ep, nanobatch, in_flight),
    }
    comp["reserve_bytes"] = np.full_like(comp["weights_bytes"], RESERVE_BYTES)
    comp["total_bytes"] = functools.reduce(operator.add, comp.values())
    return comp


def layout_memory(hw, wl, cols, nanobatch, in_flight) -> dict[str, np.ndarray]:
    """Bytes per GPU by component for degree-tuple columns (planner.cost.terms.Cols), from the workload's
    operations: the parameters a GPU holds are its shards of every GEMM weight of its layers and experts; a token
    keeps `saved_words` per layer (each sharded as declared) for the backward pass."""
    from planner.cost.terms import params_per_gpu

    f = {k: np.asarray(cols[k], dtype=np.float64) for k in ("dp", "pp", "ep")}
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
    comp["reserve_bytes"] = np.full_like(comp["weights_bytes"], RESERVE_BYTES)
    comp["total_bytes"] = functools.reduce(operator.add, comp.values())
    return comp
