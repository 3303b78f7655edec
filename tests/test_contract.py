"""The contract with scripts (issue 26, part 5): every field of every document described with its unit."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from planner.goodput import FailureModel, Goodput
from planner.limits import LimitsRow
from planner.profile import ExecutionProfile
from planner.schema import (
    Comparison,
    ErrorDocument,
    Evaluation,
    Facility,
    Hardware,
    LaunchDocument,
    Plan,
    Workload,
)
from planner.sensitivity import Sensitivity
from planner.sweep import SweepResult
from planner.validation import PublishedRun, ValidationRow
from planner.workload.scaling import ModelPreset

DOCUMENTS: list[type[BaseModel]] = [Plan, Evaluation, ErrorDocument, Hardware, Workload, ExecutionProfile,
                                    FailureModel, Goodput, Sensitivity, LimitsRow, ModelPreset, SweepResult,
                                    PublishedRun, ValidationRow, LaunchDocument, Comparison, Facility]
"""Every document the planner writes (--json of plan, evaluate, limits, sweep, validate, hardware show, --emit, several
--gpu, errors) or reads (hardware, profile, failure-model, facility, preset and runs files; plan files)."""


def undocumented(schema: dict[str, Any]) -> list[str]:
    """'Model.field' for every property of the schema and of every model in its $defs without a description."""
    missing = []
    models = {schema.get("title", "?"): schema, **schema.get("$defs", {})}
    for title, model in models.items():
        for name, prop in model.get("properties", {}).items():
            if not str(prop.get("description", "")).strip():
                missing.append(f"{title}.{name}")
    return missing


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: d.__name__)
def test_every_field_is_described(doc):
    assert undocumented(doc.model_json_schema()) == []


def test_every_model_of_the_documents_layer_is_described():
    """Beyond the list above: every pydantic model in planner.schema (the documents layer), so a new document is
    covered the day it is added."""
    import importlib
    import inspect
    import pkgutil

    import planner.schema as documents

    modules = [documents] + [importlib.import_module(f"planner.schema.{m.name}")
                             for m in pkgutil.iter_modules(documents.__path__)]
    models = {c for m in modules for _, c in inspect.getmembers(m, inspect.isclass)
              if issubclass(c, BaseModel) and c.__module__.startswith("planner.")}
    assert len(models) >= 30
    missing = sorted(f for c in models for f in undocumented(c.model_json_schema()))
    assert missing == []


def test_the_walk_finds_an_undocumented_field():
    """The walk above can fail: a nested model with one bare field is named."""
    from pydantic import Field

    class Inner(BaseModel):
        described: int = Field(description="a count")
        bare: float

    class Outer(BaseModel):
        inner: Inner = Field(description="nested")

    assert undocumented(Outer.model_json_schema()) == ["Inner.bare"]


# --------------------------------------------------------------------------------------------------
# Infeasibility facts and why the cluster is not smaller (issue 26: 1e26 in 60 days)
# --------------------------------------------------------------------------------------------------


def _formable_1e26(n: int) -> bool:
    """By hand, for the 1e26 shape (d_ff = 81,920 = 2^14 5, d_model = 20,480 = 2^12 5, L = 288 = 2^5 3^2, E = 1,
    b = 10,485,760 = 2^21 5): the degrees dividing them multiply to n iff n = 2^a 3^b 5^c with b <= 2 and c <= 3;
    on h100 a cluster larger than a node fills whole nodes of 8."""
    if n > 8 and n % 8:
        return False
    for p, most in ((2, 14 + 12 + 5 + 21), (3, 2), (5, 3)):
        e = 0
        while n % p == 0:
            n //= p
            e += 1
        if e > most:
            return False
    return n == 1


def test_smaller_clusters_say_why_the_size_jumps():
    from planner.api import plan

    p = plan(1e26, "h100", 60)
    w = p.workload
    assert (w.d_ff, w.d_model, w.layers, w.experts, w.batch_tokens) == (81920, 20480, 288, 1, 10485760)
    assert p.gpus == 28_800 == 2**7 * 3**2 * 5**2 and _formable_1e26(p.gpus)
    below = max(n for n in range(1, p.gpus) if _formable_1e26(n))
    assert below == 25_600  # 2^10 5^2
    named, probed = p.smaller_clusters[:-1], p.smaller_clusters[-1]
    # the two nearest whole-node counts below: 28,792 = 8 x 3,599 (59 x 61), 28,784 = 16 x 1,799 (7 x 257)
    assert [(c.gpus, c.status) for c in named] == [(28_792, "no_layout"), (28_784, "no_layout")]
    assert "factor 3,599" in named[0].why and "factor 1,799" in named[1].why
    assert probed.gpus == below and probed.status == "too_slow"
    assert probed.training_days is not None and probed.training_days > 60
    # whole-node counts strictly between 25,600 and 28,800: (28,800 - 25,600) / 8 - 1 = 399, none formable
    assert "the 399 counts between 25,600 and 28,800" in probed.why
    assert not any(_formable_1e26(n) for n in range(below + 1, p.gpus))
    # the probe is what `--gpus 25600` answers: the same days
    assert plan(1e26, "h100", gpus=below).training_days == pytest.approx(probed.training_days, rel=1e-12)


def test_fixed_cluster_without_layout_names_nearest_sizes():
    from planner.api import plan
    from planner.errors import Infeasible

    with pytest.raises(Infeasible) as exc:
        plan(1e26, "h100", gpus=57_344)  # 2^13 x 7: no degree takes the 7
    facts = exc.value.plan.infeasibility
    assert facts.reason == "no_layout"
    lo = max(n for n in range(1, 57_344) if _formable_1e26(n))
    hi = min(n for n in range(57_345, 70_000) if _formable_1e26(n))
    assert (lo, hi) == (51_200, 57_600)
    assert (facts.nearest_gpus_below, facts.nearest_gpus_above) == (lo, hi)
    assert "factor 7" in facts.between


def test_latency_wall_facts():
    """Past the latency wall: the shortest duration is the critical-path bound the explanation states, and the
    largest compute within the deadline is below the request."""
    from planner.api import plan
    from planner.errors import Infeasible

    with pytest.raises(Infeasible) as exc:
        plan(1e28, "h100", 0.5)
    doc = exc.value.plan
    facts = doc.infeasibility
    assert facts.reason == "latency_wall" and doc.gpus is None
    assert facts.shortest_days > 0.5
    assert f"at least {facts.shortest_days:.3g} days" in doc.explanation
    assert facts.largest_compute_flop is not None and 1e26 < facts.largest_compute_flop < 1e28
    assert f"{facts.largest_compute_flop:.3g} FLOP" in doc.explanation


# --------------------------------------------------------------------------------------------------
# api.evaluate at parity with `planner evaluate`
# --------------------------------------------------------------------------------------------------


def _same_document(a: dict, b: dict) -> None:
    for doc in (a, b):
        doc["solver"]["wall_s"] = 0.0
    assert a == b


@pytest.mark.parametrize("argv, kwargs", [
    (["--model", "llama3-8b", "--tp", "8", "--dp", "32", "--mbs", "1", "--sp", "on", "--recompute", "selective",
      "--profile", "realistic", "--set", "profile.overlap.tp=0.5", "--memory-headroom", "3", "--days", "30"],
     dict(layout=dict(tp=8, dp=32, mbs=1, sp=True, recompute="selective"),
          profile="realistic", overrides=["profile.overlap.tp=0.5"], memory_headroom_GB=3.0, days=30.0)),
    (["--model", "deepseek-v3", "--tp", "2", "--pp", "8", "--vpp", "4", "--dp", "64", "--ep", "64", "--etp", "1",
      "--first-stage-layers", "1", "--last-stage-layers", "0", "--mbs", "1", "--sp", "on",
      "--placement", "dp=4,16;tp_ff=2,1;pp=1,8", "--no-goodput"],
     dict(layout=dict(tp=2, pp=8, vpp=4, dp=64, ep=64, etp=1, first_stage_layers=1, last_stage_layers=0, mbs=1,
                      sp=True, placement="dp=4,16;tp_ff=2,1;pp=1,8"), goodput=False)),
])
def test_api_evaluate_matches_the_cli(capsys, argv, kwargs):
    import json

    from cli_helpers import invoke

    from planner import api
    from planner.workload import load_model_preset

    code, out, err = invoke(capsys, ["evaluate", "--gpu", "h100", *argv, "--json"])
    assert code in (0, 1), err
    wl = load_model_preset(argv[1])
    layout = api.megatron_layout(wl, "h100", **kwargs.pop("layout"))
    doc = api.evaluate_plan(layout, "h100", wl, **kwargs)
    cli = json.loads(out)
    # the CLI's notes say how it read Megatron's words; the library call was given a Layout
    cli["notes"] = [n for n in cli["notes"] if not n.startswith(("Megatron layout", "folded expert", "placement "))]
    _same_document(json.loads(doc.model_dump_json()), cli)
    ev = api.evaluate(layout, "h100", wl, profile=kwargs.get("profile"), overrides=kwargs.get("overrides", ()),
                      memory_headroom_GB=kwargs.get("memory_headroom_GB"))
    assert ev.step.step_s == doc.step_time_s and ev.memory.headroom_bytes == doc.memory.headroom_bytes


def test_megatron_layout_arithmetic():
    """Megatron's dp counts the expert ranks: dp 64 with ep 8 is N_DP 8; microbatches = gbs / (dp x mbs)."""
    from planner import api
    from planner.workload import load_model_preset

    wl = load_model_preset("mixtral-8x7b")
    seqs = wl.batch_tokens // wl.seq_len
    lay = api.megatron_layout(wl, "h100", tp=2, dp=64, ep=8, mbs=1)
    assert (lay.dp, lay.ep, lay.tp_ff, lay.microbatches) == (8, 8, 2, seqs // 64)
    with pytest.raises(Exception, match="not a multiple of ep"):
        api.megatron_layout(wl, "h100", dp=12, ep=8)


# --------------------------------------------------------------------------------------------------
# planner models list | show
# --------------------------------------------------------------------------------------------------


def test_models_list_names_every_shipped_preset_and_the_readme_too(capsys):
    import json
    from pathlib import Path

    from cli_helpers import invoke

    root = Path(__file__).resolve().parent.parent
    shipped = sorted(p.stem for p in (root / "models").glob("*.toml"))
    assert len(shipped) >= 11
    code, out, err = invoke(capsys, ["models", "list", "--json"])
    assert code == 0, err
    docs = json.loads(out)
    assert [d["name"] for d in docs] == shipped
    llama = next(d for d in docs if d["name"] == "llama3-8b")
    assert llama["workload"]["layers"] == 32 and llama["workload"]["d_model"] == 4096  # Llama 3 paper, Table 3
    readme = (root / "README.md").read_text()
    assert [n for n in shipped if f"`{n}`" not in readme] == []


def test_models_show(capsys):
    from cli_helpers import invoke

    code, out, _ = invoke(capsys, ["models", "show", "mixtral-8x7b"])
    assert code == 0 and "MoE 8 x top-2" in out and "published" in out
    code, out, err = invoke(capsys, ["models", "show", "no-such-model"])
    assert code == 2 and "unknown model preset 'no-such-model'" in err and "Traceback" not in err


# --------------------------------------------------------------------------------------------------
# --emit with the prediction, and --emit --json
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["megatron", "torchtitan"])
def test_emit_json_carries_plan_prediction_and_config(capsys, tmp_path, target):
    import json
    import subprocess
    import tomllib

    from cli_helpers import invoke

    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--emit", target, "--json"])
    assert code == 0, err
    doc = json.loads(out)
    plan = doc["plan"]
    assert doc["status"] == plan["status"] == "optimal" and doc["target"] == target
    text = doc["text"]
    # the prediction, as comments: the plan's own step time, MFU (as %) and memory
    assert f"step {plan['step_time_s']:.4g} s" in text
    assert f"MFU {plan['mfu'] * 100:.1f}%" in text  # one decimal below 100 % (fmt_pct)
    mem = plan["memory"]
    assert (f"{mem['total_bytes'] / 1e9:.4g} GB of {mem['capacity'] / 1e9:.4g} GB usable HBM "
            f"({mem['total_bytes'] / 2**30:.4g} of {mem['capacity'] / 2**30:.4g} GiB)") in text
    assert all(line.startswith("#") for line in text.splitlines() if "predicted" in line)
    f = tmp_path / "launch"
    f.write_text(text)
    if target == "megatron":
        # sourced by bash, the comments run nothing and the array holds exactly the flags of the document
        got = subprocess.run(["bash", "-c", f'source "{f}"; printf "%s\\n" "${{PLANNER_ARGS[@]}}"'],
                             capture_output=True, text=True, check=True).stdout.split()
        want = [tok for pair in doc["megatron_args"] for tok in pair if tok is not None]
        assert got == want
    else:
        assert tomllib.loads(text) == doc["torchtitan_config"]
    # the text is what --emit alone prints
    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--emit", target])
    assert code == 0 and out.rstrip("\n") == text.rstrip("\n")


