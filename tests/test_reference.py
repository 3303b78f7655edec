"""The generated file-format reference (planner/reference.py, docs/reference/*.md): the checked-in pages are the
code's, every key a shipped file uses is documented, the units agree with their definitions, and the examples on the
pages load to the numbers a datasheet or a hand count gives."""

from __future__ import annotations

import re
import tomllib
from importlib import resources

import pytest
from cli_helpers import invoke
from pydantic import Field

from planner import reference
from planner.hardware import LEVEL_KEYS, estimated_fields, parse_hardware
from planner.profile import parse_profile
from planner.schema import NetworkLevel
from planner.workload.scaling import parse_model_preset


def test_checked_in_pages_match_the_code():
    # Regenerate with `planner reference --write` after changing a key table or a field description.
    assert reference.stale_pages() == []


def test_reference_command(capsys):
    code, out, err = invoke(capsys, ["reference", "--check"])
    assert (code, err) == (0, "") and "up to date (4 pages)" in out
    code, out, _ = invoke(capsys, ["reference"])
    assert code == 0
    for title in ("# Hardware file format", "# Model preset format", "# Execution profile format",
                  "# Failure model format"):
        assert title in out
    code, _, err = invoke(capsys, ["reference", "--write", "--check"])
    assert code == 2 and err.startswith("error: --write regenerates the pages, --check compares them")


def test_unit_sizes_are_their_definitions():
    # SI and IEC definitions: 1 MHz = 10^6 Hz, 1 GB = 10^9 bytes, 1 MiB = 1,048,576 bytes, 1 KiB = 1,024 bytes,
    # 1 µs = 10^-6 s, 1 minute = 60 s; watts and US dollars are stored as given.
    sizes = {word: size for word, (_, size) in reference.UNITS.items()}
    assert sizes == {"MHz": 1e6, "GBps": 1e9, "GB": 1e9, "MiB": 1_048_576, "KiB": 1_024, "us": 1e-6, "minutes": 60,
                     "W": 1, "USD": 1}


def _documented_keys(page: str) -> set[str]:
    return {m.group(1).strip("[]") for m in re.finditer(r"^\| `([^`]+)` \|", page, re.M)}


def test_units_column_reads_off_the_key_names():
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \| ([^|]+) \|",
                                                          reference.hardware_page(), re.M)}
    assert rows["l2_MiB"] == "MiB (2^20 bytes)"
    assert rows["hbm_GBps"] == "GB/s (10^9 bytes/s)"
    assert rows["lat_us"] == "µs"
    assert rows["max_clock_MHz"] == "MHz"
    assert rows["dsmem"] == "true or false"
    assert rows["board_W"] == "W" and rows["switch_W_per_gpu"] == "W per GPU"
    assert rows["price_per_gpu_hour_USD"] == "USD per GPU-hour"
    profile = reference.profile_page()
    assert "| `network.latency_us` | list of µs, one per network level |" in profile
    assert "**microseconds**" in profile


def test_a_key_whose_name_and_conversion_disagree_is_refused():
    with pytest.raises(ValueError, match="the key says MiB"):
        reference._unit("l2_MiB", 1e6, None)
    with pytest.raises(ValueError, match="its name carries no unit"):
        reference._unit("l2_size", 1e6, None)


def test_a_field_without_a_file_key_or_a_description_fails_generation():
    class Jittery(NetworkLevel):
        jitter_s: float = Field(0.0, description="Latency jitter.")

    with pytest.raises(ValueError, match=r"field\(s\) \['jitter_s'\] have no file key"):
        reference._mapped(LEVEL_KEYS, Jittery, {"name"})

    class Undocumented(NetworkLevel):
        jitter_s: float = 0.0

    with pytest.raises(ValueError, match="Undocumented.jitter_s .* has no description"):
        reference._mapped({**LEVEL_KEYS, "jitter_us": ("jitter_s", 1e-6)}, Undocumented, {"name"})


def _shipped(package: str) -> list[dict]:
    return [tomllib.loads(p.read_text(encoding="utf-8")) for p in resources.files(package).iterdir()
            if p.name.endswith(".toml")]


def test_every_key_of_every_shipped_file_is_documented():
    hardware = _documented_keys(reference.hardware_page())
    for doc in _shipped("planner.hardware_specs"):
        used = set(doc) - {"gpu", "levels", "economics"} | set(doc["gpu"]) | {k for lvl in doc["levels"] for k in lvl}
        used |= set(doc.get("economics", {}))
        assert used <= hardware, used - hardware
    models = _documented_keys(reference.model_page())
    for doc in _shipped("planner.models"):
        assert set(doc) <= models, set(doc) - models
    profiles = _documented_keys(reference.profile_page())
    for doc in _shipped("planner.profiles"):
        used = {f"{section}.{key}" for section, body in doc.items()
                if isinstance(body, dict) and section not in ("framework", "recipe")
                for key in body} | {k for k, v in doc.items() if not isinstance(v, dict)}
        used |= {f"recipe.NAME.{key}" for body in doc.get("recipe", {}).values() for key in body}
        assert used <= profiles, used - profiles
    failures = _documented_keys(reference.failure_page())
    for doc in _shipped("planner.failures"):
        assert set(doc) <= failures, set(doc) - failures


def test_hardware_example_is_an_h100_with_800_gbps_infiniband():
    hw = parse_hardware(tomllib.loads(reference.HARDWARE_EXAMPLE), "example")
    # NVIDIA's H100 SXM5 datasheet: 989 TFLOP/s dense BF16 (132 SMs x 128 threads x 32 FLOP x 1.83 GHz = 989.4e12).
    assert hw.gpu.peak_flops == pytest.approx(989.4e12, rel=1e-4)
    # 800 Gb/s per GPU is 100 GB/s each way: 200 GB/s bidirectional in the file, 100e9 B/s per direction.
    assert hw.levels[1].bw_unidir_Bps == 100e9
    assert hw.gpu.l2_bytes == 50 * 1_048_576 and hw.levels[0].lat_s == pytest.approx(1.125e-6)
    assert estimated_fields(hw) == ["gpu.sustained_clock_factor"]  # its source says "estimate"


def test_model_example_counts_llama3_8b_parameters():
    preset = parse_model_preset(tomllib.loads(reference.MODEL_EXAMPLE), "example", "example")
    # Llama 3 8B (the example's shape) has 8,030,261,248 parameters in its released weights; 65 RMSNorm gains of
    # 4096 (two per layer and the final one) are not GEMM weights, so the GEMM count is 8,030,261,248 - 65 x 4096.
    assert preset.workload.params == 8_030_261_248 - 65 * 4096
    assert preset.workload.batch_tokens == 512 * 8192


def test_profile_us_keys_are_microseconds():
    prof = parse_profile({"name": "mine", "network": {"latency_us": [10.0, 20.0]}, "gemm": {"launch_us": 5},
                          "elementwise": {"layer_overhead_us": 40}}, "mine.toml")
    assert prof.collective_latency_s == pytest.approx((1e-5, 2e-5))
    assert prof.gemm_launch_s == pytest.approx(5e-6) and prof.layer_overhead_s == pytest.approx(4e-5)
