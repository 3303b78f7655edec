"""Derive the row-wise FP8 recipe's effective element-wise bytes from torchao's measured per-shape speed-ups.

Source: torchao's float8 README, "Rowwise scaling" (docs/static/fp8-rowwise-perf.png, pytorch/ao PR 2312, commit
fdddb2cf, 2025-06-06; unchanged at 6243040, the torchao of torchtitan's June 2025 runs): "Speedup observed vs
bfloat16 for LayerNorm -> Linear -> Sigmoid fwd + bwd by forward M, K, N, dynamic row-wise scaling, PyTorch version
2.8.0a0+git48807d5", one H100, compiled (benchmarks/float8/float8_roofline.py --enable_fusion_modeling: GPU kernel
time of the subgraph's forward and backward, BF16 over float8). The table is an image; its 216 speed-ups are
transcribed below (M, K, then N = 1,024 ... 32,768).

The model prices one such subgraph the way it prices a layer (planner.cost.terms.Rates, realistic profile, H100 SXM
80 GB: the README does not name the H100 variant, Meta's development H100s are the SXM part):

    BF16  = 3 BF16 GEMMs + LayerNorm and sigmoid forward and backward (10 B per element each: read 2 + write 2
            forward, read 4 + write 2 backward)
    float8 = 3 FP8 GEMMs (the recipe's rate) + the same LayerNorm and sigmoid
             + (q (M K + M N) + r (M K + K N) + 10 K N) / element-wise bandwidth

q: bytes per element of the recipe's casts of the input (M x K) and the output gradient (M x N); r: bytes per
element of the backward rescales of the input gradient (M x K) and the weight gradient (K x N); 10 B per weight
element: torchao's roofline weight casts (the weight is cast in every forward, unlike a step's priced once).
torchao's measured float8 time (BF16 time over the measured speed-up) then gives each shape's measured overhead,
linear in q and r, and (q, r) are its least squares in relative terms (each shape weighted by its float8 time) over
the shapes with M >= 16,384 (the runs priced with this recipe have 98,304-131,072 tokens per rank; smaller M adds
launch and tail effects the byte count does not model). Nothing here sees a validation run.

    python benchmarks/rowwise_linear.py    # prints (q, r) and each shape's measured / modelled speed-up
"""

from __future__ import annotations

import numpy as np

from planner.api import resolve
from planner.cost.terms import Rates

NS = (1024, 2048, 4096, 8192, 16384, 32768)
M_MIN = 16384
WEIGHT_CAST_BYTES = 10.0  # torchao roofline_utils.py, recipe 'rowwise', weight: (2 + 1) + (2 + 2) + (2 + 1)
ELEMENTWISE_BYTES = 10.0  # LayerNorm / sigmoid, per element, forward (2 + 2) and backward (4 + 2)

