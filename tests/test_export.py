"""From plan to launch (planner/export.py): round trips of every preset's plan, clear errors for what a framework
cannot run, and every emitted name checked against the frameworks' own packages (marked `network`: it downloads
the two releases from the package index; CI runs it)."""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from planner import api
from planner.cost.step import evaluate
from planner.export import (
    MEGATRON,
    MEGATRON_FIELD_OF_FLAG,
    TORCHTITAN,
    ExportError,
    Launch,
    degrees_from_megatron,
    degrees_from_torchtitan,
    emitted_names,
    export_text,
    megatron_text,
    parse_megatron,
    parse_torchtitan,
    torchtitan_text,
)
from planner.hardware import get_hardware
from planner.parallel.placement import greedy_placement
from planner.schema import Layout, Plan, Workload
from planner.search.result import SearchResult
from planner.workload.scaling import load_model_preset, workload_from_shape

H100 = get_hardware("h100")
PRESETS = [("llama3-8b", 256), ("llama3-70b", 2048), ("llama3-405b", 16384), ("gpt3-175b", 1024),
           ("nemotron4-340b", 6144), ("mixtral-8x7b", 512), ("deepseek-v3", 2048)]


def _plan_of(wl: Workload, layout: Layout, dp_overlap: bool = False) -> Plan:
    ev = evaluate(H100, wl, layout, dp_overlap=dp_overlap)
    result = SearchResult("none", "feasible", layout, 0.0, 0, evaluated=1, gap=None)
    return api.plan_from_evaluation(H100, wl, ev, result, None, None, [], dp_overlap=dp_overlap)


def _layout(**values: int) -> Layout:
    degrees = {d: values.get(d, 1) for d in ("dp", "tp_ff", "tp_model", "pp", "ep", "cp")}
    return Layout(**{**degrees, "microbatches": 1, **values}, placement=greedy_placement(H100, degrees))


