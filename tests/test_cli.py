"""The command line (README.md, "Commands"): the JSON contract, the rich tables, the exit codes and one-line errors.

Commands run in-process through `planner.cli.run` (the function behind both console scripts) so the suite stays
fast; a few tests start the real console scripts to check what a shell user sees. Searches use the exhaustive
enumerator on a tiny explicit shape (N_p = 2 * 4 * 256 * 1024 = 2.1M parameters, batch 64 tokens; ~20 ms per
search on --gpus 8) so no test waits for CP-SAT.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from cli_helpers import BIN, EXH, TINY, invoke

import planner.api
from planner.cli import app, plan_app, run
from planner.errors import InvalidInput
from planner.hardware import get_hardware, hardware_names
from planner.parallel.placement import greedy_placement, parse_placement
from planner.render.plan import plan_renderables
from planner.schema import MemoryReport, Plan


def plan_json(capsys, *extra: str) -> dict:
    code, out, err = invoke(capsys, ["plan", *TINY, *EXH, "--json", *extra])
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def p8(tmp_path_factory) -> tuple[dict, Path]:
    """The tiny model on a fixed 8-GPU H100 node, as printed by `plan --json`, and the file holding it."""
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        assert run(app, ["plan", *TINY, *EXH, "--gpus", "8", "--json"], "planner") == 0
    path = tmp_path_factory.mktemp("plans") / "p8.json"
    path.write_text(buf.getvalue())
    return json.loads(buf.getvalue()), path


# --------------------------------------------------------------------------------------------------
# plan --json: the contract with provisioning scripts
# --------------------------------------------------------------------------------------------------


def test_plan_json_has_spec_keys(p8):
    doc, _ = p8
    for key in ("status", "gpus", "nodes", "mfu", "training_days", "step_time_s", "hardware", "workload", "layout",
                "breakdown", "memory", "solver"):
        assert key in doc, key
    assert doc["status"] == "optimal"
    assert doc["hardware"] == "h100"
    assert doc["gpus"] == 8 and doc["nodes"] == 1
    wl = doc["workload"]
    for key in ("compute_flop", "d_model", "d_ff", "layers", "experts", "batch_tokens", "tokens", "params",
                "active_params"):
        assert key in wl, key
    # Hand calculation from the flags: N_p = 2 * 4 * 1 * 256 * 1024, D = 20 N_p, T = 6 N_p D.
    assert (wl["d_model"], wl["d_ff"], wl["layers"], wl["experts"], wl["batch_tokens"]) == (256, 1024, 4, 1, 64)
    assert wl["params"] == wl["active_params"] == 2_097_152
    assert wl["tokens"] == 41_943_040
    assert wl["compute_flop"] == pytest.approx(6 * 2_097_152 * 41_943_040, rel=1e-12)
    lay = doc["layout"]
    for key in ("dp", "tp_ff", "tp_model", "pp", "interleave", "ep", "microbatches", "schedule", "placement"):
        assert key in lay, key
    assert set(lay["placement"]) == {"dp", "tp_ff", "tp_model", "pp", "ep", "cp"}
    for name, factors in lay["placement"].items():
        assert len(factors) == 2  # NVLink, InfiniBand: one factor per level, bottom-up
        assert math.prod(factors) == lay[name]
    assert lay["dp"] * lay["tp_ff"] * lay["tp_model"] * lay["pp"] * lay["ep"] == 8
    # One 8-GPU node fills the NVLink level and nothing above it.
    assert math.prod(f[0] for f in lay["placement"].values()) == 8
    assert math.prod(f[1] for f in lay["placement"].values()) == 1
    assert doc["breakdown"]["step_s"] == doc["step_time_s"]
    assert doc["memory"]["capacity"] == 80e9
    for key in ("name", "status", "wall_s", "space_size", "gap"):
        assert key in doc["solver"], key
    assert doc["solver"]["name"] == "exhaustive" and doc["solver"]["status"] == "optimal"
    assert doc["solver"]["gap"] == 0
    assert doc["training_days"] == pytest.approx(doc["step_time_s"] * 655_360 / 86_400, rel=1e-12)
    assert doc["mfu"] == pytest.approx(wl["compute_flop"] / (8 * doc["peak_flops"] * doc["training_days"] * 86_400),
                                       rel=1e-12)


def test_plan_json_is_the_only_stdout_and_validates(capsys):
    code, out, err = invoke(capsys, ["plan", *TINY, *EXH, "--gpus", "8", "--json"])
    assert code == 0 and err == ""
    assert out.lstrip().startswith("{") and out.rstrip().endswith("}")
    Plan.model_validate_json(out)  # the document is a Plan, as published in docs/plan.schema.json


def test_plan_json_is_deterministic_apart_from_wall_time(capsys):
    a = plan_json(capsys, "--gpus", "16")
    b = plan_json(capsys, "--gpus", "16")
    for doc in (a, b):
        doc["solver"].pop("wall_s"), doc["solver"].pop("cpsat_s")
    assert a == b
    # 16 GPUs span two nodes: the InfiniBand level contributes a factor 2.
    assert a["nodes"] == 2
    assert math.prod(f[1] for f in a["layout"]["placement"].values()) == 2


def test_plan_fixed_cluster_with_a_deadline_it_misses_is_infeasible(capsys):
    # On one H100 the tiny model needs 8.3e-4 days (test_plan_deadline_mode_finds_one_gpu): --gpus 1 --days 1e-4
    # cannot be met, and the user must hear so (exit 1, status infeasible), with the fastest layout attached.
    code, out, err = invoke(capsys, ["plan", *TINY, *EXH, "--gpus", "1", "--days", "1e-4", "--json"])
    assert code == 1
    doc = json.loads(out)
    assert doc["status"] == "infeasible" and doc["fixed_gpus"] is True and doc["deadline_days"] == 1e-4
    assert doc["layout"] is not None and doc["training_days"] > 1e-4
    # the JSON contract: the explanation is in the document, stderr stays empty
    assert err == ""
    why = doc["explanation"]
    assert why.startswith("on 1 GPU of h100") and "more than the 0.0001 days asked" in why
    # a deadline the cluster does meet: an ordinary fixed-cluster plan that records the deadline
    doc = plan_json(capsys, "--gpus", "1", "--days", "1e-3")
    assert doc["status"] == "optimal" and doc["fixed_gpus"] is True and doc["deadline_days"] == 1e-3
    code, out, err = invoke(capsys, ["plan", *TINY, *EXH, "--gpus", "1", "--days", "1e-4"])
    assert code == 1 and out.startswith("MISSES THE DEADLINE: 1 x ")


def test_plan_deadline_mode_finds_one_gpu(capsys):
    # On one H100 this model trains in 8.3e-4 days (latency-bound 109 µs steps, 655,360 of them); the deadline
    # 1e-3 days is met by one GPU, so the fewest-GPU optimum is 1.
    doc = plan_json(capsys, "--days", "1e-3")
    assert doc["status"] == "optimal"
    assert doc["gpus"] == 1 and doc["nodes"] == 1
    assert doc["deadline_days"] == 1e-3
    assert doc["training_days"] <= 1e-3


def test_plan_console_script_alias_matches_planner_plan(capsys):
    code_a, out_a, _ = invoke(capsys, [*TINY, *EXH, "--gpus", "8", "--json"], plan_app, "plan")
    code_b, out_b, _ = invoke(capsys, ["plan", *TINY, *EXH, "--gpus", "8", "--json"])
    assert code_a == code_b == 0
    a, b = json.loads(out_a), json.loads(out_b)
    for doc in (a, b):
        doc["solver"].pop("wall_s"), doc["solver"].pop("cpsat_s")
    assert a == b


def test_plan_price_gives_cost(capsys):
    doc = plan_json(capsys, "--gpus", "8", "--price-per-gpu-hour", "2.5")
    assert doc["cost_usd"] == pytest.approx(doc["gpu_hours"] * 2.5, rel=1e-12)


# --------------------------------------------------------------------------------------------------
# plan: rich output
# --------------------------------------------------------------------------------------------------


def test_plan_rich_output_shows_every_section(capsys, p8):
    doc, _ = p8
    code, out, err = invoke(capsys, ["plan", *TINY, *EXH, "--gpus", "8", "--price-per-gpu-hour", "2"])
    assert code == 0, err
    for fragment in (
        "Model", "d_model", "256", "1,024", "2.10e6", "Cluster", "GPU-hours", "cost",
        "Layout", "NVLink", "InfiniBand", "TP,ff", "TP,model", "PP", "EP", "DP",
        doc["layout"]["schedule"], "interleave", "microbatches", "nanobatch",
        "step time", "matmul", "TP bandwidth", "PP/EP bandwidth", "DP bandwidth", "latency", "bubble",
        "critical path", "training time", "MFU", "989.4 TFLOP/s", "6 * active_params * tokens", "bottleneck",
        "Memory per GPU", "weights", "optimizer", "activations", "capacity", "80 GB",
        "Solver", "exhaustive", "21,879", "proven optimal",
    ):
        assert fragment in out, fragment
    assert doc["bottleneck"].split(" (")[0] in out
    assert "NOT PROVEN OPTIMAL" not in out
    assert "\x1b[" not in out  # no terminal escapes when piped


def test_rich_output_says_not_proven_when_search_stopped(p8):
    from rich.console import Console

    doc, _ = p8
    plan = Plan.model_validate(doc)
    stopped = plan.model_copy(update={
        "status": "feasible",
        "solver": plan.solver.model_copy(update={"status": "feasible", "gap": 0.125, "bound": 1.5}),
    })
    console = Console(record=True, width=140)
    for item in plan_renderables(stopped):
        console.print(item)
    text = console.export_text()
    assert "NOT PROVEN OPTIMAL" in text
    assert "proven optimal" not in text
    assert "gap 0.125" in text and "bound 1.5" in text


def test_rich_output_when_search_stopped_without_a_layout(p8):
    from rich.console import Console

    doc, _ = p8
    plan = Plan.model_validate(doc)
    nothing = plan.model_copy(update={
        "status": "infeasible", "layout": None, "breakdown": None, "memory": None, "gpus": None, "nodes": None,
        "solver": plan.solver.model_copy(update={"status": "unknown", "gap": None}),
    })
    console = Console(record=True, width=140)
    for item in plan_renderables(nothing):
        console.print(item)
    text = console.export_text()
    assert "NOT PROVEN INFEASIBLE" in text and "NO LAYOUT FOUND" in text
    assert "proven infeasible" not in text and "proven optimal" not in text


def test_plan_notes_are_printed(p8):
    from rich.console import Console

    doc, _ = p8
    plan = Plan.model_validate({**doc, "notes": ["the rounded shape trains 1.17e28 FLOP"]})
    console = Console(record=True, width=140)
    for item in plan_renderables(plan):
        console.print(item)
    assert "the rounded shape trains 1.17e28 FLOP" in console.export_text()


# --------------------------------------------------------------------------------------------------
# Infeasible
# --------------------------------------------------------------------------------------------------


def test_infeasible_plan_exit_1_with_explanation_and_json(capsys):
    # 655,360 steps cannot take 1e-6 days (86 ms): even a 1-GPU step is ~109 µs -> 71 s.
    code, out, err = invoke(capsys, ["plan", *TINY, *EXH, "--days", "1e-6", "--json"])
    assert code == 1
    assert err == ""  # with --json the document carries the explanation; nothing on stderr
    doc = json.loads(out)
    assert doc["status"] == "infeasible" and doc["explanation"]
    assert doc["layout"] is None and doc["gpus"] is None
    assert doc["explanation"].startswith("past the latency wall: no layout of h100 trains this model in 1e-06 days")
    assert doc["solver"]["status"] == "infeasible"
    code, out, err = invoke(capsys, ["plan", *TINY, *EXH, "--days", "1e-6"])  # without --json: the line on stderr
    assert code == 1 and err.startswith("infeasible: past the latency wall: no layout of h100 trains this model")


# --------------------------------------------------------------------------------------------------
# evaluate
# --------------------------------------------------------------------------------------------------


def _layout_flags(lay: dict) -> list[str]:
    placement = ";".join(f"{d}={','.join(map(str, f))}" for d, f in lay["placement"].items())
    return ["--dp", str(lay["dp"]), "--tp-ff", str(lay["tp_ff"]), "--tp-model", str(lay["tp_model"]),
            "--pp", str(lay["pp"]), "--interleave", str(lay["interleave"]), "--ep", str(lay["ep"]),
            "--microbatches", str(lay["microbatches"]), "--schedule", lay["schedule"], "--placement", placement]


def test_evaluate_by_flags_matches_plan(capsys, p8):
    doc, _ = p8
    code, out, err = invoke(capsys, ["evaluate", *TINY, *_layout_flags(doc["layout"]), "--json"])
    assert code == 0, err
    ev = json.loads(out)
    assert ev["step_time_s"] == doc["step_time_s"]
    assert ev["breakdown"] == doc["breakdown"]
    assert ev["memory"] == doc["memory"]
    assert ev["layout"] == doc["layout"]
    assert ev["mfu"] == doc["mfu"]


def test_evaluate_plan_file_round_trip(capsys, p8):
    doc, path = p8
    code, out, err = invoke(capsys, ["evaluate", "--plan", str(path), "--json"])
    assert code == 0, err
    ev = json.loads(out)
    assert ev["hardware"] == "h100"
    assert ev["step_time_s"] == doc["step_time_s"]
    assert ev["layout"] == doc["layout"]
    assert ev["workload"] == doc["workload"]


def test_evaluate_plan_file_rich(capsys, p8):
    _, path = p8
    code, out, err = invoke(capsys, ["evaluate", "--plan", str(path)])
    assert code == 0, err
    assert "Evaluated layout" in out and "not searched" in out
    assert "proven optimal" not in out  # no search ran, so nothing was proven


def test_evaluate_what_if_on_other_hardware_replaces_greedily(capsys, p8):
    doc, path = p8
    code, out, err = invoke(capsys, ["evaluate", "--plan", str(path), "--gpu", "h100-superpod", "--json"])
    assert code == 0, err
    ev = json.loads(out)
    assert ev["hardware"] == "h100-superpod"
    assert ev["layout"]["levels"] == ["NVLink", "NVLink Switch (SuperPOD)", "InfiniBand"]
    for name, factors in ev["layout"]["placement"].items():
        assert len(factors) == 3 and math.prod(factors) == doc["layout"][name]
    assert any("re-placed" in n for n in ev["notes"])
    # Same hardware with a different GPU: the placement is kept, the step time changes.
    code, out, err = invoke(capsys, ["evaluate", "--plan", str(path), "--gpu", "v100", "--json"])
    assert code == 0, err
    ev = json.loads(out)
    assert ev["layout"]["placement"] == doc["layout"]["placement"]
    assert not any("re-placed" in n for n in ev["notes"])
    assert ev["step_time_s"] != doc["step_time_s"]


def test_evaluate_layout_that_does_not_fit_memory_exits_1(capsys):
    # gpt3-175b-mlp on 8 GPUs with TP 8 only: every GPU holds N_p / 8 ~ 2.2e10 parameters, i.e.
    # (2 + 2 + 12) bytes x 2.2e10 ~ 350 GB of weights, gradients and optimizer state > 80 GB.
    code, out, err = invoke(capsys, ["evaluate", "--model", "gpt3-175b-mlp", "--tp-ff", "8", "--json"])
    assert code == 1
    doc = json.loads(out)
    assert doc["memory"]["total_bytes"] > doc["memory"]["capacity"]
    assert any("DOES NOT FIT" in n for n in doc["notes"])
    assert err == ""  # the JSON contract: nothing on stderr
    # the document itself says the layout cannot run (scripts read `status`, not only the exit code)
    assert doc["status"] == "infeasible" and "GB per GPU" in doc["explanation"]
    code, out, err = invoke(capsys, ["evaluate", "--model", "gpt3-175b-mlp", "--tp-ff", "8"])
    assert code == 1 and out.startswith("Evaluated layout CANNOT RUN: 8 x ")


def test_evaluate_a_layout_inside_the_headroom_is_tight_not_does_not_fit(capsys, p8):
    # A headroom between what is free and the whole capacity: the layout fits the device but not the margin a plan
    # keeps. The verdict says so ("tight", the GB left free), not "does not fit", and exits 1 as plans would refuse it.
    doc, path = p8
    m = doc["memory"]
    free = m["capacity"] - m["total_bytes"]
    assert 0 < free < m["capacity"]
    headroom = (free + m["capacity"]) / 2 / 1e9
    code, out, err = invoke(capsys, ["evaluate", "--plan", str(path), "--memory-headroom", repr(headroom), "--json"])
    assert code == 1
    ev = json.loads(out)
    assert ev["status"] == "infeasible" and ev["explanation"].startswith("the layout is tight: it needs ")
    assert f"which leaves {free / 1e9:.2f} GB free, less than the {headroom:.2f} GB of headroom" in ev["explanation"]
    assert any(n.startswith("TIGHT: ") for n in ev["notes"]) and not any("DOES NOT FIT" in n for n in ev["notes"])
    assert ev["memory"]["verdict"] == "tight" and doc["memory"]["verdict"] == "fits"
    # the JSON's verdict is recomputed from the three numbers when a plan is read back, whatever the file says
    forged = MemoryReport.model_validate({**doc["memory"], "verdict": "does not fit"})
    assert forged.verdict == "fits"
    assert MemoryReport.model_validate({**doc["memory"], "headroom_bytes": headroom * 1e9}).verdict == "tight"
    assert MemoryReport.model_validate({**doc["memory"], "total_bytes": 2 * m["capacity"]}).verdict == "does not fit"
    code, out, err = invoke(capsys, ["evaluate", "--plan", str(path), "--memory-headroom", repr(headroom)])
    assert code == 1 and out.startswith("Evaluated layout INSIDE THE MEMORY HEADROOM: 8 x ")
    assert "TIGHT: fits HBM, not the headroom" in out
    # a headroom it leaves free: fits (exit 0)
    code, out, err = invoke(capsys, ["evaluate", "--plan", str(path), "--memory-headroom", repr(free / 2e9), "--json"])
    assert code == 0 and json.loads(out)["status"] == "feasible"


def test_evaluate_against_a_deadline_it_misses_exits_1(capsys, p8):
    doc, path = p8
    days = doc["training_days"]
    code, out, err = invoke(capsys, ["evaluate", "--plan", str(path), "--days", repr(days * 1.01), "--json"])
    assert code == 0 and json.loads(out)["status"] == "feasible", err
    code, out, err = invoke(capsys, ["evaluate", "--plan", str(path), "--days", repr(days / 2), "--json"])
    assert code == 1
    ev = json.loads(out)
    assert ev["status"] == "infeasible" and f"{days:.4g} days" in ev["explanation"]
    assert err == ""  # the JSON contract: nothing on stderr
    code, out, err = invoke(capsys, ["evaluate", "--plan", str(path), "--days", repr(days / 2)])
    assert code == 1 and out.startswith("Evaluated layout MISSES THE DEADLINE: ")
    assert err.startswith("infeasible: the layout trains in ") and len(err.splitlines()) == 1


def test_greedy_placement_fills_lowest_level_tp_first():
    h100 = get_hardware("h100")
    degrees = {"dp": 4, "tp_ff": 4, "tp_model": 2, "pp": 1, "ep": 1}  # 32 GPUs = 4 nodes
    assert greedy_placement(h100, degrees) == {
        "dp": (1, 4), "tp_ff": (4, 1), "tp_model": (2, 1), "pp": (1, 1), "ep": (1, 1), "cp": (1, 1)}
    # PP comes before DP: 8 = tp_ff 2 * pp 4 on NVLink, dp 8 across nodes.
    assert greedy_placement(h100, {"dp": 8, "tp_ff": 2, "tp_model": 1, "pp": 4, "ep": 1}) == {
        "dp": (1, 8), "tp_ff": (2, 1), "tp_model": (1, 1), "pp": (4, 1), "ep": (1, 1), "cp": (1, 1)}
    superpod = get_hardware("h100-superpod")  # levels 8 | 256 | inf
    assert greedy_placement(superpod, {"dp": 64, "tp_ff": 8, "tp_model": 1, "pp": 1, "ep": 1}) == {
        "dp": (1, 32, 2), "tp_ff": (8, 1, 1), "tp_model": (1, 1, 1), "pp": (1, 1, 1), "ep": (1, 1, 1), "cp": (1, 1, 1)}
    # Given factors are kept; the rest fill the room they leave.
    assert greedy_placement(h100, degrees, {"dp": (2, 2)}) == {
        "dp": (2, 2), "tp_ff": (4, 1), "tp_model": (1, 2), "pp": (1, 1), "ep": (1, 1), "cp": (1, 1)}
    # A cluster that spans nodes must be whole nodes.
    with pytest.raises(InvalidInput, match="12 GPUs"):
        greedy_placement(h100, {"dp": 12, "tp_ff": 1, "tp_model": 1, "pp": 1, "ep": 1})


def test_parse_placement():
    degrees = {"dp": 4, "tp_ff": 8, "tp_model": 1, "pp": 1, "ep": 1}
    assert parse_placement("dp=1,4; tp-ff=8,1", degrees, 2) == {"dp": (1, 4), "tp_ff": (8, 1)}
    for bad, match in (("dp=1,2", "multiply to 2"), ("dp=4", "1 factor"), ("xx=1,1", "one of"),
                       ("dp=a,b", "whole numbers"), ("dp=1,4;dp=1,4", "twice"), ("", "empty"),
                       ("dp=0,4", ">= 1")):
        with pytest.raises(InvalidInput, match=match):
            parse_placement(bad, degrees, 2)


# --------------------------------------------------------------------------------------------------
# limits, hardware, schema
# --------------------------------------------------------------------------------------------------


def test_limits_prints_table_2(capsys):
    code, out, err = invoke(capsys, ["limits"])
    assert code == 0, err
    # The paper's Table 2 prints d' = 26.4k, b' = 591 for DGX H100 and d' = 5.9k, b' = 16 in a SuperPOD;
    # our rendering has three figures (590 and 5.86k: see tests/test_limits.py for the comparison rule).
    for fragment in ("v100", "a100", "h100", "h100-superpod", "26.4k", "590", "5.86k", "16 (SRAM)", "3.96e15",
                     "Eq. 18"):
        assert fragment in out, fragment


def test_limits_json(capsys):
    code, out, err = invoke(capsys, ["limits", "--json", "--gpu", "h100", "--gpu", "h100-superpod"])
    assert code == 0, err
    rows = json.loads(out)
    assert [r["hardware"] for r in rows] == ["h100", "h100-superpod"]
    for r in rows:
        for key in ("d_prime", "b_prime", "t_critical_flop", "t_limit_flop"):
            assert key in r
    assert round(rows[0]["d_prime"], -2) == 26_400  # Table 2: 26.4k
    # Eq. 18 at the paper's values (b = 4e6, L = 100, 3 months, t_L = 9 µs) is printed as 2e31 FLOP.
    assert 1.5e31 <= rows[0]["t_limit_flop"] < 2.5e31


def test_limits_options_change_the_bound(capsys):
    _, out_a, _ = invoke(capsys, ["limits", "--json", "--gpu", "h100"])
    _, out_b, _ = invoke(capsys, ["limits", "--json", "--gpu", "h100", "--latency-us", "0.9"])
    a, b = json.loads(out_a)[0], json.loads(out_b)[0]
    # Eq. 18 scales as t_L^-2: ten times less latency, a hundred times more compute.
    assert b["t_limit_flop"] == pytest.approx(100 * a["t_limit_flop"], rel=1e-9)


def test_hardware_list(capsys):
    code, out, err = invoke(capsys, ["hardware", "list"])
    assert code == 0, err
    for name in hardware_names():
        assert name in out
    assert "H100 SXM5" in out and "989.4 TFLOP/s" in out and "80 GB" in out and "InfiniBand" in out
    code, out, _ = invoke(capsys, ["hardware", "list", "--json"])
    assert code == 0 and len(json.loads(out)) == len(hardware_names())


def test_hardware_show(capsys):
    code, out, err = invoke(capsys, ["hardware", "show", "h100"])
    assert code == 0, err
    for fragment in ("max_clock_MHz", "1830", "hbm_GB", "80", "InfiniBand", "bw_bidir_GBps", "900", "lat_us",
                     "1.125", "gpu_model.py", "989.4 TFLOP/s", "derived"):
        assert fragment in out, fragment


def test_hardware_show_user_file_and_infinite_bandwidth(capsys, tmp_path):
    text = resources.files("planner.hardware_specs").joinpath("h100.toml").read_text(encoding="utf-8")
    path = tmp_path / "mine.toml"
    path.write_text(text.replace('name = "h100"', 'name = "mine"', 1))
    code, out, err = invoke(capsys, ["hardware", "show", str(path)])
    assert code == 0, err
    assert "mine" in out
    code, out, err = invoke(capsys, ["hardware", "show", "h100-infinite-ll", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["levels"][0]["bw_bidir_Bps"] == "Infinity"  # not null: the value survives a round trip


def test_packaged_schema_is_generated_from_the_code():
    """`planner schema` prints planner/schema/plan.schema.json (package data) instead of building the models: that
    file must be what the models generate today."""
    from planner.cli.schema import PACKAGED_SCHEMA, plan_schema_text

    assert PACKAGED_SCHEMA.read_text(encoding="utf-8") == plan_schema_text(), (
        "planner/schema/plan.schema.json is stale: regenerate it with `planner schema --write`")


def test_schema_matches_published_file(capsys):
    code, out, err = invoke(capsys, ["schema"])
    assert code == 0, err
    published = (Path(__file__).resolve().parent.parent / "docs" / "plan.schema.json").read_text(encoding="utf-8")
    assert out == published, "docs/plan.schema.json is stale: regenerate it with `planner schema --write`"
    schema = json.loads(out)
    assert schema["oneOf"] == [{"$ref": f"#/$defs/{name}"} for name in ("Plan", "LaunchDocument", "Comparison",
                                                                        "ErrorDocument")]
    plan = schema["$defs"]["Plan"]
    assert plan["title"] == "Plan"
    for key in ("status", "gpus", "nodes", "mfu", "training_days", "step_time_s", "hardware", "workload", "layout",
                "breakdown", "memory", "solver"):
        assert key in plan["properties"], key
    assert set(schema["$defs"]["ErrorDocument"]["properties"]) == {"status", "error"}


# --------------------------------------------------------------------------------------------------
# Bad input: exit 2, one line on stderr, never a traceback
# --------------------------------------------------------------------------------------------------

BAD = [
    (["plan", "--compute", "1e28", "--gpu", "h900"], "h900"),
    (["plan", "--compute", "0"], "0"),
    (["plan", "--compute", "-1"], "-1"),
    (["plan", "--compute", "nan"], "nan"),
    (["plan", "--compute", "inf"], "inf"),
    (["plan", "--compute", "abc"], "abc"),
    (["plan", "--compute", "1e28", "--days", "0"], "--days"),
    (["plan", "--compute", "1e28", "--days", "nan"], "--days"),
    (["plan", "--compute", "1e28", "--days", "-5"], "--days"),
    (["plan", "--compute", "1e28", "--gpus", "0"], "--gpus"),
    (["plan", "--compute", "1e28", "--gpus", "2.5"], "--gpus"),
    (["plan", "--compute", "1e28", "--time-limit", "0"], "--time-limit"),
    (["plan", "--compute", "1e28", "--workers", "0"], "--workers"),
    (["plan", "--compute", "1e28", "--price-per-gpu-hour", "inf"], "--price-per-gpu-hour"),
    (["plan", "--compute", "1e28", "--schedule", "gpipe"], "gpipe"),
    (["plan", "--compute", "1e28", "--solver", "magic"], "magic"),
    (["plan", "--compute", "1e28", "--batch-scaling", "linear"], "linear"),
    (["plan", "--compute", "1e28", *TINY], "--compute"),
    (["plan", "--model", "gpt3-175b-mlp", "--d-model", "256"], "--model"),
    (["plan", *TINY, "--sparse"], "--sparse"),
    (["plan", "--d-model", "256"], "--d-ff"),
    (["plan", "--d-model", "256.5", "--d-ff", "1024", "--layers", "4", "--batch-tokens", "64"], "256.5"),
    (["plan", "--model", "no-such-model"], "no-such-model"),
    (["plan"], "--compute"),
    (["plan", "--compute", "1e28", "--frobnicate"], "--frobnicate"),
    (["evaluate", *TINY, "--tp-ff", "3"], "tp_ff=3"),
    (["evaluate", *TINY, "--dp", "0"], "--dp"),
    (["evaluate", *TINY, "--tp-ff", "8", "--placement", "tp_ff=2,4"], "tp_ff"),
    (["evaluate", *TINY, "--pp", "2", "--schedule", "zb-h2"], "zb-h2"),
    (["evaluate", *TINY, "--dp", "12"], "12"),
    (["evaluate", "--plan", "/no/such/plan.json"], "/no/such/plan.json"),
    (["limits", "--days", "0"], "--days"),
    (["limits", "--latency-us", "nan"], "--latency-us"),
    (["limits", "--gpu", "tpu"], "tpu"),
    (["hardware", "show", "h900"], "h900"),
]


@pytest.mark.parametrize("argv,named", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(capsys, argv, named):
    code, out, err = invoke(capsys, argv)
    assert code == 2, (out, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert named in lines[0], f"the message should name {named!r}: {lines[0]}"


def test_malformed_files_are_input_errors(capsys, tmp_path):
    toml = tmp_path / "broken.toml"
    toml.write_text("name = 'x'\n[gpu\n")
    js = tmp_path / "broken.json"
    js.write_text('{"status": "optimal"')
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}')
    for argv in (["plan", "--compute", "1e28", "--gpu", str(toml)], ["hardware", "show", str(toml)],
                 ["plan", "--model", str(toml)], ["evaluate", "--plan", str(js)], ["evaluate", "--plan", str(other)]):
        code, out, err = invoke(capsys, argv)
        assert code == 2, (argv, err)
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err


def test_plan_file_with_conflicting_flags(capsys, p8):
    _, path = p8
    code, _, err = invoke(capsys, ["evaluate", "--plan", str(path), "--dp", "2"])
    assert code == 2 and "--dp" in err


def test_internal_error_is_one_line_exit_3(capsys, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(planner.api, "plan", boom)  # what `plan` calls (imported when it runs)
    code, out, err = invoke(capsys, ["plan", "--compute", "1e28"])
    assert code == 3
    assert err == "internal error: RuntimeError: boom second line\n"


def test_keyboard_interrupt_is_not_swallowed(capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(planner.api, "plan", interrupted)
    capsys.readouterr()
    try:
        code = run(app, ["plan", "--compute", "1e28"], "planner")
    except KeyboardInterrupt:
        code = 130
    assert code == 130  # the shell convention for SIGINT, not an error message
    assert "internal error" not in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# The real console scripts (what a shell user sees)
# --------------------------------------------------------------------------------------------------


def _script(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"console script {name} not installed next to {sys.executable}")
    return str(path)


def test_console_scripts(tmp_path):
    out = subprocess.run([_script("plan"), *TINY, *EXH, "--gpus", "8", "--json"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["gpus"] == 8
    bad = subprocess.run([_script("planner"), "plan", "--compute", "abc"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.splitlines()) == 1 and "Traceback" not in bad.stderr
    nan = subprocess.run([_script("plan"), "--compute", "nan", "--days", "90"], capture_output=True, text=True,
                         timeout=120)
    assert nan.returncode == 2 and nan.stderr.startswith("error: ") and len(nan.stderr.splitlines()) == 1


def test_version(capsys):
    from importlib.metadata import version

    code, out, err = invoke(capsys, ["--version"])
    assert code == 0 and out == f"planner {version('planner')}\n" and err == ""


def test_unusable_gpu_count_names_the_nearest_counts_on_both_sides(capsys):
    # 1e28 FLOP (d_model 49152, d_ff 196608, L 512, b 25,165,824 = 3 x 2^23): usable counts are multiples of 8 built
    # from those divisors; 884,736 = 2^15 x 27 lies 115,267 below 1,000,003, and 1,048,576 = 2^20 lies above.
    code, out, err = invoke(capsys, ["plan", "--compute", "1e28", "--gpus", "1000003"])
    assert code == 1
    assert "the nearest usable counts are 884,736 and 1,048,576" in err


def test_plan_trains_the_compute_asked_for_and_paper_budget_keeps_the_paper_rounding(capsys):
    """The issue's headline: `plan --compute 1e28` trains 1e28 (the paper's rule trained 1.1751e28: 120 N_p^2 with
    N_p = 2 x 512 x 49152 x 196608, a hand calculation in tests/test_workload.py)."""
    code, out, _ = invoke(capsys, ["plan", "--compute", "1e28", "--json"])
    assert code == 0
    wl = json.loads(out)["workload"]
    assert wl["compute_flop"] == pytest.approx(1e28, rel=0.005)
    code, out, _ = invoke(capsys, ["plan", "--compute", "1e28", "--budget", "paper", "--json"])
    assert code == 0
    doc = json.loads(out)
    assert doc["workload"]["compute_flop"] == pytest.approx(1.1751e28, rel=1e-4)
    assert doc["gpus"] == 2_359_296  # the paper-rounding answer README quoted before the exact budget
    assert any("paper budget" in n for n in doc["notes"])


# --------------------------------------------------------------------------------------------------
# Help that a newcomer can follow (issue 29, part 5)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--help"], ["plan", "--help"], ["evaluate", "--help"], ["sweep", "--help"],
                                  ["limits", "--help"], ["hardware", "show", "--help"], ["schema", "--help"]])
def test_switches_are_shown_as_switches(capsys, argv):
    code, out, _ = invoke(capsys, argv)
    assert code == 0
    assert "<bool>" not in out  # --json, --quiet, --sparse, --help take no value
    assert "--json / --no-json" not in out


def test_plan_has_a_version_like_planner(capsys):
    code, out, _ = invoke(capsys, ["--version"], plan_app, "plan")
    code2, out2, _ = invoke(capsys, ["--version"])
    assert code == code2 == 0 and out == out2 and out.startswith("planner ")


def test_sp_is_described_in_words(capsys):
    code, out, _ = invoke(capsys, ["plan", "--help"])
    words = " ".join(out.replace("│", " ").split())
    assert code == 0 and "along the sequence over the TP ranks" in words and "reduce-scatter" in words
