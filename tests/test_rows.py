"""planner.cost.rows: distinct rows found without a sort, and row-wise functions evaluated once per distinct row, give
the numbers numpy's own unique and a direct evaluation give."""

from __future__ import annotations

import numpy as np
import pytest

from planner.cost.memory import layout_memory
from planner.cost.pipeline import microbatches_in_flight
from planner.cost.rows import DistinctRows, unique_rows


@pytest.mark.parametrize("big", [False, True])
def test_unique_rows_is_numpys(big):
    rng = np.random.default_rng(7)
    n = 20_000
    cols = [rng.choice([1, 2, 4, 8, 16, 128], n), rng.choice([0, 1], n), rng.choice([3, 5, 7], n)]
    if big:  # values past the lookup table, and a negative one: the sorted path
        cols.append(rng.choice([-1, 2, 1 << 40], n))
    uniq, inv = unique_rows(cols)
    want, want_inv = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
    assert np.array_equal(uniq, want)
    assert np.array_equal(inv, want_inv.ravel())


def test_apply_equals_direct_evaluation_and_falls_back_on_an_unlisted_column():
    rng = np.random.default_rng(3)
    n = 5000
    cols = {"tp_ff": rng.choice([1, 2, 8], n), "sp": rng.choice([0, 1], n), "dp": rng.integers(1, 1000, n)}
    rows = DistinctRows(cols, ("tp_ff", "sp"))
    assert len(rows.sub["tp_ff"]) == 6  # 3 x 2 combinations, not 5000 rows

    def shard(c):
        return 12288.0 / np.where(np.asarray(c["sp"]) == 1, np.asarray(c["tp_ff"]), 1)

    assert np.array_equal(rows.apply(shard), shard(cols))

    def reads_dp(c):  # dp is not among the keys: evaluated on every row instead, still right
        return np.asarray(c["tp_ff"]) * np.asarray(c["dp"])

    assert np.array_equal(rows.apply(reads_dp), cols["tp_ff"] * cols["dp"])
    assert rows.apply(lambda c: "etp" in c) is False  # a column the rows lack is absent, as in the rows


def test_transformer_memory_unchanged_by_distinct_rows(monkeypatch):
    """layout_memory with the per-distinct-row evaluation against the same call with DistinctRows disabled (every
    function on every row): equal bytes, element by element."""
    from planner import api
    from planner.cost import memory
    from planner.cost import terms as T
    from planner.parallel.space import SearchOptions, build_space, model_parallel_rows, tuples_for_model_parallel
    from planner.search.presolve import ShapeTable
    from planner.workload import load_model_preset

    wl = load_model_preset("llama3-8b")
    hw = api.resolve("h100", "realistic", [])
    space = build_space(hw, wl, SearchOptions(gpus=64))
    mp = model_parallel_rows(space)
    every = np.arange(0, len(mp["pp"]), max(1, len(mp["pp"]) // 500))  # a spread of shards, stages and options
    t = tuples_for_model_parallel(space, {k: v[every] for k, v in mp.items()}, space.dp_m)
    bn = T.tuple_quantities(hw, wl, t, ShapeTable.for_space(hw, wl, space).lookup(t))["nanobatch"]
    flight = microbatches_in_flight(t["pp"], t["interleave"], t["microbatches"], t["zero_bubble"])
    fast = layout_memory(hw, wl, t, bn, flight)

    class Every(DistinctRows):
        def apply(self, fn):
            return fn(self.cols)

    monkeypatch.setattr(memory, "DistinctRows", Every)
    slow = layout_memory(hw, wl, t, bn, flight)
    for k in slow:
        assert np.array_equal(np.broadcast_to(fast[k], np.shape(slow[k])), slow[k]), k


@pytest.mark.parametrize("compute,sparse", [(1e24, False), (1e28, False), (1e27, True)])
def test_toy_shape_table_equals_the_full_grid(compute, sparse):
    """presolve.ShapeTable prices the toy block on broadcasting axes (each weight shard tiled once); the table must
    equal planner.cost.terms.shape_times on the raveled grid of every (N_TP,ff, N_TP,model, N_DP m), element by
    element."""
    from planner.cost import terms as T
    from planner.hardware import get_hardware
    from planner.parallel.space import SearchOptions, build_space
    from planner.search.presolve import ShapeTable
    from planner.workload import infer_workload

    hw, wl = get_hardware("h100"), infer_workload(compute, sparse=sparse)
    table = ShapeTable.for_space(hw, wl, build_space(hw, wl, SearchOptions()))
    f, m, u = np.meshgrid(table.tp_ff, table.tp_model, table.u, indexing="ij")
    n = f.size
    cols = {"tp_ff": f.ravel(), "tp_model": m.ravel(), "dp": u.ravel(), "microbatches": np.ones(n, dtype=np.int64)}
    full = T.shape_times(hw, wl, cols, (wl.batch_tokens // wl.experts) / u.ravel().astype(np.float64))
    assert full.keys() == table.times.keys()
    for k in full:
        assert np.array_equal(full[k], table.times[k]), k