# --------------------------------------------------------------------------------------------------
# Round trip: every preset's plan, exported and parsed back, gives the same degrees
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["megatron", "torchtitan"])
@pytest.mark.parametrize("name,gpus", PRESETS, ids=[p[0] for p in PRESETS])
def test_every_preset_round_trips(name, gpus, target):
    wl = load_model_preset(name)
    doc = api.plan(workload=wl, gpu="h100", gpus=gpus, runs_on=target)
    assert doc.status == "optimal" and doc.layout is not None
    lay = doc.layout
    text = export_text(doc, H100, wl, target)
    seqs = wl.batch_tokens // wl.seq_len
    if target == "megatron":
        got = degrees_from_megatron(parse_megatron(text))
        assert got == {"tp_ff": lay.tp_ff, "pp": lay.pp, "interleave": lay.interleave, "cp": lay.cp, "ep": lay.ep,
                       "sp": lay.sp, "recompute": lay.recompute, "zero": lay.zero,
                       "micro_batch": seqs // (lay.dp * lay.ep * lay.microbatches), "global_batch": seqs}
        # Megatron's world size: tp x cp x pp x dp, its dp counting the expert ranks.
        assert lay.tp_ff * lay.cp * lay.pp * (seqs // (got["micro_batch"] * lay.microbatches)) == doc.gpus
    else:
        got_tt = degrees_from_torchtitan(parse_torchtitan(text))
        assert got_tt == {"tp_ff": lay.tp_ff, "pp": lay.pp, "cp": lay.cp, "ep": lay.ep, "dp_shard": lay.dp * lay.ep,
                          "interleave_schedule": int(lay.interleave > 1), "global_batch": seqs,
                          "local_batch": seqs // (lay.dp * lay.ep) if lay.pp > 1
                          else seqs // (lay.dp * lay.ep * lay.microbatches)}
        # The microbatch count m: torchtitan accumulates global / (local x dp) local batches without pipelining, and
        # splits the local batch into microbatches of pipeline_parallel_microbatch_size with it.
        par = parse_torchtitan(text)["parallelism"]
        m = (seqs // (got_tt["local_batch"] * got_tt["dp_shard"]) if lay.pp == 1
             else got_tt["local_batch"] // par["pipeline_parallel_microbatch_size"])
        assert m == lay.microbatches
        assert lay.zero == 3 and lay.recompute != 1
    assert lay.tp_model == 1 and lay.schedule == "1f1b"


def test_uneven_ends_are_exported_as_priced():
    # Llama 3 405B: 126 layers on 16 stages of 8: the ends hold 2 fewer between them.
    wl = load_model_preset("llama3-405b")
    doc = _plan_of(wl, _layout(dp=128, tp_ff=8, pp=16, microbatches=16, sp=1))
    args = parse_megatron(export_text(doc, H100, wl, "megatron"))
    first, last = int(args["--decoder-first-pipeline-num-layers"]), int(args["--decoder-last-pipeline-num-layers"])
    assert first + last + 14 * 8 == 126 and 7 <= first <= 8 and 7 <= last <= 8
    par = parse_torchtitan(export_text(doc.model_copy(update={"layout": doc.layout.model_copy(
        update={"zero": 3})}), H100, wl, "torchtitan"))["parallelism"]
    assert par["pipeline_parallel_layers_per_stage"] == 8
    assert par["pipeline_parallel_first_stage_less_layers"] + par["pipeline_parallel_last_stage_less_layers"] == 2


# --------------------------------------------------------------------------------------------------
# What a framework cannot run: a clear error naming the change, never a different layout
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target,values,message", [
    ("megatron", dict(tp_ff=4, tp_model=2), "--tp-model 1"),
    ("torchtitan", dict(tp_ff=4, tp_model=2), "--tp-model 1"),
    ("megatron", dict(dp=8, pp=2, microbatches=4, schedule="zb-h2"), "--schedule 1f1b"),
    ("torchtitan", dict(dp=8, zero=1), "--zero 3"),
    ("torchtitan", dict(dp=8, zero=3, recompute=1), "--recompute none or full"),
    ("torchtitan", dict(tp_ff=8, zero=3, sp=0), "--sp on"),
    ("megatron", dict(pp=2, interleave=2, microbatches=1), "rounds of pp"),
])
def test_what_a_framework_cannot_run_is_named(target, values, message):
    wl = load_model_preset("llama3-8b")
    doc = _plan_of(wl, _layout(**values))
    with pytest.raises(ExportError, match=message.replace("-", r"\-")):
        export_text(doc, H100, wl, target)


@pytest.mark.parametrize("target", ["megatron", "torchtitan"])
def test_a_one_stage_plan_labelled_zb_h2_exports_as_1f1b(target):
    """The search labels many one-stage plans zb-h2 (`plan --model llama3-8b --gpu h100 --gpus 64 --json`: pp 1,
    schedule zb-h2), and export refused them ("has no ZB-H2 schedule: re-plan with --schedule 1f1b") though without a
    pipeline both schedules are one run (same step and memory, checked here). Such a plan exports what its 1f1b twin
    exports; with two stages ZB-H2 is still refused (test_what_a_framework_cannot_run_is_named)."""
    wl = load_model_preset("llama3-8b")
    zb, one = (_layout(dp=8, zero=3, microbatches=4, schedule=s) for s in ("zb-h2", "1f1b"))
    zb_ev, one_ev = evaluate(H100, wl, zb), evaluate(H100, wl, one)
    assert (zb_ev.training_s, zb_ev.memory.total_bytes) == (one_ev.training_s, one_ev.memory.total_bytes)
    assert export_text(_plan_of(wl, zb), H100, wl, target) == export_text(_plan_of(wl, one), H100, wl, target)


def test_a_placement_against_the_rank_order_is_refused():
    wl = load_model_preset("llama3-8b")
    degrees = {"dp": 2, "tp_ff": 8, "tp_model": 1, "pp": 1, "ep": 1, "cp": 1}
    lay = Layout(**degrees, microbatches=1, sp=1,
                 placement=greedy_placement(H100, degrees, {"dp": (2, 1), "tp_ff": (4, 2)}))
    with pytest.raises(ExportError, match="rank order"):
        export_text(_plan_of(wl, lay), H100, wl, "megatron")


def test_the_toy_model_is_not_exported():
    wl = workload_from_shape(256, 1024, 4, 1, 64)
    doc = api.plan(workload=wl, gpu="h100", gpus=8)
    with pytest.raises(ExportError, match="toy model"):
        export_text(doc, H100, wl, "megatron")


def test_cli_emit_and_export(tmp_path, capsys):
    from planner.cli import app, plan_app, run

    code = run(plan_app, ["--model", "llama3-405b", "--gpu", "h100", "--gpus", "16384", "--emit", "megatron"], "plan")
    out = capsys.readouterr().out
    assert code == 0 and "--tensor-model-parallel-size" in out and MEGATRON in out
    code = run(plan_app, ["--model", "llama3-405b", "--gpus", "16384", "--json"], "plan")
    path = tmp_path / "plan.json"
    path.write_text(capsys.readouterr().out)
    code = run(app, ["export", "--plan", str(path), "--to", "torchtitan"], "planner")
    captured = capsys.readouterr()
    doc = json.loads(path.read_text())
    if code == 0:  # the unconstrained optimum happened to be launchable
        assert parse_torchtitan(captured.out)["parallelism"]["tensor_parallel_degree"] == doc["layout"]["tp_ff"]
    else:  # or the error says what to change, on one line
        assert code == 2 and "re-plan with" in captured.err and len(captured.err.strip().splitlines()) == 1


# --------------------------------------------------------------------------------------------------
# Every emitted name exists in the frameworks' own definitions (downloads the two releases)
# --------------------------------------------------------------------------------------------------


def _launches() -> list[Launch]:
    """Launches that reach every branch of both exporters."""
    base = dict(tp=8, pp=4, vpp=1, cp=1, ep=1, dp=16, micro_batch=1, global_batch=512, seq_len=8192, sp=True,
                recompute=0, zero=1, fp8=False, layers_per_stage=8, first_less=0, last_less=0, overlap=False,
                experts=1)
    variants = [dict(), dict(vpp=2, first_less=1, last_less=1), dict(first_less=1, last_less=2), dict(cp=4),
                dict(experts=8, ep=8), dict(recompute=1), dict(recompute=2, zero=3, fp8=True), dict(zero=2),
                dict(overlap=True), dict(fp8=True, recipe="mxfp8"), dict(fp8=True, recipe="delayed"),
                dict(fp8=True, recipe="nvfp4")]
    return [Launch(**{**base, **v}) for v in variants]  # type: ignore[arg-type]


def _download(spec: str, dest: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest), spec],
                   check=True)
    name = spec.split("==")[0].replace("-", "_")
    return next(p for p in dest.iterdir() if p.name.replace("-", "_").startswith(name))


