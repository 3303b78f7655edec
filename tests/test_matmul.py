"""Single-GPU GEMM time (docs/model.md §2, paper App. 8.1.1).

Expected numbers are worked out by hand below from the simulator's hardware values (hardware_specs/*.toml) and the
tiling rule of docs/model.md §2, not by calling the code under test. Most hand cases use square weights (or weights
whose tile count makes the tiles square), where the near-square tiling of ``n`` tiles has sqrt(n d1/d2) rows and
sqrt(n d2/d1) columns.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cost.matmul import gemm_flop, matmul_io_bytes, matmul_time_s
from planner.errors import InvalidInput
from planner.hardware import get_hardware
from planner.schema import Gpu

KiB = 1024
MiB = 1024**2

H100 = get_hardware("h100").gpu

# H100 SXM5 (hardware_specs/h100.toml): 128 threads x 132 SMs x 32 FLOP/clk x 1830 MHz = 9.894e14 FLOP/s peak, x 0.70.
H100_SUSTAINED_FLOPS = 128 * 132 * 32 * 1830e6 * 0.70
H100_SHARED_BPS = 32 * 4 * 132 * 1830e6 * 0.70  # 32 banks x 4 B x SMs x sustained clock = 2.164e13
H100_L2_TILE = 0.75 * 50 * MiB  # 39,321,600 B
SM_TILE = 4 * 0.75 * 64 * KiB  # 196,608 B per SM (4 register files of 64 KiB, 75 % usable)
BLOCK_TILE = 0.75 * 64 * KiB  # 49,152 B per processing block
LATENCY_S = 4.5e-6

# A100 SXM from the the simulator's A100 values, built here (no dsmem: exercises the L2-multicast-free path and a GPU
# whose HBM, not L2, is the tightest memory).
A100 = Gpu(
    name="A100 SXM (the simulator's A100 values)", sms=108, flop_per_clock_per_thread=16, max_clock_Hz=1410e6,
    sustained_clock_factor=0.85, hbm_Bps=1555e9, l2_Bps=5603e9, l2_bytes=40 * MiB,
    register_file_per_block_bytes=64 * KiB, l1_per_sm_bytes=192 * KiB, hbm_bytes=40e9,
    matmul_latency_s=4.5e-6, dsmem=False,
)


def test_hardware_constants_match_spec_table():
    assert H100.sustained_flops == pytest.approx(9.894e14 * 0.70, rel=1e-4)
    assert H100.shared_mem_Bps == pytest.approx(H100_SHARED_BPS, rel=1e-12)
    assert H100.matmul_latency_s == pytest.approx(LATENCY_S)


# --- docs/model.md §2's worked example: 49152 x 12288 weight, b = 8192, forward ---------------------------------

D1, D2, B = 49152, 12288, 8192
W_BYTES = D1 * D2 * 2  # 1,207,959,552
X_BYTES = D2 * B * 2  # right-hand input, 201,326,592
Y_BYTES = D1 * B * 2  # output, 805,306,368


def test_spec_example_flop_term_is_14_3_ms():
    """The project brief's '≈ 14.3 ms (10.0 ms at peak)': the arithmetic term alone, 2 d1 d2 b / (peak x 0.70)."""
    flop = 2 * 49152 * 12288 * 8192  # 9.8956e12, all dimensions already multiples of 8
    assert gemm_flop(D1, D2, B) == flop
    assert flop / H100_SUSTAINED_FLOPS == pytest.approx(14.2876e-3, rel=1e-4)
    assert flop / (128 * 132 * 32 * 1830e6) == pytest.approx(10.0013e-3, rel=1e-4)


