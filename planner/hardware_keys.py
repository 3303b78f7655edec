"""The hardware file's keys: TOML key -> (document field, multiplier to SI units). planner.hardware converts a file
with them, and the hardware tables render them (planner/render/light.py); this module imports nothing, so that the
command line's fast path (planner/fastpath.py) can render a shipped file without the pydantic documents."""

KiB = 1024
MiB = 1024**2

GPU_KEYS: dict[str, tuple[str, float | None]] = {
    "sms": ("sms", 1),
    "threads_per_sm": ("threads_per_sm", 1),
    "flop_per_clock_per_thread": ("flop_per_clock_per_thread", 1),
    "max_clock_MHz": ("max_clock_Hz", 1e6),
    "sustained_clock_factor": ("sustained_clock_factor", 1),
    "hbm_GBps": ("hbm_Bps", 1e9),
    "l2_GBps": ("l2_Bps", 1e9),
    "l2_MiB": ("l2_bytes", MiB),
    "register_file_per_block_KiB": ("register_file_per_block_bytes", KiB),
    "l1_per_sm_KiB": ("l1_per_sm_bytes", KiB),
    "hbm_GB": ("hbm_bytes", 1e9),
    "matmul_latency_us": ("matmul_latency_s", 1e-6),
    "dsmem": ("dsmem", None),
    "word_bytes": ("word_bytes", 1),
    "fp8_flop_per_clock_per_thread": ("fp8_flop_per_clock_per_thread", 1),
    "fp4_flop_per_clock_per_thread": ("fp4_flop_per_clock_per_thread", 1),
}
LEVEL_KEYS: dict[str, tuple[str, float | None]] = {
    "size": ("size", 1),
    "bw_bidir_GBps": ("bw_bidir_Bps", 1e9),
    "lat_us": ("lat_s", 1e-6),
    "unit": ("unit", 1),
    "usable": ("usable", 1),
    "switch_W_per_gpu": ("switch_W_per_gpu", 1),
}
ECONOMICS_KEYS: dict[str, tuple[str, float | None]] = {
    "price_per_gpu_hour_USD": ("price_per_gpu_hour_usd", 1),
    "board_W": ("board_W", 1),
    "node_overhead_W": ("node_overhead_W", 1),
}
INT_FIELDS = {"sms", "threads_per_sm", "size", "word_bytes", "unit", "usable"}
"""Fields whose values are whole numbers (the file may write 8.0; the document holds 8)."""
