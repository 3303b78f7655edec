"""The published-runs dataset and `planner validate` (planner/validation.py)."""

from __future__ import annotations

import functools
import json

import pytest
from cli_helpers import invoke

from planner.errors import InvalidInput
from planner.validation import (
    BLACKWELL,
    PublishedRun,
    ValidationRow,
    dense_16bit,
    layout_of,
    load_runs,
    low_precision,
    precision_pairs,
    reported_flop_per_token,
    split_of,
    summary,
    validate,
    workload_of,
)


def _run(**kw) -> PublishedRun:
    base = dict(id="t", source="s", gpu="a100-80gb", gpus=64, layers=96, d_model=12288, heads=96, d_ff=49152,
                vocab=51200, seq_len=2048, global_batch_sequences=64, tp=8, pp=8, dp=1, micro_batch=1,
                tflops_per_gpu=150.0, flop_convention="megatron-recompute")
    return PublishedRun(**{**base, **kw})


def test_the_dataset_loads_and_every_run_has_a_source_and_a_throughput():
    runs = load_runs()
    assert len(runs) >= 30
    assert {r.gpu for r in runs} >= {"a100-80gb", "h100-80gb"} and {r.precision for r in runs} >= {"bf16", "fp8"}
    assert any(r.experts > 1 for r in runs)
    for r in runs:
        assert r.source and (r.tflops_per_gpu or r.tokens_per_s_per_gpu or r.mfu or r.hfu)


def test_megatron_flop_conventions_by_hand():
    # Narayanan et al. 2021 Eq. 3 per token: 96 l h^2 (1 + s / (6h) + V / (16 l h)); GPT-3 175B shape.
    run = _run()
    wl = workload_of(run)
    n_l, h, s, v = 96, 12288, 2048, 51200
    assert reported_flop_per_token(run, wl) == pytest.approx(96 * n_l * h * h * (1 + s / (6 * h) + v / (16 * n_l * h)))
    # Korthikanti et al. 2022 model FLOPs: 72 l h^2 (1 + s / (6h) + V / (12 l h)).
    run2 = _run(flop_convention="megatron")
    assert reported_flop_per_token(run2, wl) == pytest.approx(72 * n_l * h * h * (1 + s / (6 * h) + v / (12 * n_l * h)))


def test_published_layout_in_planner_terms():
    run = _run(gpus=512, dp=8, micro_batch=2, global_batch_sequences=512, ep=1, sp=True, recompute="selective")
    from planner.hardware import get_hardware

    lay = layout_of(run, get_hardware("a100-80gb"))
    assert (lay.dp, lay.tp_ff, lay.pp, lay.microbatches, lay.sp, lay.recompute) == (8, 8, 8, 32, 1, 1)
    assert lay.gpus == 512
    assert lay.placement["tp_ff"] == (8, 1)  # tensor parallelism fills the node first (the rank order)
    with pytest.raises(InvalidInput, match="whole micro-batches"):
        layout_of(_run(micro_batch=3), get_hardware("a100-80gb"))


def test_llama3_405b_records_carry_the_papers_pipeline_split():
    # Llama 3 §3.3.2: one layer fewer on the first and the last stage, so that the first chunk holds only the
    # embedding and the last only the output layer and loss. A chunk left empty by losing one layer held one: 126 + 2
    # one-layer chunks over 16 stages is 8 virtual stages per rank, the end chunks empty, 7 layers on each end stage.
    from planner.cost.terms import custom_stage_layers
    from planner.hardware import get_hardware
    from planner.parallel.space import Tuples

    runs = [r for r in load_runs() if r.id.startswith("llama3-405b-")]
    assert len(runs) == 3
    for run in runs:
        assert (run.layers, run.pp, run.vpp) == (126, 16, 8) and "vpp" not in run.unknown
        assert (run.first_stage_layers, run.last_stage_layers) == (0, 0)
        lay = layout_of(run.model_copy(update={"unknown": [], "micro_batch": 1}), get_hardware("h100"))
        first, c, last = custom_stage_layers(workload_of(run), Tuples.from_layouts([lay]))
        assert (int(first[0]), int(c[0]), int(last[0])) == (0, 1, 0)


