"""What is trained: the model shape from scaling laws or presets (`scaling`). The operations one layer of it runs
(GEMMs, collectives, point-to-point transfers, element-wise work), which the cost model prices, belong to the
Workload document itself (planner.schema.ops)."""

from planner.workload.families import families, read_family, shape_for_params, workload_for_family
from planner.workload.scaling import (
    BATCH_LAWS,
    BUDGETS,
    MAX_COMPUTE_FLOP,
    MIN_COMPUTE_FLOP,
    batch_tokens_law,
    continuous_shape,
    friendly_round,
    infer_workload,
    load_model_preset,
    model_preset_names,
    read_model_preset,
    workload_from_shape,
)

__all__ = [
    "BATCH_LAWS", "BUDGETS", "MAX_COMPUTE_FLOP", "MIN_COMPUTE_FLOP", "batch_tokens_law", "continuous_shape",
    "friendly_round", "infer_workload", "load_model_preset", "model_preset_names", "read_model_preset",
    "workload_from_shape", "families", "read_family", "shape_for_params", "workload_for_family",
]
