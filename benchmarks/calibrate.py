"""Fit the realistic profile's free values on the calibration split of validation/runs.toml (never the held-out runs).

Coordinate descent over a grid per value, minimising the mean absolute error of predicted / reported throughput on
the calibration runs; prints the fitted values and the error before and after. The fitted values are copied by hand
into profiles/realistic.toml (each marked "fitted on the calibration split"); this script changes no file.

Fields a record leaves unknown are searched by `validate` (the fastest value that fits); to keep the fit fast they are
resolved once per round under the current values (`resolve_unknowns`) and held while the round's descent runs.

    python benchmarks/calibrate.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from planner.profile import ExecutionProfile, get_profile
from planner.validation import load_runs, resolve_unknowns, split_of, summary, validate

# value -> candidate grid; 'deepspeed.*' and 'megatron-bridge.*' are those frameworks' overrides.
GRID: dict[str, list[Any]] = {
    # group-specific values first, so the shared ones below do not absorb one group's bias
    "blackwell_sustained": [round(x, 3) for x in np.arange(0.60, 1.0001, 0.025)],
    # the 500 W H100 96 GB of torchtitan's published benchmarks (hardware_specs/h100-96gb.toml)
    "h100_500w_sustained": [round(x, 3) for x in np.arange(0.35, 1.0001, 0.025)],
    # torch.compile fuses the norms, activations and residual adds: it saves element-wise traffic, never adds it
    # (a fit of 1.0 would price eager and compiled runs alike), so the grid stops short of 1
    "compiled_elementwise_fraction": [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
    # eager PyTorch's per-op dispatch (DTensor under TP) can reach milliseconds per layer
    "torchtitan.layer_overhead_s": [x * 1e-6 for x in (0, 200, 400, 600, 800, 1200, 1600, 2000, 3000)],
    # PyTorch's SDPA kernels: FlashAttention-2 reaches about 35 % of H100's peak (FlashAttention-3 paper, Shah et al.
    # 2024), FlashAttention-3 and cuDNN's 70-75 %: which one a torchtitan run got is not published
    "torchtitan.attention_fwd_fraction": [0.3, 0.35, 0.4, 0.5, 0.6, 0.7],
    "torchtitan.attention_bwd_fraction": [0.25, 0.3, 0.35, 0.4, 0.5],
    "gemm_sustained_factor": [round(x, 3) for x in np.arange(0.70, 1.0001, 0.025)],
    # per-layer launch overhead: about 50 kernels a layer at up to 8 us each bounds it at 400 us
    "layer_overhead_s": [x * 1e-6 for x in (0, 50, 100, 150, 200, 250, 300, 350, 400)],
    "attention_unfused_fraction": [0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7],
    "overlap_pp": [0.0, 0.25, 0.5, 0.75, 1.0],
    # --tp-comm-overlap / async TP exist to hide TP traffic: at least half of it (a fit of 0 would price runs with
    # and without the overlap alike)
    "overlap_tp_comm": [0.5, 0.6, 0.75, 0.9, 1.0],
    "overlap_cp": [0.0, 0.25, 0.5, 0.75, 1.0],
    "dp_exposed": [0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0],
    "overlap_zero": [0.0, 0.25, 0.5, 0.75, 1.0],
    "deepspeed.overlap_zero": [0.0, 0.25, 0.5, 0.75, 1.0],
    "deepspeed.zero_flat": [False, True],
    # Megatron-Bridge's recipes overlap the EP all-to-all (only its MoE runs move this value).
    "megatron-bridge.overlap_ep": [0.0, 0.25, 0.5, 0.75, 1.0],
    # Runs whose recipe turns on Megatron's overlap_moe_expert_parallel_comm (records' ep_comm_overlap).
    "overlap_ep_comm": [0.0, 0.25, 0.5, 0.6, 0.75, 0.9, 1.0],
    # Host-bound floor of eagerly launched MoE layers (records' cuda_graph_impl = 'none'): CPU seconds to issue one
    # MoE layer's forward and backward kernels for one microbatch (docs/model.md §1c); 0 prices no floor.
    "host_eager_moe_layer_s": [x * 1e-3 for x in (0, 2, 4, 6, 8, 9, 10, 10.5, 11, 12, 14)],
}


H100_500W = "H100 SXM5 96GB"
"""The GPU name of hardware_specs/h100-96gb.toml."""


def apply(base: ExecutionProfile, values: dict[str, Any]) -> ExecutionProfile:
    update: dict[str, Any] = {}
    frameworks = {k: dict(v) for k, v in base.frameworks.items()}
    for key, value in values.items():
        if key == "blackwell_sustained":
            update["gemm_sustained_by_family"] = {**update.get("gemm_sustained_by_family",
                                                                  base.gemm_sustained_by_family),
                                                  "B200": value, "B300": value}
        elif key == "h100_500w_sustained":
            update["gemm_sustained_by_family"] = {**update.get("gemm_sustained_by_family",
                                                                  base.gemm_sustained_by_family),
                                                  H100_500W: value}
        elif "." in key:
            fw, field = key.split(".", 1)
            frameworks.setdefault(fw, {})[field] = value
        else:
            update[key] = value
    return base.model_copy(update={**update, "frameworks": frameworks})


def current(base: ExecutionProfile) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in GRID:
        if key == "blackwell_sustained":
            out[key] = base.gemm_sustained_by_family.get("B200", base.gemm_sustained_factor)
        elif key == "h100_500w_sustained":
            out[key] = base.gemm_sustained_by_family.get(H100_500W, base.gemm_sustained_factor)
        elif "." in key:
            fw, field = key.split(".", 1)
            out[key] = base.frameworks.get(fw, {}).get(field, getattr(base, field))
        else:
            out[key] = getattr(base, key)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=sorted(GRID), metavar="KEY",
                    help="fit only these values (the others stay as the profile has them): a refit after a change "
                    "that moves few of them")
    args = ap.parse_args()
    grid = {k: v for k, v in GRID.items() if args.only is None or k in args.only}
    all_runs = [r for r in load_runs() if split_of(r.id) == "calibration"]
    base = get_profile("realistic")
    runs = all_runs

    def error(values: dict[str, Any]) -> float:
        rows = validate(runs, apply(base, values))
        return summary(rows)["calibration"]["mean_abs_error"]

    values = current(base)
    start = time.perf_counter()
    print(f"calibration runs: {len(all_runs)}; start: mean abs error "
          f"{summary(validate(all_runs, base))['calibration']['mean_abs_error']:.4f} with {values}")
    for rnd in range(args.rounds):
        runs = resolve_unknowns(all_runs, apply(base, values))
        best = error(values)
        changed = False
        for key, cands in grid.items():
            for cand in cands:
                if cand == values[key]:
                    continue
                trial = {**values, key: cand}
                e = error(trial)
                if e < best - 1e-6:
                    best, values, changed = e, trial, True
            print(f"  round {rnd + 1}: {key} = {values[key]} -> {best:.4f}")
        if not changed:
            break
    final = summary(validate(all_runs, apply(base, values)))["calibration"]["mean_abs_error"]
    print(f"fitted ({time.perf_counter() - start:.0f} s): mean abs error {final:.4f} (unknowns searched again)")
    for key, value in values.items():
        print(f"  {key} = {value}")


if __name__ == "__main__":
    main()