def test_spec_example_full_model_is_shared_memory_bound():
    """The full App. 8.1.1 model puts this GEMM 4 % above its arithmetic time: shared memory binds.

    docs/model.md §2 quotes ≈ 14.3 ms, i.e. the FLOP term (test above). Counting bytes as docs/model.md §2 prescribes
    (the same rules as the paper's simulator, which gives the same answer) the shared-memory term is larger:

    (b) L2 <-> SM, Hopper multicast. Aggregate capacity 132 x 196,608 B = 25,952,256 B < 2 W, so the weights
        cross. Big tiles: ceil(W / 25,952,256) = ceil(46.5) = 47, grid sqrt(47 x 4) x sqrt(47 / 4).
        Small (per-SM) tiles: W / 196,608 = 6144 exactly, grid sqrt(24576) x sqrt(1536); the inter-SM
        copies are 2 ((rows - 1) X + (cols - 1) Y).
    (c) shared memory <-> registers: W / 49,152 = 24576 tiles, grid sqrt(98304) x sqrt(6144).
    """
    big_r, big_c = math.sqrt(47 * 4), math.sqrt(47 / 4)  # 13.71 x 3.43
    small_r, small_c = math.sqrt(6144 * 4), math.sqrt(6144 / 4)  # 156.8 x 39.2
    reg_r, reg_c = math.sqrt(24576 * 4), math.sqrt(24576 / 4)  # 313.5 x 78.4
    l2_sm = W_BYTES + big_r * X_BYTES + (2 * big_c - 1) * Y_BYTES  # 8.68e9
    dsmem = 2 * ((small_r - 1) * X_BYTES + (small_c - 1) * Y_BYTES)  # 1.242e11
    sm_reg = W_BYTES + reg_r * X_BYTES + (2 * reg_c - 1) * Y_BYTES  # 1.898e11
    sm_bytes = l2_sm + dsmem + sm_reg  # 3.227e11
    expected_s = sm_bytes / H100_SHARED_BPS + LATENCY_S  # 14.914 ms

    assert matmul_io_bytes(H100, D1, D2, B).sm_bytes == pytest.approx(sm_bytes, rel=1e-9)
    assert float(matmul_time_s(H100, D1, D2, B)) == pytest.approx(expected_s, rel=1e-9)
    assert expected_s == pytest.approx(14.914e-3, rel=1e-4)
    # Compute-bound would be 14.29 ms; the model stays within 5 % of it.
    assert 1.0 < expected_s / (2 * D1 * D2 * B / H100_SUSTAINED_FLOPS + LATENCY_S) < 1.05


def test_spec_example_hbm_bytes():
    """(a) HBM <-> L2: ceil(W / 39,321,600) = ceil(30.7) = 31 tiles; tile side sqrt(W words / 31) = 4414
    fits both dimensions, so the grid is sqrt(31 x 4) x sqrt(31 / 4)."""
    r, c = math.sqrt(31 * 4), math.sqrt(31 / 4)
    hbm = W_BYTES + r * X_BYTES + (2 * c - 1) * Y_BYTES  # 7.128e9 B -> 2.1 ms at 3352 GB/s
    assert matmul_io_bytes(H100, D1, D2, B).hbm_bytes == pytest.approx(hbm, rel=1e-9)


# --- latency-bound ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("d1,d2,b", [(8, 8, 8), (64, 64, 16), (1, 1, 1), (128, 64, 8)])
def test_tiny_gemm_costs_the_kernel_latency(d1, d2, b):
    t = float(matmul_time_s(H100, d1, d2, b))
    assert t == pytest.approx(LATENCY_S, rel=0.01)
    assert t > LATENCY_S


# --- memory-bound: 16384 x 16384 weight (512 MiB, > 37.5 MiB of usable L2), b = 16 --------------------------

MB_D = 16384
MB_B = 16
MB_W = MB_D * MB_D * 2  # 536,870,912 B
MB_ACT = MB_D * MB_B * 2  # 524,288 B, both X and Y (square weight)
# Tile counts, ceil(W / capacity):  H100 L2 ceil(13.65) = 14;  H100 all SMs ceil(20.69) = 21;
# one SM ceil(2730.7) = 2731;  one processing block ceil(10922.7) = 10923;  A100 L2 (30 MiB) ceil(17.07) = 18.
MB_HBM_FWD_H100 = MB_W + math.sqrt(14) * MB_ACT + (2 * math.sqrt(14) - 1) * MB_ACT  # 542.23e6 B
MB_L2_SM_FWD_H100 = MB_W + math.sqrt(21) * MB_ACT + (2 * math.sqrt(21) - 1) * MB_ACT  # 543.55e6 B


