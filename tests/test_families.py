"""Model families scaled to a compute budget (issue 26 part 4; docs/families.md).

The law, written out here and checked against the workload: D = 20 N (Chinchilla, the rule `--compute` uses,
App. 8.1.4) and C = (FLOP per token) x D in the project's convention, with FLOP per token
F = 6 x (non-embedding active params) + 12 x layers x seq x heads x head_dim + 6 x d_model x vocab. Writing
f = F / N for the chosen shape, N* = sqrt(C / (20 f)) and D* = 20 N*. Parameters and FLOPs are counted by hand from
the shape's integers below, not by the code under test.
"""

from __future__ import annotations

import json
import math

import pytest

from planner.errors import InvalidInput
from planner.workload.families import families, read_family, shape_for_params, workload_for_family

# Published configs (Hugging Face config.json of each model; Meta's params.json for the FFN constants).
LLAMA3 = {  # d_model: (layers, heads, d_ff)
    4096: (32, 32, 14336),     # Meta-Llama-3-8B
    8192: (80, 64, 28672),     # Meta-Llama-3-70B
    16384: (126, 128, 53248),  # Llama-3.1-405B
}
QWEN3_MOE = {  # d_model: (layers, heads, moe_intermediate_size)
    2048: (48, 32, 768),   # Qwen3-30B-A3B
    4096: (94, 64, 1536),  # Qwen3-235B-A22B
}
LLAMA_VOCAB, QWEN_VOCAB = 128256, 151936
DEEPSEEK_VOCAB = 129280
DEEPSEEK_DEPTH = {2048: 27, 5120: 60, 7168: 61}  # V2-Lite, V2, V3 config.json num_hidden_layers


def llama_params_by_hand(d: int, layers: int, d_ff: int) -> int:
    heads = d // 128
    attn = d * heads * 128 * 2 + 2 * d * 8 * 128  # q and o; k and v with 8 KV heads of 128
    return layers * (attn + 3 * d * d_ff) + 2 * LLAMA_VOCAB * d  # SwiGLU; untied embedding and head


def llama_flop_per_token_by_hand(d: int, layers: int, d_ff: int, seq: int) -> float:
    non_embedding = llama_params_by_hand(d, layers, d_ff) - 2 * LLAMA_VOCAB * d
    return 6.0 * non_embedding + 12.0 * layers * seq * d + 6.0 * d * LLAMA_VOCAB  # heads x 128 = d


def meta_ffn_width(d: int, multiplier: float, multiple_of: int) -> int:
    """llama/model.py FeedForward: int(2 * 4d / 3), times ffn_dim_multiplier, rounded up to multiple_of."""
    hidden = int(multiplier * int(2 * 4 * d / 3))
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def law(compute: float, f: float) -> tuple[float, float]:
    n = math.sqrt(compute / (20.0 * f))
    return n, 20.0 * n


def test_families_are_listed_and_sourced():
    assert families() == ["deepseek-v3", "llama3", "qwen3-moe"]
    for name in families():
        fam = read_family(name)
        assert fam.source and fam.description and all(m.source for m in fam.members)


def test_meta_ffn_rule_reproduces_the_published_widths():
    # Meta's constants: 8B (1.3, 1024), 70B (1.3, 4096), 405B (1.2, 4096).
    assert meta_ffn_width(4096, 1.3, 1024) == 14336
    assert meta_ffn_width(8192, 1.3, 4096) == 28672
    assert meta_ffn_width(16384, 1.2, 4096) == 53248


