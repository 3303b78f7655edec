"""The hardware library: every shipped file, the paper's reference numbers, and the loader's rejections.

Expected numbers are written out here from their sources (the paper's App. 8.1.1 and Table 2, NVIDIA's datasheets),
never recomputed from the files under test.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from planner.errors import InvalidInput
from planner.hardware import get_hardware, hardware_names, load_hardware_file

KiB = 1024
MiB = 1024**2

SHIPPED = [
    "v100",
    "a100",
    "h100",
    "h100-superpod",
    "h100-low-latency",
    "h100-global-nvlink",
    "h100-global-nvlink-ll",
    "h100-infinite-ll",
    "h200",
    "b200",
    "gb200-nvl72",
]


def sig4(x: float) -> float:
    """x rounded to 4 significant figures."""
    return float(f"{x:.4g}")


# --------------------------------------------------------------------------------------------------
# Shipped files
# --------------------------------------------------------------------------------------------------


def test_library_lists_every_shipped_file():
    assert set(SHIPPED) <= set(hardware_names())


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_file_loads_with_a_source_on_every_number(name):
    hw = get_hardware(name)  # shipped files are loaded with require_source=True
    assert hw.name == name
    assert hw.sources, "no sources recorded"
    assert not [path for path, src in hw.sources.items() if src.startswith("user-supplied")]
    assert hw.levels[-1].size is None, "the top level of a shipped system is unbounded"


# Peak 16-bit FLOP/s = 128 threads x SMs x flop/clk/thread x max clock (paper App. 8.1.1; the MFU peak of
# docs/model.md §6).
@pytest.mark.parametrize("name, peak_flops", [("v100", 1.256e14), ("a100", 3.119e14), ("h100", 9.894e14)])
def test_paper_gpus_peak_matches_spec_table(name, peak_flops):
    assert sig4(get_hardware(name).gpu.peak_flops) == peak_flops


# Paper Table 2, column S: SRAM of a whole 8-GPU node in 16-bit words,
# S = 8 x (L2 + SMs x (register file + L1/shared)) / 2 bytes.
def test_h100_node_sram_is_487m_words():
    by_hand = 8 * (50 * MiB + 132 * (256 + 256) * KiB) / 2  # = 486,539,264 words
    node_words = 8 * get_hardware("h100").gpu.sram_bytes / 2
    assert node_words == by_hand
    assert node_words == pytest.approx(487e6, rel=2e-3)


@pytest.mark.parametrize("name, table2_words", [("v100", 151e6), ("a100", 366e6)])
def test_v100_a100_node_sram_match_table2(name, table2_words):
    node_words = 8 * get_hardware(name).gpu.sram_bytes / 2
    assert node_words == pytest.approx(table2_words, rel=0.02)


def test_superpod_level_caps():
    # 8 GPUs per NVLink node, 32 nodes per SuperPOD, InfiniBand unbounded above (paper App. 8.1.2).
    assert get_hardware("h100-superpod").level_caps == (8, 32, None)


# Dense BF16 peaks: NVIDIA's 2:4-sparse headline figures halved.
@pytest.mark.parametrize(
    "name, dense_peak",
    [
        ("h200", 1979e12 / 2),  # H200 SXM datasheet: BF16 1,979 TFLOPS with sparsity
        ("b200", 4.5e15 / 2),  # Blackwell datasheet, HGX B200: FP16/BF16 4.5 PFLOPS with sparsity
        ("gb200-nvl72", 5.0e15 / 2),  # Blackwell datasheet, GB200 NVL72: 5 PFLOPS per GPU with sparsity
    ],
)
def test_current_systems_peak_matches_datasheet(name, dense_peak):
    assert get_hardware(name).gpu.peak_flops == pytest.approx(dense_peak, rel=1e-3)


def test_gb200_nvlink_domain_is_72_gpus():
    hw = get_hardware("gb200-nvl72")
    assert hw.levels[0].size == 72
    assert hw.gpus_per_node == 4
    # A job takes 4-GPU trays, at most 16 of the 18 per rack (docs/model.md, "The search space"): 16 x 4 = 64.
    assert (hw.levels[0].unit, hw.levels[0].usable) == (4, 64)
    assert hw.level_caps == (64, None)


# Paper §6.3.1: the low-latency scenarios divide every latency by ten (H100: 4.5 us matmul, 1.125 us network).
@pytest.mark.parametrize("name", ["h100-low-latency", "h100-global-nvlink-ll", "h100-infinite-ll"])
def test_low_latency_scenarios_divide_latencies_by_ten(name):
    hw = get_hardware(name)
    assert hw.gpu.matmul_latency_s == pytest.approx(0.45e-6)
    assert all(lvl.lat_s == pytest.approx(0.1125e-6) for lvl in hw.levels)


def test_infinite_scenario_has_one_unbounded_infinite_level():
    (level,) = get_hardware("h100-infinite-ll").levels
    assert level.size is None and math.isinf(level.bw_bidir_Bps)


# --------------------------------------------------------------------------------------------------
# Loader rejections
# --------------------------------------------------------------------------------------------------

GOOD = """\
name = "toy"
gpus_per_node = 8

[gpu]
name = "Toy"
sms = 4
flop_per_clock_per_thread = 32
max_clock_MHz = 1000
sustained_clock_factor = 0.8
hbm_GBps = 1000
l2_GBps = 2000
l2_MiB = 8
register_file_per_block_KiB = 64
l1_per_sm_KiB = 256
hbm_GB = 16
matmul_latency_us = 4.5
dsmem = false