def test_emit_json_of_an_infeasible_plan(capsys):
    import json

    from cli_helpers import invoke

    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--days", "1", "--emit",
                                     "megatron", "--json"])
    assert code == 1
    doc = json.loads(out)
    assert doc["status"] == "infeasible" and doc["text"] is None and doc["megatron_args"] is None
    assert doc["plan"]["infeasibility"]["reason"] == "fixed_cluster"


# --------------------------------------------------------------------------------------------------
# Several accelerators in one request (issue 26, part 1)
# --------------------------------------------------------------------------------------------------


def test_a_price_override_flips_the_cost_ranking_where_the_arithmetic_says():
    from planner.compare import compare

    request = dict(compute_flop=1e26, days=90.0, price_per_gpu_hour=2.0, why_smaller=False)
    base = compare(["h100", "h200"], **request)
    opt = {o.hardware: o for o in base.options}
    for o in opt.values():  # by hand: USD = price x GPUs held x wall-clock hours (DGX nodes: no spares)
        assert o.status == "optimal" and o.plan is not None and o.plan.solver.status == "optimal"
        assert o.cost_usd == pytest.approx(2.0 * o.gpus * o.wall_clock_days * 24.0, rel=1e-12)
        assert o.compute_cost_usd == pytest.approx(2.0 * o.plan.gpu_hours, rel=1e-12)
    cheaper, dearer = sorted(opt.values(), key=lambda o: o.cost_usd)
    assert base.best == cheaper.hardware and [o.rank for o in base.options] == [1, 2]
    # The price of the cheaper one at which both cost the same: p* = cost(dearer) / (GPUs x hours of the cheaper).
    p_star = dearer.cost_usd / (cheaper.gpus * cheaper.wall_clock_days * 24.0)
    assert p_star > 2.0
    for factor, best in ((0.999, cheaper.hardware), (1.001, dearer.hardware)):
        moved = compare(["h100", "h200"], prices={cheaper.hardware: p_star * factor}, **request)
        assert moved.best == best
        again = {o.hardware: o for o in moved.options}
        assert again[cheaper.hardware].cost_usd == pytest.approx(dearer.cost_usd * factor, rel=1e-9)
        assert again[dearer.hardware].cost_usd == pytest.approx(dearer.cost_usd, rel=1e-12)  # its price unchanged
        assert again[cheaper.hardware].gpus == cheaper.gpus  # the price moves the ranking, not the plan
    # ranked by GPUs instead: the fewer GPUs first, whatever the prices
    by_gpus = compare(["h100", "h200"], objective="gpus", **request)
    assert [o.gpus for o in by_gpus.options] == sorted(o.gpus for o in base.options)


