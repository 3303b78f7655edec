"""Real transformer workloads (docs/model.md §1b): presets against their papers, FLOP accounting against PaLM's and
Megatron's formulas worked here by hand, a one-GPU step worked by hand, and CP-SAT against the enumerator (and the
bounds against full pricing) on small transformer instances."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.cost.step import evaluate
from planner.hardware import get_hardware
from planner.parallel.dimensions import DEGREES
from planner.parallel.space import (
    SearchOptions,
    build_space,
    check_layout,
    level_products,
    model_parallel_rows,
    tuples_for_model_parallel,
)
from planner.schema import Layout, NetworkLevel
from planner.search.cpsat import solve_cpsat
from planner.search.exhaustive import price_placements, solve_exhaustive
from planner.search.presolve import LeastFeatures, ShapeTable, step_lower_bound, tuple_terms
from planner.workload.scaling import read_model_preset, transformer_workload

H100 = get_hardware("h100")
TRI16 = H100.model_copy(update={"name": "tri16", "levels": (
    NetworkLevel(name="pair", size=2, bw_bidir_Bps=900e9, lat_s=1.0e-6),
    NetworkLevel(name="quad", size=4, bw_bidir_Bps=200e9, lat_s=2.0e-6),
    NetworkLevel(name="pod", size=16, bw_bidir_Bps=50e9, lat_s=4.0e-6),
)})


# --------------------------------------------------------------------------------------------------
# Presets against their sources
# --------------------------------------------------------------------------------------------------

PRESETS = ("gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "nemotron4-340b", "mixtral-8x7b", "deepseek-v3")


@pytest.mark.parametrize("name", PRESETS)
def test_preset_parameter_count_within_one_percent_of_its_source(name):
    preset = read_model_preset(name)
    assert preset.published_params is not None and preset.source and preset.params_source
    assert preset.workload.transformer is not None
    assert abs(preset.workload.params / preset.published_params - 1) < 0.01, preset.workload.params


def test_moe_active_parameters_against_their_sources():
    # Mixtral 8x7B: 12.9B active (Jiang et al. 2024), embeddings and head included.
    mixtral = read_model_preset("mixtral-8x7b").workload
    assert abs(mixtral.active_params / 12.9e9 - 1) < 0.01
    # DeepSeek-V3: README_WEIGHTS.md of deepseek-ai/DeepSeek-V3 gives 36.7B activated for the main model, which
    # matches our count without the input-embedding lookup (0.93e9): the paper's "37B" is that figure rounded.
    ds = read_model_preset("deepseek-v3").workload
    lookup = ds.transformer.vocab * ds.d_model
    assert abs((ds.active_params - lookup) / 36.7e9 - 1) < 0.01
    assert abs(ds.params / 671e9 - 1) < 0.001


def test_llama3_405b_by_hand():
    # 126 layers: q and o 16384^2 each, k and v 16384 x (8 x 128) each, SwiGLU 3 x 16384 x 53248; untied
    # 128256-row embedding and head.
    attn = 2 * 16384**2 + 2 * 16384 * 1024
    mlp = 3 * 16384 * 53248
    expected = 126 * (attn + mlp) + 2 * 128256 * 16384
    wl = read_model_preset("llama3-405b").workload
    assert wl.params == expected
    assert wl.layers == 126 and wl.seq_len == 8192 and wl.batch_tokens == 2048 * 8192


# --------------------------------------------------------------------------------------------------
# FLOPs per token: Megatron's and PaLM's formulas, by hand
# --------------------------------------------------------------------------------------------------


def test_gpt3_flops_per_token_equal_megatrons_formula():
    # Narayanan et al. 2021, Eq. 3: 72 B s l h^2 (1 + s / (6 h) + V / (12 l h)) per iteration of B sequences.
    wl = read_model_preset("gpt3-175b").workload
    n_layers, h, s, v = 96, 12288, 2048, 50257
    megatron_per_token = 72 * n_layers * h**2 * (1 + s / (6 * h) + v / (12 * n_layers * h))
    assert wl.model_flop_per_token == pytest.approx(megatron_per_token, rel=1e-12)


@pytest.mark.parametrize("seq,share", [(2048, 0.02), (8192, 0.08)])
def test_attention_flop_share_of_a_405b_shape(seq, share):
    # PaLM Appendix B: 6 N + 12 L H Q T per token (H heads of width Q, sequence T), not halved for the causal mask.
    base = read_model_preset("llama3-405b").workload
    wl = base.model_copy(update={"seq_len": seq, "batch_tokens": 2048 * seq})
    attention = 12 * 126 * 128 * 128 * seq
    assert wl.attention_flop_per_token == attention
    got = attention / wl.model_flop_per_token
    assert abs(got - share) < 0.006, got


def test_compute_is_model_flops_times_tokens():
    wl = read_model_preset("llama3-405b").workload
    # 6 x (non-embedding params 401.6e9 + head 2.1e9) + attention 2.03e11, times 15.6e12 tokens.
    non_embedding = 126 * (2 * 16384**2 + 2 * 16384 * 1024 + 3 * 16384 * 53248)
    per_token = 6 * non_embedding + 12 * 126 * 8192 * 128 * 128 + 6 * 16384 * 128256
    assert wl.compute_flop == pytest.approx(per_token * 15.6e12, rel=1e-12)


# --------------------------------------------------------------------------------------------------
# A one-GPU step worked by hand
# --------------------------------------------------------------------------------------------------

def _ideal_gpu():
    """A GPU whose GEMMs run at exactly peak x sustained factor (no latency, unbounded memory bandwidths)."""
    g = H100.gpu.model_copy(update={"matmul_latency_s": 0.0, "hbm_Bps": 1e30, "l2_Bps": 1e30,
                                    "sustained_clock_factor": 0.5})
    return H100.model_copy(update={"name": "ideal", "gpu": g})


def tiny(**kw):
    base = dict(d_model=64, d_ff=128, layers=4, experts=1, seq_len=32, batch_tokens=16 * 32, tokens=1e9,
                fields={"heads": 4, "kv_heads": 2, "vocab": 256, "ffn": "swiglu"}, label="tiny")
    base.update(kw)
    return transformer_workload(base["d_model"], base["d_ff"], base["layers"], base["experts"], base["seq_len"],
                                base["batch_tokens"], base["tokens"], base["fields"], base["label"])


def test_one_gpu_step_by_hand():
    hw = _ideal_gpu()
    # Wide enough that every GEMM is compute-bound (on-chip bandwidth never binds): 8 heads of 128, 4 KV heads.
    wl = tiny(d_model=1024, d_ff=4096, seq_len=256, batch_tokens=16 * 256,
              fields={"heads": 8, "kv_heads": 4, "vocab": 4096, "ffn": "swiglu"})
    lay = Layout(dp=1, tp_ff=1, tp_model=1, pp=1, interleave=1, ep=1, microbatches=1, schedule="1f1b",
                 placement={d: (1, 1) for d in DEGREES})
    ev = evaluate(hw, wl, lay)
    tokens = 4096
    peak = H100.gpu.peak_flops
    # GEMMs per token per layer: q and o 1024^2, k and v 4 x 128 x 1024 each, SwiGLU 3 x 1024 x 4096; head
    # 4096 x 1024. Forward, activation gradient and weight gradient: 6 FLOPs per weight per token.
    gemm_params = 4 * (2 * 1024**2 + 2 * 512 * 1024 + 3 * 1024 * 4096) + 4096 * 1024
    gemm_s = 6 * gemm_params * tokens / (peak * 0.5)
    # Attention kernel: forward 2 (s / 2) heads (128 + 128) per token at 70 % of peak; backward 2.5x at 50 %.
    fwd = 2 * 128 * 8 * 256 * tokens * 4  # four layers
    attn_s = fwd / (peak * 0.7) + 2.5 * fwd / (peak * 0.5)
    assert ev.step.matmul_s == pytest.approx(gemm_s + attn_s, rel=1e-6)
    assert ev.step.step_s == pytest.approx(gemm_s + attn_s, rel=1e-6)  # one GPU: no network, no bubble
    # Weights 2 + grads 2 + optimizer 12 bytes per parameter (embedding and head untied).
    params = gemm_params + 4096 * 1024
    assert ev.memory.weights_bytes + ev.memory.grads_bytes + ev.memory.optimizer_bytes == pytest.approx(16 * params)


def test_kv_heads_replicate_beyond_their_count():
    wl = tiny()  # 4 heads, 2 KV heads
    hw = H100
    lay = Layout(dp=1, tp_ff=4, tp_model=1, pp=1, interleave=1, ep=1, microbatches=1, schedule="1f1b",
                 placement={"dp": (1, 1), "tp_ff": (4, 1), "tp_model": (1, 1), "pp": (1, 1), "ep": (1, 1)})
    assert check_layout(hw, wl, lay) == []
    # tp_ff = 4 > 2 KV heads: each GPU holds one KV head (2 x 16 x 64 weights for k and v), not half of one.
    kv = next(g for g in wl.ops.gemms if g.name == "kv")
    assert kv.out.per_gpu({"tp_ff": np.array([4])}) == pytest.approx(2 * 16)
    bad = tiny(fields={"heads": 6, "kv_heads": 3, "vocab": 256, "ffn": "swiglu", "head_dim": 16}, d_ff=192)
    lay2 = lay.model_copy(update={"tp_ff": 2, "placement": {**lay.placement, "tp_ff": (2, 1)}})
    assert any("kv_heads" in p for p in check_layout(hw, bad, lay2))


def test_uneven_pipeline_ends_are_expressible():
    wl = read_model_preset("llama3-405b").workload
    lay = Layout(dp=128, tp_ff=8, tp_model=1, pp=16, interleave=1, ep=1, microbatches=16, schedule="1f1b",
                 placement={"dp": (1, 128), "tp_ff": (8, 1), "tp_model": (1, 1), "pp": (1, 16), "ep": (1, 1)})
    assert check_layout(H100, wl, lay) == []  # 126 layers on 16 stages: 8 each, the ends lighter
    bad = lay.model_copy(update={"pp": 126, "dp": 1, "microbatches": 2048,
                                 "placement": {**lay.placement, "pp": (1, 126), "dp": (1, 1)}})
    assert check_layout(H100, wl, bad) == []  # one layer per stage
    worse = lay.model_copy(update={"pp": 100, "dp": 1, "microbatches": 2048,
                                   "placement": {**lay.placement, "pp": (1, 100), "dp": (1, 1)}})
    assert any("virtual stages" in p for p in check_layout(H100, wl, worse))


# --------------------------------------------------------------------------------------------------
# CP-SAT = exhaustive, bounds <= priced optimum
# --------------------------------------------------------------------------------------------------

TOL_S = 10e-9

SHAPES = {
    "gqa-dense": dict(),
    "mha-gelu-tied": dict(fields={"heads": 4, "vocab": 512, "ffn": "gelu", "tied_embeddings": True}, layers=6),
    "moe-top2": dict(experts=4, d_ff=128, layers=4,
                     fields={"heads": 4, "kv_heads": 4, "vocab": 256, "ffn": "swiglu", "top_k": 2,
                             "expert_d_ff": 64, "shared_experts": 1, "dense_layers": 1}),
    "mla": dict(layers=3, fields={"heads": 4, "kv_heads": 4, "vocab": 256, "attention": "mla", "q_lora_rank": 32,
                                  "kv_lora_rank": 16, "rope_head_dim": 8, "head_dim": 16, "v_head_dim": 16}),
}
CASES = [
    ("h100", "gqa-dense", None, 8), ("h100", "gqa-dense", None, 16), ("tri16", "gqa-dense", None, 16),
    ("h100", "mha-gelu-tied", None, 8), ("tri16", "moe-top2", None, 16), ("h100", "moe-top2", None, 8),
    ("tri16", "mla", None, 4), pytest.param("h100", "gqa-dense", 4e-3, None, marks=pytest.mark.slow),  # ~4.6 s
    ("tri16", "moe-top2", 6e-3, None),
]


@pytest.mark.parametrize("hw_name,shape,step_deadline_s,gpus", CASES)
def test_cpsat_matches_enumerator_on_transformers(hw_name, shape, step_deadline_s, gpus):
    hw = {"h100": H100, "tri16": TRI16}[hw_name]
    wl = tiny(**SHAPES[shape])
    deadline = None if step_deadline_s is None else step_deadline_s * wl.steps
    opts = SearchOptions(gpus=gpus)
    ex = solve_exhaustive(hw, wl, opts, deadline)
    cp = solve_cpsat(hw, wl, opts, deadline, time_limit_s=60.0)
    assert ex.status == "optimal" and cp.status == "optimal", (ex.status, cp.status)
    assert cp.space_size == ex.space_size
    ee, ec = evaluate(hw, wl, ex.layout), evaluate(hw, wl, cp.layout)
    for ev in (ee, ec):
        assert check_layout(hw, wl, ev.layout) == [] and ev.memory.fits
    if deadline is not None:
        assert ec.gpus == ee.gpus
    assert abs(ec.step.step_s - ee.step.step_s) <= TOL_S, (cp.layout, ex.layout)


@pytest.mark.parametrize("shape", ["gqa-dense", "moe-top2"])
def test_bounds_never_exceed_the_priced_optimum_on_transformers(shape):
    hw, wl = TRI16, tiny(**SHAPES[shape])
    space = build_space(hw, wl, SearchOptions())
    t = tuples_for_model_parallel(space, model_parallel_rows(space), space.dp_m)
    _, valid = level_products(hw, t.gpus)
    t = t.take(np.nonzero(valid)[0])
    terms = tuple_terms(hw, wl, t, ShapeTable.for_space(hw, wl, space))
    rows, _, arr = price_placements(hw, wl, t, False, terms)
    best = np.full(len(t), np.inf)
    np.minimum.at(best, rows, arr["step_s"])
    priced = np.isfinite(best)
    assert priced.sum() > 100
    lb = step_lower_bound(hw, wl, t, terms, LeastFeatures(hw, wl))
    assert (lb[priced] <= best[priced] * (1 + 1e-12)).all()
    assert np.median(lb[priced] / best[priced]) > 0.5


def test_expert_parallelism_is_carved_out_of_data_parallelism():
    # GPUs = tp x dp x ep x pp; the dense layers see dp x ep data-parallel ranks: b / (dp ep m) tokens each.
    wl = tiny(**SHAPES["moe-top2"])
    lay = Layout(dp=2, tp_ff=1, tp_model=1, pp=1, interleave=1, ep=4, microbatches=2, schedule="1f1b",
                 placement={"dp": (1, 2), "tp_ff": (1, 1), "tp_model": (1, 1), "pp": (1, 1), "ep": (4, 1)})
    ev = evaluate(H100, wl, lay)
    assert ev.gpus == 8
    assert ev.nanobatch_tokens == 512 / (2 * 4 * 2)
    assert math.isfinite(ev.step.step_s) and ev.step.pp_ep_s > 0  # the all-to-all is priced


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def test_plan_llama3_405b_on_16k_gpus_is_proven_optimal(capsys):
    import json

    from cli_helpers import invoke

    code, out, err = invoke(capsys, ["plan", "--model", "llama3-405b", "--gpu", "h100", "--gpus", "16384",
                                     "--batch-sequences", "2048", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "optimal" and doc["gpus"] == 16384
    assert doc["workload"]["transformer"]["kv_heads"] == 8 and doc["workload"]["batch_tokens"] == 2048 * 8192
    assert doc["hfu"] == doc["mfu"] and "not halved" in doc["flop_convention"]
    names = {op["name"] for op in doc["ops"]}
    assert {"attention kernel", "mlp up + gate", "lm head", "norms"} <= names


def test_evaluate_in_megatrons_words(capsys):
    import json

    from cli_helpers import invoke

    # Mixtral on 64 GPUs: tp 2, pp 2, Megatron dp 16 = expert-dp 2 x ep 8; 128 sequences, micro-batch 1.
    code, out, err = invoke(capsys, ["evaluate", "--model", "mixtral-8x7b", "--tp", "2", "--pp", "2", "--dp", "16",
                                     "--ep", "8", "--mbs", "1", "--gbs", "128", "--json"])
    doc = json.loads(out)
    lay = doc["layout"]
    assert (lay["tp_ff"], lay["pp"], lay["dp"], lay["ep"], lay["microbatches"]) == (2, 2, 2, 8, 8)
    assert doc["gpus"] == 64
    code, out, err = invoke(capsys, ["evaluate", "--model", "mixtral-8x7b", "--dp", "12", "--ep", "8", "--mbs", "1"])
    assert code == 2 and "multiple of --ep" in err
    code, out, err = invoke(capsys, ["plan", "--model", "gpt3-175b-mlp", "--batch-sequences", "8"])
    assert code == 2 and "transformer" in err


def test_sliding_window_layers_by_hand():
    """GPT-OSS 120B's shape: 36 layers, 64 heads of 64, half of them with a 128-token window (HF config
    sliding_window 128, alternating layer_types), at 4,096 tokens. A windowed layer's query sees min(i + 1, 128) keys:
    the mean over the 4,096 positions is 128 - 128 * 127 / (2 * 4096) = 126.015625 (Megatron-Bridge's
    flop_utils counts it so); a full causal layer 2,048 (s / 2)."""
    fields = {"heads": 64, "kv_heads": 8, "head_dim": 64, "vocab": 201088, "top_k": 4, "expert_d_ff": 2880}
    full = transformer_workload(2880, 2880, 36, 128, 4096, 1280 * 4096, None, fields, "gpt-oss")
    windowed = transformer_workload(2880, 2880, 36, 128, 4096, 1280 * 4096, None,
                                    {**fields, "sliding_window": 128, "sliding_window_layers": 18}, "gpt-oss")
    assert windowed.windowed_context == 126.015625
    # model FLOPs: 12 x heads x head_dim per key, full layers count s, windowed ones twice their mean context
    per_key = 12 * 64 * 64
    assert full.attention_flop_per_token == 36 * 4096 * per_key
    assert windowed.attention_flop_per_token == pytest.approx(18 * 4096 * per_key + 18 * 2 * 126.015625 * per_key,
                                                              rel=1e-12)
    # the kernel's forward FLOPs per token (one GPU, no TP): 2 s_eff heads (d_qk + d_v), s_eff the layers' mean
    deg = {d: np.ones(1) for d in DEGREES}
    core_full = full.model_ops.layer.attention
    core_win = windowed.model_ops.layer.attention
    assert float(core_full.forward_flop_per_token(deg)[0]) == 2 * 2048 * 64 * 128
    assert float(core_win.forward_flop_per_token(deg)[0]) == pytest.approx(
        2 * (0.5 * 2048 + 0.5 * 126.015625) * 64 * 128, rel=1e-12)
    # everything but attention is untouched
    assert windowed.non_embedding_active_params == full.non_embedding_active_params


@pytest.mark.parametrize("extra,msg", [({"sliding_window": 128}, "go together"),
                                       ({"sliding_window": 128, "sliding_window_layers": 40}, "more than")])
def test_sliding_window_fields_are_checked(extra, msg):
    from planner.errors import InvalidInput

    with pytest.raises(InvalidInput, match=msg):
        transformer_workload(2880, 2880, 36, 1, 4096, 4096, None, {"heads": 64, "head_dim": 64, "vocab": 1000, **extra},
                             "x")


def test_a_window_as_long_as_the_sequence_changes_nothing():
    fields = {"heads": 32, "vocab": 32000}
    plain = transformer_workload(4096, 11008, 32, 1, 2048, 2048 * 8, None, fields, "x")
    wide = transformer_workload(4096, 11008, 32, 1, 2048, 2048 * 8, None,
                                {**fields, "sliding_window": 4096, "sliding_window_layers": 16}, "x")
    assert wide.attention_flop_per_token == plain.attention_flop_per_token


def test_a_model_file_may_window_its_layers(tmp_path):
    """models/*.toml accept sliding_window and sliding_window_layers (a GPT-OSS-like file) and say so in the FLOP
    convention; a plain file's convention is unchanged."""
    from planner.workload.scaling import read_model_preset

    text = ('kind = "transformer"\nsource = "test"\nd_model = 2880\nd_ff = 2880\nlayers = 36\nseq_len = 4096\n'
            'batch_sequences = 8\nheads = 64\nkv_heads = 8\nhead_dim = 64\nvocab = 201088\n')
    plain, windowed = tmp_path / "plain.toml", tmp_path / "windowed.toml"
    plain.write_text(text)
    windowed.write_text(text + "sliding_window = 128\nsliding_window_layers = 18\n")
    a, b = read_model_preset(str(plain)).workload, read_model_preset(str(windowed)).workload
    assert b.windowed_share == 0.5 and a.windowed_share == 0.0
    assert b.attention_flop_per_token < a.attention_flop_per_token
    assert "sliding-window" in b.flop_convention and "sliding-window" not in a.flop_convention
