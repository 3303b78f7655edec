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
    """GEMM precision of a transformer workload."""

    bf16 = "bf16"
    fp8 = "fp8"


class Framework(StrEnum):
    """Training frameworks a plan can be exported to (planner.export)."""

    megatron = "megatron"
    torchtitan = "torchtitan"
