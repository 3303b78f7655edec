"""The sweep document (`planner sweep --json`): every plan of a compute grid and what each hardware's curve says
(planner.sweep runs it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from planner.schema import Plan


class HardwareSummary(BaseModel):
    """What one hardware's curve says: where linear scaling ends and where feasibility ends."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    hardware: str = Field(description="Hardware name.")
    ceiling_mfu: float = Field(description="MFU, fraction (0-1), one GPU sustains: the share of peak a large GEMM "
                               "reaches (sustained / max clock under the paper's roofline): the ceiling of the curve.")
    threshold_mfu: float = Field(description="0.8 x ceiling_mfu: below it linear scaling has ended.")
    end_of_linear_scaling_flop: float | None = Field(
        description="Compute where the MFU trend (the least-squares non-increasing fit to the feasible points) "
        "crosses the threshold, log-interpolated between grid points; null if it never drops below it.")
    last_feasible_flop: float | None = Field(description="Largest grid compute with a feasible plan; null if none.")
    feasible_points: int = Field(description="Grid points with a layout.")
    infeasible_points: int = Field(description="Grid points without one.")
    first_dip_flop: float | None = Field(
        default=None, description="First compute where the raw MFU points dip below the threshold, when that is "
        "more than 1.5x below end_of_linear_scaling_flop (the curve jitters with the rounded model shapes); null "
        "otherwise.")
    unproven_points: int = Field(description="Points whose search hit the time limit: 'feasible' but not proven "
                                 "optimal, or infeasible but not proven so.")
    notes: list[str] = Field(default_factory=list, description="Caveats about this curve, one sentence each.")


class SweepResult(BaseModel):
    """A sweep: its inputs, every plan (hardware-major, compute ascending) and the per-hardware summary."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    hardware: list[str] = Field(description="Hardware names, in the order swept.")
    compute_flop: list[float] = Field(description="The log-spaced grid of requested compute, FLOP.")
    days: float = Field(description="Deadline of every plan, days.")
    sparse: bool = Field(description="Sparse (mixture-of-experts) scaling law for the inferred shapes.")
    batch_scaling: str = Field(description="Batch-size law of the inferred shapes ('paper', 'deepseek', 'fixed').")
    budget: str = Field("exact", description="How training tokens follow the inferred shape: 'exact' (the requested "
                        "compute) or 'paper' (20 N_p of the rounded shape).")
    profile: str = Field("paper", description="The execution profile that priced every plan.")
    overrides: list[str] = Field(default_factory=list, description="--set FIELD=VALUE overrides of every plan.")
    schedule: str = Field(description="Pipeline schedule asked for ('auto', '1f1b', 'zb-h2').")
    dp_overlap: bool = Field(False, description="DP all-reduce overlapped with compute in every plan (--dp-overlap).")
    price_per_gpu_hour: float | None = Field(None, description="USD per GPU-hour used for each plan's cost_usd.")
    time_limit_s: float | None = Field(description="Search time limit per plan, seconds (null: none).")
    plans: list[Plan] = Field(description="One plan per (hardware, compute), hardware-major, compute ascending; "
                              "infeasible points are Plans with status 'infeasible' and an explanation.")
    summaries: list[HardwareSummary] = Field(description="One summary per hardware, in `hardware` order.")
    end_of_linear_scaling_flop: dict[str, float | None] = Field(
        description="Hardware name -> end of linear scaling (same as in `summaries`).")
    last_feasible_flop: dict[str, float | None] = Field(
        description="Hardware name -> largest feasible compute (same as in `summaries`).")

    def plans_for(self, hardware: str) -> list[Plan]:
        k = self.hardware.index(hardware)
        n = len(self.compute_flop)
        return self.plans[k * n:(k + 1) * n]

    def summary(self, hardware: str) -> HardwareSummary:
        return self.summaries[self.hardware.index(hardware)]
