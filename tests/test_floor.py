"""The transformer's latency wall (planner.explain.floor_bound) read from the cost terms: a lower bound on every
layout's step, checked against the enumerator's pricing of every layout of small spaces, and attained where a hand
calculation says it is (docs/model.md §6)."""

from __future__ import annotations

import numpy as np
import pytest

from planner import explain
from planner.cost import terms as T
from planner.cost.step import evaluate
from planner.hardware import get_hardware, with_profile
from planner.parallel.placement import greedy_placement
from planner.parallel.space import SearchOptions, build_space, model_parallel_rows, tuples_for_model_parallel
from planner.schema import Layout, TransformerShape, Workload
from planner.search.exhaustive import price_placements
from planner.search.presolve import ShapeTable, tuple_terms
from planner.workload import load_model_preset


def _dense() -> Workload:
    tr = TransformerShape(heads=8, kv_heads=4, head_dim=64, ffn="swiglu", vocab=4096)
    return Workload(d_model=512, d_ff=1536, layers=4, batch_tokens=16 * 1024, tokens=1e9, seq_len=1024,
                    transformer=tr)


def _moe() -> Workload:
    tr = TransformerShape(heads=8, kv_heads=8, head_dim=64, ffn="swiglu", vocab=4096, top_k=2, expert_d_ff=512,
                          shared_experts=1, dense_layers=1)
    return Workload(d_model=512, d_ff=1536, layers=4, experts=8, batch_tokens=16 * 1024, tokens=1e9, seq_len=1024,
                    transformer=tr)


def _mla_fp8() -> Workload:
    tr = TransformerShape(heads=8, kv_heads=8, head_dim=32, ffn="swiglu", vocab=4096, attention="mla", q_lora_rank=128,
                          kv_lora_rank=64, rope_head_dim=16, v_head_dim=32, top_k=2, expert_d_ff=256)
    return Workload(d_model=256, d_ff=768, layers=3, experts=4, batch_tokens=8 * 512, tokens=1e8, seq_len=512,
                    transformer=tr, precision="fp8")


WORKLOADS = {"dense": _dense, "moe": _moe, "mla-fp8": _mla_fp8}


def _every_layout(hw, wl, options: SearchOptions, gpus: int):
    """The cost model's pricing (step_arrays, as the exhaustive solver calls it) of every layout of the space on
    exactly `gpus` GPUs: every degree tuple, every placement."""
    space = build_space(hw, wl, options)
    t = tuples_for_model_parallel(space, model_parallel_rows(space), space.dp_m)
    t = t.take(np.nonzero(t.gpus == gpus)[0])
    rows, _, arr = price_placements(hw, wl, t, False, tuple_terms(hw, wl, t, ShapeTable.for_space(hw, wl, space)))
    assert len(rows) > 0
    return arr


@pytest.mark.parametrize("profile", ["paper", "realistic"])
@pytest.mark.parametrize("name", list(WORKLOADS))
@pytest.mark.parametrize("gpus", [8, 16])
def test_transformer_floor_is_below_every_layout(profile, name, gpus):
    """Every layout on 8 (one node) and 16 (two nodes) GPUs, priced by the cost model: none has a step, nor even a
    floor branch, below the bound; on one node under the paper profile the least critical path is the bound itself
    (every placement inside a node has the same latencies, so nothing is lost by minimising the terms apart)."""
    hw = with_profile(get_hardware("h100"), profile)
    wl = WORKLOADS[name]()
    options = SearchOptions(gpus=gpus)
    fb = explain.floor_bound(hw, wl, options)
    arr = _every_layout(hw, wl, options, gpus)
    assert np.all(arr["step_s"] >= fb.step_s * (1 - 1e-12))
    assert np.all(arr["floor_s"] >= fb.step_s * (1 - 1e-12))
    # the bound's path part (less its optimizer step) is below every layout's critical path
    path = fb.step_s - explain._least_optimizer_s(hw, wl, gpus)
    assert np.all(arr["critical_path_s"] >= path * (1 - 1e-12))
    least = float(arr["critical_path_s"].min())
    if gpus == 8 and profile == "paper":
        assert least == pytest.approx(fb.step_s, rel=1e-12)
    else:  # close: two groups wanting the same node can both be inside it only in the bound
        assert least <= 1.05 * path
    # with no cluster size given, the bound is over more layouts: no higher
    assert explain.floor_bound(hw, wl).step_s <= fb.step_s * (1 + 1e-12)