def _sources(archive: Path) -> dict[str, str]:
    """Python files of a wheel or an sdist, by path inside the package."""
    out: dict[str, str] = {}
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            for n in z.namelist():
                if n.endswith(".py"):
                    out[n] = z.read(n).decode("utf-8", "replace")
    else:
        with tarfile.open(archive) as t:
            for m in t.getmembers():
                if m.name.endswith(".py") and m.isfile():
                    f = t.extractfile(m)
                    if f is not None:
                        out[m.name.split("/", 1)[1]] = io.TextIOWrapper(f, "utf-8", "replace").read()
    return out


def _dataclass_fields(source: str) -> dict[str, dict[str, str]]:
    """class name -> {field: annotation} of every class with annotated fields."""
    out: dict[str, dict[str, str]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            fields = {st.target.id: ast.unparse(st.annotation) for st in node.body
                      if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)}
            if fields:
                out[node.name] = fields
    return out


@pytest.mark.network
def test_megatron_flags_exist_in_megatron_core(tmp_path):
    src = _sources(_download(MEGATRON.replace(" ", "==").replace("megatron-core", "megatron-core"), tmp_path))
    config_files = ("megatron/core/model_parallel_config.py", "megatron/core/transformer/transformer_config.py",
                    "megatron/core/distributed/distributed_data_parallel_config.py",
                    "megatron/core/optimizer/optimizer_config.py")
    names: set[str] = set()
    for f in config_files:
        for cls in _dataclass_fields(src[f]).values():
            names |= set(cls)
    # The batch sizes are arguments of megatron-core's microbatch calculator, not configuration fields.
    for node in ast.walk(ast.parse(src["megatron/core/num_microbatches_calculator.py"])):
        if isinstance(node, ast.FunctionDef):
            names |= {a.arg for a in node.args.args}
    assert {"tensor_model_parallel_size", "micro_batch_size", "global_batch_size"} <= names  # the files were read
    wl = load_model_preset("llama3-405b")
    emitted = {flag for launch in _launches() for flag in parse_megatron(megatron_text(_plan_of(
        wl, _layout(tp_ff=8)), launch, wl))}
    doc = api.plan(workload=wl, gpu="h100", gpus=16384, runs_on="megatron")
    emitted |= set(parse_megatron(export_text(doc, H100, wl, "megatron")))
    missing = sorted(f for f in emitted if MEGATRON_FIELD_OF_FLAG.get(f, f[2:].replace("-", "_")) not in names)
    assert not missing, f"flags with no field in {MEGATRON}: {missing}"


