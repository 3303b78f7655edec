"""The quantities a hardware file implies but does not state (peak FLOP/s, SRAM, how a job may use a network level),
written once as functions of the stated values. A base-layer module with no imports of the package: the hardware
documents' properties (planner.schema) and the command line's fast path, which reads shipped files without the
documents (planner/fastpath.py), both call these, so the two readings cannot drift apart."""

from __future__ import annotations

from typing import Protocol


class GpuValues(Protocol):
    """The stated per-GPU values the derived ones are computed from (SI units), read-only."""

    @property
    def threads_per_sm(self) -> int: ...
    @property
    def sms(self) -> int: ...
    @property
    def flop_per_clock_per_thread(self) -> float: ...
    @property
    def max_clock_Hz(self) -> float: ...
    @property
    def sustained_clock_factor(self) -> float: ...
    @property
    def l2_bytes(self) -> float: ...
    @property
    def register_file_per_block_bytes(self) -> float: ...
    @property
    def l1_per_sm_bytes(self) -> float: ...


class LevelValues(Protocol):
    """The stated values of one network level that say how a job may use its groups."""

    @property
    def size(self) -> int | None: ...
    @property
    def unit(self) -> int | None: ...
    @property
    def usable(self) -> int | None: ...


def peak_flops(gpu: GpuValues) -> float:
    """Peak dense FLOP/s at the maximum clock: threads per SM x SMs x FLOP per clock per thread x clock."""
    return gpu.threads_per_sm * gpu.sms * gpu.flop_per_clock_per_thread * gpu.max_clock_Hz


def sustained_clock_Hz(gpu: GpuValues) -> float:
    """The clock the GPU holds under load: the maximum clock times the sustained-clock factor."""
    return gpu.max_clock_Hz * gpu.sustained_clock_factor


def sustained_flops(gpu: GpuValues) -> float:
    """Dense FLOP/s at the sustained clock."""
    return peak_flops(gpu) * gpu.sustained_clock_factor


def shared_mem_Bps(gpu: GpuValues) -> float:
    """Shared-memory bandwidth: 32 banks x 4 bytes per clock per SM, at the sustained clock."""
    return 32 * 4 * gpu.sms * sustained_clock_Hz(gpu)


def sram_bytes(gpu: GpuValues) -> float:
    """On-chip SRAM per GPU (Table 2's S): L2 plus, per SM, four register-file blocks and L1/shared memory."""
    return gpu.l2_bytes + gpu.sms * (4 * gpu.register_file_per_block_bytes + gpu.l1_per_sm_bytes)


def subdivided(level: LevelValues) -> bool:
    """Whether a job may use part of each group (whole units, up to `usable`) instead of filling it."""
    return level.unit is not None or level.usable is not None


def unit_gpus(level: LevelValues) -> int:
    """GPUs a job takes whole inside one group: `unit`, else 1."""
    return level.unit or 1


def usable_gpus(level: LevelValues) -> int | None:
    """The most GPUs a job uses in one group: `usable`, else the group's size (None: unbounded)."""
    return level.usable if level.usable is not None else level.size
