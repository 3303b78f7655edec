"""MoE traffic as Megatron runs it: parallel folding (expert_ep x etp over dp x cp x tp), custom end stages, routing
imbalance. Expected values are hand arithmetic written out in each test (docs/model.md §1c, §5b)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import invoke

from planner.cost import terms as T
from planner.cost.step import evaluate
from planner.hardware import get_hardware, with_profile
from planner.parallel.space import SearchOptions, Tuples, check_layout
from planner.profile import PAPER, get_profile
from planner.schema import Layout
from planner.search.cpsat import solve_cpsat
from planner.search.exhaustive import solve_exhaustive
from planner.validation import layout_of, load_runs, validate, workload_of
from planner.workload.scaling import transformer_workload

H100 = get_hardware("h100")  # NVLink 8 GPUs at 450 GB/s one way, InfiniBand 50 GB/s one way (paper profile)
NVL_BPS, IB_BPS = 450e9, 50e9


def _ideal_h100():
    """GEMMs at exactly peak x 0.5 (no latency, unbounded memory bandwidths): a GEMM's time is its FLOPs' share."""
    g = H100.gpu.model_copy(update={"matmul_latency_s": 0.0, "hbm_Bps": 1e30, "l2_Bps": 1e30,
                                    "sustained_clock_factor": 0.5})
    return H100.model_copy(update={"name": "ideal", "gpu": g})


def tiny_moe(experts: int = 16, layers: int = 4, d: int = 64, seq_len: int = 32, heads: int = 4):
    """d_model = expert width = d, `heads` heads (half as many KV), SwiGLU experts, top-2, every layer MoE, no shared
    expert; 16 sequences of `seq_len` tokens."""
    return transformer_workload(d, d, layers, experts, seq_len, 16 * seq_len, 1e9,
                                {"heads": heads, "kv_heads": heads // 2, "vocab": 256, "ffn": "swiglu", "top_k": 2,
                                 "expert_d_ff": d, "shared_experts": 0, "dense_layers": 0}, "tiny-moe")


def folded(dp, tp, expert_ep, etp, microbatches, placement, **kw) -> Layout:
    return Layout(dp=dp, tp_ff=tp, tp_model=1, pp=kw.pop("pp", 1), interleave=kw.pop("interleave", 1), ep=1, cp=1,
                  microbatches=microbatches, expert_ep=expert_ep, etp=etp, schedule="1f1b", placement=placement,
                  **kw)


def _ones(**factors):
    return {d: factors.get(d, (1, 1)) for d in ("dp", "tp_ff", "tp_model", "pp", "ep", "cp")}


def _op(ev, name):
    return next(o.seconds for o in ev.ops if o.name == name)


def test_expert_gemms_are_split_by_etp_not_tp():
    # Wide enough that every GEMM is compute-bound on the ideal GPU: d_model = expert width 1024, 8 heads of 128,
    # 16 sequences of 1024 tokens (16,384 a step).
    hw, wl = _ideal_h100(), tiny_moe(d=1024, seq_len=1024, heads=8)
    peak = H100.gpu.peak_flops
    # 4 GPUs in one node: Megatron dp 2 x tp 2, one microbatch; the experts folded as ep 4 x etp 1 or ep 2 x etp 2.
    place = _ones(dp=(2, 1), tp_ff=(2, 1))
    a = folded(2, 2, 4, 1, 1, place)
    b = folded(2, 2, 2, 2, 1, place)
    assert check_layout(hw, wl, a) == [] and check_layout(hw, wl, b) == []
    # Token copies per expert per microbatch: top-k b / (m E edp) = 2 x 16384 / (1 x 16 x 1) = 2048.
    # a: 16 / 4 = 4 experts here, up + gate 2048 x 1024 whole (etp 1): 3 passes x 2 FLOPs x weights x 2048 tokens.
    up_a = 4 * 4 * 3 * 2 * 2048 * 1024 * 2048 / (peak * 0.5)  # layers x experts x FLOPs
    # b: 8 experts here, each split over etp 2 (1024 x 1024 per GPU): the same FLOPs per GPU.
    up_b = 4 * 8 * 3 * 2 * 1024 * 1024 * 2048 / (peak * 0.5)
    ea, eb = evaluate(hw, wl, a), evaluate(hw, wl, b)
    assert _op(ea, "expert up + gate") == pytest.approx(up_a, rel=1e-6)
    assert _op(eb, "expert up + gate") == pytest.approx(up_b, rel=1e-6)
    # Not the attention's tp: had tp 2 split the experts of a too, it would run half of up_a.
    assert _op(ea, "expert down") == pytest.approx(4 * 4 * 3 * 2 * 1024 * 1024 * 2048 / (peak * 0.5), rel=1e-6)
    # The attention stays split by tp 2: q is 1024 x 1024 / 2 on 16384 / dp 2 = 8192 tokens.
    assert _op(ea, "q") == pytest.approx(4 * 3 * 2 * 512 * 1024 * 8192 / (peak * 0.5), rel=1e-6)


def test_folded_all_to_all_spans_the_levels_of_the_folded_ep():
    wl = tiny_moe()
    # 16 GPUs over two nodes: Megatron dp 8 (4 per node) x tp 2; ep 16 x etp 1 folds over all 16 ranks: Megatron's
    # expert order puts 8 of them in a node and 2 nodes apart, so ep's factors are (8, 2) although the placed ep is 1.
    lay = folded(8, 2, 16, 1, 2, _ones(dp=(4, 2), tp_ff=(2, 1)))
    assert check_layout(H100, wl, lay) == []
    cols = Tuples.from_layouts([lay])
    fac = {d: np.array([lay.placement[d]]) for d in lay.placement}
    ff = T.fold_factors(cols, fac)
    assert ff["expert_ep"].tolist() == [[8, 2]] and ff["etp"].tolist() == [[1, 1]] and ff["edp"].tolist() == [[1, 1]]
    # Words a GPU sends: b / (ep edp) = 512 / 16 = 32 tokens x 4 layers x (2 passes x dispatch + combine x top-2 x
    # d_model 64) = 65,536. Eq. 20: a copy leaves the node with probability (2 - 1) / 2 = 1/2 and stays inside it but
    # leaves the GPU with (8 - 1) / 16; InfiniBand binds: 65,536 x 1/2 x 2 bytes / 50 GB/s.
    words = 32 * 4 * 2 * 2 * 2 * 64
    expected = words * max(7 / 16 * 2 / NVL_BPS, 0.5 * 2 / IB_BPS)
    ev = evaluate(H100, wl, lay)
    assert ev.step.pp_ep_s == pytest.approx(expected, rel=1e-12)
    # The unfolded reading (ep carved from dp) cannot express it: the planner refused ep 16 on Megatron dp 8 before.
    assert ev.gpus == 16


def test_expert_gradients_reduce_over_expert_data_parallel_ranks():
    wl = tiny_moe()
    # dp 8 x tp 2 on 16 GPUs; ep 4 x etp 1 leaves edp = 16 / 4 = 4, placed (2, 2): ep takes 4 of a node's 8 ranks.
    lay = folded(8, 2, 4, 1, 2, _ones(dp=(4, 2), tp_ff=(2, 1)))
    assert check_layout(H100, wl, lay) == []
    cols = Tuples.from_layouts([lay])
    fac = {d: np.array([lay.placement[d]]) for d in lay.placement}
    fac.update(T.fold_factors(cols, fac))
    assert fac["expert_ep"].tolist() == [[4, 1]] and fac["edp"].tolist() == [[2, 2]]
    term = {t.name: t for t in T.group_terms(wl, PAPER, folded=True)}["dp_expert_bw"]
    # Expert weights here: 16 / 4 = 4 experts x 4 layers x (up + gate 128 x 64 + down 64 x 64) = 196,608 words.
    # Hierarchical all-reduce over (2, 2): NVLink moves 2 (1/2) W, InfiniBand 2 (1/2) W / 2; InfiniBand binds.
    w = 4 * 4 * (128 * 64 + 64 * 64)
    expected = max(w * 2 / NVL_BPS, w / 2 * 2 / IB_BPS)
    got = term.scale(H100, wl, cols) * term.feature(H100, wl, cols, fac)
    assert float(got[0]) == pytest.approx(expected, rel=1e-12)
    # The dense weights' reduction no longer carries them.
    dense, expert = T.split_params_per_gpu(wl, cols)
    assert float(expert[0]) == w
    assert float(T._dp_words(H100, wl, cols)[0]) == float(dense[0])


def test_dispatch_dedup_counts_distinct_destinations_by_enumeration():
    # 4 expert ranks, 2 per node (factors (2, 2)), top-2 with each copy on a uniformly random rank: enumerate the 16
    # destination pairs of a token on rank 0. Copies leaving the node: 2 x 1/2 = 1 on average; distinct remote
    # nodes: 1 - P(both stay) = 1 - 1/4 = 3/4. Copies to another GPU of the node (rank 1): 2 x 1/4 = 1/2; distinct:
    # 1 - (3/4)^2 = 7/16.
    pairs = [(a, b) for a in range(4) for b in range(4)]
    node_copies = sum((a >= 2) + (b >= 2) for a, b in pairs) / 16
    node_distinct = sum(a >= 2 or b >= 2 for a, b in pairs) / 16
    gpu_copies = sum((a == 1) + (b == 1) for a, b in pairs) / 16
    gpu_distinct = sum(a == 1 or b == 1 for a, b in pairs) / 16
    share = T.dispatch_dedup(np.array([[2, 2]]), 2)[0]
    assert share[0] == pytest.approx(gpu_distinct / gpu_copies, rel=1e-12) == 7 / 8
    assert share[1] == pytest.approx(node_distinct / node_copies, rel=1e-12) == 3 / 4
    # DeepSeek-V3 on 256 B200s (EP 32 = 8 per node x 4 nodes, top-8): (1 - (3/4)^8) / (8 / 4) = 0.44995 of the copies
    # cross InfiniBand, (1 - (31/32)^8) / (8 / 32) = 0.8958 leave the GPU within the node.
    share = T.dispatch_dedup(np.array([[8, 4]]), 8)[0]
    assert share[1] == pytest.approx((1 - 0.75**8) / 2, rel=1e-12)
    assert share[0] == pytest.approx((1 - (31 / 32) ** 8) * 4, rel=1e-12)


def test_dispatch_dedup_scales_the_all_to_all_by_the_distinct_share():
    # The folded layout of the test above: ep factors (8, 2), top-2, InfiniBand binds (65,536 words x 1/2 x 2 bytes
    # / 50 GB/s). A deduplicating dispatcher sends (1 - (1/2)^2) / (2 x 1/2) = 3/4 of those copies over InfiniBand;
    # within the node (1 - (15/16)^2) / (2/16) = 0.96875 of 7/16 still binds less.
    wl = tiny_moe()
    lay = folded(8, 2, 16, 1, 2, _ones(dp=(4, 2), tp_ff=(2, 1)))
    dedup = with_profile(H100, PAPER.model_copy(update={"moe_dispatch_dedup": True}))
    words = 32 * 4 * 2 * 2 * 2 * 64
    assert evaluate(dedup, wl, lay).step.pp_ep_s == pytest.approx(words * 0.75 * 0.5 * 2 / IB_BPS, rel=1e-12)
    real = get_profile("realistic")
    assert not real.moe_dispatch_dedup and real.for_framework("megatron-bridge").moe_dispatch_dedup
    assert not PAPER.moe_dispatch_dedup


def test_routing_imbalance_scales_expert_gemms_and_all_to_all():
    wl = tiny_moe()
    lay = folded(8, 2, 16, 1, 2, _ones(dp=(4, 2), tp_ff=(2, 1)))
    hw = _ideal_h100()
    skew = with_profile(hw, PAPER.model_copy(update={"moe_imbalance": 1.25}))
    e1, e2 = evaluate(hw, wl, lay), evaluate(skew, wl, lay)
    assert _op(e2, "expert up + gate") == pytest.approx(1.25 * _op(e1, "expert up + gate"), rel=1e-12)
    assert _op(e2, "q") == _op(e1, "q")  # dense work is not routed
    assert e2.step.pp_ep_s == pytest.approx(1.25 * e1.step.pp_ep_s, rel=1e-12)
    assert PAPER.moe_imbalance == 1.0 and get_profile("paper").moe_imbalance == 1.0


def test_custom_end_stages_device_time_by_hand():
    wl = tiny_moe(layers=13)
    # pp 4 x interleave 2 = 8 virtual stages; the first holds 1 layer, the last 0, the other 6 split 12: 2 each.
    cols = {"pp": np.array([4]), "interleave": np.array([2]), "first_layers": np.array([1]),
            "last_layers": np.array([0])}
    first, c, last = T.custom_stage_layers(wl, cols)
    assert (int(first[0]), int(c[0]), int(last[0])) == (1, 2, 0)
    # Device 0: its first chunk (1) + one more (2) = 3 layers + the embedding; device 3: 2 + 0 layers + the head;
    # the middle devices 2 x 2 = 4 layers. Layer 1 s, embedding 0.5 s, head 2 s: max(3.5, 4, 4) = 4 s.
    assert float(T.device_time_s(wl, cols, 1.0, 0.5, 2.0)[0]) == 4.0
    assert float(T.device_time_s(wl, cols, 1.0, 0.5, 3.0)[0]) == 5.0  # the last device now sets the pace
    assert float(T.device_layers(wl, cols)[0]) == 4.0
    # Only the first given: the other 7 virtual stages split 12 layers: refused (uneven).
    lay = Layout(dp=1, tp_ff=1, tp_model=1, pp=4, interleave=2, ep=1, microbatches=8, first_stage_layers=2,
                 schedule="1f1b", placement=_ones(pp=(4, 1)))
    assert any("do not split evenly" in p for p in check_layout(H100, wl, lay))
    ok = lay.model_copy(update={"first_stage_layers": 1, "last_stage_layers": 0})
    assert check_layout(H100, wl, ok) == []  # the automatic split would refuse 13 layers on 8 stages of 2


def test_custom_end_stages_price_the_busiest_device():
    hw, wl = _ideal_h100(), tiny_moe(layers=13)
    lay = Layout(dp=1, tp_ff=1, tp_model=1, pp=4, interleave=2, ep=1, microbatches=8, first_stage_layers=1,
                 last_stage_layers=0, schedule="1f1b", placement=_ones(pp=(4, 1)))
    assert check_layout(hw, wl, lay) == []
    ev = evaluate(hw, wl, lay)
    # The middle devices hold 4 layers; every layer op is priced on them.
    one = evaluate(hw, wl, lay.model_copy(update={"pp": 1, "interleave": 1, "first_stage_layers": None,
                                                   "last_stage_layers": None, "placement": _ones()}))
    assert _op(ev, "expert up + gate") == pytest.approx(_op(one, "expert up + gate") * 4 / 13, rel=1e-12)


def test_folding_rules_name_the_numbers():
    wl = tiny_moe()
    bad = folded(8, 2, 32, 1, 2, _ones(dp=(4, 2), tp_ff=(2, 1)))
    problems = check_layout(H100, wl, bad)
    assert any("expert_ep=32 does not divide experts=16" in p for p in problems)
    assert any("does not divide dp(8) * cp(1) * tp_ff(2) = 16" in p for p in problems)
    odd = folded(8, 2, 4, 3, 2, _ones(dp=(4, 2), tp_ff=(2, 1)))
    assert any("etp=3 does not divide the expert width 64" in p for p in check_layout(H100, wl, odd))
    placed = Layout(dp=4, tp_ff=2, tp_model=1, pp=1, interleave=1, ep=2, microbatches=2, etp=1, schedule="1f1b",
                    placement=_ones(dp=(2, 2), tp_ff=(2, 1), ep=(2, 1)))
    assert any("placed ep must be 1" in p for p in check_layout(H100, wl, placed))


@pytest.mark.parametrize("gpus", [4, 8])
def test_search_space_unchanged_cpsat_matches_enumerator(gpus):
    # The search never folds (its layouts have etp None): CP-SAT and the enumerator still agree on a tiny MoE.
    wl = tiny_moe(experts=4)
    opts = SearchOptions(gpus=gpus)
    ex = solve_exhaustive(H100, wl, opts, None)
    cp = solve_cpsat(H100, wl, opts, None, time_limit_s=60.0)
    assert ex.status == "optimal" and cp.status == "optimal"
    assert cp.layout.etp is None and cp.layout.first_stage_layers is None
    assert abs(evaluate(H100, wl, cp.layout).step.step_s - evaluate(H100, wl, ex.layout).step.step_s) <= 10e-9


def test_validate_prices_the_folded_and_custom_stage_records():
    runs = {r.id: r for r in load_runs()}
    qwen = runs["mbridge260401-qwen3-235b-a22b-256gpu-fp8"]
    lay = layout_of(qwen, H100)
    # Megatron dp 16 x tp 2 x pp 8; ep 32 > dp 16 folds over dp x tp = 32 ranks a stage: edp 1.
    assert (lay.dp, lay.ep, lay.tp_ff, lay.pp, lay.expert_ep, lay.etp, lay.gpus) == (16, 1, 2, 8, 32, 1, 256)
    assert check_layout(H100, workload_of(qwen), lay) == []
    dsv3 = runs["mbridge2509-deepseek-v3-1024gpu-fp8"]
    lay = layout_of(dsv3, H100)
    assert (lay.first_stage_layers, lay.last_stage_layers, lay.interleave, lay.expert_ep, lay.etp) == (1, 0, 4, 64, 1)
    rows = validate([qwen, dsv3], "realistic")
    assert all(r.problem == "" and r.ratio is not None for r in rows), [r.problem for r in rows]


def test_evaluate_cli_accepts_deepseek_v3_megatron_layout(capsys):
    argv = ["evaluate", "--model", "deepseek-v3", "--gpu", "h100", "--tp", "2", "--pp", "8", "--vpp", "4", "--dp",
            "64", "--ep", "64", "--etp", "1", "--first-stage-layers", "1", "--last-stage-layers", "0", "--gbs", "8192",
            "--mbs", "1", "--sp", "on", "--placement", "dp=4,16;tp_ff=2,1;pp=1,8", "--no-goodput", "--json"]
    code, out, err = invoke(capsys, argv)
    assert code in (0, 1), err  # 1: it may not fit in 80 GB; the layout is priced either way
    doc = json.loads(out)
    lay = doc["layout"]
    assert (lay["dp"], lay["ep"], lay["expert_ep"], lay["etp"], lay["first_stage_layers"], lay["last_stage_layers"]) \
        == (64, 1, 64, 1, 1, 0)
    assert doc["gpus"] == 1024 and doc["step_time_s"] > 0
    # Without the custom stages 61 layers cannot sit on 32 virtual stages of 2: one line, exit 2.
    k = argv.index("--first-stage-layers")
    code, out, err = invoke(capsys, argv[:k] + argv[k + 4:])
    # --json: the error is the ErrorDocument on stdout, nothing on stderr
    assert code == 2 and err == "" and "virtual stages cannot hold 61 layers" in json.loads(out)["error"]["message"]


def test_evaluate_cli_accepts_qwen3_235b_folded_layout(capsys, tmp_path):
    model = tmp_path / "qwen3-235b.toml"
    model.write_text("\n".join([
        'description = "Qwen3-235B-A22B shape (test)"', 'source = "Qwen3 config.json (test copy)"',
        'kind = "transformer"', "layers = 94", "d_model = 4096", "heads = 64", "kv_heads = 4", "head_dim = 128",
        'ffn = "swiglu"', "d_ff = 1536", "vocab = 151936", "seq_len = 4096", "batch_sequences = 8192",
        "tokens = 1e12", "experts = 128", "top_k = 8", "expert_d_ff = 1536", "shared_experts = 0",
        "dense_layers = 0"]) + "\n")
    argv = ["evaluate", "--model", str(model), "--gpu", "h100", "--tp", "2", "--pp", "8", "--vpp", "4", "--dp", "16",
            "--ep", "32", "--etp", "1", "--mbs", "1", "--sp", "on", "--precision", "fp8",
            "--placement", "dp=4,4;tp_ff=2,1;pp=1,8", "--no-goodput", "--json"]
    code, out, err = invoke(capsys, argv)
    assert code in (0, 1), err
    lay = json.loads(out)["layout"]
    assert (lay["dp"], lay["ep"], lay["expert_ep"], lay["etp"]) == (16, 1, 32, 1)
    k = argv.index("--etp")
    code, out, err = invoke(capsys, argv[:k] + argv[k + 2:])  # unfolded, ep must come out of dp
    assert code == 2 and err == "" and "multiple of --ep 32" in json.loads(out)["error"]["message"]


def _stage_price(c, a2a, rest, u):
    """The step under the stage-wise EP overlap branches, from hand-set values: stage computes `c`, all-to-all
    `a2a`, the rest `rest`, unpaired share `u` (no bubble, no DP, no latency)."""
    wl = tiny_moe()
    prof = PAPER.model_copy(update={"overlap_ep_stages": True})
    forms = [b for b in T.branches(wl, False, prof) if b.name.startswith("ep_stages_")]
    assert len(forms) == 16
    values = {"stretch": 1.0, "ep_stage_share": 0.25, "ep_unpaired_stretch": u, "ep_unpaired_share": u / 4,
              "ep_rest_s": rest, "a2a_bw": a2a, "one": 1.0, "lat_share": 0.0, "optimizer_s": 0.0}
    values.update({k: v for k, v in zip(T.EP_STAGE_TOTALS, c, strict=True)})
    for t in T.group_terms(wl, prof):
        values.setdefault(t.name, 0.0)
    return max(float(T.combine(b, values)) for b in forms)


def test_ep_stage_overlap_branches_by_hand():
    # Stage computes 1, 2, 3, 4 s against quarters of an 8 s all-to-all (2 s each), 0.5 s outside the layers:
    # 0.5 + max(1, 2) + max(2, 2) + max(3, 2) + max(4, 2) = 11.5 s.
    assert _stage_price((1.0, 2.0, 3.0, 4.0), 8.0, 0.5, 0.0) == pytest.approx(11.5, rel=1e-12)
    # A quarter of the passes unpaired: they take compute + all-to-all in full, 0.25 x (10 + 8) = 4.5 s, the paired
    # three quarters 0.75 x 11 = 8.25 s: 0.5 + 8.25 + 4.5 = 13.25 s.
    assert _stage_price((1.0, 2.0, 3.0, 4.0), 8.0, 0.5, 0.25) == pytest.approx(13.25, rel=1e-12)
    # An all-to-all that every stage hides: the compute alone, 0.5 + 10 = 10.5 s.
    assert _stage_price((1.0, 2.0, 3.0, 4.0), 2.0, 0.5, 0.0) == pytest.approx(10.5, rel=1e-12)


def test_ep_unpaired_share_by_hand():
    cols = {"pp": np.array([1, 4, 4, 8]), "interleave": np.array([1, 2, 1, 4]), "microbatches": np.array([8, 8, 8, 4])}
    # pp 1: the first forward and the last backward of 8 microbatches, 1/8. Interleaved pp 4 x 2: (4 - 1) 2 + (2 - 1)
    # 4 + 1 = 11 warm-up chunks of 8 x 2 = 16. pp 4 without interleaving: 4 of 8. pp 8 x 4 with 4 microbatches:
    # 14 + 24 + 1 = 39 > 16 chunks, every pass unpaired.
    assert T.ep_unpaired_share(cols) == pytest.approx([1 / 8, 11 / 16, 4 / 8, 1.0], rel=1e-12)


def test_ep_stage_times_split_the_layer_by_hand():
    # The ideal GPU: every GEMM pass of one weight takes the same time, element-wise work is free (unbounded HBM).
    # Stage 2 is the experts' activation gradients: a third of the two expert GEMMs' seconds per layer per
    # microbatch (4 layers x 2 microbatches); stage 3 their forward and weight gradient, twice that; stages 1 and 4
    # the attention side's forward and activation gradient: a third of q, kv, o and router each, plus the attention
    # kernel's forward (stage 1) and backward (stage 4).
    hw = with_profile(_ideal_h100(), PAPER.model_copy(update={"overlap_ep_stages": True}))
    wl = tiny_moe()
    lay = folded(8, 2, 16, 1, 2, _ones(dp=(4, 2), tp_ff=(2, 1)))
    ev = evaluate(hw, wl, lay)
    shape = T.shape_times(hw, wl, Tuples.from_layouts([lay]))
    per = 4 * 2
    experts = (_op(ev, "expert up + gate") + _op(ev, "expert down")) / per
    side = sum(_op(ev, n) for n in ("q", "kv", "o", "router")) / per
    kernel = _op(ev, "attention kernel") / per  # forward + backward
    fwd_kernel = float(shape["block_core_fwd_s"][0])  # the kernel's forward (what selective recomputation reruns)
    assert 0.0 < fwd_kernel < kernel
    assert float(shape["ep_stage2_s"][0]) == pytest.approx(experts / 3, rel=1e-9)
    assert float(shape["ep_stage3_s"][0]) == pytest.approx(2 * experts / 3, rel=1e-9)
    assert float(shape["ep_stage1_s"][0]) == pytest.approx(side / 3 + fwd_kernel, rel=1e-9)
    assert float(shape["ep_stage4_s"][0]) == pytest.approx(side / 3 + kernel - fwd_kernel, rel=1e-9)
    # What no all-to-all hides is the attention side's weight gradient: the four stages and it make the layer.
    total = sum(float(shape[k][0]) for k in T.EP_STAGE_KEYS) + side / 3
    assert total == pytest.approx(float(shape["block_s"][0]), rel=1e-9)


def test_ep_stages_only_when_the_overlap_runs():
    wl = tiny_moe()
    assert not any(b.name.startswith("ep_stages_") for b in T.branches(wl, False, PAPER))
    real = get_profile("realistic")
    assert real.overlap_ep_comm_stages and not real.overlap_ep_stages  # validation turns it on per record


def optimal_steps_both_ways(hw0, wl, gpus: int, field: str, values) -> list[float]:
    """The optimal step on `gpus` GPUs under the paper profile with `field` set to each of `values`, after checking
    that CP-SAT and the exhaustive enumerator both prove an optimum of the same step (within 10 ns)."""
    opts, steps = SearchOptions(gpus=gpus), []
    for value in values:
        hw = with_profile(hw0, PAPER.model_copy(update={field: value}))
        ex = solve_exhaustive(hw, wl, opts, None)
        cp = solve_cpsat(hw, wl, opts, None, time_limit_s=60.0)
        assert ex.status == "optimal" and cp.status == "optimal"
        step = evaluate(hw, wl, ex.layout).step.step_s
        assert abs(evaluate(hw, wl, cp.layout).step.step_s - step) <= 10e-9
        steps.append(step)
    return steps


@pytest.mark.parametrize("gpus", [4, 8])
def test_ep_stages_cpsat_matches_enumerator(gpus):
    # The stage branches are linear forms like the others: CP-SAT and the enumerator agree with them on. Links a
    # thousand times slower than H100's make the all-to-all bind: on 8 GPUs the stages change the optimum's price.
    slow = H100.model_copy(update={"levels": [lv.model_copy(update={"bw_bidir_Bps": lv.bw_bidir_Bps * 1e-3})
                                              for lv in H100.levels]})
    steps = optimal_steps_both_ways(slow, tiny_moe(experts=4), gpus, "overlap_ep_stages", (False, True))
    assert steps[1] >= steps[0] - 1e-15  # hiding by stages never hides more than the whole overlap
    if gpus == 8:
        assert steps[1] > steps[0] * 1.05


def test_ep_stages_step_by_hand():
    # The tiny MoE on the ideal GPU behind links 1000x slower than H100's (dp 8, expert_ep 8, 2 microbatches): one
    # layout's step under the stage-wise
    # overlap, rebuilt by hand from its parts. Stage computes c_k = m x layers x the per-layer stage time (m = 2,
    # 4 layers, pp 1), the all-to-all A (pp_ep_s: no pipeline, so no point-to-point), the unpaired share u = 1 / m
    # (the first forward, the last backward), the rest the GEMM time outside the stages:
    # step = DP + latency + rest + (1 - u) sum_k max(c_k, A / 4) + u (sum_k c_k + A).
    ideal = _ideal_h100()
    slow = ideal.model_copy(update={"levels": [lv.model_copy(update={"bw_bidir_Bps": lv.bw_bidir_Bps * 1e-3})
                                               for lv in ideal.levels]})
    hw = with_profile(slow, PAPER.model_copy(update={"overlap_ep_stages": True}))
    wl = tiny_moe()
    lay = folded(8, 1, 8, 1, 2, _ones(dp=(4, 2)))  # no tensor parallelism: no all-reduce in the network branch
    ev = evaluate(hw, wl, lay)
    assert ev.step.tp_s == 0.0
    shape = T.shape_times(hw, wl, Tuples.from_layouts([lay]))
    c = [2 * 4 * float(shape[k][0]) for k in T.EP_STAGE_KEYS]
    a2a, u = ev.step.pp_ep_s, 0.5
    rest = ev.step.matmul_s - sum(c)
    assert rest > 0 and max(c) < a2a / 4  # every stage is all-to-all-bound here
    staged = rest + (1 - u) * sum(max(ck, a2a / 4) for ck in c) + u * (sum(c) + a2a)
    assert ev.step.step_s == pytest.approx(ev.step.dp_s + ev.step.latency_s + staged, rel=1e-9)
    # Without the stages the all-to-all hides whole: max(GEMMs, all-to-all) instead.
    flat = evaluate(with_profile(slow, PAPER), wl, lay)
    assert flat.step.step_s == pytest.approx(flat.step.dp_s + flat.step.latency_s + max(flat.step.matmul_s, a2a),
                                             rel=1e-9)
