"""Step time (paper Eq. 21 plus the critical-path latency floor of SPEC §5.4), run time and MFU.

`step_arrays` is the single implementation of the cost model over many layouts at once; the scalar
`evaluate` (used by the CLI, the API and the solvers' decoders) calls it with one row, and both solvers
tabulate their costs through it, so a layout always has exactly one price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from planner.cost import memory as mem
from planner.cost import network as net
from planner.cost.matmul import matmul_time_s
from planner.cost.pipeline import bubble_fraction, microbatches_in_flight
from planner.schema import (
    DEGREES,
    Evaluation,
    Hardware,
    Layout,
    MemoryBreakdown,
    StepBreakdown,
    Workload,
)

SECONDS_PER_DAY = 86400.0


@dataclass
class LayoutBatch:
    """Many layouts as parallel numpy arrays (one row per layout). `placement[d]` has shape (n, H)."""

    dp: np.ndarray
    tp_ff: np.ndarray
    tp_model: np.ndarray
    pp: np.ndarray
    interleave: np.ndarray
    ep: np.ndarray
    microbatches: np.ndarray
    zero_bubble: np.ndarray
    placement: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_layouts(cls, layouts: list[Layout]) -> "LayoutBatch":
        def col(name):
            return np.array([getattr(l, name) for l in layouts], dtype=np.int64)

        return cls(
            dp=col("dp"), tp_ff=col("tp_ff"), tp_model=col("tp_model"), pp=col("pp"),
            interleave=col("interleave"), ep=col("ep"), microbatches=col("microbatches"),
            zero_bubble=np.array([l.schedule == "zb-h2" for l in layouts]),
            placement={d: np.array([l.placement[d] for l in layouts], dtype=np.int64) for d in DEGREES},
        )

    @property
    def gpus(self) -> np.ndarray:
        return self.dp * self.tp_ff * self.tp_model * self.pp * self.ep


def nanobatch_tokens(wl: Workload, dp, microbatches) -> np.ndarray:
    """b' = b / (E N_DP m): tokens per expert per microbatch per data-parallel rank (Eq. 7, footnote 11)."""
    return wl.batch_tokens / (wl.experts * np.asarray(dp, dtype=np.float64) * microbatches)


def block_matmul_s(hw: Hardware, wl: Workload, tp_ff, tp_model, nanobatch) -> tuple[np.ndarray, np.ndarray]:
    """GEMM time of one expert of one MLP block for one nanobatch on one GPU (App. 8.1.1).

    The two weight shards are (d_ff/N_TP,ff) x (d_model/N_TP,model) and its transpose. Forward and activation
    gradient each run both matrices; the weight gradient runs both too. Returns (all six GEMMs, the four on the
    critical path: forward + activation gradient; weight gradients can be deferred).
    """
    g = hw.gpu
    f = wl.d_ff / np.asarray(tp_ff, dtype=np.float64)
    d = wl.d_model / np.asarray(tp_model, dtype=np.float64)
    up = matmul_time_s(g, f, d, nanobatch)  # W1: d_model -> d_ff
    down = matmul_time_s(g, d, f, nanobatch)  # W2: d_ff -> d_model
    wgrad = matmul_time_s(g, f, d, nanobatch, weight_grad=True) + matmul_time_s(g, d, f, nanobatch, weight_grad=True)
    critical = 2.0 * (up + down)
    return critical + wgrad, critical