def test_memory_bound_h100_bytes_and_time():
    """On H100 the weights cross L2 twice (HBM -> L2 -> SM), and 2 x 3352 GB/s > 6441 GB/s, so L2 binds:
    (542.23e6 + 543.55e6) B / 6441 GB/s = 168.6 us, against HBM 161.8 us, SM 62.5 us, FLOP 12.4 us."""
    dsmem = 2 * 2 * (math.sqrt(2731) - 1) * MB_ACT  # X and Y each (52.26 - 1) times, both sides
    sm_reg = MB_W + math.sqrt(10923) * MB_ACT + (2 * math.sqrt(10923) - 1) * MB_ACT
    moved = matmul_io_bytes(H100, MB_D, MB_D, MB_B)
    assert moved.hbm_bytes == pytest.approx(MB_HBM_FWD_H100, rel=1e-9)
    assert moved.l2_bytes == pytest.approx(MB_HBM_FWD_H100 + MB_L2_SM_FWD_H100, rel=1e-9)
    assert moved.sm_bytes == pytest.approx(MB_L2_SM_FWD_H100 + dsmem + sm_reg, rel=1e-9)

    t_hbm = MB_HBM_FWD_H100 / 3352e9
    t_l2 = (MB_HBM_FWD_H100 + MB_L2_SM_FWD_H100) / 6441e9
    t_flop = 2 * MB_D * MB_D * MB_B / H100_SUSTAINED_FLOPS
    assert t_hbm == pytest.approx(161.76e-6, rel=1e-4)
    assert t_l2 == pytest.approx(168.57e-6, rel=1e-4)
    assert t_flop < t_hbm < t_l2
    assert float(matmul_time_s(H100, MB_D, MB_D, MB_B)) == pytest.approx(t_l2 + LATENCY_S, rel=1e-9)


def test_memory_bound_a100_is_hbm_bound():
    """A100 (no dsmem, simulator values): HBM = W + sqrt(18) X + (2 sqrt(18) - 1) Y = 543.02e6 B over 1555 GB/s
    = 349.2 us; L2 = that + (W + sqrt(2731) X + (2 sqrt(2731) - 1) Y) = 1.1615e9 B / 5603 GB/s = 207.3 us."""
    hbm = MB_W + math.sqrt(18) * MB_ACT + (2 * math.sqrt(18) - 1) * MB_ACT
    l2_sm = MB_W + math.sqrt(2731) * MB_ACT + (2 * math.sqrt(2731) - 1) * MB_ACT
    moved = matmul_io_bytes(A100, MB_D, MB_D, MB_B)
    assert moved.hbm_bytes == pytest.approx(hbm, rel=1e-9)
    assert moved.l2_bytes == pytest.approx(hbm + l2_sm, rel=1e-9)
    assert hbm / 1555e9 == pytest.approx(349.21e-6, rel=1e-4)
    assert (hbm + l2_sm) / 5603e9 < hbm / 1555e9
    assert float(matmul_time_s(A100, MB_D, MB_D, MB_B)) == pytest.approx(hbm / 1555e9 + LATENCY_S, rel=1e-9)


def test_weight_grad_reads_and_writes_the_gradient():
    """Weight grad: 2 W (read the running gradient, write it back) + sqrt(14) X + sqrt(14) dY, where the
    forward pass moves W + sqrt(14) X + (2 sqrt(14) - 1) Y."""
    hbm = 2 * MB_W + math.sqrt(14) * MB_ACT + math.sqrt(14) * MB_ACT
    moved = matmul_io_bytes(H100, MB_D, MB_D, MB_B, weight_grad=True)
    assert moved.hbm_bytes == pytest.approx(hbm, rel=1e-9)
    # The weight part is exactly twice the forward one: take away the activation streams.
    fwd = matmul_io_bytes(H100, MB_D, MB_D, MB_B).hbm_bytes
    wgrad_weights = moved.hbm_bytes - 2 * math.sqrt(14) * MB_ACT
    fwd_weights = fwd - (3 * math.sqrt(14) - 1) * MB_ACT
    assert wgrad_weights == pytest.approx(2 * fwd_weights, rel=1e-12)
    assert fwd_weights == pytest.approx(MB_W, rel=1e-12)


# --- resident weights ---------------------------------------------------------------------------------------


def test_weights_that_fit_in_l2_cost_no_hbm_weight_traffic():
    """512 x 512: W = 512 KiB, 2 W = 1 MiB <= 37.5 MiB of L2 and <= 25.9 MB over all SMs: resident at L2 and at
    the SMs. One tile at both interfaces: HBM = X + (2 x 1 - 1) Y = 2 x 512 x 64 x 2 B; L2 = twice that."""
    act = 512 * 64 * 2  # 65,536 B
    for weight_grad in (False, True):
        moved = matmul_io_bytes(H100, 512, 512, 64, weight_grad=weight_grad)
        assert float(moved.hbm_bytes) == 2 * act
        assert float(moved.l2_bytes) == 4 * act


