"""Time of one GEMM on one GPU (docs/model.md §2; paper §4.1.1 and App. 8.1.1).

What is modelled
----------------
A training step multiplies every weight (shard) matrix ``W`` of shape ``d1 x d2`` by a nanobatch of ``b``
tokens three times per microbatch:

* forward            ``Y  = W X``       -> ``matmul_time_s(gpu, d1, d2, b)``
* activation grad    ``dX = W^T dY``    -> ``matmul_time_s(gpu, d2, d1, b)`` (dimensions swapped)
* weight grad        ``dW = dY X^T``    -> ``matmul_time_s(gpu, d1, d2, b, weight_grad=True)``

App. 8.1.1 refines "FLOP / peak" in three ways, all kept here: data movement through the memory hierarchy
is overlapped with arithmetic, so the kernel takes as long as its slowest resource; every kernel pays a
fixed launch/setup/teardown latency; and the arithmetic runs at a sustained clock below the boost clock
(thermal throttling), which is ``gpu.sustained_flops``. So

    t = max(HBM bytes / hbm_Bps, L2 bytes / l2_Bps, SM bytes / shared_mem_Bps, FLOP / sustained_flops)
        + matmul_latency_s.

Counting the bytes. The kernel is assumed to tile the *weight* matrix (not the output) at every level,
because ``b`` is normally the smallest dimension (App. 8.1.1, "we always assume tiling by the weight (or
weight gradient) matrix dimensions"). Three interfaces are counted, each by the same rule (`_io_bytes`):

(a) HBM <-> L2. One tile at a time, of at most max(0.75 L2, 4 x 0.75 register file per block) bytes.
(b) L2 <-> an SM's shared memory. One tile per SM, ``sms`` in flight, of at most 4 x 0.75 register file
    per processing block (the weight tile lives in the four blocks' registers; shared memory is a transit
    buffer). On Hopper (``gpu.dsmem``) distributed shared memory lets one SM forward what another already
    fetched, so L2 sees the matrix tiled at the aggregate size of all SMs, and the copies between SMs are
    charged to shared memory instead.
(c) shared memory <-> registers. One tile per processing block, ``4 sms`` in flight, of at most
    0.75 register file.

At each interface the weight matrix is cut into the fewest tiles that fit (ceil(weight bytes / capacity))
and each tile is made as square as the matrix allows. Then:

* If the weights and their gradients (2 x weight bytes) fit in the lower level's aggregate capacity
  (capacity x tiles in flight) they stay there and cost nothing; otherwise the weights cross once
  (forward, activation grad) or the running gradient sum is read and written back once (weight grad).
* The right-hand operand (``d2 x b``) crosses once per row of tiles.
* Weight grad: the left-hand operand dY (``d1 x b``) crosses once per column of tiles.
  Forward / activation grad: the output (``d1 x b``) is a running sum over columns of tiles, read and
  written once per column except that the first pass has nothing to read: (2 cols - 1) x output bytes.
* With multicast, each operand above is also copied between SMs once per *small* (per-SM) tile row or
  column beyond the first, and each copy is counted twice (sender's and receiver's shared memory).

HBM bytes = (a); L2 bytes = (a) + (b); SM bytes = (b) + inter-SM copies + (c).
FLOP = 2 d1 d2 b on the padded dimensions.

A reference point: on H100 the forward GEMM of a 49152 x 12288 weight with b = 8192 takes 14.91 ms here,
bound by shared memory (per-block tiles of 0.75 x 64 KiB make the register-level activation streams large).
Its arithmetic alone is 14.29 ms, the "≈ 14.3 ms" docs/model.md §2 quotes; the paper's simulator counts bytes
the same way, so it should land on the shared-memory term too.

Deviations from the paper's simulator (github.com/ege-erdil/limits_to_distributed_training,
``gpu/gpu_model.py``), which this follows otherwise:

* Dimensions are padded up to a multiple of 8 (the tensor-core granularity docs/model.md §2 prescribes), not 16.
* The padded dimensions are used for the byte counts as well as for the FLOP (the simulator pads only the
  FLOP), so a padded dimension costs exactly what its padded size costs, in every regime.
* The HBM <-> L2 tile capacity is max(0.75 L2, 4 x 0.75 register file), per docs/model.md §2; the simulator uses
  0.75 L2 alone. The two agree on every GPU with more L2 than one SM's registers, i.e. all real ones.
* Everything is vectorised over numpy arrays (the solver tabulates millions of shapes); the simulator
  memoises scalar calls.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from planner.errors import InvalidInput
from planner.schema import Gpu

TENSOR_CORE_MULTIPLE = 8
"""Every GEMM dimension is padded up to a multiple of this (docs/model.md §2)."""

USABLE_FRACTION = 0.75
"""Share of an on-chip memory a kernel can fill with weight tiles; the rest holds activation buffers,
accumulators and addresses. The paper's simulator uses 0.75 for both L2 and the register file."""

BLOCKS_PER_SM = 4
"""Processing blocks (each with its own register file and tensor core) per SM."""