def test_compare_keeps_options_that_cannot_run_and_says_why(capsys):
    import json

    from cli_helpers import invoke

    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--precision", "fp8", "--gpus", "64",
                                     "--gpu", "a100,h100", "--objective", "days", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    a100, h100 = ({o["hardware"]: o for o in doc["options"]}[n] for n in ("a100", "h100"))
    assert h100["rank"] == 1 and doc["best"] == "h100" and h100["plan"]["gpus"] == 64
    assert a100["rank"] is None and a100["status"] == "error" and "FP8" in a100["why"] and a100["plan"] is None
    # none can meet the request: the document still lists each, exit 1
    code, out, err = invoke(capsys, ["plan", "--compute", "1e26", "--gpus", "8", "--gpu", "h100,h200", "--json"])
    assert code == 1 and err == ""  # the JSON contract: the Comparison says it, nothing on stderr
    doc = json.loads(out)
    assert doc["best"] is None and all(o["status"] == "infeasible" and o["why"] for o in doc["options"])


def test_gpu_all_and_bad_lists():
    from planner.compare import PAPER_SCENARIOS, accelerator_names, parse_prices
    from planner.errors import InvalidInput
    from planner.hardware import hardware_names

    everything = accelerator_names("all")
    assert {"h100", "h200", "b200", "gb200-nvl72"} <= set(everything)
    assert set(everything) | set(PAPER_SCENARIOS) == set(hardware_names())
    assert not set(everything) & set(PAPER_SCENARIOS)
    for bad in ("h100,h100", "all,h100", ","):
        with pytest.raises(InvalidInput):
            accelerator_names(bad)
    assert parse_prices(["h100=2.5"]) == {"h100": 2.5}
    for bad in ("h100", "h100=-1", "h100=nan", "=2"):
        with pytest.raises(InvalidInput, match="NAME=USD"):
            parse_prices([bad])