@pytest.mark.parametrize("name,target,d_model,layers,width", [
    ("llama3", 8_029_995_008, 4096, 32, 14336),      # 32 x (4096^2 x 2.5 + 3 x 4096 x 14336) + 2 x 128256 x 4096
    ("llama3", 70.6e9, 8192, 80, 28672),              # 70,552,387,584 by hand (models/llama3-70b.toml)
    ("llama3", 405_849_243_648, 16384, 126, 53248),   # tests/test_transformer.py::test_llama3_405b_by_hand
    ("qwen3-moe", 30.5e9, 2048, 48, 768),             # model card: 30.5B
    ("qwen3-moe", 235e9, 4096, 94, 1536),             # model card: 235B
    ("deepseek-v3", 671e9, 7168, 61, 2048),           # arXiv:2412.19437 §4.2: 671B (the preset counts 671.03e9)
])
def test_rules_at_a_published_size_give_the_published_shape(name, target, d_model, layers, width):
    # Tolerance: none. The depth rule passes through every member and the width rules reproduce each member's
    # widths, so at a member's parameter count (within 0.45 %) the search returns the member's exact shape.
    wl = shape_for_params(name, target)
    assert (wl.d_model, wl.layers) == (d_model, layers)
    assert (wl.transformer.expert_d_ff or wl.d_ff) == width
    published = {"llama3": LLAMA3, "qwen3-moe": QWEN3_MOE, "deepseek-v3": {7168: (61, 128, 2048)}}[name][d_model]
    assert wl.transformer.heads == published[1]


@pytest.mark.parametrize("compute", [1e24, 1e26, 1e27])
def test_llama3_at_a_budget_matches_the_law_and_the_rules(compute):
    wl = workload_for_family("llama3", compute)
    tr = wl.transformer
    d, layers, d_ff = wl.d_model, wl.layers, wl.d_ff
    # The family's fixed sizes.
    assert (tr.head_dim, tr.kv_heads, tr.vocab, tr.ffn, tr.tied_embeddings) == (128, 8, 128256, "swiglu", False)
    assert tr.heads * 128 == d and tr.heads % 8 == 0 and wl.experts == 1 and wl.seq_len == 8192
    # MLP width: Meta's rule with the nearest member's constants (405B's past sqrt(8192 x 16384) = 11585), or one or
    # two 1024-quanta from it (the search's freedom, docs/families.md).
    constants = (1.3, 4096) if d < 11585 else (1.2, 4096)
    assert d_ff % 1024 == 0 and abs(d_ff - meta_ffn_width(d, *constants)) <= 2048
    # Depth: near the log-log line through the members (the 70B-405B segment, extrapolated past 405B).
    slope = math.log(126 / 80) / math.log(2)
    rule = 80 * (d / 8192) ** slope
    assert abs(math.log(layers / rule)) < 0.15, (layers, rule)
    # The budget, by hand.
    params = llama_params_by_hand(d, layers, d_ff)
    flop = llama_flop_per_token_by_hand(d, layers, d_ff, 8192)
    assert wl.params == params and wl.model_flop_per_token == pytest.approx(flop, rel=1e-12)
    n_star, d_star = law(compute, flop / params)
    assert abs(params / n_star - 1) < 0.005
    assert abs(wl.tokens / d_star - 1) < 0.005
    assert abs(flop * wl.tokens / compute - 1) < 0.005
    assert wl.tokens % wl.batch_tokens == 0 and wl.requested_compute_flop == compute and wl.family == "llama3"
    # An outside sanity check: Chinchilla's C = 6 N D, D = 20 N gives N = sqrt(C / 120); the project's FLOP
    # convention adds attention and the LM head (F / 6N - 1: 13 % at 1e24 with 8192-token sequences, 6 % at 1e26),
    # so N* = sqrt(C / (20 f)) lies up to ~6 % below it.
    assert 0.93 < n_star / math.sqrt(compute / 120) < 1.0


