"""The host-bound floor of eagerly launched MoE layers (docs/model.md §1c): a pipeline stage takes at least its MoE
layers x microbatches x the host time per layer, stretched by the bubble like the GEMMs. Expected values are hand
arithmetic written out in each test."""

from __future__ import annotations

import pytest
from test_moe import H100, _ones, optimal_steps_both_ways, tiny_moe

from planner.cost import terms as T
from planner.cost.step import evaluate
from planner.hardware import with_profile
from planner.profile import PAPER, get_profile
from planner.schema import Layout
from planner.validation import load_runs, validate
from planner.workload.scaling import transformer_workload


def _layout(pp: int, microbatches: int) -> Layout:
    return Layout(dp=1, tp_ff=1, tp_model=1, pp=pp, interleave=1, ep=1, cp=1, microbatches=microbatches,
                  schedule="1f1b", placement=_ones(pp=(pp, 1)))


def test_host_floor_by_hand():
    # One GPU, the tiny MoE (4 layers, every one MoE), 2 microbatches, 1 s of host time per layer and microbatch:
    # the host needs 2 x 4 x 1 = 8 s, far more than the GPU's microseconds, and nothing else is in the step (one
    # GPU: no traffic; the paper profile: no optimizer term).
    hw = with_profile(H100, PAPER.model_copy(update={"host_moe_layer_s": 1.0}))
    wl = tiny_moe()
    ev = evaluate(hw, wl, _layout(1, 2))
    assert ev.step.step_s == pytest.approx(8.0, rel=1e-9)
    assert ev.bottleneck.startswith("host-bound floor")
    # Two stages of 2 layers, 4 microbatches: 4 x 2 x 1 = 8 s of host time on each stage, stretched by the 1F1B
    # bubble f_b = (2 - 1) / (2 - 1 + 4) = 1/5: 8 / (1 - 1/5) = 10 s, plus the point-to-point latencies the
    # other branches carry too (microseconds).
    assert evaluate(hw, wl, _layout(2, 4)).step.step_s == pytest.approx(10.0, rel=1e-5)


def test_no_floor_without_host_time_or_experts():
    wl = tiny_moe()
    assert not any(b.name == "host" for b in T.branches(wl, False, PAPER))
    on = PAPER.model_copy(update={"host_moe_layer_s": 1e-3})
    assert any(b.name == "host" for b in T.branches(wl, False, on))
    dense = transformer_workload(64, 256, 4, 1, 32, 512, 1e9, {"heads": 4, "vocab": 256, "ffn": "swiglu"}, "dense")
    assert not any(b.name == "host" for b in T.branches(dense, False, on))  # dense layers are not floored
    # Shipped profiles price no floor for plans; the realistic one holds a fitted value for eager records.
    real = get_profile("realistic")
    assert real.host_moe_layer_s == 0.0 and real.host_eager_moe_layer_s > 0.0


def test_floor_a_small_host_time_leaves_alone():
    # A host time far below the GPU's per-layer time changes nothing: the GEMM branch stays the maximum.
    wl = tiny_moe()
    base = evaluate(H100, wl, _layout(1, 2)).step.step_s
    hw = with_profile(H100, PAPER.model_copy(update={"host_moe_layer_s": 1e-12}))
    assert evaluate(hw, wl, _layout(1, 2)).step.step_s == pytest.approx(base, rel=1e-12)


def test_validate_floors_only_eager_records():
    # Qwen3-30B-A3B on 16 H100 (26.06, FP8): the recipe captures no CUDA graph. 1,024 sequences over dp 16 with
    # microbatch 1 are 64 microbatches through 48 MoE layers on one stage: the step takes at least 64 x 48 x H.
    real = get_profile("realistic")
    h = real.host_eager_moe_layer_s
    run = next(r for r in load_runs() if r.id == "mbridge2606-qwen3-30b-a3b-16gpu-fp8")
    assert run.cuda_graph_impl == "none"
    graphed = run.model_copy(update={"cuda_graph_impl": "full_iteration"})
    eager_row, graphed_row = validate([run, graphed], real)
    tokens = 1024 * 4096
    step_eager = tokens / (eager_row.predicted_tokens_per_s * 16)
    step_graphed = tokens / (graphed_row.predicted_tokens_per_s * 16)
    assert step_eager >= 64 * 48 * h - 1e-9
    assert step_eager > step_graphed  # the floor binds on this run
    unknown = run.model_copy(update={"cuda_graph_impl": None})
    assert validate([unknown], real)[0].predicted_tokens_per_s == pytest.approx(graphed_row.predicted_tokens_per_s)


@pytest.mark.parametrize("gpus", [4, 8])
def test_host_floor_cpsat_matches_enumerator(gpus):
    # The floor is one more linear branch: CP-SAT and the enumerator agree with it on, and 1 ms per layer and
    # microbatch (far above the tiny model's GEMMs) changes the optimum's price.
    steps = optimal_steps_both_ways(H100, tiny_moe(experts=4), gpus, "host_moe_layer_s", (0.0, 1e-3))
    assert steps[1] > steps[0] * 10