def test_fractions_are_fractions_in_json_and_percentages_in_text(capsys):
    import json

    from cli_helpers import invoke

    described = [f"{title}.{name}" for title, model in {"Plan": Plan.model_json_schema(),
                                                        **Plan.model_json_schema()["$defs"]}.items()
                 for name, prop in model.get("properties", {}).items()
                 if "fraction (0-1)" in str(prop.get("description", ""))]
    assert {"Plan.mfu", "Plan.hfu", "Goodput.goodput"} <= set(described)
    argv = ["plan", "--compute", "1e23", "--gpu", "h100", "--days", "30"]
    code, out, _ = invoke(capsys, [*argv, "--json"])
    doc = json.loads(out)
    assert code == 0 and 0 < doc["mfu"] < 1 and 0 < doc["hfu"] < 1
    code, text, _ = invoke(capsys, argv)
    assert f"{doc['mfu'] * 100:.1f}%" in text


def test_transformer_fixed_cluster_too_small_for_memory():
    """Llama 3 405B's weights, gradients and Adam state alone are about 16 B x 406e9 = 6.5 TB: 64 GPUs of 80 GB hold
    5.1 TB at most, so no layout fits; the facts say memory, as the explanation does."""
    from planner.api import plan
    from planner.errors import Infeasible
    from planner.workload import load_model_preset

    wl = load_model_preset("llama3-405b")
    assert 16 * wl.params > 64 * 80e9
    with pytest.raises(Infeasible) as exc:
        plan(workload=wl, gpu="h100", gpus=64)
    doc = exc.value.plan
    assert doc.infeasibility.reason == "memory" and "does not fit in the memory" in doc.explanation
    assert doc.infeasibility.nearest_gpus_below < 64 < doc.infeasibility.nearest_gpus_above