def test_qwen3_moe_at_a_budget_by_hand():
    compute = 1e24
    wl = workload_for_family("qwen3-moe", compute)
    tr = wl.transformer
    d, layers, e = wl.d_model, wl.layers, tr.expert_d_ff
    assert (wl.experts, tr.top_k, tr.shared_experts, tr.dense_layers) == (128, 8, 0, 0)
    assert (tr.kv_heads, tr.head_dim, tr.vocab, wl.seq_len) == (4, 128, QWEN_VOCAB, 4096)
    assert tr.heads * 64 == d and tr.heads % 4 == 0  # heads x 128 = 2 d_model, as in both members
    assert e % 128 == 0 and abs(e - 0.375 * d) <= 2 * 128 + 64  # 0.375 d to a multiple of 128, +-2 quanta
    assert abs(math.log(layers / (94 * (d / 4096) ** (math.log(94 / 48) / math.log(2))))) < 0.15
    attn = d * (tr.heads * 128) * 2 + 2 * d * 4 * 128
    router, expert = d * 128, 3 * d * e
    params = layers * (attn + router + 128 * expert) + 2 * QWEN_VOCAB * d
    active_non_embedding = layers * (attn + router + 8 * expert)
    flop = 6.0 * active_non_embedding + 12.0 * layers * 4096 * tr.heads * 128 + 6.0 * d * QWEN_VOCAB
    assert wl.params == params and wl.model_flop_per_token == pytest.approx(flop, rel=1e-12)
    # D = 20 N on total parameters (the paper's sparse law counts total parameters too); compute on active ones.
    n_star, d_star = law(compute, flop / params)
    assert abs(params / n_star - 1) < 0.005 and abs(wl.tokens / d_star - 1) < 0.005
    assert abs(flop * wl.tokens / compute - 1) < 0.005


def test_a_family_past_the_planners_limits_is_one_line():
    # 128 experts x more than 192 layers is beyond the 24576 layer-experts the planner accepts.
    with pytest.raises(InvalidInput, match="qwen3-moe.*24576"):
        workload_for_family("qwen3-moe", 1e27)
    with pytest.raises(InvalidInput, match="family llama3: no shape"):
        workload_for_family("llama3", 1e40)


@pytest.mark.slow
def test_qwen3_moe_scales_and_plans():
    """A 265B-total, 25B-active Qwen3-style MoE at 1e24 FLOP plans on H100s within 90 days (about 10 s)."""
    from planner.api import plan

    wl = workload_for_family("qwen3-moe", 1e24)
    doc = plan(workload=wl, gpu="h100", days=90, time_limit_s=60)
    assert doc.status == "optimal" and doc.training_days <= 90
    assert doc.workload.family == "qwen3-moe" and doc.workload.experts == 128
    assert any("qwen3-moe family" in n for n in doc.notes)


@pytest.mark.parametrize("argv,needle", [
    (["plan", "--compute", "1e26", "--model-family", "llama4"], "llama3, qwen3-moe"),
    (["plan", "--compute", "1e26", "--model-family", "llama3", "--model", "llama3-70b"], "--model-family and --model"),
    (["plan", "--model-family", "llama3"], "needs --compute"),
    (["plan", "--compute", "1e26", "--model-family", "llama3", "--sparse"], "--sparse"),
    (["plan", "--compute", "1e26", "--model-family", "llama3", "--layers", "80"], "--layers"),
])
def test_bad_family_flags_are_one_line_errors(capsys, argv, needle):
    from cli_helpers import invoke

    code, out, err = invoke(capsys, argv)
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_plan_json_says_transformer_and_family(capsys):
    from cli_helpers import invoke

    code, out, err = invoke(capsys, ["plan", "--compute", "1e22", "--model-family", "llama3", "--gpus", "64",
                                     "--json"])
    assert code == 0, err
    doc = json.loads(out)
    wl = doc["workload"]
    assert doc["status"] == "optimal" and doc["profile"] == "realistic"
    assert wl["family"] == "llama3" and wl["transformer"]["vocab"] == LLAMA_VOCAB
    assert wl["requested_compute_flop"] == 1e22 and abs(wl["compute_flop"] / 1e22 - 1) < 0.005
    assert "llama3 family" in wl["label"] and any("llama3 family" in n for n in doc["notes"])