class MatmulBytes(NamedTuple):
    """Bytes a GEMM moves through each memory, the numerators of App. 8.1.1's time model."""

    hbm_bytes: np.ndarray
    """HBM <-> L2 traffic, interface (a)."""
    l2_bytes: np.ndarray
    """Everything L2 serves or absorbs: interfaces (a) + (b)."""
    sm_bytes: np.ndarray
    """Shared-memory traffic: interface (b), inter-SM copies (Hopper), interface (c)."""


def pad_dim(d: ArrayLike) -> np.ndarray:
    """Round a GEMM dimension up to the tensor-core granularity (a multiple of 8)."""
    return np.ceil(np.asarray(d, dtype=np.float64) / TENSOR_CORE_MULTIPLE) * TENSOR_CORE_MULTIPLE


def _checked_dims(d1: ArrayLike, d2: ArrayLike, b: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    out = []
    for name, value in (("d1", d1), ("d2", d2), ("b", b)):
        arr = np.asarray(value, dtype=np.float64)
        bad = ~(np.isfinite(arr) & (arr > 0))
        if np.any(bad):
            first = arr[bad].flat[0]
            raise InvalidInput(
                f"GEMM dimension {name} = {float(first):g}; every dimension must be a finite number > 0"
            )
        out.append(pad_dim(arr))
    return out[0], out[1], out[2]


def gemm_flop(d1: ArrayLike, d2: ArrayLike, b: ArrayLike) -> np.ndarray:
    """FLOP of a ``d1 x d2`` by ``d2 x b`` GEMM, 2 d1 d2 b, on dimensions padded to multiples of 8."""
    p1, p2, pb = _checked_dims(d1, d2, b)
    return 2.0 * p1 * p2 * pb


def _tile_grid(d1: np.ndarray, d2: np.ndarray, tile_capacity_bytes: float, word_bytes: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the near-square tiling of a ``d1 x d2`` matrix into tiles of at most
    ``tile_capacity_bytes``.

    The tile count is the least that fits; the tile shape is then as square as the matrix allows (a side
    longer than the matrix is impossible, so a thin matrix gets full-width tiles). Discreteness is
    ignored, as in the paper's simulator: rows and columns may be fractional, which keeps the byte counts
    smooth in the dimensions.
    """
    words = d1 * d2
    tiles = np.ceil(words * word_bytes / tile_capacity_bytes)
    words_per_tile = words / tiles
    tile_rows_len = np.maximum(np.minimum(d1, np.sqrt(words_per_tile)), words_per_tile / d2)
    tile_cols_len = words_per_tile / tile_rows_len
    return d1 / tile_rows_len, d2 / tile_cols_len


def _io_bytes(d1: np.ndarray, d2: np.ndarray, b: np.ndarray, tile_capacity_bytes: float, concurrent: int,
              multicast: bool, weight_grad: ArrayLike, *, word_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes across one interface of the memory hierarchy, and bytes copied between SMs (App. 8.1.1).

    ``tile_capacity_bytes`` is what one unit of the lower level (the L2, one SM, one processing block)
    holds of the weight matrix; ``concurrent`` units work at once. With ``multicast`` (Hopper distributed
    shared memory) the upper level is read as if the units were one big unit, and the redundant copies
    travel between units instead; the second value returned counts them (0 without multicast).
    Dimensions must already be padded.
    """
    weight_bytes = d1 * d2 * word_bytes
    right_bytes = d2 * b * word_bytes  # X (forward), dY (activation grad), X^T (weight grad)
    left_bytes = d1 * b * word_bytes  # the output Y or dX, or the input dY of the weight grad

    small_rows: np.ndarray | float
    small_cols: np.ndarray | float
    if multicast:
        rows, cols = _tile_grid(d1, d2, tile_capacity_bytes * concurrent, word_bytes)
        small_rows, small_cols = _tile_grid(d1, d2, tile_capacity_bytes, word_bytes)
    else:
        rows, cols = _tile_grid(d1, d2, tile_capacity_bytes, word_bytes)
        small_rows = small_cols = 1.0

    # Weights stay resident below when they and their gradients fit in all units together (§5.1).
    resident = 2.0 * weight_bytes <= tile_capacity_bytes * concurrent
    weight_traffic = np.where(resident, 0.0, np.where(weight_grad, 2.0 * weight_bytes, weight_bytes))

    # The right-hand operand meets every row of tiles; the left-hand one every column. A forward or
    # activation-grad output is a running sum across columns: written each time, read back all but the first.
    left_passes = np.where(weight_grad, cols, 2.0 * cols - 1.0)
    interlevel = weight_traffic + rows * right_bytes + left_passes * left_bytes

    # Inter-SM copies: one per extra small tile along each direction, seen by both sender and receiver.
    between_units = 2.0 * ((small_rows - 1.0) * right_bytes + (small_cols - 1.0) * left_bytes)
    return interlevel, between_units


def matmul_io_bytes(gpu: Gpu, d1: ArrayLike, d2: ArrayLike, b: ArrayLike,
                    weight_grad: ArrayLike = False) -> MatmulBytes:
    """Bytes through HBM, L2 and shared memory for one GEMM of weight ``d1 x d2`` and ``b`` tokens
    (App. 8.1.1; arguments as for `matmul_time_s`)."""
    p1, p2, pb = _checked_dims(d1, d2, b)
    w = gpu.word_bytes
    reg_tile_bytes = USABLE_FRACTION * gpu.register_file_per_block_bytes
    sm_tile_bytes = BLOCKS_PER_SM * reg_tile_bytes
    l2_tile_bytes = max(USABLE_FRACTION * gpu.l2_bytes, sm_tile_bytes)

    hbm_l2, _ = _io_bytes(p1, p2, pb, l2_tile_bytes, 1, False, weight_grad, word_bytes=w)
    l2_sm, between_sms = _io_bytes(p1, p2, pb, sm_tile_bytes, gpu.sms, gpu.dsmem, weight_grad, word_bytes=w)
    sm_reg, _ = _io_bytes(p1, p2, pb, reg_tile_bytes, BLOCKS_PER_SM * gpu.sms, False, weight_grad, word_bytes=w)
    return MatmulBytes(hbm_bytes=hbm_l2, l2_bytes=hbm_l2 + l2_sm, sm_bytes=l2_sm + between_sms + sm_reg)


def matmul_time_s(gpu: Gpu, d1: ArrayLike, d2: ArrayLike, b: ArrayLike, weight_grad: ArrayLike = False
                  ) -> np.ndarray:
    """Seconds for one GEMM of a ``d1 x d2`` weight (shard) and a nanobatch of ``b`` tokens (App. 8.1.1).

    ``d1`` is the weight's output dimension and ``d2`` its input dimension for the forward pass; swap them
    for the activation gradient; set ``weight_grad`` for the weight gradient. Every argument may be a
    numpy array (they broadcast); the result has the broadcast shape, float64.
    """
    moved = matmul_io_bytes(gpu, d1, d2, b, weight_grad)
    p1, p2, pb = _checked_dims(d1, d2, b)
    t_hbm = moved.hbm_bytes / gpu.hbm_Bps
    t_l2 = moved.l2_bytes / gpu.l2_Bps
    t_sm = moved.sm_bytes / gpu.shared_mem_Bps
    t_flop = 2.0 * p1 * p2 * pb / gpu.sustained_flops
    t = np.maximum(np.maximum(t_hbm, t_l2), np.maximum(t_sm, t_flop)) + gpu.matmul_latency_s
    return np.asarray(t, dtype=np.float64)


def quantization_efficiency(gpu: Gpu, rows: ArrayLike, cols: ArrayLike, tile: tuple[int, int]) -> np.ndarray:
    """Share of a GEMM's tensor-core work that is useful: an output of `rows` x `cols` is cut into tiles of
    `tile` (the better of the two orientations), the last tile of each row and column is partly empty (tile
    quantization) and the tiles run in waves of one per SM, the last wave partly empty (wave quantization; NVIDIA
    Deep Learning Performance Guide, 'Matrix Multiplication Background')."""
    r = np.asarray(rows, dtype=np.float64)
    c = np.asarray(cols, dtype=np.float64)
    best = np.zeros(np.broadcast(r, c).shape)
    for tr, tc in (tile, tile[::-1]):
        nr, nc = np.ceil(r / tr), np.ceil(c / tc)
        tiles = nr * nc
        waves = np.ceil(tiles / gpu.sms)
        useful = (r * c) / (tiles * tr * tc) * tiles / (waves * gpu.sms)
        best = np.maximum(best, useful)
    return best


def measured_matmul_time_s(gpu: Gpu, d1: ArrayLike, d2: ArrayLike, b: ArrayLike, weight_grad: ArrayLike,
                           peak_fraction: float, tile: tuple[int, int], launch_s: float, hbm_Bps: float
                           ) -> np.ndarray:
    """Seconds for one GEMM under a measured-efficiency model (the 'realistic' execution profile): the FLOPs at
    `peak_fraction` of peak (a large GEMM's measured throughput) times the tile and wave quantization of its output,
    or, if slower, its compulsory HBM traffic (each operand and the output once) at `hbm_Bps`; plus `launch_s`.

    Arguments as for `matmul_time_s`: the forward output is d1 x b, the activation gradient's d2 x b (swap d1 and
    d2), the weight gradient's d1 x d2."""
    p1, p2, pb = _checked_dims(d1, d2, b)
    wg = np.asarray(weight_grad, dtype=bool)
    out_rows = p1
    out_cols = np.where(wg, p2, pb)
    q = quantization_efficiency(gpu, out_rows, out_cols, tile)
    t_flop = 2.0 * p1 * p2 * pb / (gpu.peak_flops * peak_fraction * q)
    t_mem = (p1 * p2 + p2 * pb + p1 * pb) * gpu.word_bytes / hbm_Bps
    return np.asarray(np.maximum(t_flop, t_mem) + launch_s, dtype=np.float64)