def test_transformer_floor_respects_a_fixed_recomputation():
    """With full recomputation pinned, the bound adds its re-run forward pass and hops (and still bounds every
    layout); without the pin it is lower."""
    hw = get_hardware("h100")
    wl = _dense()
    pinned = SearchOptions(gpus=8, fixed=(("recompute", 2),))
    fb = explain.floor_bound(hw, wl, pinned)
    arr = _every_layout(hw, wl, pinned, 8)
    assert np.all(arr["step_s"] >= fb.step_s * (1 - 1e-12))
    assert float(arr["critical_path_s"].min()) == pytest.approx(fb.step_s, rel=1e-12)
    assert explain.floor_bound(hw, wl, SearchOptions(gpus=8)).step_s < fb.step_s


def test_least_optimizer_step_by_hand():
    """The dense test model's layers hold 4 x (3 x 512^2 + 3 x 512 x 1536) = 12,582,912 weights (q, kv of 4 heads of
    64, o, and SwiGLU's three MLP matrices); on 8 GPUs the busiest updates at least an eighth of them, at the
    realistic profile's optimizer bytes per parameter over element-wise HBM bandwidth. The paper profile prices no
    optimizer step."""
    hw = with_profile(get_hardware("h100"), "realistic")
    per_param = hw.profile.optimizer_bytes_per_param / (hw.gpu.hbm_Bps * hw.profile.elementwise_hbm_fraction)
    assert explain._least_optimizer_s(hw, _dense(), 8) == pytest.approx(per_param * 12_582_912 / 8, rel=1e-12)
    assert explain._least_optimizer_s(get_hardware("h100"), _dense(), 8) == 0.0


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_transformer_floor_on_one_gpu_is_one_sequence_per_microbatch(name):
    """Hand calculation: on one GPU every degree is 1 and no collective has a latency, so the floor is the critical
    GEMMs, attention and element-wise work of the fastest microbatch, which is one sequence (the most microbatches
    the batch allows). The layout with m = b / s is priced at exactly the bound (the paper profile: no optimizer
    step); with two sequences per microbatch it is slower."""
    hw = get_hardware("h100")
    wl = WORKLOADS[name]()
    fb = explain.floor_bound(hw, wl, SearchOptions(gpus=1))
    assert (fb.tp_ff, fb.tp_model, fb.ep, fb.cp, fb.nanobatch) == (1, 1, 1, 1, wl.seq_len)
    seqs = wl.batch_tokens // wl.seq_len
    degrees = {"dp": 1, "tp_ff": 1, "tp_model": 1, "pp": 1, "ep": 1}
    lay = Layout(**degrees, interleave=1, microbatches=seqs, placement=greedy_placement(hw, degrees))
    ev = evaluate(hw, wl, lay)
    assert ev.step.critical_path_s == pytest.approx(fb.step_s, rel=1e-12)
    assert ev.step.step_s >= fb.step_s
    slower = evaluate(hw, wl, lay.model_copy(update={"microbatches": seqs // 2}))
    assert slower.step.critical_path_s > fb.step_s


@pytest.mark.parametrize("profile", ["paper", "realistic"])
@pytest.mark.parametrize("preset", ["llama3-70b", "deepseek-v3", "mixtral-8x7b"])
def test_critical_path_grows_with_the_tokens_per_microbatch(profile, preset):
    """The fact the bound's k = 1 rests on: at fixed shard degrees, every critical-path quantity of the shape table
    is non-decreasing in the tokens a GPU runs per microbatch (here over every N_DP m the batch allows)."""
    hw = with_profile(get_hardware("h100"), profile)
    wl = load_model_preset(preset)
    space = build_space(hw, wl, SearchOptions())
    seqs = wl.batch_tokens // wl.seq_len
    ep = int(space.values["ep"][-1]) if seqs % int(space.values["ep"][-1]) == 0 else 1
    u = np.array([d for d in range(1, seqs // ep + 1) if (seqs // ep) % d == 0], dtype=np.int64)  # N_DP m, rising
    for tf in (1, int(space.values["tp_ff"][-1])):
        for sp in (0, 1) if tf > 1 else (0,):
            n = len(u)
            cols = {"tp_ff": np.full(n, tf), "tp_model": np.ones(n, dtype=np.int64), "dp": u,
                    "microbatches": np.ones(n, dtype=np.int64), "ep": np.full(n, ep),
                    "cp": np.ones(n, dtype=np.int64), "sp": np.full(n, sp)}
            times = T.shape_times(hw, wl, cols)
            for key in ("block_critical_s", "block_fwd_s", "block_core_fwd_s", "embed_critical_s", "head_critical_s"):
                t = np.broadcast_to(times[key], (n,))
                assert np.all(np.diff(t) <= 1e-15 * t[:-1]), key  # more microbatches: fewer tokens, no slower


@pytest.mark.parametrize("preset", ["llama3-405b", "deepseek-v3"])
def test_transformer_floor_of_presets_is_below_random_layouts(preset):
    """Random valid layouts of a preset's space (greedy placements), priced in full: none below the bound (the space
    is far too large to price every layout)."""
    import random

    from planner.errors import InvalidInput
    from planner.parallel.space import check_layout

    hw = with_profile(get_hardware("h100"), "realistic")
    wl = load_model_preset(preset)
    fb = explain.floor_bound(hw, wl)
    space = build_space(hw, wl, SearchOptions())
    seqs = wl.batch_tokens // wl.seq_len
    rnd = random.Random(29)
    priced = 0
    for _ in range(400):
        if priced == 40:
            break
        pick = {d: int(rnd.choice(space.values[d])) for d in ("tp_ff", "ep", "sp", "recompute", "zero")}
        pick["tp_model"] = int(rnd.choice([v for v in space.values["tp_model"] if v <= 4]))
        pick["cp"] = int(rnd.choice([v for v in space.values["cp"] if v <= 8]))
        k = rnd.randrange(len(space.pp_i_zb["pp"]))
        pp, il = int(space.pp_i_zb["pp"][k]), int(space.pp_i_zb["interleave"][k])
        per_ep = seqs // pick["ep"] if seqs % pick["ep"] == 0 else 0
        if per_ep == 0:
            continue
        dp = rnd.choice([d for d in range(1, 65) if per_ep % d == 0])
        m = rnd.choice([d for d in range(1, per_ep // dp + 1) if (per_ep // dp) % d == 0])
        if dp * pp * pick["tp_ff"] * pick["tp_model"] * pick["ep"] * pick["cp"] > 16384:
            continue
        degrees = {"dp": dp, "tp_ff": pick["tp_ff"], "tp_model": pick["tp_model"], "pp": pp, "ep": pick["ep"],
                   "cp": pick["cp"]}
        try:
            lay = Layout(**degrees, interleave=il, microbatches=m, sp=pick["sp"], recompute=pick["recompute"],
                         zero=pick["zero"], placement=greedy_placement(hw, degrees))
        except (InvalidInput, ValueError):
            continue
        if check_layout(hw, wl, lay):
            continue
        assert evaluate(hw, wl, lay).step.step_s >= fb.step_s * (1 - 1e-12)
        priced += 1
    assert priced >= 10


@pytest.mark.parametrize("name", ["dense", "moe"])
def test_transformer_floor_where_a_level_is_faster_than_the_one_below(name):
    """The toy's floor needs its per-layer bound on such hardware (a pipeline hop could undercut its routing hop);
    the transformer's prices its expert routing as its own term and leaves the pipeline's hops out, so the same
    reading stays below every layout."""
    hw = get_hardware("h100")
    slow_bottom = hw.model_copy(update={"levels": (hw.levels[0].model_copy(update={"lat_s": 1e-4}), *hw.levels[1:])})
    wl = WORKLOADS[name]()
    options = SearchOptions(gpus=16)
    fb = explain.floor_bound(slow_bottom, wl, options)
    arr = _every_layout(slow_bottom, wl, options, 16)
    assert np.all(arr["step_s"] >= fb.step_s * (1 - 1e-12))
    # A slower level cannot lower the bound; here it does not raise it either: each group's least latency may sit on
    # the faster level above (the least over factor vectors does not ask the levels to fill bottom-up).
    assert fb.step_s >= explain.floor_bound(hw, wl, options).step_s