@pytest.mark.slow
def test_plan_llama3_at_1e26_on_h100_in_90_days(capsys):
    """The issue's must-show: `plan --compute 1e26 --model-family llama3 --gpu h100 --days 90` (about 8 s)."""
    from cli_helpers import invoke

    code, out, err = invoke(capsys, ["plan", "--compute", "1e26", "--model-family", "llama3", "--gpu", "h100",
                                     "--days", "90", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    wl = doc["workload"]
    assert doc["status"] == "optimal" and doc["training_days"] <= 90
    assert wl["family"] == "llama3" and wl["transformer"]["kv_heads"] == 8 and wl["transformer"]["head_dim"] == 128
    params = llama_params_by_hand(wl["d_model"], wl["layers"], wl["d_ff"])
    flop = llama_flop_per_token_by_hand(wl["d_model"], wl["layers"], wl["d_ff"], 8192)
    n_star, d_star = law(1e26, flop / params)
    assert abs(wl["params"] / n_star - 1) < 0.005 and abs(wl["tokens"] / d_star - 1) < 0.005
    assert abs(wl["compute_flop"] / 1e26 - 1) < 0.005 and wl["requested_compute_flop"] == 1e26


# DeepSeek-V3 (arXiv:2412.19437 §4.2; huggingface.co/deepseek-ai/DeepSeek-V3 config.json): MLA with q latent 1536,
# kv latent 512, per-head widths 128 (no rope) + 64 (rope) and value 128; 256 routed experts of width 2048 (at 7168
# wide) + 1 shared, top-8; the first 3 layers dense of width 18432; vocabulary 129280, untied; sequences of 4096.


def deepseek_by_hand(d: int, layers: int, heads: int, d_ff: int, e: int) -> tuple[int, int]:
    """(params, non-embedding active params): every GEMM weight, the router (d x 256 per MoE layer) included."""
    attn = d * 1536 + 1536 * heads * (128 + 64) + d * (512 + 64) + 512 * heads * (128 + 128) + heads * 128 * d
    dense, moe_layers = 3 * (attn + 3 * d * d_ff), layers - 3
    params = dense + moe_layers * (attn + 257 * 3 * d * e + 256 * d) + 2 * DEEPSEEK_VOCAB * d
    active = dense + moe_layers * (attn + 9 * 3 * d * e + 256 * d)
    return params, active


def test_deepseek_v3_at_its_own_size_is_v3():
    # The preset's hand count (models/deepseek-v3.toml): 671,025,397,760 weights, 37,551,276,032 active.
    assert deepseek_by_hand(7168, 61, 128, 18432, 2048)[0] == 671_025_397_760
    wl = shape_for_params("deepseek-v3", 671_025_397_760)
    tr = wl.transformer
    assert (wl.d_model, wl.layers, wl.d_ff, tr.expert_d_ff, tr.heads) == (7168, 61, 18432, 2048, 128)
    assert (tr.attention, tr.q_lora_rank, tr.kv_lora_rank, tr.head_dim, tr.rope_head_dim, tr.v_head_dim) == \
        ("mla", 1536, 512, 128, 64, 128)
    assert wl.params == 671_025_397_760 and wl.active_params == 37_551_276_032


@pytest.mark.parametrize("compute", [1e25, 1e26])
def test_deepseek_v3_at_a_budget_by_hand(compute):
    wl = workload_for_family("deepseek-v3", compute)
    tr = wl.transformer
    d, layers, e, d_ff = wl.d_model, wl.layers, tr.expert_d_ff, wl.d_ff
    # V3's fixed choices, whatever the width.
    assert (wl.experts, tr.top_k, tr.shared_experts, tr.dense_layers) == (256, 8, 1, 3)
    assert (tr.attention, tr.q_lora_rank, tr.kv_lora_rank, tr.head_dim, tr.rope_head_dim, tr.v_head_dim) == \
        ("mla", 1536, 512, 128, 64, 128)
    assert (tr.vocab, tr.tied_embeddings, tr.ffn, wl.seq_len, tr.kv_heads) == (DEEPSEEK_VOCAB, False, "swiglu", 4096,
                                                                               tr.heads)
    # V3's ratios: heads x 128 = 16/7 d_model (128 at 7168), a multiple of 8; dense width 18/7 d_model (18432 at
    # 7168) to a multiple of 128; expert width 2/7 d_model (2048) to a multiple of 128, or a quantum or two off it.
    assert tr.heads * 128 * 7 == 16 * d and tr.heads % 8 == 0
    assert d_ff % 128 == 0 and abs(d_ff - 18 * d / 7) <= 64
    assert e % 128 == 0 and abs(e - 2 * d / 7) <= 2 * 128 + 64
    # Depth: the least-squares log-log slope over V2-Lite, V2 and V3, through V3.
    xs = [math.log(w) for w in DEEPSEEK_DEPTH]
    ys = [math.log(n) for n in DEEPSEEK_DEPTH.values()]
    mx, my = sum(xs) / 3, sum(ys) / 3
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    assert 0.69 < slope < 0.71  # 0.697
    assert abs(math.log(layers / (61 * (d / 7168) ** slope))) < 0.15
    assert layers * 256 <= 24576  # the planner's layers x experts bound: at most 96 layers
    # The budget, by hand.
    params, active = deepseek_by_hand(d, layers, tr.heads, d_ff, e)
    flop = 6.0 * active + 6.0 * layers * 4096 * tr.heads * (128 + 64 + 128) + 6.0 * d * DEEPSEEK_VOCAB
    assert wl.params == params and wl.model_flop_per_token == pytest.approx(flop, rel=1e-12)
    n_star, d_star = law(compute, flop / params)
    assert abs(params / n_star - 1) < 0.005 and abs(wl.tokens / d_star - 1) < 0.005
    assert abs(flop * wl.tokens / compute - 1) < 0.005
    assert wl.tokens % wl.batch_tokens == 0 and wl.family == "deepseek-v3"


def test_family_members_that_differ_inform_the_depth_only():
    fam = read_family("deepseek-v3")
    assert [m.name for m in fam.members if m.shares_fixed_choices] == ["DeepSeek-V3"]
    v2 = next(m for m in fam.members if m.name == "DeepSeek-V2")
    assert (v2.experts, v2.top_k, v2.shared_experts, v2.dense_layers) == (160, 6, 2, 1)


def test_a_depth_held_by_the_planners_bound_is_said():
    # Qwen3 MoE at 1e26: the depth line through 48 @ 2048 and 94 @ 4096 gives 94 x (9984 / 4096)^0.97 = 223 layers,
    # but 24576 / 128 experts = 192 is the most the planner accepts.
    wl = workload_for_family("qwen3-moe", 1e26)
    assert wl.layers == 192 and round(94 * (wl.d_model / 4096) ** (math.log(94 / 48) / math.log(2))) == 223
    assert "depth held at 192 layers, not the depth rule's 223" in wl.label and "24576" in wl.label
    assert "depth held" not in workload_for_family("deepseek-v3", 1e26).label  # 94 layers, the rule's 94.5


def test_a_family_file_that_breaks_its_rules_is_refused():
    import tomllib

    from pydantic import ValidationError

    from planner.schema.family import ModelFamily
    from planner.workload.scaling import _preset_dir

    doc = tomllib.loads(_preset_dir().joinpath("families", "deepseek-v3.toml").read_text(encoding="utf-8"))
    ModelFamily(name="deepseek-v3", **doc)  # as shipped
    members = [dict(m) for m in doc["members"]]
    members[-1]["experts"] = 160  # the line is drawn through the last member: it must have the family's design
    with pytest.raises(ValidationError, match="must share every fixed choice"):
        ModelFamily(name="x", **{**doc, "members": members})
    with pytest.raises(ValidationError, match="heads_multiple"):
        ModelFamily(name="x", **{k: v for k, v in doc.items() if k != "heads_multiple"})
    with pytest.raises(ValidationError, match="no kv_heads"):
        ModelFamily(name="x", **{**doc, "kv_heads": 8})


@pytest.mark.slow
def test_deepseek_v3_at_1e25_plans():
    """A 1.12e12-total, 6.05e10-active DeepSeek-V3-style MoE at 1e25 FLOP plans on H100s within 90 days (about 6 s of
    search; before the presolve row cap it stopped in presolve at the 60 s limit)."""
    from planner.api import plan

    wl = workload_for_family("deepseek-v3", 1e25)
    doc = plan(workload=wl, gpu="h100", days=90, time_limit_s=60)
    assert doc.status == "optimal" and doc.training_days <= 90
    assert doc.workload.family == "deepseek-v3" and doc.workload.transformer.attention == "mla"
