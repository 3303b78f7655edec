"""Step time, run time and MFU of layouts: the float reading of planner.cost.terms (paper Eq. 21 and the
critical-path floor, docs/model.md §6), plus memory.

`step_arrays` prices many layouts at once; the scalar `evaluate` (CLI, API, the searches' decoders) calls it with
one row. The searches read the same terms (bounds, CP-SAT tables), so a layout has exactly one price.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from planner.cost import memory as mem
from planner.cost import terms
from planner.cost.pipeline import microbatches_in_flight
from planner.economics import fmt_pct
from planner.parallel.dimensions import DEGREES
from planner.parallel.space import Tuples
from planner.schema import (
    Evaluation,
    Hardware,
    Layout,
    MemoryBreakdown,
    OpTime,
    StepBreakdown,
    Workload,
)

SECONDS_PER_DAY = 86400.0


def step_arrays(hw: Hardware, wl: Workload, cols: terms.Cols, factors: terms.Factors, dp_overlap: bool = False,
                shape: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The float reading of planner.cost.terms for every row: seconds per step by component and bytes per GPU.

    `cols` are degree-tuple columns (planner.parallel.space.Tuples), `factors` each degree's factor vectors, `shape`
    the rows' planner.cost.terms.shape_times when the caller has them tabulated.
    """
    q = terms.tuple_quantities(hw, wl, cols, shape)
    out = terms.price(hw, wl, cols, factors, dp_overlap, q)
    in_flight = microbatches_in_flight(cols["pp"], cols["interleave"], cols["microbatches"], cols["zero_bubble"])
    return {"gpus": terms.gpus_of(cols), **out, **mem.layout_memory(hw, wl, cols, q["nanobatch"], in_flight)}


def run_seconds(wl: Workload, step_s):
    """t_run = (D / b) t_step (App. 8.1.5)."""
    return wl.steps * step_s


def peak_flops(hw: Hardware, wl: Workload) -> float:
    """MFU's denominator: the dense peak at max clock in the workload's GEMM precision (FP8 runs against the FP8
    peak, so that MFU stays a fraction of what the hardware can do)."""
    low = hw.gpu.at_precision(wl.precision) if wl.transformer is not None else None
    return low.peak_flops if low is not None else hw.gpu.peak_flops


def mfu(hw: Hardware, wl: Workload, gpus, step_s):
    """MFU = T / (N_GPU * peak FLOP/s * t_run), T = model FLOPs (toy: 6 N_active D; transformer: Workload
    .flop_convention), peak at max clock in the workload's precision (docs/model.md §6, §7b)."""
    return wl.compute_flop / (gpus * peak_flops(hw, wl) * run_seconds(wl, step_s))


def bottleneck(row: dict[str, float]) -> str:
    """Name, in words, what sets the step time of one evaluated layout."""
    step = row["step_s"]
    if row["floor_s"] > row["eq21_s"]:
        return (f"latency floor: one microbatch's serial path through all layers "
                f"({fmt_pct(row['critical_path_s'] / step)} of the step) exceeds the pipelined time")
    if row.get("branch_host", 0.0) >= row["eq21_s"] > 0.0:
        return ("host-bound floor: the CPU issuing every MoE layer's kernels of every microbatch "
                f"({fmt_pct(row['branch_host'] / step)} of the step)")
    comm = row["tp_s"] + row["pp_ep_s"] + row.get("zero_s", 0.0)
    name = ("overlapped ZeRO-2/3 reduce-scatter / all-gather traffic" if row.get("zero_s", 0.0) > comm / 2
            else "overlapped TP/PP/EP network bandwidth")
    parts = {"matmul (GEMM compute / on-chip memory)": row["matmul_s"], name: comm}
    if row.get("cp_s", 0.0) > 0 and row.get("branch_context", 0.0) >= max(row.get("branch_gemm", 0.0),
                                                                          row.get("branch_network", 0.0)):
        parts["context-parallel key/value exchange beyond the attention kernels"] = row["cp_s"]
    busy_name = max(parts, key=parts.__getitem__)
    shares = {
        busy_name: max(parts.values()),
        "exposed TP/PP/EP/ZeRO communication": row.get("exposed_comm_s", 0.0),
        "optimizer step": row.get("optimizer_s", 0.0),
        "pipeline bubble": row["bubble_s"],
        "data-parallel all-reduce": row["dp_s"],
        "serial network latency": row["latency_s"],
    }
    name = max(shares, key=shares.__getitem__)
    return f"{name} ({fmt_pct(shares[name] / step)} of the step)"


def nodes_for(hw: Hardware, gpus: int) -> int:
    return math.ceil(gpus / hw.gpus_per_node)


def evaluate(hw: Hardware, wl: Workload, layout: Layout, dp_overlap: bool = False) -> Evaluation:
    """Run one layout through the cost model (no feasibility judgement; see planner.parallel.space.check_layout)."""
    if len(next(iter(layout.placement.values()))) != len(hw.levels):
        raise ValueError(f"layout has factors for {len(next(iter(layout.placement.values())))} network levels but "
                         f"{hw.name} has {len(hw.levels)}")
    factors = {d: np.array([layout.placement[d]], dtype=np.int64) for d in DEGREES}
    arr = step_arrays(hw, wl, Tuples.from_layouts([layout]), factors, dp_overlap=dp_overlap)
    row = {k: float(v[0]) for k, v in arr.items()}
    step = StepBreakdown(**{k: row[k] for k in StepBreakdown.model_fields})
    memory = MemoryBreakdown(**{k: row[k] for k in MemoryBreakdown.model_fields if k != "capacity_bytes"},
                             capacity_bytes=mem.capacity_bytes(hw))
    t_run = run_seconds(wl, row["step_s"])
    ops = [OpTime(name=n, kind=k, where=w, seconds=float(np.asarray(t).ravel()[0]))
           for n, k, w, t in terms.op_breakdown(hw, wl, Tuples.from_layouts([layout]))]
    util = mfu(hw, wl, layout.gpus, row["step_s"])
    hardware = 1.0 + wl.recompute_flop_per_token(layout.recompute) / wl.model_flop_per_token
    return Evaluation(
        layout=layout, gpus=layout.gpus, nodes=nodes_for(hw, layout.gpus), step=step, memory=memory,
        training_s=t_run, training_days=t_run / SECONDS_PER_DAY,
        mfu=util, hfu=util * hardware, bottleneck=bottleneck(row), nanobatch_tokens=row["nanobatch"], ops=ops,
    )