def test_split_is_a_fixed_function_of_the_id():
    ids = [r.id for r in load_runs()]
    assert [split_of(i) for i in ids] == [split_of(i) for i in ids]
    assert split_of("llama3-405b-8k-8192gpus") == "calibration"  # its SHA-1 is 2 mod 3 (computed by hand)
    names = [f"run-{k}" for k in range(300)]
    held = sum(split_of(n) == "held-out" for n in names)
    assert 70 <= held <= 130  # about a third


@pytest.mark.slow  # prices every published run (with _rows: about 20 s per profile on 2 cores)
def test_validate_prices_consistently():
    rows = _rows("paper")
    # Every record is priced: runs that cannot be are left out of runs.toml and named in its header's exclusions.
    assert [(r.id, r.problem) for r in rows if r.ratio is None] == []
    for r in rows:
        if r.ratio is not None:
            assert r.predicted_tokens_per_s is not None and r.reported_tokens_per_s is not None
            assert r.ratio == pytest.approx(r.predicted_tokens_per_s / r.reported_tokens_per_s)
            assert r.predicted_mfu is not None and r.reported_mfu is not None
            assert r.predicted_mfu / r.reported_mfu == pytest.approx(r.ratio)


def test_cli_validate_json(capsys, monkeypatch):
    """The command hands the shipped runs and the profile asked for to `validate` and prints its rows as JSON. Here
    `validate` prices the first three runs only (the whole dataset under both profiles made this the suite's
    longest test; the slow-marked tests below price every run)."""
    import planner.validation

    asked = []
    few = load_runs()[:3]

    def first_three(runs, profile):
        asked.append(profile.name)
        assert runs == load_runs()
        return validate(few, profile)

    monkeypatch.setattr(planner.validation, "validate", first_three)
    code, out, err = invoke(capsys, ["validate", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["profile"] == "realistic" and [r["id"] for r in doc["runs"]] == [r.id for r in few]
    assert all(r["predicted_tokens_per_s"] > 0 for r in doc["runs"])
    code, out, err = invoke(capsys, ["validate", "--json", "--profile", "paper"])
    assert code == 0, err
    assert json.loads(out)["profile"] == "paper"
    assert asked == ["realistic", "paper"]


@functools.cache
def _rows(profile: str) -> list[ValidationRow]:
    return validate(load_runs(), profile)


@pytest.mark.slow  # prices every published run (with _rows: about 20 s per profile on 2 cores)
def test_realistic_profile_predicts_the_held_out_runs():
    """Issue 25's targets, on numbers from the published runs that never entered a fit: held-out dense 16-bit runs
    within 8 % mean absolute error, Spearman on MFU >= 0.8 over all held-out runs; the paper's idealised profile
    misses by far. FP8 / FP4 held-out runs: the issue asks 10 %; this guards what the model reaches today (12.3 %,
    docs/validation.md says which runs miss and why)."""
    real, paper = _rows("realistic"), _rows("paper")
    dense = summary(dense_16bit(real))["held-out"]
    assert dense["runs"] >= 20
    assert dense["mean_abs_error"] <= 0.08 and abs(dense["bias"]) < 0.05
    assert summary(real)["held-out"]["spearman"] >= 0.8
    low = summary(low_precision(real))["held-out"]
    assert low["runs"] >= 30 and low["mean_abs_error"] <= 0.14
    assert summary(dense_16bit(paper))["held-out"]["mean_abs_error"] > 0.3


def test_the_dataset_holds_todays_runs():
    """At least 40 FP8 runs, 10 of them on Blackwell, NVFP4 runs, and no MLPerf Training submission (those are the
    independent check, kept out of both splits)."""
    runs = load_runs()
    fp8 = [r for r in runs if r.precision == "fp8"]
    assert len(fp8) >= 40 and sum(r.gpu in BLACKWELL for r in fp8) >= 10
    assert any(r.precision == "fp4" for r in runs)
    assert not [r.id for r in runs if "mlperf" in (r.id + r.source).lower()]


@pytest.mark.slow  # prices every published run (with _rows: about 20 s per profile on 2 cores)
def test_low_precision_gain_on_the_same_layout_is_the_published_one():
    """FP8 against BF16 on the same layout (torchtitan's published pairs): the predicted gain within 10 % of the
    published one on the held-out pairs, per-tensor and row-wise scaling."""
    pairs = [(low, hi) for low, hi in precision_pairs(_rows("realistic")) if low.split == "held-out"]
    assert len(pairs) >= 2
    for low, hi in pairs:
        published = (low.reported_tokens_per_s or 0) / (hi.reported_tokens_per_s or 1)
        predicted = (low.predicted_tokens_per_s or 0) / (hi.predicted_tokens_per_s or 1)
        assert predicted == pytest.approx(published, rel=0.10), low.id


def test_rowwise_fp8_gains_on_torchtitans_june_2025_layouts_are_the_published_ones():
    """torchtitan's June 2025 runs (benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md): row-wise FP8 against BF16
    on the same layouts gained 0.81-1.00x (599.6 / 597.3 and 624.8 / 652.4 tokens/s on Llama 3.1 70B, vanilla and
    async TP; 3,708.5 / 4,378.0 and 3,914.9 / 4,809.4 on 8B, the records' figures); the predicted gain is within
    10 % of each, and below 1 for 8B (docs/model.md, round 8)."""
    rows = validate([r for r in load_runs() if r.id.startswith("torchtitan2506")], "realistic")
    pairs = [(low, hi) for low, hi in precision_pairs(rows) if "rowwise" in low.id]
    assert len(pairs) == 4
    for low, hi in pairs:
        published = (low.reported_tokens_per_s or 0) / (hi.reported_tokens_per_s or 1)
        predicted = (low.predicted_tokens_per_s or 0) / (hi.predicted_tokens_per_s or 1)
        assert predicted == pytest.approx(published, rel=0.10), low.id
        if "8b" in low.id:
            assert predicted < 1.0, low.id


def test_a_framework_override_and_tp_overlap_change_only_their_runs():
    from planner.profile import get_profile

    prof = get_profile("realistic")
    ds = prof.for_framework("deepspeed")
    assert ds.zero_flat and ds.overlap_zero == 0.0 and ds.name == "realistic/deepspeed"
    assert prof.for_framework("megatron") is prof
    base = _run(zero=3, tp=1, pp=1, dp=64, gpus=64, global_batch_sequences=64, tflops_per_gpu=100.0)
    slow, = validate([base.model_copy(update={"framework": "deepspeed"})], "realistic")
    fast, = validate([base], "realistic")
    assert slow.predicted_tokens_per_s < fast.predicted_tokens_per_s
    on, = validate([_run(tp_comm_overlap=True, sp=True)], "realistic")
    off, = validate([_run(sp=True)], "realistic")
    assert on.predicted_tokens_per_s > off.predicted_tokens_per_s


def test_precision_pairs_match_compiled_with_compiled():
    """torchtitan's Llama 3.1 8B on 128 GPUs has an eager and a compiled BF16 run beside its compiled FP8 run: the
    pair is the compiled one (published gain 8,380 / 6,514 = 1.29, not 8,380 / 5,605 = 1.50, which is compile's
    gain too)."""
    ids = ("torchtitan-llama31-8b-128gpu-fsdp-bf16", "torchtitan-llama31-8b-128gpu-fsdp-compile-bf16",
           "torchtitan-llama31-8b-128gpu-fsdp-compile-fp8")
    rows = validate([r for r in load_runs() if r.id in ids], "realistic")
    (low, hi), = precision_pairs(rows)
    assert (low.id, hi.id) == (ids[2], ids[1]) and low.compiled and hi.compiled
    assert (low.reported_tokens_per_s or 0) / (hi.reported_tokens_per_s or 1) == pytest.approx(8380 / 6514)


def test_expert_overlap_prices_only_the_runs_that_turn_it_on():
    """A record's ep_comm_overlap swaps the framework's overlap_ep for the profile's overlap_ep_comm: with both
    equal the price is the same; with the all-to-all fully hidden (1.0) against fully exposed (0.0) the run is
    faster, and a record without the field keeps the framework's value."""
    from planner.profile import get_profile

    prof = get_profile("realistic")
    run = next(r for r in load_runs() if r.id == "mbridge2606-qwen3-30b-a3b-8gpu-mxfp8-gb200")
    assert run.ep_comm_overlap is True
    off = run.model_copy(update={"ep_comm_overlap": None})

    def priced(r, value):
        p = prof.model_copy(update={"overlap_ep_comm": value})
        row, = validate([r], p)
        return row.predicted_tokens_per_s

    same = prof.for_framework("megatron-bridge").overlap_ep
    assert priced(run, same) == pytest.approx(priced(off, same), rel=1e-12)
    assert priced(run, 1.0) > priced(run, 0.0) * 1.05
    assert priced(off, 1.0) == pytest.approx(priced(off, 0.0), rel=1e-12)


def _megatron_bridge_flop_per_token(run: PublishedRun, release: str) -> float:
    """Megatron-Bridge's model FLOPs per token (`training/utils/flop_utils.py`, GQA and MoE branch), by hand.

    Up to v0.4.2 (26.04.01, commit c81012934) the count has no sliding-window term and counts a gated MLP as three
    projections only when its activation is SiLU (GPT-OSS's clamped quick-GEGLU counts two); from v0.5.0 (26.06,
    fcbb60311; the change is baa0259bd, 2026-05-28) every GLU counts three and a windowed layer's core attention
    takes the mean causal context W - W (W - 1) / (2 s). Causal core attention counts s / 2 in both, the router no
    FLOPs, the logits 6 h V with V padded to 128 x tp."""
    h, layers, heads = run.d_model, run.layers, run.heads
    head_dim = run.head_dim or h // heads
    groups = run.kv_heads or heads
    q, s = heads * head_dim, run.seq_len
    silu = "gpt-oss" not in run.id  # models/gpt_oss/gpt_oss_bridge.py: activation_func = quick_gelu
    glu_projections = 3 if (release == "v0.5.0" or silu) else 2
    windowed = (run.sliding_window_layers or 0) if (release == "v0.5.0" and run.sliding_window) else 0
    w = run.sliding_window or 0
    context = w - w * (w - 1) / (2 * s) if w < s else s / 2
    proj = h * (q + 2 * head_dim * groups) + q * h
    attention = 6 * ((layers - windowed) * (proj + q * s) + windowed * (proj + 2 * q * context))
    experts = 6 * h * run.expert_d_ff * run.top_k * glu_projections * layers
    pad = 128 * run.tp
    return attention + experts + 6 * h * (-(-run.vocab // pad) * pad)


def test_megatron_bridge_counted_the_recorded_moe_shapes():
    # Each Megatron-Bridge GPT-OSS and Qwen3 row publishes tokens/s/GPU and model TFLOP/s/GPU; their ratio is the
    # release's FLOPs per token. Re-deriving that count from the record's shape fields must land on it: a wrong
    # layer count, width, expert count, top-k, window or vocabulary would miss by 5-30 %.
    rows = [r for r in load_runs() if r.framework == "megatron-bridge" and ("gpt-oss" in r.id or "qwen3" in r.id)]
    assert sum("gpt-oss" in r.id for r in rows) == 9 and len(rows) >= 20
    for run in rows:
        release = "v0.5.0" if run.id.startswith("mbridge2606") else "v0.4.2"
        published = run.tflops_per_gpu * 1e12 / run.tokens_per_s_per_gpu
        assert published == pytest.approx(_megatron_bridge_flop_per_token(run, release), rel=0.01), run.id
    # The GPT-OSS 120B rows of 26.04.01 count 27.2 GFLOP a token and those of 26.06 32.6: the same model, counted by
    # two releases of flop_utils (hand values: 27.16 and 32.63 GFLOP).
    oss = {r.id: r for r in rows}
    assert _megatron_bridge_flop_per_token(oss["mbridge260401-gpt-oss-120b-64gpu-bf16-gb200"], "v0.4.2") == (
        pytest.approx(27.164e9, rel=1e-4))
    assert _megatron_bridge_flop_per_token(oss["mbridge2606-gpt-oss-120b-64gpu-mxfp8-gb200"], "v0.5.0") == (
        pytest.approx(32.630e9, rel=1e-4))
