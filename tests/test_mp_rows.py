"""The model-parallel rows the CP-SAT search builds (planner.parallel.space.model_parallel_rows_within), against an
enumeration written out here: every combination of the degree and option values and the (N_PP, interleave, schedule)
rows, in meshgrid 'ij' order, without sequence parallelism where N_TP,ff = 1; and with `max_size`, the same rows less
those whose model-parallel GPU count (every degree but N_DP) exceeds it."""

from __future__ import annotations

import itertools

import pytest

from planner.hardware import get_hardware
from planner.parallel.space import (
    SearchOptions,
    build_space,
    model_parallel_rows,
    model_parallel_rows_within,
    model_parallel_sizes,
    mp_size,
)
from planner.workload.families import workload_for_family
from planner.workload.scaling import infer_workload


def rows_by_hand(space) -> list[tuple[int, ...]]:
    names = list(space.values)
    pz = list(zip(*(space.pp_i_zb[k].tolist() for k in space.pp_i_zb)))
    out = []
    for combo in itertools.product(*(space.values[n].tolist() for n in names), pz):
        row = dict(zip(names, combo[:-1]))
        if row["sp"] == 1 and row["tp_ff"] == 1:
            continue
        out.append((*combo[:-1], *combo[-1]))
    return out


def size_of(space, row: tuple[int, ...]) -> int:
    names = [*space.values, *space.pp_i_zb]
    r = dict(zip(names, row))
    return r["tp_ff"] * r["tp_model"] * r["ep"] * r["cp"] * r["pp"]


@pytest.mark.parametrize("wl,fixed", [
    pytest.param(workload_for_family("qwen3-moe", 3e21), (("recompute", 0), ("zero", 1)),  # fewer options
                 marks=pytest.mark.slow),  # 5 s in the default run
    (infer_workload(1e24), ()),
], ids=["qwen3-moe family", "paper toy"])
def test_rows_and_the_size_cap_match_an_enumeration(wl, fixed):
    space = build_space(get_hardware("h100"), wl, SearchOptions(fixed=fixed))
    expected = rows_by_hand(space)
    names = [*space.values, *space.pp_i_zb]
    for cap in (None, 64, 1000):
        got = model_parallel_rows_within(space, None, max_size=cap)
        assert got is not None
        rows = list(zip(*(got[n].tolist() for n in names)))
        want = [r for r in expected if cap is None or size_of(space, r) <= cap]
        assert rows == want and 0 < len(want) <= len(expected)
    # With a caller's mask as well (the search's fixed-cluster rule takes this path): both filters, same order.
    got = model_parallel_rows_within(space, None, lambda cols: cols["pp"] % 2 == 0, max_size=1000)
    assert got is not None
    rows = list(zip(*(got[n].tolist() for n in names)))
    pp_at = names.index("pp")
    assert rows == [r for r in expected if size_of(space, r) <= 1000 and r[pp_at] % 2 == 0] and rows
    # A fixed cluster's count (`divides`): the rows whose size divides it, in the same order.
    for n in (96, 1024):
        got = model_parallel_rows_within(space, None, max_size=n, divides=n)
        assert got is not None
        rows = list(zip(*(got[k].tolist() for k in names)))
        assert rows == [r for r in expected if n % size_of(space, r) == 0] and rows


@pytest.mark.parametrize("fixed", [(), (("sp", 1),)], ids=["sp free", "sp on"])
def test_model_parallel_sizes_are_those_of_the_rows(fixed):
    # explain.UsableCounts reads the sizes without the rows; they must be the rows' (sp on drops N_TP,ff = 1).
    space = build_space(get_hardware("h100"), workload_for_family("qwen3-moe", 3e21),
                        SearchOptions(fixed=(("recompute", 0), ("zero", 1), *fixed)))
    sizes = model_parallel_sizes(space)
    assert sizes.tolist() == sorted(set(mp_size(model_parallel_rows(space)).tolist())) and len(sizes) > 10