def test_comparison_table(capsys):
    from cli_helpers import invoke

    code, out, err = invoke(capsys, ["plan", "--compute", "1e23", "--days", "30", "--gpu", "h100,h200",
                                     "--price-per-gpu-hour", "2", "--objective", "gpus"])
    assert code == 0, err
    for column in ("accelerator", "GPUs", "racks /", "nodes", "(wall-clock)", "$ per", "GPU-hour", "wall-clock",
                   "compute-only", "MW", "MWh", "MFU", "status"):
        assert column in out, column
    assert "ranked by gpus" in out and "h100" in out and "h200" in out and "optimal" in out
    code, out, err = invoke(capsys, ["plan", "--compute", "1e23", "--gpu", "h100,h200", "--emit", "megatron"])
    assert code == 2 and "takes one accelerator" in err


def test_four_accelerators_for_1e26_in_90_days_by_cost():
    """The issue's request: h100, h200, b200 and gb200-nvl72 for 1e26 FLOP in 90 days, ranked by cost, each with $
    wall-clock and compute-only, MW and MWh."""
    from planner.compare import compare

    c = compare(["h100", "h200", "b200", "gb200-nvl72"], compute_flop=1e26, days=90.0, why_smaller=False)
    assert c.objective == "cost" and [o.rank for o in c.options] == [1, 2, 3, 4]
    costs = [o.cost_usd for o in c.options]
    assert costs == sorted(costs) and c.best == c.options[0].hardware
    for o in c.options:
        assert o.status == "optimal" and o.wall_clock_days <= 90
        assert None not in (o.cost_usd, o.compute_cost_usd, o.facility_power_MW, o.energy_MWh)
        # by hand: MWh = MW x wall-clock hours (no failures in the paper profile: wall-clock = compute days)
        assert o.energy_MWh == pytest.approx(o.facility_power_MW * o.wall_clock_days * 24.0, rel=1e-9)
        assert o.compute_cost_usd == pytest.approx(o.price_per_gpu_hour * o.plan.gpu_hours, rel=1e-12)
    nvl = next(o for o in c.options if o.hardware == "gb200-nvl72")
    # GB200 NVL72 racks are taken whole: 72 GPUs held per rack, 64 used, so wall-clock / compute-only = 72 / 64
    assert nvl.gpus == nvl.racks * 64
    assert nvl.cost_usd / nvl.compute_cost_usd == pytest.approx(72 / 64, rel=1e-9)


