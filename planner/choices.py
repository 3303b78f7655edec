"""Enumerated command-line choices shared by every command (one definition each)."""

from enum import StrEnum


class BatchScaling(StrEnum):
    """Critical-batch law (paper App. 8.1.4, §6.3.2)."""

    paper = "paper"
    deepseek = "deepseek"
    fixed = "fixed"


class Budget(StrEnum):
    """How an inferred shape's training tokens are set (planner.workload.BUDGETS)."""

    exact = "exact"
    paper = "paper"


class ScheduleChoice(StrEnum):
    """Pipeline schedule the search may use; 'auto' lets it choose."""

    auto = "auto"
    one_f_one_b = "1f1b"
    zb_h2 = "zb-h2"


class LayoutSchedule(StrEnum):
    """The schedule of a given layout (`evaluate`)."""

    one_f_one_b = "1f1b"
    zb_h2 = "zb-h2"


class Solver(StrEnum):
    """cpsat proves optimality; exhaustive enumerates the same space."""

    cpsat = "cpsat"
    exhaustive = "exhaustive"


class Precision(StrEnum):
    """GEMM precision of a transformer workload, optionally with its low-precision recipe (Transformer Engine's
    names): 'fp8' is per-tensor current scaling, 'fp4' is NVFP4."""

    bf16 = "bf16"
    fp8 = "fp8"
    fp8_current = "fp8-current"
    fp8_delayed = "fp8-delayed"
    fp8_rowwise = "fp8-rowwise"
    fp8_blockwise = "fp8-blockwise"
    mxfp8 = "mxfp8"
    fp4 = "fp4"
    nvfp4 = "nvfp4"

    @property
    def precision_and_recipe(self) -> tuple[str, str | None]:
        """(precision, recipe): ('fp8', 'delayed') for 'fp8-delayed', ('fp8', None) for 'fp8' (the default recipe)."""
        return {"bf16": ("bf16", None), "fp8": ("fp8", None), "fp8-current": ("fp8", "current"),
                "fp8-delayed": ("fp8", "delayed"), "fp8-rowwise": ("fp8", "rowwise"),
                "fp8-blockwise": ("fp8", "blockwise"), "mxfp8": ("fp8", "mxfp8"),
                "fp4": ("fp4", None), "nvfp4": ("fp4", "nvfp4")}[self.value]


class Framework(StrEnum):
    """Training frameworks a plan can be exported to (planner.export)."""

    megatron = "megatron"
    torchtitan = "torchtitan"


class RankBy(StrEnum):
    """What a comparison of accelerators minimises (planner.compare.OBJECTIVES)."""

    cost = "cost"
    gpus = "gpus"
    days = "days"
    energy = "energy"