def test_residency_boundary_is_twice_the_weight_bytes():
    """A 2048 x 4096 weight is 16 MiB: 2 W = 32 MiB <= 37.5 MiB stays; 4096 x 4096 (2 W = 64 MiB) does not."""
    b = 8
    fits = matmul_io_bytes(H100, 2048, 4096, b).hbm_bytes
    assert float(fits) == (4096 * b + 2048 * b) * 2  # one tile: X once, Y written once
    spills = matmul_io_bytes(H100, 4096, 4096, b).hbm_bytes
    assert float(spills) > 4096 * 4096 * 2


# --- padding -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("weight_grad", [False, True])
@pytest.mark.parametrize("other,b", [(4096, 16), (49152, 8192), (512, 3)])
def test_dimensions_pad_to_multiples_of_8(other, b, weight_grad):
    def t(d1, d2, bb):
        return float(matmul_time_s(H100, d1, d2, bb, weight_grad=weight_grad))

    assert t(12287, other, b) == t(12288, other, b)
    assert t(12289, other, b) == t(12296, other, b)
    assert t(other, 12287, b) == t(other, 12288, b)
    assert t(other, 12289, b) == t(other, 12296, b)
    assert t(other, 12288, 8185) == t(other, 12288, 8192)
    assert t(12289, other, b) > t(12288, other, b)


def test_gemm_flop_pads():
    assert gemm_flop(12287, 12289, 1) == 2 * 12288 * 12296 * 8
    assert gemm_flop(8, 8, 8) == 1024


# --- vectorisation -----------------------------------------------------------------------------------------


def test_vectorised_matches_scalar_calls():
    rng = np.random.default_rng(0)
    n = 100_000
    d1 = rng.integers(1, 65_537, n)
    d2 = rng.integers(1, 65_537, n)
    b = rng.integers(1, 100_001, n)
    wg = rng.random(n) < 0.5
    t = matmul_time_s(H100, d1, d2, b, weight_grad=wg)
    assert t.shape == (n,) and t.dtype == np.float64
    moved = matmul_io_bytes(H100, d1, d2, b, weight_grad=wg)
    for k in rng.choice(n, 300, replace=False):
        scalar = matmul_time_s(H100, int(d1[k]), int(d2[k]), int(b[k]), weight_grad=bool(wg[k]))
        assert np.ndim(scalar) == 0
        assert float(scalar) == t[k]
        one = matmul_io_bytes(H100, int(d1[k]), int(d2[k]), int(b[k]), weight_grad=bool(wg[k]))
        assert (float(one.hbm_bytes), float(one.l2_bytes), float(one.sm_bytes)) == (
            moved.hbm_bytes[k], moved.l2_bytes[k], moved.sm_bytes[k])


def test_arguments_broadcast():
    d1 = np.array([512, 4096, 16384])[:, None]
    b = np.array([8, 64, 512, 4096])[None, :]
    t = matmul_time_s(H100, d1, 4096, b)
    assert t.shape == (3, 4)
    assert t[2, 1] == float(matmul_time_s(H100, 16384, 4096, 64))


def test_rejects_non_positive_dimensions():
    with pytest.raises(InvalidInput, match="d2 = 0"):
        matmul_time_s(H100, 8, np.array([8, 0]), 8)
    with pytest.raises(InvalidInput, match="b = nan"):
        matmul_time_s(H100, 8, 8, float("nan"))


# --- monotonicity ------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    d1=st.integers(1, 40_000),
    d2=st.integers(1, 40_000),
    b_lo=st.integers(1, 50_000),
    b_extra=st.integers(0, 50_000),
    weight_grad=st.booleans(),
    gpu=st.sampled_from([H100, A100]),
)
def test_time_is_non_decreasing_in_b(d1, d2, b_lo, b_extra, weight_grad, gpu):
    t_lo = float(matmul_time_s(gpu, d1, d2, b_lo, weight_grad=weight_grad))
    t_hi = float(matmul_time_s(gpu, d1, d2, b_lo + b_extra, weight_grad=weight_grad))
    assert t_lo <= t_hi