def step_arrays(hw: Hardware, wl: Workload, lb: LayoutBatch, dp_overlap: bool = False,
                block_s: np.ndarray | None = None, block_critical_s: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The cost model for every row of `lb`. Returns arrays of seconds per step and bytes per GPU.

    `block_s` / `block_critical_s` may be passed in when the caller has tabulated `block_matmul_s` for the rows'
    (N_TP,ff, N_TP,model, nanobatch) shapes; they must equal what `block_matmul_s` returns.
    """
    g = hw.gpu
    wb = g.word_bytes
    bw = np.array([lvl.bw_unidir_Bps for lvl in hw.levels])
    lat = np.array([lvl.lat_s for lvl in hw.levels])
    L, E, dm, dff, b = wl.layers, wl.experts, wl.d_model, wl.d_ff, wl.batch_tokens

    dp = lb.dp.astype(np.float64)
    tf = lb.tp_ff.astype(np.float64)
    tm = lb.tp_model.astype(np.float64)
    pp = lb.pp.astype(np.float64)
    ep = lb.ep.astype(np.float64)
    m = lb.microbatches.astype(np.float64)
    n_gpu = dp * tf * tm * pp * ep
    pl = lb.placement

    bn = nanobatch_tokens(wl, dp, m)
    if block_s is None or block_critical_s is None:
        block_s, block_critical_s = block_matmul_s(hw, wl, tf, tm, bn)
    layers_here = L / pp
    experts_here = E / ep

    # GEMMs: every microbatch, every layer of this stage, every expert on this GPU (App. 8.1.1).
    t_matmul = m * layers_here * experts_here * block_s

    # Tensor parallelism (Table 1, §3.1.4): per token per layer, forward and backward, an all-reduce of the
    # d_ff/N_TP,ff-word partial output over the model group and of the d_model/N_TP,model-word one over the ff group.
    tokens_here = b / (dp * ep)  # tokens through this GPU per layer per step
    tp_words_ff = 2.0 * layers_here * tokens_here * dff / tf
    tp_words_model = 2.0 * layers_here * tokens_here * dm / tm
    t_tp = (net.allreduce_time_s(tp_words_ff, pl["tp_model"], bw, wb)
            + net.allreduce_time_s(tp_words_model, pl["tp_ff"], bw, wb))

    # Pipeline + expert point-to-point (App. 8.1.2): d_model words per token at each crossing interface, forward
    # and backward, at the joint level; total traffic spread evenly over all GPUs; levels overlap.
    p_pp = net.pp_frequencies(pl["pp"], lb.interleave, L)
    p_ep = net.ep_frequencies(pl["ep"])
    p_joint = net.p2p_frequencies(p_pp, p_ep)[:, 1:]
    p2p_words = 2.0 * b * max(L - 1, 0) * dm * p_joint / n_gpu[:, None]
    t_p2p = (p2p_words * wb / bw[None, :]).max(axis=1)

    # Data parallelism (§3.1.3): all-reduce of this GPU's shard of the gradients once per step.
    shard_words = wl.params / (tf * tm * pp * ep)
    t_dp = net.allreduce_time_s(shard_words, pl["dp"], bw, wb)
    lat_dp = net.allreduce_latency_s(pl["dp"], lat)

    # Serial latencies of one microbatch through all L blocks, both directions (§4.3, App. 8.1.2).
    lat_tp_layer = net.allreduce_latency_s(pl["tp_model"], lat) + net.allreduce_latency_s(pl["tp_ff"], lat)
    lat_p2p = net.p2p_latency_per_pass_s(pl["pp"], lb.interleave, pl["ep"], L, lat)
    lat_path = 2.0 * (L * lat_tp_layer + lat_p2p)
    critical_path = L * experts_here * block_critical_s + lat_path

    zb = lb.zero_bubble.astype(bool)
    f_b = bubble_fraction(pp, lb.interleave, m, zb)
    # Under 1F1B each GPU waits out its share (1/N_PP of the layers) of every microbatch's serial latency;
    # under ZB-H2 those latencies hide behind other microbatches' work (App. 8.1.5) but the floor below holds.
    lat_model = np.where(zb, 0.0, m / pp * lat_path)
    t_lat = lat_dp + lat_model

    t_ndp_y = t_tp + t_p2p
    t_dp_n, t_dp_y = (np.zeros_like(t_dp), t_dp) if dp_overlap else (t_dp, np.zeros_like(t_dp))
    busy = np.maximum(t_matmul, t_ndp_y)
    pipelined = busy / (1.0 - f_b)
    eq21 = t_lat + t_dp_n + np.maximum(t_dp_y, pipelined)
    floor = lat_dp + t_dp_n + critical_path
    step = np.maximum(eq21, floor)
    network = t_tp + t_p2p + t_dp + lat_dp + m / pp * lat_path

    in_flight = microbatches_in_flight(pp, lb.interleave, m, zb)
    memc = mem.memory_components(wl.params, dm, dff, L, E, wb, dp, tf, tm, pp, ep, bn, in_flight)

    return {
        "gpus": n_gpu, "nanobatch": bn, "matmul_s": t_matmul, "tp_s": t_tp, "pp_ep_s": t_p2p, "dp_s": t_dp,
        "latency_s": t_lat, "latency_dp_s": lat_dp, "bubble_fraction": f_b, "bubble_s": pipelined - busy,
        "critical_path_s": critical_path, "eq21_s": eq21, "floor_s": floor, "step_s": step, "network_s": network,
        **memc,
    }


def run_seconds(wl: Workload, step_s):
    """t_run = (D / b) t_step (App. 8.1.5)."""
    return wl.steps * step_s


def mfu(hw: Hardware, wl: Workload, gpus, step_s):
    """MFU = T / (N_GPU * peak FLOP/s * t_run), T = 6 N_active D, peak at max clock (SPEC §4)."""
    return wl.compute_flop / (gpus * hw.gpu.peak_flops * run_seconds(wl, step_s))


def bottleneck(row: dict[str, float]) -> str:
    """Name, in words, what sets the step time of one evaluated layout."""
    step = row["step_s"]
    if row["floor_s"] > row["eq21_s"]:
        return (f"latency floor: one microbatch's serial path through all layers "
                f"({row['critical_path_s'] / step:.0%} of the step) exceeds the pipelined time")
    parts = {
        "matmul (GEMM compute / on-chip memory)": row["matmul_s"],
        "overlapped TP/PP/EP network bandwidth": row["tp_s"] + row["pp_ep_s"],
    }
    busy_name = max(parts, key=parts.get)
    shares = {
        busy_name: max(parts.values()),
        "pipeline bubble": row["bubble_s"],
        "data-parallel all-reduce": row["dp_s"],
        "serial network latency": row["latency_s"],
    }
    name = max(shares, key=shares.get)
    return f"{name} ({shares[name] / step:.0%} of the step)"


def nodes_for(hw: Hardware, gpus: int) -> int:
    return math.ceil(gpus / hw.gpus_per_node)


def evaluate(hw: Hardware, wl: Workload, layout: Layout, dp_overlap: bool = False) -> Evaluation:
    """Run one layout through the cost model (no feasibility judgement; see planner.parallel.space.check_layout)."""
    if len(next(iter(layout.placement.values()))) != len(hw.levels):
        raise ValueError(f"layout has factors for {len(next(iter(layout.placement.values())))} network levels but "
                         f"{hw.name} has {len(hw.levels)}")
    arr = step_arrays(hw, wl, LayoutBatch.from_layouts([layout]), dp_overlap=dp_overlap)
    row = {k: float(v[0]) for k, v in arr.items()}
    step = StepBreakdown(**{k: row[k] for k in StepBreakdown.model_fields})
    memory = MemoryBreakdown(**{k: row[k] for k in MemoryBreakdown.model_fields if k != "capacity_bytes"},
                             capacity_bytes=hw.gpu.hbm_bytes)
    t_run = run_seconds(wl, row["step_s"])
    return Evaluation(
        layout=layout, gpus=layout.gpus, nodes=nodes_for(hw, layout.gpus), step=step, memory=memory,
        training_s=t_run, training_days=t_run / SECONDS_PER_DAY,
        mfu=mfu(hw, wl, layout.gpus, row["step_s"]), bottleneck=bottleneck(row),
    )
