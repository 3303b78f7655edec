"""Every published run priced: GB200 NVL72 layouts placed in Megatron's rank order on racks used 64 GPUs at a time,
and interleaved pipelines whose layer counts do not divide the virtual stages (DeepSeek-V3 / Kimi K2's 61 layers,
Llama 3.1 405B's 126 on 128 virtual stages) priced with the custom end stages their sources use."""

from __future__ import annotations

import itertools
import math

import pytest

from planner.hardware import get_hardware
from planner.validation import HARDWARE_OF_GPU, PublishedRun, layout_of, load_runs, validate, workload_of

RACK_GPUS = 64
"""GPUs a job uses per GB200 / GB300 NVL72 rack: 16 of the rack's 18 compute trays of 4 GPUs (Slurm block scheduling
segment of 16 trays, NVIDIA's GB200 NVL72 block-scheduling blog), written here rather than read from the hardware
file."""


def _run(run_id: str) -> PublishedRun:
    return next(r for r in load_runs() if r.id == run_id)


def _megatron_racks(run: PublishedRun) -> dict[str, tuple[int, int]]:
    """Brute force, independent of the planner's placement code: number every rank as Megatron does (tp fastest, then
    cp, ep, the data-parallel ranks left, pp), put rank r on rack r // 64 (all ranks on one rack below 64 GPUs), and
    read each degree's factors off the ranks: inside one rack, the distinct values its coordinate takes; across racks,
    the rest. Asserts the racks cut the rank grid into whole blocks (a rack's ranks are a product of ranges)."""
    per_rack = min(run.gpus, RACK_GPUS)
    degrees = {"tp_ff": run.tp, "cp": run.cp, "ep": run.ep, "dp": run.dp // run.ep, "pp": run.pp}
    assert math.prod(degrees.values()) == run.gpus
    names = list(degrees)
    coords = list(itertools.product(*(range(degrees[d]) for d in reversed(names))))  # pp slowest ... tp fastest
    rack0 = [tuple(reversed(c)) for c in coords[:per_rack]]
    inside = {d: len({c[k] for c in rack0}) for k, d in enumerate(names)}
    assert math.prod(inside.values()) == per_rack, "a rack holds a ragged piece of the rank grid"
    return {d: (inside[d], degrees[d] // inside[d]) for d in names}


GB_256 = ["mbridge2606-llama31-405b-256gpu-mxfp8-gb200", "mbridge2606-llama31-405b-256gpu-fp8-gb200",
          "mbridge2606-deepseek-v3-256gpu-mxfp8-gb200", "mbridge2511-deepseek-v3-256gpu-mxfp8-gb200",
          "mbridge2606-qwen3-235b-a22b-256gpu-mxfp8-gb200", "nemo2504-nemotron4-340b-128gpu-fp8-gb200",
          "nemo2504-llama31-405b-128gpu-fp8-gb200"]


def test_gb200_256_gpu_llama_405b_places_in_rank_order_by_hand():
    # tp 4 x dp 4 x pp 16 on 256 GPUs: 4 racks of 64 (16 trays each). Ranks 0-63 are tp 0-3 x dp 0-3 x pp stages
    # 0-3, so a rack holds all of tp and dp and 4 of the 16 stages; the other 4-stage blocks sit on the other racks.
    run = _run("mbridge2606-llama31-405b-256gpu-mxfp8-gb200")
    lay = layout_of(run, get_hardware(HARDWARE_OF_GPU[run.gpu]))
    assert lay.placement["tp_ff"] == (4, 1) and lay.placement["dp"] == (4, 1) and lay.placement["pp"] == (4, 4)
    assert all(lay.placement[d] == (1, 1) for d in ("cp", "ep", "tp_model"))
    # DeepSeek-V3 at ep 32 x pp 8: a rack holds the 32 expert ranks of two stages, so pp is 2 x 4 across racks.
    ds = _run("mbridge2511-deepseek-v3-256gpu-mxfp8-gb200")
    lay = layout_of(ds, get_hardware(HARDWARE_OF_GPU[ds.gpu]))
    assert lay.placement["ep"] == (32, 1) and lay.placement["pp"] == (2, 4) and lay.placement["dp"] == (1, 1)


@pytest.mark.parametrize("run_id", GB_256)
def test_gb200_records_place_as_megatron_numbers_ranks(run_id):
    run = _run(run_id)
    lay = layout_of(run, get_hardware(HARDWARE_OF_GPU[run.gpu]))
    for d, factors in _megatron_racks(run).items():
        assert lay.placement[d] == factors, d


def test_every_nvl72_record_places_as_megatron_numbers_ranks():
    runs = [r for r in load_runs() if HARDWARE_OF_GPU[r.gpu].endswith("nvl72")]
    assert len(runs) >= 30
    for run in runs:
        if (run.etp is not None and run.etp != run.tp) or run.dp % run.ep:
            continue  # folded expert layouts place the attention layout only (test_moe covers them)
        lay = layout_of(run, get_hardware(HARDWARE_OF_GPU[run.gpu]))
        assert {d: lay.placement[d] for d in ("tp_ff", "cp", "ep", "dp", "pp")} == _megatron_racks(run), run.id


INTERLEAVED = {  # id: (pp, vpp, first_stage_layers, last_stage_layers, layers on the busiest device, by hand)
    # 126 layers + embedding + loss = 128 slots on 16 x 8 virtual stages: one each; the ends hold no layer, so the
    # middle devices hold 8 layers and device 0 / 15 hold 7.
    "mbridge2606-llama31-405b-256gpu-mxfp8-gb200": (16, 8, 0, 0, 8),
    "mbridge2606-llama31-405b-256gpu-nvfp4-gb200": (16, 8, 0, 0, 8),
    # 'Et|(tt|)*30mL': 1 + 30 x 2 + 0 = 61; device 0 holds 1 + 3 x 2 = 7, middle ones 4 x 2 = 8, the last 3 x 2 = 6.
    "mbridge2511-deepseek-v3-256gpu-mxfp8-gb200": (8, 4, 1, 0, 8),
    # nearest to AutoModel's split (29 stages of 2, then 3 of 1): 0 + 30 x 2 + 1 = 61; middle devices 8 x 2 = 16.
    "automodel-deepseek-v3-1024gpu-bf16": (4, 8, 0, 1, 16),
    "automodel-deepseek-v3-256gpu-bf16": (4, 8, 0, 1, 16),
    # pp 8 x vp 4: middle devices 4 x 2 = 8, the last 3 x 2 + 1 = 7.
    "automodel-kimi-k2-256gpu-bf16": (8, 4, 0, 1, 8),
}


@pytest.mark.parametrize("run_id", sorted(INTERLEAVED))
def test_interleaved_records_carry_their_end_stages_and_are_priced(run_id):
    from planner.cost.terms import device_layers
    from planner.parallel.space import Tuples

    pp, vpp, first, last, busiest = INTERLEAVED[run_id]
    run = _run(run_id)
    assert (run.pp, run.vpp, run.first_stage_layers, run.last_stage_layers) == (pp, vpp, first, last)
    middle = (run.layers - first - last) / (pp * vpp - 2)
    assert middle == int(middle) and middle >= 1  # the other virtual stages split the rest evenly
    lay = layout_of(run, get_hardware(HARDWARE_OF_GPU[run.gpu]))
    assert device_layers(workload_of(run), Tuples.from_layouts([lay]).cols)[0] == busiest
    row, = validate([run], "realistic")
    assert row.problem in (None, "") and row.ratio is not None and 0.3 < row.ratio < 3.0, (row.problem, row.ratio)


def test_without_the_end_stages_the_61_layer_record_is_refused():
    """The custom ends are what makes it priceable: 61 layers do not fill 32 virtual stages with the automatic split."""
    run = _run("mbridge2511-deepseek-v3-256gpu-mxfp8-gb200").model_copy(
        update={"first_stage_layers": None, "last_stage_layers": None})
    row, = validate([run], "realistic")
    assert row.ratio is None and "cannot hold 61 layers" in row.problem