[[levels]]
name = "NVLink"
size = 8
bw_bidir_GBps = 900
lat_us = 1.0

[[levels]]
name = "InfiniBand"
bw_bidir_GBps = 100
lat_us = 2.0
"""


def write(tmp_path: Path, text: str, old: str = "", new: str = "") -> Path:
    if old:
        assert old in text, f"test setup: {old!r} not in the base file"
        text = text.replace(old, new)
    path = tmp_path / "hw.toml"
    path.write_text(text)
    return path


def test_user_file_with_plain_numbers_loads(tmp_path):
    hw = get_hardware(str(write(tmp_path, GOOD)))
    assert hw.gpu.peak_flops == 128 * 4 * 32 * 1000e6
    assert hw.level_caps == (8, None)


@pytest.mark.parametrize(
    "old, new, expected",
    [
        pytest.param('name = "Toy"', 'name = "Toy', "malformed TOML", id="malformed-toml"),
        pytest.param("sms = 4\n", "", "sms", id="missing-field"),
        pytest.param("sms = 4", 'sms = "four"', "gpu.sms", id="string-for-number"),
        pytest.param("bw_bidir_GBps = 900", "bw_bidir_GBps = -900", "bw_bidir", id="negative-bandwidth"),
        pytest.param("hbm_GBps = 1000", "hbm_GBs = 1000", "did you mean 'hbm_GBps'", id="unknown-key"),
        pytest.param(
            'size = 8\nbw_bidir_GBps = 900',
            "bw_bidir_GBps = 900",
            "'NVLink' is unbounded but is not the top level",
            id="unbounded-level-not-top",
        ),
        pytest.param(
            "bw_bidir_GBps = 100",
            "size = 4\nbw_bidir_GBps = 100",
            "sizes must increase",
            id="level-sizes-not-increasing",
        ),
    ],
)
def test_loader_rejects_bad_file(tmp_path, old, new, expected):
    path = write(tmp_path, GOOD, old, new)
    with pytest.raises(InvalidInput) as err:
        load_hardware_file(path)
    assert expected in str(err.value)


def test_unbounded_level_not_top_needs_a_bounded_level_above(tmp_path):
    # The case above leaves the upper level unbounded too; here the upper level is bounded.
    text = GOOD.replace("size = 8\n", "").replace("bw_bidir_GBps = 100", "size = 16\nbw_bidir_GBps = 100")
    with pytest.raises(InvalidInput, match="'NVLink' is unbounded but is not the top level"):
        load_hardware_file(write(tmp_path, text))


@pytest.mark.parametrize("sms", ["sms = { value = 4 }", "sms = 4"], ids=["table-without-source", "plain-number"])
def test_shipped_style_load_requires_a_source(tmp_path, sms):
    path = write(tmp_path, GOOD, "sms = 4", sms)
    with pytest.raises(InvalidInput, match=r"gpu\.sms: every number in a shipped hardware file needs a source"):
        load_hardware_file(path, require_source=True)


def test_unknown_hardware_name_suggests_close_one():
    with pytest.raises(InvalidInput, match="did you mean h100"):
        get_hardware("h10")


def test_estimates_are_named_in_results(capsys, tmp_path):
    """Numbers whose source calls them an estimate are listed in every plan/evaluation on that hardware."""
    import json
    import tomllib

    from cli_helpers import invoke

    from planner.hardware import estimated_fields

    # read the shipped h100 file directly: its only estimate is the L2 bandwidth (the paper's simulator's value)
    path = Path(__file__).parent.parent / "hardware_specs" / "h100.toml"
    doc = tomllib.loads(path.read_text())
    marked = [f"gpu.{k}" for k, v in doc["gpu"].items() if isinstance(v, dict)
              and "estimate" in (v.get("source", "") + v.get("note", "")).lower()]
    assert marked == ["gpu.l2_GBps"]
    assert estimated_fields(get_hardware("h100")) == marked

    shape = ["--d-model", "256", "--d-ff", "1024", "--layers", "2", "--batch-tokens", "64", "--json"]
    code, out, _ = invoke(capsys, ["evaluate", "--gpu", "h100", *shape])
    assert code == 0
    notes = json.loads(out)["notes"]
    assert "h100: 1 hardware value behind this result is an estimate (gpu.l2_GBps); `planner hardware show` with " \
           "the same --gpu (name or file) gives the sources" in notes
    # the same numbers without sources (a user's file): nothing is called an estimate
    plain = tmp_path / "plain.toml"
    plain.write_text(_plain_copy(doc))
    code, out, _ = invoke(capsys, ["evaluate", "--gpu", str(plain), *shape])
    assert code == 0
    assert not any("estimate" in n for n in json.loads(out)["notes"])


def _plain_copy(doc: dict) -> str:
    """A hardware TOML with the same values and no source/note annotations."""
    lines = ['name = "plain"', f"gpus_per_node = {doc.get('gpus_per_node', 8)}", "[gpu]"]
    for k, v in doc["gpu"].items():
        v = v["value"] if isinstance(v, dict) else v
        text = f'"{v}"' if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)
        lines.append(f"{k} = {text}")
    for lvl in doc["levels"]:
        lines.append("[[levels]]")
        for k, v in lvl.items():
            v = v["value"] if isinstance(v, dict) else v
            lines.append(f"{k} = " + (f'"{v}"' if isinstance(v, str) else str(v)))
    return "\n".join(lines) + "\n"
