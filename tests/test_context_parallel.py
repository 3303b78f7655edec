"""Context parallelism as torchtitan runs it (PyTorch's ring attention, docs/model.md §7b "Context parallelism"):
the words its ring moves and the element-wise work of its merges, against hand counts."""

from __future__ import annotations

import numpy as np
import pytest

from planner.cost import terms
from planner.cost.step import evaluate
from planner.hardware import get_hardware, with_profile
from planner.parallel.space import Tuples
from planner.profile import get_profile
from planner.validation import layout_of, load_runs, workload_of

RUN = "torchtitan-llama31-8b-8gpu-cp8-256k-fp8"  # Llama 3.1 8B, 262,144 tokens, FSDP 1 x CP 8, full recompute


def _setup(framework: str | None, **update):
    run = next(r for r in load_runs() if r.id == RUN)
    prof = get_profile("realistic")
    if framework is not None:
        prof = prof.for_framework(framework)
    prof = prof.model_copy(update=update)
    hw = with_profile(get_hardware("h100-96gb"), prof)
    wl = workload_of(run)
    lay = layout_of(run, hw)
    return hw, wl, lay, Tuples.from_layouts([lay])


def test_torchtitan_ring_words_by_hand():
    hw, wl, lay, cols = _setup("torchtitan")
    assert (lay.cp, lay.dp, lay.recompute) == (8, 1, 2)
    # repeat_kv: every one of the 32 query heads' keys and values, 128 + 128 words a token
    kv = 32 * (128 + 128)
    tokens_here = 262144 / 8
    # keys/values 7 times in the forward, the recomputed forward and the backward; float32 gradients (2 words an
    # element) 8 times (they travel back to their owner)
    hops = 7 * 3 + 2 * 8
    expected = hops * kv * tokens_here * 32
    assert float(terms._cp_words(hw, wl, cols)[0]) == pytest.approx(expected, rel=1e-12)


def test_default_ring_words_are_the_kv_heads_at_cp_minus_one_hops():
    """Megatron / Transformer Engine (the profile's top level): GQA's 8 KV heads, 16-bit gradients, N_CP - 1 hops:
    (N_CP - 1)(3 + 1 recomputed forward) chunk transfers."""
    hw, wl, lay, cols = _setup(None, compiled=False)
    expected = (8 - 1) * (3 + 1) * (2 * 8 * 128) * (262144 / 8) * 32
    assert float(terms._cp_words(hw, wl, cols)[0]) == pytest.approx(expected, rel=1e-12)
    assert not any(o.name == "ring attention merge" for o in evaluate(hw, wl, lay).ops)


def test_ring_merge_row_by_hand_and_it_only_slows():
    hw, wl, lay, _ = _setup("torchtitan", compiled=False)
    prof = hw.profile
    assert (prof.cp_merge_fwd_bytes, prof.cp_merge_bwd_bytes) == (40.0, 64.0)
    ev = evaluate(hw, wl, lay)
    row = next(o for o in ev.ops if o.name == "ring attention merge")
    # 8 steps x (40 + 64) bytes x (32768 tokens x 32 heads x 128) output elements, 32 layers, one microbatch,
    # at the HBM bandwidth the element-wise rows get
    bw = hw.gpu.hbm_Bps * prof.elementwise_hbm_fraction
    expected = 32 * 8 * (40 + 64) * (32768 * 32 * 128) / bw
    assert row.seconds == pytest.approx(expected, rel=1e-12)
    more = with_profile(hw, prof.model_copy(update={"cp_merge_bwd_bytes": 128.0}))
    assert evaluate(more, wl, lay).step.step_s > ev.step.step_s
    none = with_profile(hw, prof.model_copy(update={"cp_merge_fwd_bytes": 0.0, "cp_merge_bwd_bytes": 0.0}))
    assert evaluate(none, wl, lay).step.step_s < ev.step.step_s


def test_one_rank_has_no_ring():
    hw, wl, lay, _ = _setup("torchtitan")
    one = lay.model_copy(update={"cp": 1, "dp": 8, "placement": {**lay.placement, "cp": (1, 1), "dp": (8, 1)}})
    cols = Tuples.from_layouts([one])
    assert float(terms._cp_words(hw, wl, cols)[0]) == 0.0
    assert float(np.asarray(terms.cp_hops(hw, cols))[0]) == 0.0
    assert not any(o.name == "ring attention merge" for o in evaluate(hw, wl, one).ops)


def test_cpsat_matches_enumerator_under_torchtitans_ring():
    """The search prices the expanded ring and the merge row the same way in CP-SAT and the enumerator, and picks the
    same step time (a tiny long-context model on 8 GPUs, memory tight enough that context parallelism is in play)."""
    from planner.parallel.space import SearchOptions
    from planner.search.cpsat import solve_cpsat
    from planner.search.exhaustive import solve_exhaustive
    from planner.workload.scaling import transformer_workload

    wl = transformer_workload(64, 128, 4, 1, 256, 16 * 256, 1e9, {"heads": 4, "kv_heads": 2, "vocab": 256,
                                                                   "ffn": "swiglu"}, "tiny long")
    prof = get_profile("realistic").for_framework("torchtitan")
    assert prof.cp_kv_expanded and prof.cp_merge_bwd_bytes > 0
    hw = with_profile(get_hardware("h100-96gb"), prof)
    for opts in (SearchOptions(gpus=8), SearchOptions(gpus=8, fixed=(("cp", 4),))):
        ex, cs = solve_exhaustive(hw, wl, opts, None), solve_cpsat(hw, wl, opts, None)
        assert ex.status == cs.status == "optimal" and ex.space_size == cs.space_size
        assert ex.layout is not None and cs.layout is not None
        ee, ec = evaluate(hw, wl, ex.layout), evaluate(hw, wl, cs.layout)
        assert abs(ec.step.step_s - ee.step.step_s) <= 1e-9
    assert cs.layout.cp == 4 and any(o.name == "ring attention merge" and o.seconds > 0 for o in ec.ops)
