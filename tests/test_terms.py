"""The step formula is written once (planner.cost.terms) and read three ways; each reading gives the same time.

For random valid layouts of small instances (three hardware hierarchies, dense and sparse, both schedules, DP
serial and overlapped):
* float: planner.cost.step.evaluate (the price every report shows);
* CP-SAT: the per-tuple and per-(tuple, factor vector) tables the model is built from, summed for the layout's own
  factor vectors, branch by branch, and the integer model's step (each table entry rounded up to the quantum);
* bound: the placement-free lower bound presolve prunes with.
The float and CP-SAT readings must agree branch by branch, the integer step must lie within the documented rounding
(one quantum per tuple part and per group) above the float step, and the bound must not exceed it. A hand
calculation pins the float reading to the paper's formula on one layout.
"""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest

from planner.cost import terms as T
from planner.cost.step import evaluate
from planner.hardware import get_hardware, with_profile
from planner.parallel.dimensions import DEGREES, GROUPS
from planner.parallel.space import (
    SearchOptions,
    Tuples,
    build_space,
    layout_from,
    model_parallel_rows,
    placements_for_tuple,
    tuples_for_model_parallel,
)
from planner.schema import Layout, Workload
from planner.search.cpsat import QUANTUM_S, build_pair_tables, to_quanta, tuple_forms
from planner.search.presolve import LeastFeatures, ShapeTable, step_lower_bound, tuple_terms
from planner.workload.scaling import transformer_workload

INSTANCES = [
    ("h100", Workload(d_model=256, d_ff=1024, layers=8, experts=1, batch_tokens=4096, tokens=1e9)),
    ("h100", Workload(d_model=128, d_ff=512, layers=4, experts=4, batch_tokens=2048, tokens=1e9)),
    ("h100-superpod", Workload(d_model=128, d_ff=512, layers=4, experts=2, batch_tokens=1024, tokens=1e9)),
    ("v100", Workload(d_model=512, d_ff=2048, layers=6, experts=1, batch_tokens=3072, tokens=1e9)),
    ("h100", transformer_workload(64, 128, 4, 1, 64, 16 * 64, 1e9, {"heads": 4, "kv_heads": 2, "vocab": 256},
                                  "tiny dense")),
    ("h100-superpod", transformer_workload(64, 128, 4, 4, 64, 16 * 64, 1e9, {"heads": 4, "kv_heads": 2,
                                                                              "vocab": 256, "top_k": 2}, "tiny moe")),
]


def _random_layouts(hw, wl, rng: random.Random, k: int) -> list[Layout]:
    space = build_space(hw, wl, SearchOptions())
    t = tuples_for_model_parallel(space, model_parallel_rows(space), space.dp_m)
    t = t.take(np.nonzero(t.gpus <= 256)[0])
    out: list[Layout] = []
    while len(out) < k:
        row = rng.randrange(len(t))
        pls = placements_for_tuple(hw, t, row)
        if len(pls):
            out.append(layout_from(t, row, pls[rng.randrange(len(pls))]))
    return out


@pytest.mark.parametrize("profile", ["paper", "realistic"])
@pytest.mark.parametrize("overlap", [False, True], ids=["dp-serial", "dp-overlap"])
@pytest.mark.parametrize("hw_name,wl", INSTANCES, ids=[f"{h}-E{w.experts}-{'tr' if w.transformer else 'toy'}{k}"
                                                for k, (h, w) in enumerate(INSTANCES)])
def test_three_readings_agree(hw_name, wl, overlap, profile):
    hw = with_profile(get_hardware(hw_name), profile)
    rng = random.Random(hash((hw_name, wl.experts, overlap)) & 0xFFFF)
    layouts = _random_layouts(hw, wl, rng, 40)
    t = Tuples.from_layouts(layouts)
    space = build_space(hw, wl, SearchOptions())
    q = tuple_terms(hw, wl, t, ShapeTable.for_space(hw, wl, space))
    q["step_lb"] = step_lower_bound(hw, wl, t, q, LeastFeatures(hw, wl), overlap)
    tables = build_pair_tables(hw, wl, t, q, overlap, prune=False)
    per_tuple = tuple_forms(hw, wl, q, overlap)
    forms = T.branches(wl, overlap, hw.profile)
    for i, lay in enumerate(layouts):
        ev = evaluate(hw, wl, lay, dp_overlap=overlap)
        floats = T.price(hw, wl, Tuples.from_layouts([lay]), {d: np.array([lay.placement[d]]) for d in DEGREES},
                         overlap)
        cp_seconds = {f.name: per_tuple[f.name][i] for f in forms}
        cp_quanta = {f.name: int(to_quanta(per_tuple[f.name][i])) for f in forms}
        for g, tab in tables.items():
            hit = tab.tup == i
            for d in GROUPS[g]:
                hit &= (tab.factors[d] == np.array(lay.placement[d])[None, :]).all(axis=1)
            (k,) = np.nonzero(hit)[0]  # exactly one pair per group is the layout's own placement
            for f in forms:
                cp_seconds[f.name] += tab.forms[f.name][k]
                cp_quanta[f.name] += int(to_quanta(tab.forms[f.name][k]))
        for f in forms:
            assert cp_seconds[f.name] == pytest.approx(float(floats[f"branch_{f.name}"][0]), rel=1e-12, abs=1e-18)
        step = ev.step.step_s
        assert max(cp_seconds.values()) == pytest.approx(step, rel=1e-12)
        s_int = max(cp_quanta.values())
        assert step / QUANTUM_S - 1e-6 <= s_int <= step / QUANTUM_S + len(tables) + 1 + 1e-6
        assert q["step_lb"][i] <= step * (1 + 1e-12)