# --------------------------------------------------------------------------------------------------
# Emitted launch text (task qa3's review): every string of a plan JSON that reaches the text, made hostile
# --------------------------------------------------------------------------------------------------

EMITTED_STRINGS = [("gpu",), ("profile",), ("bottleneck",), ("workload", "family")]
"""The plan's string fields that `export` copies into the Megatron script or the torchtitan TOML (found by
test_every_plan_string_that_reaches_the_emitted_text_is_listed); every other string stays out of it."""

HOSTILE_TEXT = ["$(touch pwned1)", "`touch pwned2`", "'; touch pwned3; '", "a\ntouch pwned4", "a\rtouch pwned5\n",
                "a\u2028touch pwned6", "a\u2029b\u0085touch pwned7", "\x1b]0;title\x07", "x\x00y", "a\\", "\"]\n[x]",
                "${PATH:?pwned8}", "#", "'", "$((1/0))"]


def _plan_json(capsys, tmp_path) -> dict[str, Any]:
    import json

    from cli_helpers import invoke

    from planner.cli.app import plan_app

    code, out, err = invoke(capsys, ["--model", "llama3-8b", "--gpus", "64", "--schedule", "1f1b", "--json"],
                            plan_app, "plan")
    assert code == 0, err
    return json.loads(out)


def _export(capsys, doc: dict[str, Any], tmp_path, to: str) -> tuple[int, str, str]:
    import json

    from cli_helpers import invoke

    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return invoke(capsys, ["export", "--plan", str(path), "--to", to])


def _with(doc: dict[str, Any], keys: tuple[str, ...], value: str) -> dict[str, Any]:
    import copy

    out = copy.deepcopy(doc)
    node = out
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return out


@pytest.mark.parametrize("keys", EMITTED_STRINGS, ids="/".join)
def test_hostile_plan_strings_never_run_when_the_export_is_sourced(capsys, tmp_path, keys):
    """Each hostile string in each field that reaches the text: the Megatron script is sourced by bash (nothing
    runs, the array reads back as the layout's flags), the torchtitan TOML parses; a name the plan's validation
    refuses (control characters) is one `error:` line."""
    import subprocess
    import tomllib

    base = _plan_json(capsys, tmp_path)
    for text in HOSTILE_TEXT:
        doc = _with(base, keys, text)
        code, out, err = _export(capsys, doc, tmp_path, "megatron")
        if code == 2:
            assert err.startswith("error: ") and len(err.splitlines()) == 1, err
            continue
        assert code == 0, err
        (tmp_path / "parallel.sh").write_text(out, encoding="utf-8")
        run = subprocess.run(["bash", "-c", "set -u; source ./parallel.sh && printf '%s\\n' \"${PLANNER_ARGS[@]}\""],
                             cwd=tmp_path, capture_output=True, text=True, timeout=30)
        assert run.returncode == 0 and run.stderr == "", (text, run.stderr)
        assert not list(tmp_path.glob("pwned*")), text
        assert run.stdout.split("\n")[0] == "--tensor-model-parallel-size", (text, run.stdout[:200])
        code, out, err = _export(capsys, doc, tmp_path, "torchtitan")
        assert code == 0, err
        assert set(tomllib.loads(out)) == {"training", "parallelism", "activation_checkpoint"}, text


@pytest.mark.slow  # about 5 s: two exports per string of a plan
def test_every_plan_string_that_reaches_the_emitted_text_is_listed(capsys, tmp_path):
    """A marker in each string leaf of a plan (with a model family, so its model lines are written) in turn: the
    fields whose marker shows up in either export are exactly EMITTED_STRINGS, so a new field copied into the text
    fails here until the hostile test above covers it."""
    base = _plan_json(capsys, tmp_path)
    base["workload"]["family"] = "llama3"

    def leaves(node: Any, path: tuple = ()) -> list[tuple]:
        if isinstance(node, dict):
            return [p for k, v in node.items() for p in leaves(v, (*path, k))]
        if isinstance(node, list):
            return [p for i, v in enumerate(node) for p in leaves(v, (*path, i))]
        return [path] if isinstance(node, str) else []

    reaching = set()
    for keys in leaves(base):
        doc = _with(base, keys, "QAMARKER")
        for to in ("megatron", "torchtitan"):
            code, out, _ = _export(capsys, doc, tmp_path, to)
            if "QAMARKER" in out:
                reaching.add(keys)
    assert reaching == set(EMITTED_STRINGS)