@pytest.mark.network
def test_torchtitan_keys_exist_in_its_job_config(tmp_path):
    src = _sources(_download(TORCHTITAN.replace(" ", "=="), tmp_path))
    classes = _dataclass_fields(src["torchtitan/config/job_config.py"])
    wl = load_model_preset("llama3-405b")
    texts = [torchtitan_text(_plan_of(wl, _layout(tp_ff=8)), launch) for launch in _launches()
             if launch.recompute != 1]
    doc = api.plan(workload=wl, gpu="h100", gpus=16384, runs_on="torchtitan")
    texts.append(export_text(doc, H100, wl, "torchtitan"))
    missing = []
    for text in texts:
        for path in emitted_names("torchtitan", text):
            cls = "JobConfig"
            for part in path.split("."):
                annotation = classes.get(cls, {}).get(part)
                if annotation is None:
                    missing.append(path)
                    break
                cls = annotation
    assert not missing, f"keys with no field in {TORCHTITAN}'s JobConfig: {sorted(set(missing))}"


def test_emit_search_equals_the_enumerator_over_the_launchable_space():
    # The restricted space (1D TP, 1F1B in whole rounds, the rank order's placement, torchtitan's FSDP) is searched
    # exactly: CP-SAT and the enumerator agree on it.
    from planner.export import RANK_ORDER
    from planner.parallel.space import SearchOptions
    from planner.search.cpsat import solve_cpsat
    from planner.search.exhaustive import solve_exhaustive
    from planner.workload.scaling import transformer_workload

    wl = transformer_workload(64, 128, 4, 1, 64, 16 * 64, 1e9, {"heads": 4, "kv_heads": 2, "vocab": 256,
                                                               "ffn": "swiglu"}, "tiny")
    for gpus in (8, 16):
        opts = SearchOptions(schedule="1f1b", gpus=gpus, fixed=(("tp_model", 1), ("zero", 3)),
                             excluded=(("recompute", 1),), rank_order=RANK_ORDER, whole_rounds=True)
        ex, cp = solve_exhaustive(H100, wl, opts, None), solve_cpsat(H100, wl, opts, None)
        assert ex.status == cp.status == "optimal" and ex.space_size == cp.space_size
        assert cp.layout is not None and ex.layout is not None
        ee, ec = evaluate(H100, wl, ex.layout), evaluate(H100, wl, cp.layout)
        assert abs(ee.step.step_s - ec.step.step_s) <= 1e-12 * ee.step.step_s
        doc = _plan_of(wl, cp.layout)
        for target in ("megatron", "torchtitan"):
            export_text(doc, H100, wl, target)  # launchable as chosen: no ExportError


@pytest.mark.parametrize("target,fixed,message", [
    ("torchtitan", {"zero": 1}, "drop --zero 1"), ("torchtitan", {"recompute": 1}, "drop --recompute selective"),
    ("megatron", {"tp_model": 2}, "drop --tp-model 2"), ("torchtitan", {"sp": 0}, "drop --sp 0"),
])
def test_emit_refuses_pins_the_framework_cannot_run(target, fixed, message):
    from planner.errors import InvalidInput

    with pytest.raises(InvalidInput, match=message.replace("-", r"\-")):
        api.plan(workload=load_model_preset("llama3-8b"), gpu="h100", gpus=64, fixed=fixed, runs_on=target)


def test_emit_keeps_tensor_parallelism_within_the_kv_heads():
    # Both frameworks split the KV heads over the TP ranks: Llama 3 70B (8 KV heads) never gets tp 16 from --emit.
    wl = load_model_preset("llama3-70b")
    for target in ("megatron", "torchtitan"):
        doc = api.plan(workload=wl, gpu="h100", gpus=2048, runs_on=target)
        assert doc.layout is not None and 8 % doc.layout.tp_ff == 0
    with pytest.raises(ExportError, match="must divide 8"):
        export_text(_plan_of(wl, _layout(tp_ff=16, sp=1)), H100, wl, "megatron")