def test_float_reading_by_hand():
    """One layout on one flat level, priced by hand from the paper's formulas (docs/model.md §3-§6)."""
    hw = get_hardware("h100-global-nvlink")  # one unbounded level: 900 GB/s bidirectional, 1.125 us
    wl = Workload(d_model=1024, d_ff=4096, layers=8, experts=1, batch_tokens=65536, tokens=1e9)
    lay = Layout(dp=2, tp_ff=2, tp_model=1, pp=2, interleave=1, ep=1, microbatches=4, schedule="1f1b",
                 placement={"dp": (2,), "tp_ff": (2,), "tp_model": (1,), "pp": (2,), "ep": (1,)})
    ev = evaluate(hw, wl, lay)
    bw = 450e9  # bytes/s one way
    lat = hw.levels[0].lat_s
    # DP: all-reduce of the GPU's parameter shard, 2 L d_model d_ff / (tp pp) words, over 2 ranks: 2 (1/2) w words.
    shard_words = 2 * 8 * 1024 * 4096 / (2 * 2)
    assert ev.step.dp_s == pytest.approx(shard_words * 2 / bw)
    # TP (ff group, 2 ranks): per token and layer, d_model / tp_model = 1024 words each pass, L / pp = 4 layers,
    # b / dp = 32768 tokens: 2 * 4 * 32768 * 1024 words all-reduced, each moving 2 (1/2) w words.
    assert ev.step.tp_s == pytest.approx(2 * 4 * 32768 * 1024 * 2 / bw)
    # PP: 2 b d_model (N_PP - 1) words in total (Table 1), spread over 8 GPUs.
    assert ev.step.pp_ep_s == pytest.approx(2 * 65536 * 1024 * 1 / 8 * 2 / bw)
    # 1F1B bubble, Eq. 22: (N_PP - 1) / (N_PP - 1 + m) = 1/5.
    assert ev.step.bubble_fraction == pytest.approx(1 / 5)
    # Latency: DP 2 lat; path per microbatch 2 (L * 2 lat [tp_ff] + 1 lat [one stage boundary]); 1F1B m / N_PP.
    path = 2 * (8 * 2 * lat + 1 * lat)
    assert ev.step.latency_s == pytest.approx(2 * lat + 4 / 2 * path)
    busy = max(ev.step.matmul_s, ev.step.tp_s + ev.step.pp_ep_s)
    eq21 = 2 * lat + 4 / 2 * path + ev.step.dp_s + busy / (1 - 1 / 5)
    assert ev.step.eq21_s == pytest.approx(eq21)
    assert ev.step.step_s == pytest.approx(max(eq21, ev.step.floor_s))
    assert math.isfinite(ev.step.step_s)


def test_elementwise_work_is_priced_at_hbm_bandwidth():
    """An element-wise op adds passes x bytes per token x nanobatch / HBM bandwidth to the critical GEMM time (and
    so to the total), worked by hand against the same block without it."""
    import types

    from planner.schema.ops import Dim, Elementwise, toy_mlp_ops

    hw = get_hardware("h100")
    toy = toy_mlp_ops(1024, 4096)
    norm = Elementwise("norm", bytes_per_token=Dim(4096, "tp_model"), passes=2)
    with_norm = types.SimpleNamespace(ops=dataclasses.replace(toy, elementwise=(norm,)))
    cols = {"tp_ff": np.array([2]), "tp_model": np.array([4])}
    nanobatch = 512.0
    total0, crit0 = T.block_matmul_s(hw, types.SimpleNamespace(ops=toy), cols, nanobatch)
    total1, crit1 = T.block_matmul_s(hw, with_norm, cols, nanobatch)
    extra = 2 * (4096 / 4) * 512.0 / hw.gpu.hbm_Bps
    assert crit1[0] - crit0[0] == pytest.approx(extra, rel=1e-9)
    assert total1[0] - total0[0] == pytest.approx(extra, rel=1e-9)
