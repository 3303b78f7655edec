"""Reliability (the planner runs unattended in provisioning scripts): it never crashes, hangs, prints a traceback,
or claims more than it proved.

* a table of bad inputs, each with its exit code (2 bad input, 1 infeasible) and a fragment of its message;
* the infeasibility explanations (latency wall, memory, GPU counts no layout can form, a search cut short);
* --time-limit: a search cut short returns its best layout, labelled NOT PROVEN OPTIMAL, status 'feasible';
* determinism with CP-SAT on 2 workers;
* hypothesis properties over random valid inputs;
* extreme but valid inputs (slow ones marked @pytest.mark.slow; numbers in docs/benchmarks.md "Extreme inputs").

Commands run in-process through `planner.cli.run` (what both console scripts call) unless the real process matters.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import BIN, EXH, TINY, invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import api
from planner.cli import plan_app
from planner.cost.step import evaluate as fresh_evaluate
from planner.errors import Infeasible, InvalidInput
from planner.explain import explain_infeasible, floor_bound, min_memory_on
from planner.hardware import get_hardware, hardware_names
from planner.parallel.space import SearchOptions, check_layout
from planner.render.plan import plan_renderables
from planner.schema import Layout
from planner.search.result import SearchResult
from planner.workload import infer_workload, workload_from_shape

# --------------------------------------------------------------------------------------------------
# Input files for the table (written per test into tmp_path)
# --------------------------------------------------------------------------------------------------

HW_OK = """name = "mini"
[gpu]
name = "Mini"
sms = 132
threads_per_sm = 128
flop_per_clock_per_thread = 32
max_clock_MHz = 1830
sustained_clock_factor = 0.7
hbm_GBps = 3352
l2_GBps = 6441
l2_MiB = 50
register_file_per_block_KiB = 64
l1_per_sm_KiB = 256
hbm_GB = 80
matmul_latency_us = 4.5
dsmem = true
[[levels]]
name = "NVLink"
size = 8
bw_bidir_GBps = 900
lat_us = 1.125
[[levels]]
name = "IB"
bw_bidir_GBps = 100
lat_us = 1.125
"""

HW_FILES = {
    "ok": HW_OK,
    "no_gpu_table": re.sub(r"\[gpu\].*?(?=\[\[levels)", "", HW_OK, flags=re.S),
    "no_levels": HW_OK.split("[[levels]]")[0],
    "level_without_bw": HW_OK.replace("bw_bidir_GBps = 100\n", ""),
    "gpu_without_hbm": HW_OK.replace("hbm_GB = 80\n", ""),
    "sms_string": HW_OK.replace("sms = 132", 'sms = "lots"'),
    "sms_fraction": HW_OK.replace("sms = 132", "sms = 132.5"),
    "sms_inf": HW_OK.replace("sms = 132", "sms = inf"),
    "size_huge": HW_OK.replace("size = 8", "size = 1e30"),
    "node_vs_nvlink": HW_OK.replace('name = "mini"', 'name = "mini"\ngpus_per_node = 7'),
    "negative_bw": HW_OK.replace("bw_bidir_GBps = 100", "bw_bidir_GBps = -100"),
    "zero_bw": HW_OK.replace("bw_bidir_GBps = 900", "bw_bidir_GBps = 0"),
    "negative_latency": HW_OK.replace("lat_us = 1.125\n[[levels]]", "lat_us = -1\n[[levels]]"),
    "infinite_latency": HW_OK.replace("lat_us = 1.125\n[[levels]]", "lat_us = inf\n[[levels]]"),
    "nan_hbm": HW_OK.replace("hbm_GB = 80", "hbm_GB = nan"),
    "clock_factor_2": HW_OK.replace("sustained_clock_factor = 0.7", "sustained_clock_factor = 2"),
    "malformed": HW_OK.replace("[[levels]]", "[[levels]", 1),
    "unknown_top_key": "colour = 'green'\n" + HW_OK,
    "gpu_key_typo": HW_OK.replace("hbm_GB = 80", "hbm_gb = 80"),
    "dsmem_number": HW_OK.replace("dsmem = true", "dsmem = 1"),
    "two_unbounded": HW_OK.replace("size = 8\n", ""),
    "sizes_not_increasing": HW_OK.replace('name = "IB"\n', 'name = "IB"\nsize = 4\n'),
    "empty": "",
}

PRESET_OK = "description = 'x'\nd_model = 256\nd_ff = 1024\nlayers = 4\nbatch_tokens = 64\n"
MODEL_FILES = {
    "unknown_key": PRESET_OK + "headz = 8\n",
    "missing_layers": PRESET_OK.replace("layers = 4\n", ""),
    "batch_vs_experts": PRESET_OK + "experts = 3\n",
    "huge_d_model": PRESET_OK.replace("d_model = 256", "d_model = 1e30"),
}


def _plan_doc() -> dict:
    wl = workload_from_shape(256, 1024, 4, 1, 64)
    p = api.plan(workload=wl, gpu="h100", days=None, gpus=8, solver="exhaustive", time_limit_s=10)
    return json.loads(p.model_dump_json())


PLAN_MUTATIONS = {
    "truncated": lambda d: json.dumps(d)[:-20],
    "not_an_object": lambda d: "[]",
    "empty": lambda d: "",
    "gpus_string": lambda d: json.dumps({**d, "gpus": "eight"}),
    "no_workload": lambda d: json.dumps({k: v for k, v in d.items() if k != "workload"}),
    "no_layout": lambda d: json.dumps({**d, "status": "infeasible", "layout": None}),
    "placement_mismatch": lambda d: json.dumps({**d, "layout": {**d["layout"], "dp": d["layout"]["dp"] * 3}}),
    "negative_layers": lambda d: json.dumps({**d, "workload": {**d["workload"], "layers": -4}}),
    "tp_not_dividing": lambda d: json.dumps({**d, "layout": {**d["layout"], "tp_ff": 3,
                                                                 "placement": {**d["layout"]["placement"],
                                                                               "tp_ff": [3, 1]}}}),
}


@pytest.fixture
def files(tmp_path) -> dict[str, str]:
    out = {}
    for name, text in HW_FILES.items():
        p = tmp_path / f"hw_{name}.toml"
        p.write_text(text)
        out[f"hw:{name}"] = str(p)
    binary = tmp_path / "hw_binary.toml"
    binary.write_bytes(b"\xff\xfe\x00\x01garbage")
    out["hw:binary"] = str(binary)
    for name, text in MODEL_FILES.items():
        p = tmp_path / f"model_{name}.toml"
        p.write_text(text)
        out[f"model:{name}"] = str(p)
    doc = _plan_doc()
    for name, mutate in PLAN_MUTATIONS.items():
        p = tmp_path / f"plan_{name}.json"
        p.write_text(mutate(doc))
        out[f"plan:{name}"] = str(p)
    binary_plan = tmp_path / "plan_binary.json"
    binary_plan.write_bytes(b"\x89PNG\r\n\x1a\n\xff")
    out["plan:binary"] = str(binary_plan)
    out["dir"] = str(tmp_path)
    return out


def _hw(name: str) -> list[str]:
    return ["plan", *TINY, *EXH, "--gpus", "8", "--gpu", f"{{hw:{name}}}"]


# (argv with {file} placeholders, exit code, fragment of stderr)
TABLE = [
    # numbers: compute
    (["plan", "--compute", "1e60"], 2, "1e+60"),
    (["plan", "--compute", "1e17"], 2, "outside the accepted range"),
    (["plan", "--compute", "-inf"], 2, "-inf"),
    (["plan", "--compute", "-1e28"], 2, "positive finite"),
    (["plan", "--compute", "NaN"], 2, "nan"),
    (["plan", "--compute", ""], 2, "is not a number"),
    (["plan", "--compute", "1e28FLOP"], 2, "1e28FLOP"),
    # numbers: days and other options
    (["plan", "--compute", "1e28", "--days", "inf"], 2, "--days"),
    (["plan", "--compute", "1e28", "--days", "-0"], 2, "--days"),
    (["plan", "--compute", "1e28", "--days"], 2, "--days"),
    (["plan", "--compute", "1e28", "--time-limit", "nan"], 2, "--time-limit"),
    (["plan", "--compute", "1e28", "--time-limit", "-1"], 2, "--time-limit"),
    (["plan", "--compute", "1e28", "--time-limit", "inf"], 2, "--time-limit"),
    (["plan", "--compute", "1e28", "--workers", "2.5"], 2, "--workers"),
    (["plan", "--compute", "1e28", "--workers", "-1"], 2, "--workers"),
    (["plan", "--compute", "1e28", "--price-per-gpu-hour", "-1"], 2, "--price-per-gpu-hour"),
    (["plan", "--compute", "1e28", "--gpus", "1e3"], 2, "--gpus"),
    (["plan", "--compute", "1e28", "--gpus", "-3"], 2, "--gpus"),
    (["plan", *TINY, "--gpus", "99999999999999999999999"], 2, "too large"),
    # unknown names: the message suggests the closest
    (["plan", "--compute", "1e28", "--gpu", "h10"], 2, "did you mean h100"),
    (["plan", "--compute", "1e28", "--gpu", "A100-80"], 2, "did you mean a100"),
    (["plan", "--compute", "1e28", "--gpu", ""], 2, "unknown GPU/hardware ''"),
    (["limits", "--gpu", "h20"], 2, "did you mean h200"),
    (["plan", "--model", "gpt3"], 2, "did you mean gpt3-175b"),
    # bad enum values
    (["plan", "--compute", "1e28", "--schedule", "ZB-H2"], 2, "ZB-H2"),
    (["plan", "--compute", "1e28", "--schedule", "interleaved"], 2, "interleaved"),
    (["plan", "--compute", "1e28", "--solver", ""], 2, "--solver"),
    (["plan", "--compute", "1e28", "--solver", "gurobi"], 2, "gurobi"),
    (["plan", "--compute", "1e28", "--batch-scaling", "chinchilla"], 2, "chinchilla"),
    (["evaluate", *TINY, "--schedule", "auto"], 2, "auto"),
    # hardware files
    (_hw("no_gpu_table"), 2, "missing required 'gpu'"),
    (_hw("no_levels"), 2, "missing required 'levels'"),
    (_hw("level_without_bw"), 2, "levels[1].bw_bidir_GBps"),
    (_hw("gpu_without_hbm"), 2, "gpu.hbm_GB"),
    (_hw("sms_string"), 2, "gpu.sms: expected a number"),
    (_hw("sms_fraction"), 2, "expected a whole number"),
    (_hw("sms_inf"), 2, "gpu.sms"),
    (_hw("size_huge"), 2, "too large"),
    (_hw("node_vs_nvlink"), 2, "gpus_per_node = 7 does not fit"),
    (_hw("negative_bw"), 2, "greater than 0"),
    (_hw("zero_bw"), 2, "greater than 0"),
    (_hw("negative_latency"), 2, "levels[0].lat_us"),
    (_hw("infinite_latency"), 2, "lat_us"),
    (_hw("nan_hbm"), 2, "NaN"),
    (_hw("clock_factor_2"), 2, "sustained_clock_factor"),
    (_hw("malformed"), 2, "malformed TOML"),
    (_hw("unknown_top_key"), 2, "colour"),
    (_hw("gpu_key_typo"), 2, "did you mean 'hbm_GB'"),
    (_hw("dsmem_number"), 2, "true or false"),
    (_hw("two_unbounded"), 2, "unbounded"),
    (_hw("sizes_not_increasing"), 2, "sizes must increase"),
    (_hw("empty"), 2, "missing required 'name'"),
    (_hw("binary"), 2, "not UTF-8"),
    (["plan", "--compute", "1e28", "--gpu", "{dir}"], 2, "Is a directory"),
    (["hardware", "show", "{hw:negative_bw}"], 2, "greater than 0"),
    # model presets and explicit shapes
    (["plan", "--model", "{model:unknown_key}"], 2, "unknown key 'headz'"),
    (["plan", "--model", "{model:missing_layers}"], 2, "layers"),
    (["plan", "--model", "{model:batch_vs_experts}"], 2, "not a multiple of experts 3"),
    (["plan", "--model", "{model:huge_d_model}"], 2, "too large"),
    (["plan", "--d-model", "256", "--d-ff", "1024", "--layers", "4", "--batch-tokens", "64", "--experts", "3"], 2,
     "not a multiple of experts 3"),
    (["plan", "--d-model", "1024", "--d-ff", "4096", "--layers", "8", "--batch-tokens", "1000", "--experts", "64"], 2,
     "e.g. 960 or 1024"),
    (["plan", *TINY, "--experts", "0"], 2, "experts"),
    (["plan", "--d-model", "256", "--d-ff", "1024", "--layers", "-4", "--batch-tokens", "64"], 2, "layers"),
    (["plan", *TINY, "--tokens", "nan"], 2, "tokens"),
    (["plan", "--d-model", "1e30", "--d-ff", "1024", "--layers", "4", "--batch-tokens", "64"], 2, "too large"),
    # contradictory flags
    (["plan", "--compute", "1e28", "--model", "gpt3-175b-mlp"], 2, "contradictory"),
    (["plan", "--model", "gpt3-175b-mlp", "--batch-scaling", "paper"], 2, "--batch-scaling"),
    (["evaluate", "--plan", "{plan:truncated}", "--compute", "1e28"], 2, "--compute"),
    # --gpus that no layout can use: infeasible (exit 1), with the usable counts nearby
    (["plan", *TINY, *EXH, "--gpus", "7"], 1, "lack the factor 7"),
    (["plan", *TINY, *EXH, "--gpus", "12"], 1, "nearest usable counts are 8 and 16"),
    (["plan", *TINY, *EXH, "--gpus", "3"], 1, "nearest usable counts are 2 and 4"),
    # bad evaluate layouts
    (["evaluate", *TINY, "--tp-model", "3"], 2, "tp_model=3 does not divide d_model=256"),
    (["evaluate", *TINY, "--tp-ff", "3", "--tp-model", "2"], 2, "tp_ff=3 does not divide d_ff=1024"),
    (["evaluate", *TINY, "--tp-ff", "3", "--tp-model", "3"], 2, "9 GPUs cannot fill h100's network levels"),
    (["evaluate", *TINY, "--pp", "3"], 2, "pp(3) * interleave(1) does not divide layers=4"),
    (["evaluate", *TINY, "--pp", "2", "--interleave", "4"], 2, "does not divide layers=4"),
    (["evaluate", *TINY, "--ep", "2"], 2, "ep=2 does not divide experts=1"),
    (["evaluate", *TINY, "--microbatches", "3"], 2, "nanobatch must be whole tokens"),
    (["evaluate", *TINY, "--dp", "2", "--placement", "dp=2,2"], 2, "multiply to 4 but dp = 2"),
    (["evaluate", *TINY, "--placement", "xx=1,1"], 2, "xx=1,1"),
    (["evaluate", *TINY, "--placement", "dp=1"], 2, "2 network level(s)"),
    (["evaluate", *TINY, "--placement", "dp=a,b"], 2, "whole numbers"),
    (["evaluate", *TINY, "--placement", ""], 2, "--placement is empty"),
    (["evaluate", *TINY, "--placement", "dp=0,1"], 2, ">= 1"),
    (["evaluate", *TINY, "--placement", "dp=1,1;dp=1,1"], 2, "names dp twice"),
    (["evaluate", *TINY, "--dp", "2", "--tp-ff", "8", "--placement", "dp=2,1;tp_ff=8,1"], 2, "level 1"),
    (["evaluate", *TINY, "--dp", "99999999999999999999"], 2, "too large"),
    (["evaluate", *TINY, "--days", "0"], 2, "--days"),
    # malformed plan JSON
    (["evaluate", "--plan", "{plan:truncated}"], 2, "not a plan document"),
    (["evaluate", "--plan", "{plan:not_an_object}"], 2, "not a plan document"),
    (["evaluate", "--plan", "{plan:empty}"], 2, "not a plan document"),
    (["evaluate", "--plan", "{plan:gpus_string}"], 2, "gpus"),
    (["evaluate", "--plan", "{plan:no_workload}"], 2, "workload"),
    (["evaluate", "--plan", "{plan:no_layout}"], 2, "no layout"),
    (["evaluate", "--plan", "{plan:placement_mismatch}"], 2, "dp"),
    (["evaluate", "--plan", "{plan:negative_layers}"], 2, "layers"),
    (["evaluate", "--plan", "{plan:tp_not_dividing}"], 2, "tp_ff=3 does not divide d_ff=1024"),
    (["evaluate", "--plan", "{plan:binary}"], 2, "not UTF-8"),
    (["evaluate", "--plan", "{dir}"], 2, "directory"),
    # limits
    (["limits", "--experts", "0"], 2, "--experts"),
    (["limits", "--batch-tokens", "-1"], 2, "--batch-tokens"),
    (["limits", "--layers", "inf"], 2, "--layers"),
    (["limits", "--alpha", "0.7"], 2, "0.5"),
    # commands
    (["frobnicate"], 2, "No such command"),
    (["hardware", "frob"], 2, "No such command"),
]


def _fill(argv: list[str], files: dict[str, str]) -> list[str]:
    return [re.sub(r"\{([^}]+)\}", lambda m: files[m.group(1)], a) for a in argv]


@pytest.mark.parametrize("argv,code,fragment", TABLE, ids=[f"{i:02d}-" + " ".join(a)[-60:] for i, (a, _, _) in
                                                           enumerate(TABLE)])
def test_bad_input_table(capsys, files, argv, code, fragment):
    got, out, err = invoke(capsys, _fill(argv, files))
    assert got == code, (got, out, err)
    assert "Traceback" not in out + err
    if code == 2:
        assert out == ""
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        assert fragment in lines[0], f"expected {fragment!r} in: {lines[0]}"
    else:
        assert err.startswith("infeasible: ")
        assert fragment in err, f"expected {fragment!r} in: {err}"


def test_table_is_large_enough():
    assert len(TABLE) >= 30


def test_good_hardware_file_of_the_table_works(capsys, files):
    code, out, err = invoke(capsys, ["plan", *TINY, *EXH, "--gpus", "8", "--gpu", files["hw:ok"], "--json"])
    assert code == 0, err
    assert json.loads(out)["hardware"] == "mini"


def test_real_console_scripts_never_print_a_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe")
    for script, argv, code in (("plan", ["--compute", "nan"], 2), ("plan", ["--compute", "1e28", "--gpu", str(bad)], 2),
                               ("planner", ["evaluate", *TINY, "--dp", "1" + "0" * 30], 2),
                               ("plan", [*TINY, *EXH, "--gpus", "7"], 1)):
        exe = BIN / script
        if not exe.exists():
            pytest.skip(f"console script {script} not installed")
        proc = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=120)
        assert proc.returncode == code, proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr
        if code == 2:
            assert len(proc.stderr.splitlines()) == 1


# --------------------------------------------------------------------------------------------------
# Infeasibility explanations
# --------------------------------------------------------------------------------------------------


def test_latency_wall_explanation_1e32(capsys):
    # The paper's budget (D = 20 N_p of the rounded shape: 1.34e32 FLOP trained), whose step counts are hand-checked.
    code, out, err = invoke(capsys, ["--compute", "1e32", "--budget", "paper", "--gpu", "h100", "--days", "90"],
                            plan_app, "plan")
    assert code == 1
    assert "Traceback" not in out + err
    first = err.splitlines()[0]
    assert first.startswith("infeasible: past the latency wall: no layout of h100 trains this model in 90 days")
    m = re.search(r"no layout can be faster than ([\d,.]+) days \(the critical path of one microbatch through all "
                  r"L=1792 layers, [\d.]+ ms per step, times D/b = 167,772,160 steps\)", first)
    assert m, first
    floor_days = float(m.group(1).replace(",", ""))
    assert 90 < floor_days < 100  # 94.0 days with the shipped h100 numbers
    m = re.search(r"largest compute trainable in 90 days: at most about ([\d.e+]+) FLOP \(an upper estimate", err)
    assert m, err
    estimate = m.group(1)
    assert 1e31 < float(estimate) < 1e32
    assert "shortest possible duration: at least" in err
    # The report on stdout says why as well (a user may keep only stdout).
    assert "Why:" in out and "past the latency wall" in out and f"at most about {estimate} FLOP" in out
    # The estimate is a property of the hardware and the deadline, not of the request: a request further past the
    # wall gets the same number.
    code, _, err3 = invoke(capsys, ["--compute", "3e32", "--budget", "paper", "--gpu", "h100", "--days", "90"],
                           plan_app, "plan")
    assert code == 1 and f"at most about {estimate} FLOP" in err3
    # the numbers are the library's
    fb = floor_bound(get_hardware("h100"), infer_workload(1e32, budget="paper"))
    assert f"{fb.days:,.1f} days" in first


def test_latency_wall_json_is_infeasible_with_explanation(capsys):
    code, out, err = invoke(capsys, ["plan", "--compute", "2e32", "--days", "90", "--json"])
    assert code == 1
    doc = json.loads(out)
    assert doc["status"] == "infeasible" and doc["layout"] is None
    assert doc["solver"]["status"] == "infeasible"  # proven (by the bound), not 'unknown'
    assert doc["solver"]["evaluated"] == 0  # proven without a search: no layout was priced
    assert "latency wall" in doc["explanation"].splitlines()[0]


def test_memory_explanation_1e26_on_8_gpus(capsys):
    code, out, err = invoke(capsys, ["--compute", "1e26", "--gpu", "h100", "--gpus", "8"], plan_app, "plan")
    assert code == 1
    assert "Traceback" not in out + err
    lines = err.splitlines()
    assert lines[0].startswith("infeasible: the model does not fit in memory on 8 GPUs of h100")
    m = re.search(r"needs ([\d,.]+) GB per GPU but the H100 SXM5 has 80 GB of HBM", lines[0])
    assert m, lines[0]
    need = float(m.group(1).replace(",", ""))
    wl = infer_workload(1e26)
    assert need * 1e9 >= 16 * wl.params / 8  # at least weights + grads + optimizer state, 16 bytes per parameter
    assert need == pytest.approx(1934.8, rel=1e-3)
    m = re.search(r"the fewest GPUs on which some layout fits is ([\d,]+)", err)
    assert m, err
    assert int(m.group(1).replace(",", "")) == 200


def test_memory_explanation_claims_are_true():
    """The best-fitting layout on 8 GPUs really needs that much; on 200 GPUs the solver finds a layout."""
    hw, wl = get_hardware("h100"), infer_workload(1e26)
    fit = min_memory_on(hw, wl, SearchOptions(), 8)
    assert fit.total_bytes > hw.gpu.hbm_bytes
    assert not (min_memory_on(hw, wl, SearchOptions(), 192).total_bytes <= hw.gpu.hbm_bytes)
    p = api.plan(1e26, "h100", None, gpus=200, time_limit_s=30)
    assert p.gpus == 200 and p.memory.total_bytes <= p.memory.capacity


def test_gpu_count_no_layout_can_form(capsys):
    code, _, err = invoke(capsys, ["plan", "--compute", "1e24", "--gpus", "7", "--time-limit", "20"])
    assert code == 1
    assert "no layout can split this model over exactly 7 GPUs" in err and "lack the factor 7" in err
    assert "nearest usable counts are" in err
    code, _, err = invoke(capsys, ["plan", "--compute", "1e24", "--gpus", "12", "--time-limit", "20"])
    assert code == 1
    assert "12 GPUs cannot form a cluster of h100" in err
    assert re.search(r"nearest usable counts are 8\b.* and 16\b", err), err
    assert "fewest GPUs on which some layout fits in memory is" in err


def test_unknown_status_is_not_called_infeasible():
    hw, wl = get_hardware("h100"), workload_from_shape(256, 1024, 4, 1, 64)
    stopped = SearchResult("cpsat", "unknown", None, 3.0, 1000)
    text = explain_infeasible(hw, wl, SearchOptions(), 1.0, stopped)
    assert "time limit" in text.splitlines()[0] and "NOT proven infeasible" in text and "--time-limit" in text
    text = explain_infeasible(hw, wl, SearchOptions(gpus=8), None, stopped)
    assert "time limit" in text.splitlines()[0] and "NOT proven infeasible" in text and "--time-limit" in text


def test_explicit_shape_past_the_wall_gives_tokens(capsys):
    code, _, err = invoke(capsys, ["plan", *TINY, *EXH, "--days", "1e-6"])
    assert code == 1
    assert "no layout can be faster than" in err
    assert "most tokens trainable with this shape in 1e-06 days: at most" in err


# --------------------------------------------------------------------------------------------------
# --time-limit: a search cut short
# --------------------------------------------------------------------------------------------------

MID = ["--d-model", "4096", "--d-ff", "16384", "--layers", "64", "--batch-tokens", "1048576", "--gpus", "64"]


def test_time_limit_returns_best_layout_not_proven(capsys):
    """The enumerator stopped after 0.1 s of a 1.5M-tuple space reliably has a layout but no proof."""
    code, out, err = invoke(capsys, ["plan", *MID, *EXH, "--time-limit", "0.1", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "feasible" and doc["solver"]["status"] == "feasible"
    assert doc["layout"] is not None and doc["gpus"] == 64
    assert doc["solver"]["gap"] != 0  # unknown (None) or positive, never a claimed 0
    code, out, err = invoke(capsys, ["plan", *MID, *EXH, "--time-limit", "0.1"])
    assert code == 0
    assert "NOT PROVEN OPTIMAL" in out and "proven optimal" not in out


def test_stopped_cpsat_search_reports_bound_and_gap():
    """A CP-SAT search stopped with a layout: JSON status 'feasible' with bound and gap; rich says NOT PROVEN."""
    from rich.console import Console

    from planner.cli.output import plan_json as _plan_json

    hw, wl = get_hardware("h100"), workload_from_shape(256, 1024, 4, 1, 64)
    lay = Layout(dp=8, tp_ff=1, tp_model=1, pp=1, ep=1, microbatches=1,
                 placement={"dp": (8, 1), "tp_ff": (1, 1), "tp_model": (1, 1), "pp": (1, 1), "ep": (1, 1)})
    ev = fresh_evaluate(hw, wl, lay)
    res = SearchResult("cpsat", "feasible", lay, 0.5, 1234, evaluated=10, gap=0.25,
                       bound=ev.step.step_s * 0.75, stage="step", cpsat_status="step:FEASIBLE")
    p = api.plan_from_evaluation(hw, wl, ev, res, None)
    doc = json.loads(_plan_json(p))
    assert doc["status"] == "feasible" and doc["solver"]["status"] == "feasible"
    assert doc["solver"]["gap"] == 0.25 and doc["solver"]["bound"] == pytest.approx(ev.step.step_s * 0.75)
    console = Console(record=True, width=140)
    for item in plan_renderables(p):
        console.print(item)
    text = console.export_text()
    assert "NOT PROVEN OPTIMAL" in text and "gap 0.25" in text


# --------------------------------------------------------------------------------------------------
# Determinism
# --------------------------------------------------------------------------------------------------


def _plan_twice(argv):
    """Two separate processes (so no in-process cache can make the answers agree)."""
    exe = BIN / "planner"
    if not exe.exists():
        pytest.skip("console script planner not installed")
    docs = []
    for _ in range(2):
        proc = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        doc["solver"].pop("wall_s"), doc["solver"].pop("cpsat_s")
        docs.append(json.dumps(doc, sort_keys=False))
    return docs


def test_deterministic_small_instance_two_workers():
    a, b = _plan_twice(["plan", *TINY, "--days", "0.01", "--workers", "2", "--json"])
    assert a == b


def test_deterministic_1e24_two_workers():
    a, b = _plan_twice(["plan", "--compute", "1e24", "--workers", "2", "--json"])
    assert a == b


# --------------------------------------------------------------------------------------------------
# Properties over random valid inputs
# --------------------------------------------------------------------------------------------------

SHIPPED = hardware_names()


@st.composite
def requests(draw):
    d_model = draw(st.sampled_from([8, 16, 24, 32, 48, 64, 96, 128]))
    d_ff = d_model * draw(st.sampled_from([1, 2, 3, 4]))
    layers = draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
    experts = draw(st.sampled_from([1, 1, 2, 4]))
    batch = experts * draw(st.sampled_from([1, 2, 4, 8, 12, 16, 32, 64]))
    wl = workload_from_shape(d_model, d_ff, layers, experts, batch)
    hw = draw(st.sampled_from(SHIPPED))
    if draw(st.booleans()):
        kwargs = {"gpus": draw(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 24])), "days": None}
    else:
        kwargs = {"days": draw(st.sampled_from([1e-7, 1e-6, 1e-5, 1e-4, 1e-3]))}
    kwargs["schedule"] = draw(st.sampled_from(["auto", "1f1b", "zb-h2"]))
    kwargs["solver"] = draw(st.sampled_from(["cpsat", "exhaustive"]))
    return hw, wl, kwargs


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_api_is_total_and_honest(req):
    hw_name, wl, kwargs = req
    hw = get_hardware(hw_name)
    try:
        p = api.plan(workload=wl, gpu=hw, time_limit_s=5, workers=2, **kwargs)
    except (InvalidInput, Infeasible) as exc:
        if isinstance(exc, Infeasible):
            assert exc.explanation and "explanation failed" not in exc.explanation
        return
    lay = Layout(dp=p.layout.dp, tp_ff=p.layout.tp_ff, tp_model=p.layout.tp_model, pp=p.layout.pp,
                 interleave=p.layout.interleave, ep=p.layout.ep, microbatches=p.layout.microbatches,
                 schedule=p.layout.schedule, placement={k: tuple(v) for k, v in p.layout.placement.items()})
    assert check_layout(hw, wl, lay) == []
    assert p.memory.total_bytes <= p.memory.capacity
    ev = fresh_evaluate(hw, wl, lay)
    assert p.step_time_s == ev.step.step_s
    assert ev.step.step_s >= floor_bound(hw, wl).step_s * (1 - 1e-12)  # the explanation's bound is sound
    if kwargs.get("gpus"):
        assert p.gpus == kwargs["gpus"]
    else:
        assert p.training_days <= kwargs["days"] * (1 + 1e-9)


@settings(max_examples=40, deadline=None)
@given(requests(), st.integers(0, 10**6))
def test_floor_bound_is_below_every_layout(req, seed):
    """floor_bound <= the step time of any valid layout (random layouts of the space)."""
    import random

    from planner.parallel.placement import greedy_placement
    from planner.parallel.space import divisors

    hw_name, wl, _ = req
    hw = get_hardware(hw_name)
    rnd = random.Random(seed)
    pe = wl.batch_tokens // wl.experts
    dp = rnd.choice(divisors(pe))
    m = rnd.choice(divisors(pe // dp))
    pp = rnd.choice(divisors(wl.layers))
    degrees = {"dp": dp, "tp_ff": rnd.choice(divisors(wl.d_ff)), "tp_model": rnd.choice(divisors(wl.d_model)),
               "pp": pp, "ep": rnd.choice(divisors(wl.experts))}
    try:
        placement = greedy_placement(hw, degrees)
    except InvalidInput:
        return
    lay = Layout(**degrees, interleave=rnd.choice(divisors(wl.layers // pp)), microbatches=m, placement=placement)
    assert fresh_evaluate(hw, wl, lay).step.step_s >= floor_bound(hw, wl).step_s * (1 - 1e-12)


# --------------------------------------------------------------------------------------------------
# Extreme but valid inputs (measurements: benchmarks/extremes.py, docs/benchmarks.md "Extreme inputs")
# --------------------------------------------------------------------------------------------------

FIVE_LEVELS = (Path(__file__).parent / "data" / "five-level.toml").read_text(encoding="utf-8")
"""4 per board, 8 per node, 64 per rack, 1024 per pod, unbounded DC (also used by benchmarks/extremes.py)."""

LIMIT = 20.0
SLACK = 15.0  # interpreter start-up, space building and the explanation


def _timed(capsys, argv):
    t0 = time.perf_counter()
    code, out, err = invoke(capsys, argv)
    return code, out, err, time.perf_counter() - t0


def _finished_clearly(code, out, err):
    assert "Traceback" not in out + err
    assert code in (0, 1), err
    if code == 1 and out.lstrip().startswith("{"):  # --json: the explanation is in the document, stderr is empty
        assert err == "" and "explanation failed" not in json.loads(out)["explanation"]
    elif code == 1:
        assert err.startswith("infeasible: ") and "explanation failed" not in err


def test_extreme_1e35_flop(capsys):
    code, out, err, dt = _timed(capsys, ["plan", "--compute", "1e35", "--time-limit", str(LIMIT), "--json"])
    _finished_clearly(code, out, err)
    assert code == 1 and err == "" and "latency wall" in json.loads(out)["explanation"]
    assert dt < LIMIT + SLACK


def test_extreme_thousands_of_experts(capsys):
    code, out, err, dt = _timed(capsys, ["plan", "--d-model", "1024", "--d-ff", "4096", "--layers", "8", "--experts",
                                         "2048", "--batch-tokens", str(2048 * 64), "--time-limit", str(LIMIT),
                                         "--json"])
    _finished_clearly(code, out, err)
    assert dt < LIMIT + SLACK
    if code == 0:
        assert json.loads(out)["workload"]["experts"] == 2048


def test_extreme_one_gpu(capsys):
    code, out, err, dt = _timed(capsys, ["plan", "--compute", "1e24", "--gpus", "1", "--time-limit", str(LIMIT)])
    _finished_clearly(code, out, err)
    assert code == 1 and "does not fit in memory on 1 GPU" in err
    code, out, err, dt = _timed(capsys, ["plan", *TINY, "--gpus", "1", "--time-limit", str(LIMIT), "--json"])
    assert code == 0 and json.loads(out)["gpus"] == 1


@pytest.mark.slow
def test_extreme_five_network_levels(capsys, tmp_path):
    hw = tmp_path / "five.toml"
    hw.write_text(FIVE_LEVELS)
    assert len(get_hardware(str(hw)).levels) == 5
    code, out, err, dt = _timed(capsys, ["plan", "--compute", "1e24", "--gpu", str(hw), "--time-limit", str(LIMIT),
                                         "--json"])
    _finished_clearly(code, out, err)
    assert dt < LIMIT + SLACK, f"took {dt:.1f} s with --time-limit {LIMIT:g}"
    if code == 0:
        assert len(json.loads(out)["layout"]["placement"]["dp"]) == 5


def test_five_network_levels_small(capsys, tmp_path):
    hw = tmp_path / "five.toml"
    hw.write_text(FIVE_LEVELS)
    code, out, err, dt = _timed(capsys, ["plan", *TINY, "--gpu", str(hw), "--days", "1e-3", "--time-limit",
                                         str(LIMIT), "--json"])
    _finished_clearly(code, out, err)
    assert code == 0
    assert len(json.loads(out)["layout"]["placement"]["dp"]) == 5
    assert dt < LIMIT + SLACK


@pytest.mark.slow
def test_extreme_1e40_sparse_deepseek(capsys):
    code, out, err, dt = _timed(capsys, ["plan", "--compute", "1e40", "--sparse", "--batch-scaling", "deepseek",
                                         "--time-limit", str(LIMIT)])
    _finished_clearly(code, out, err)
    assert dt < LIMIT + SLACK