# torchao docs/static/fp8-rowwise-perf.png: M, K, speed-up at N = 1,024 ... 32,768
SPEEDUPS = """
1024 1024 0.42 0.42 0.50 0.51 0.56 0.56
1024 2048 0.40 0.38 0.42 0.50 0.50 0.56
1024 4096 0.48 0.43 0.46 0.53 0.57 0.60
1024 8192 0.45 0.48 0.54 0.62 0.60 0.62
1024 16384 0.46 0.48 0.54 0.60 0.60 0.61
1024 32768 0.45 0.50 0.55 0.60 0.62 0.65
2048 1024 0.43 0.43 0.48 0.55 0.62 0.65
2048 2048 0.38 0.45 0.58 0.65 0.72 0.75
2048 4096 0.43 0.50 0.68 0.78 0.81 0.82
2048 8192 0.46 0.58 0.73 0.82 0.87 0.89
2048 16384 0.48 0.62 0.75 0.83 0.84 0.85
2048 32768 0.50 0.64 0.75 0.84 0.83 0.99
4096 1024 0.45 0.47 0.57 0.66 0.72 0.76
4096 2048 0.43 0.53 0.70 0.83 0.90 0.91
4096 4096 0.44 0.64 0.84 1.01 1.01 1.04
4096 8192 0.53 0.72 0.91 1.01 1.07 1.13
4096 16384 0.53 0.74 0.92 1.05 1.10 1.18
4096 32768 0.54 0.75 0.93 1.02 1.17 1.18
8192 1024 0.48 0.52 0.65 0.77 0.83 0.84
8192 2048 0.45 0.64 0.82 1.01 1.03 1.06
8192 4096 0.52 0.76 1.00 1.13 1.17 1.19
8192 8192 0.59 0.85 1.05 1.20 1.31 1.41
8192 16384 0.58 0.82 1.03 1.22 1.37 1.40
8192 32768 0.59 0.82 1.04 1.30 1.36 1.46
16384 1024 0.48 0.58 0.73 0.86 0.85 0.89
16384 2048 0.51 0.70 0.90 1.05 1.07 1.15
16384 4096 0.57 0.79 1.02 1.20 1.26 1.40
16384 8192 0.61 0.87 1.08 1.33 1.39 1.49
16384 16384 0.59 0.83 1.07 1.34 1.42 1.55
16384 32768 0.60 0.85 1.16 1.35 1.48 1.72
32768 1024 0.51 0.62 0.77 0.87 0.88 0.94
32768 2048 0.54 0.73 0.91 1.08 1.14 1.27
32768 4096 0.59 0.81 1.04 1.28 1.35 1.49
32768 8192 0.63 0.87 1.11 1.41 1.50 1.62
32768 16384 0.60 0.83 1.16 1.39 1.49 1.73
32768 32768 0.63 0.93 1.16 1.48 1.70 1.52
"""


def measured() -> dict[tuple[int, int, int], float]:
    """(M, K, N) -> torchao's measured speed-up of the row-wise float8 subgraph over BF16."""
    out: dict[tuple[int, int, int], float] = {}
    for line in SPEEDUPS.strip().splitlines():
        m, k, *sp = line.split()
        out.update({(int(m), int(k), n): float(s) for n, s in zip(NS, sp, strict=True)})
    return out


def _gemms_s(r: Rates, m: int, k: int, n: int) -> float:
    """The Linear's three GEMMs (forward out = N x M from K inputs; arguments as Rates.gemm)."""
    return float(r.gemm_pass(n, k, m, "fprop") + r.gemm_pass(k, n, m, "dgrad") + r.gemm_pass(n, k, m, "wgrad"))


def derive(m_min: int = M_MIN) -> tuple[float, float, float]:
    """(q, r, mean |modelled / measured speed-up - 1|) over the shapes with M >= m_min."""
    hw = resolve("h100", "realistic")
    bf16 = Rates(hw)
    fp8 = Rates(hw, precision="fp8", recipe=hw.profile.recipe("rowwise"), recipe_name="rowwise")
    bw = bf16.hbm_Bps
    rows, target, weight, base = [], [], [], []
    for (m, k, n), speedup in measured().items():
        if m < m_min:
            continue
        ew = ELEMENTWISE_BYTES * (m * k + m * n) / bw
        t_bf16 = _gemms_s(bf16, m, k, n) + ew
        t_fp8 = t_bf16 / speedup
        fixed = _gemms_s(fp8, m, k, n) + ew + WEIGHT_CAST_BYTES * k * n / bw
        rows.append([(m * k + m * n) / bw, (m * k + k * n) / bw])
        target.append(t_fp8 - fixed)
        weight.append(1.0 / t_fp8)
        base.append((t_bf16, fixed, speedup))
    a, y, w = np.array(rows), np.array(target), np.array(weight)
    (q, r), *_ = np.linalg.lstsq(a * w[:, None], y * w, rcond=None)
    err = [abs(t_bf16 / (fixed + q * x[0] + r * x[1]) / s - 1) for (t_bf16, fixed, s), x in zip(base, rows)]
    return float(q), float(r), float(np.mean(err))


def main() -> None:
    for m_min in (M_MIN, 4096):
        q, r, err = derive(m_min)
        print(f"M >= {m_min:>6,}: casts {q:.2f} B per element of input and output gradient, rescales {r:.2f} B per "
              f"element of input and weight gradient; mean |modelled / measured speed-up - 1| {err:.1%}")


if __name__ == "__main__":
    main()
