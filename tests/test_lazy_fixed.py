"""A fixed cluster's best-first expansion (planner.search.cpsat._LazyCount) is exact: CP-SAT sees the same models.

At a fixed GPU count the search no longer prices every degree tuple before the probe: it expands (model-parallel
row, N_DP) pairs in increasing order of their pair bound, only as far as the probe and its cut need. The claim is
that every CP-SAT model built is the same, tuple for tuple and in the same order, as when every tuple of the count
is priced first (LAZY_FIXED = False, the path a search with a deadline takes), so the answer and the solver's report
are the same. The models' inputs are recorded from both paths and compared, and the inequality the expansion relies
on (a tuple's placement-free bound is at least its pair's bound) is checked on every tuple of a few counts.
"""

from __future__ import annotations

import numpy as np
import pytest

import planner.search.cpsat as C
from planner.api import resolve
from planner.parallel.space import SearchOptions, build_space, model_parallel_rows
from planner.search.presolve import LeastFeatures, ShapeTable, pair_step_lower_bound
from planner.workload import workload_from_shape
from planner.workload.scaling import load_model_preset

CASES = [
    # (hardware, profile, workload, GPUs, rank order)
    ("h100", "realistic", "llama3-8b", 64, ()),
    ("h100", "realistic", "mixtral-8x7b", 32, ()),
    ("h100", "realistic", "llama3-8b", 96, ("tp_ff", "cp", "ep", "dp", "pp")),
    ("gb200-nvl72", "realistic", "llama3-8b", 128, ()),
    ("h100", "paper", (2048, 8192, 16, 1, 1024), 128, ()),
]


def _workload(spec):
    if isinstance(spec, str):
        return load_model_preset(spec)
    d, f, layers, experts, batch = spec
    return workload_from_shape(d_model=d, d_ff=f, layers=layers, experts=experts, batch_tokens=batch * 2048,
                               seq_len=2048)


_MODEL_INIT, _TABLES = C.Model.__init__, C.build_pair_tables


def _run(monkeypatch, hw, wl, options, lazy: bool, first_pairs: int, window: int):
    seen = []
    init = _MODEL_INIT

    def record(self, hw_, wl_, t, q, *args, **kw):
        seen.append({k: np.array(v) for k, v in t.items()} | {"step_lb": np.array(q["step_lb"])})
        init(self, hw_, wl_, t, q, *args, **kw)

    tables = _TABLES

    def record_cut(hw_, wl_, t, q, *args, **kw):  # the probe's cut: every tuple the tables are built for
        seen.append({k: np.array(v) for k, v in t.items()} | {"step_lb": np.array(q["step_lb"])})
        return tables(hw_, wl_, t, q, *args, **kw)

    monkeypatch.setattr(C.Model, "__init__", record)
    monkeypatch.setattr(C, "build_pair_tables", record_cut)
    monkeypatch.setattr(C, "LAZY_FIXED", lazy)
    monkeypatch.setattr(C, "LAZY_FIRST_PAIRS", first_pairs)
    monkeypatch.setattr(C, "WINDOW_TUPLES", window)  # small: a count is priced in several slices
    C._SHARED.clear()
    res = C.solve_cpsat(hw, wl, options, None, time_limit_s=None)
    return res, seen


@pytest.mark.parametrize("first_pairs,window", [(1, 400), (C.LAZY_FIRST_PAIRS, C.WINDOW_TUPLES)],
                         ids=["pairs-1-slices", "defaults"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}{'-ranked' if c[4] else ''}" for c in CASES])
def test_same_models_as_pricing_every_tuple(monkeypatch, case, first_pairs, window):
    gpu, profile, spec, gpus, rank = case
    hw, wl = resolve(gpu, profile), _workload(spec)
    options = SearchOptions(gpus=gpus, rank_order=rank)
    full, full_models = _run(monkeypatch, hw, wl, options, False, first_pairs, window)
    counts = []
    expand = C._LazyCount.expand

    def expand_counted(self, probe_q):
        out = expand(self, probe_q)
        counts.append((self.done, len(self.group_lb)))
        return out

    monkeypatch.setattr(C._LazyCount, "expand", expand_counted)
    lazy, lazy_models = _run(monkeypatch, hw, wl, options, True, first_pairs, window)
    if first_pairs == 1:  # the best-first path ran and left pairs unexpanded (with the defaults a count of at most
        assert len(counts) == 1 and counts[0][0] < counts[0][1]  # LAZY_FIRST_PAIRS pairs is priced whole)
    assert full.status == "optimal" and full.layout is not None
    assert lazy.status == full.status and lazy.layout == full.layout
    assert (lazy.cpsat_tuples, lazy.cpsat_pairs, lazy.cpsat_models, lazy.evaluated, lazy.cpsat_status) == (
        full.cpsat_tuples, full.cpsat_pairs, full.cpsat_models, full.evaluated, full.cpsat_status)
    assert len(lazy_models) == len(full_models) >= 2
    for a, b in zip(lazy_models, full_models):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize("case", CASES[:2] + CASES[-1:], ids=["llama3-8b", "mixtral", "toy"])
def test_pair_bound_below_every_tuple_bound(case):
    """The inequality the expansion's stopping rules rely on: step_lb of every priced tuple >= its pair's bound
    (read with the slack BOUND_SLACK), on every pair of a few GPU counts."""
    gpu, profile, spec, gpus, _ = case
    hw, wl = resolve(gpu, profile), _workload(spec)
    space = build_space(hw, wl, SearchOptions())
    index = C.PairIndex.build(space, model_parallel_rows(space))
    shapes, least = ShapeTable.for_space(hw, wl, space), LeastFeatures(hw, wl)
    work = shapes.least_work(space)
    checked = 0
    for n in (gpus // 2, gpus, 2 * gpus):
        ii, jj = index.pairs(n, n)
        bound = pair_step_lower_bound(hw, wl, index.rows(ii, jj), index.m_min[jj], index.m_max[jj], shapes, work,
                                      least)
        t, src = C.tuples_from_pairs(space, index, ii, jj, source=True)
        kept, q = C._filter_index(hw, wl, t, None, shapes, least, False)
        if len(kept) == 0:
            continue
        assert np.all(q["step_lb"] >= bound[src[kept]] * (1 - C.BOUND_SLACK))
        checked += len(kept)
    assert checked > 100
