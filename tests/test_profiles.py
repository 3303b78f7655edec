"""Execution profiles (planner/profile.py, profiles/*.toml): the paper's leaves the model unchanged, the realistic one
prices what the paper hides, CP-SAT still proves the enumerator's optimum under it, and bad profile files fail in
one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import invoke

from planner.cost.matmul import quantization_efficiency
from planner.cost.step import evaluate
from planner.errors import InvalidInput
from planner.hardware import get_hardware, with_profile
from planner.parallel.space import SearchOptions
from planner.profile import PAPER, get_profile, parse_profile
from planner.schema import Layout
from planner.search.cpsat import solve_cpsat
from planner.search.exhaustive import solve_exhaustive
from planner.workload.scaling import transformer_workload


def _tiny():
    return transformer_workload(64, 128, 4, 1, 64, 16 * 64, 1e9, {"heads": 4, "kv_heads": 2, "vocab": 256},
                                "tiny")


def test_the_paper_profile_file_is_the_default_model():
    paper = get_profile("paper")
    skip = {"sources", "description"}
    assert paper.model_dump(exclude=skip) == PAPER.model_dump(exclude=skip)
    hw = get_hardware("h100")
    assert hw.profile == PAPER
    wl = _tiny()
    lay = Layout(dp=2, tp_ff=2, tp_model=1, pp=2, interleave=1, ep=1, cp=1, microbatches=4, schedule="1f1b",
                 placement={"dp": (1, 2), "tp_ff": (2, 1), "tp_model": (1, 1), "pp": (2, 1), "ep": (1, 1),
                            "cp": (1, 1)})
    assert evaluate(with_profile(hw, "paper"), wl, lay).step == evaluate(hw, wl, lay).step


def test_realistic_profile_exposes_tp_traffic_by_hand():
    """Realistic: TP all-reduces add to the GEMMs (overlap 0) instead of hiding under them; with everything else
    equal, the exposed term is the TP bandwidth time itself (priced at the profile's bus bandwidth)."""
    hw = get_hardware("h100")
    wl = _tiny()
    lay = Layout(dp=1, tp_ff=8, tp_model=1, pp=1, interleave=1, ep=1, cp=1, microbatches=1, schedule="1f1b",
                 placement={"dp": (1, 1), "tp_ff": (8, 1), "tp_model": (1, 1), "pp": (1, 1), "ep": (1, 1),
                            "cp": (1, 1)})
    real = with_profile(hw, "realistic")
    ev = evaluate(real, wl, lay)
    assert ev.step.exposed_comm_s == pytest.approx(ev.step.tp_s, rel=1e-12)
    assert ev.step.optimizer_s > 0
    # NVLink at 0.80 of 450 GB/s: one all-reduce of W words over 8 ranks moves 2 * 7/8 * W * 2 bytes.
    paper = evaluate(hw, wl, lay)
    assert ev.step.tp_s == pytest.approx(paper.step.tp_s / 0.80, rel=1e-9)


def test_wave_quantization_by_hand():
    gpu = get_hardware("h100").gpu  # 132 SMs
    # 128 x 256 output: one tile, one wave of 132 SMs -> 1/132 useful.
    assert float(quantization_efficiency(gpu, 128, 256, (128, 256))) == pytest.approx(1 / 132)
    # 133 tiles of 128 x 256 (a 128 x 34048 output): two waves, 133 / 264 useful.
    assert float(quantization_efficiency(gpu, 128, 256 * 133, (128, 256))) == pytest.approx(133 / 264)
    # 132 whole tiles: no loss.
    assert float(quantization_efficiency(gpu, 128 * 12, 256 * 11, (128, 256))) == pytest.approx(1.0)


@pytest.mark.parametrize("gpus", [4, 8, 16])
def test_cpsat_matches_the_enumerator_under_the_realistic_profile(gpus):
    hw, wl = with_profile(get_hardware("h100"), "realistic"), _tiny()
    opts = SearchOptions(gpus=gpus, dp_overlap=True)
    ex = solve_exhaustive(hw, wl, opts, None)
    cp = solve_cpsat(hw, wl, opts, None)
    assert ex.status == cp.status == "optimal" and ex.space_size == cp.space_size
    ee, ec = evaluate(hw, wl, ex.layout, dp_overlap=True), evaluate(hw, wl, cp.layout, dp_overlap=True)
    assert abs(ec.step.step_s - ee.step.step_s) <= 1e-9 * ee.step.step_s
    assert abs(ec.step.network_s - ee.step.network_s) <= 1e-9 * max(ee.step.network_s, 1e-12)


def test_plan_says_which_profile_priced_it(capsys):
    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--json", "--profile",
                                     "realistic"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["profile"] == "realistic"
    assert doc["layout"]["placement"]["tp_ff"][0] == doc["layout"]["tp_ff"]  # TP inside the node
    # The default follows the question: a real transformer is priced by the realistic profile, the paper's toy
    # workload by the paper's, unless --profile says otherwise.
    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--json"])
    assert code == 0 and json.loads(out)["profile"] == "realistic"
    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--json", "--profile", "paper"])
    assert code == 0 and json.loads(out)["profile"] == "paper"
    code, out, err = invoke(capsys, ["plan", "--compute", "1e24", "--gpus", "64", "--json"])
    assert code == 0 and json.loads(out)["profile"] == "paper"


@pytest.mark.parametrize("doc,match", [
    ({"name": "x", "gemm": {"modle": "measured"}}, "did you mean 'gemm.model'"),
    ({"name": "x", "overlap": {"tp": 1.5}}, "less than or equal to 1"),
    ({"name": "x", "gpu": {}}, "unknown top-level"),
    ({"gemm": {}}, "missing required 'name'"),
    ({"name": "x", "network": {"latency_us": {"value": [1.0]}}}, None),
])
def test_bad_profile_files_fail_in_one_line(doc, match):
    if match is None:
        assert parse_profile(doc, "f.toml").collective_latency_s == pytest.approx((1e-6,))
        return
    with pytest.raises(InvalidInput, match=match) as exc:
        parse_profile(doc, "f.toml")
    assert "\n" not in str(exc.value)


def test_unknown_profile_name_is_a_clean_cli_error(capsys):
    code, out, err = invoke(capsys, ["plan", "--compute", "1e24", "--profile", "realistc"])
    assert code == 2 and "did you mean realistic" in err and "Traceback" not in err


def test_shipped_profiles_source_every_value():
    for name in ("paper", "realistic"):
        prof = get_profile(name)
        assert prof.sources and all(v.strip() for v in prof.sources.values())
    assert np.isclose(get_profile("realistic").gemm_fraction("H100 SXM5", False), 0.801)
