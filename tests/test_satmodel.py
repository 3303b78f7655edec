"""planner.search.satmodel builds the same CP-SAT models as `ortools.sat.python.cp_model` and gets the same answers.

Every model a real search solves is recorded twice: once as the planner builds it (SatModel, through
cp_model_helper alone) and once with `cp_model.CpModel` and `cp_model.CpSolver` put in its place (the code the
planner used before; this test may import cp_model, the planner may not). The serialised protos (binary, written
by OR-Tools' own CpSatHelper.write_model_to_file) must be byte-identical, model by model, and the statuses,
objective values and final layouts equal.
"""

from __future__ import annotations

import types

import pytest
from ortools.sat.python import cp_model
from ortools.sat.python import cp_model_helper as cmh

from planner.hardware import get_hardware
from planner.parallel.space import SearchOptions
from planner.search import cpsat
from planner.search import satmodel as sat
from planner.workload import workload_from_shape


def _bytes(proto, path) -> bytes:
    assert cmh.CpSatHelper.write_model_to_file(proto, str(path))
    return path.read_bytes()


class _CpSolverResult:
    """cp_model's solver, read the way cpsat.py reads a satmodel.Response."""

    def __init__(self, solver: cp_model.CpSolver, status) -> None:
        self.solver, self.status = solver, status
        self.objective_value = solver.objective_value
        self.best_objective_bound = solver.best_objective_bound

    def boolean_value(self, v) -> bool:
        return self.solver.boolean_value(v)


def _cp_model_solve(model, params):
    # What Model.solve did before satmodel: a CpSolver with these four parameters set on it.
    s = cp_model.CpSolver()
    s.parameters.num_workers = params.num_workers
    s.parameters.max_time_in_seconds = params.max_time_in_seconds
    s.parameters.random_seed = 0
    s.parameters.catch_sigint_signal = False
    return _CpSolverResult(s, s.solve(model))


CP_MODEL = types.SimpleNamespace(
    SatModel=cp_model.CpModel, LinearExpr=cp_model.LinearExpr, parameters=sat.parameters, solve=_cp_model_solve,
    Response=sat.Response, cmh=cmh, OPTIMAL=cp_model.OPTIMAL, FEASIBLE=cp_model.FEASIBLE,
    INFEASIBLE=cp_model.INFEASIBLE, MODEL_INVALID=cp_model.MODEL_INVALID, UNKNOWN=cp_model.UNKNOWN)


def _run(monkeypatch, backend, tmp_path, tag, hw, wl, opts, deadline):
    """One search through `backend`; returns its result and each solved model's proto bytes and answer."""
    seen = []
    solve = backend.solve

    def recording(model, params):
        proto = model.model_proto
        blob = _bytes(proto, tmp_path / f"{tag}{len(seen)}.pb")
        r = solve(model, params)
        seen.append((blob, int(r.status), r.objective_value))
        return r

    monkeypatch.setattr(cpsat, "sat", types.SimpleNamespace(**{**vars(backend), "solve": recording}))
    cpsat._SHARED.clear()
    res = cpsat.solve_cpsat(hw, wl, opts, deadline, time_limit_s=60.0)
    monkeypatch.undo()
    return res, seen


CASES = [
    # (hardware, shape d, f, layers, experts, batch, deadline s, fixed gpus, schedule, overlap): deadline searches,
    # fixed clusters, an infeasible one, MoE, zero-bubble (the enumerator cases of tests/test_solver.py).
    ("h100", (128, 512, 2, 4, 256), 6.2, None, "auto", False),
    ("h100", (512, 2048, 2, 1, 2048), 2.63, None, "auto", True),
    ("h100-global-nvlink", (512, 2048, 8, 4, 1024), 330.0, None, "1f1b", False),
    ("h100-global-nvlink", (512, 2048, 8, 4, 1024), None, 32, "1f1b", True),
    ("h100", (1024, 4096, 2, 1, 1024), None, 8, "zb-h2", False),
    ("h100", (256, 1024, 2, 1, 512), 1.688, None, "auto", False),
    ("h100", (1024, 4096, 2, 1, 1024), None, 16, "auto", False),
    ("h100-superpod", (256, 1024, 4, 2, 128), None, 64, "auto", False),
]


@pytest.mark.parametrize("hw_name,shape,deadline,gpus,schedule,overlap", CASES)
def test_same_protos_and_answers_as_cp_model(monkeypatch, tmp_path, hw_name, shape, deadline, gpus, schedule,
                                             overlap):
    hw = get_hardware(hw_name)
    wl = workload_from_shape(*shape)
    opts = SearchOptions(schedule=schedule, gpus=gpus, dp_overlap=overlap)
    mine, seen_mine = _run(monkeypatch, sat, tmp_path, "sat", hw, wl, opts, deadline)
    theirs, seen_theirs = _run(monkeypatch, CP_MODEL, tmp_path, "cpm", hw, wl, opts, deadline)
    assert len(seen_mine) == len(seen_theirs) >= mine.cpsat_models
    for k, (a, b) in enumerate(zip(seen_mine, seen_theirs, strict=True)):
        assert a[0] == b[0], f"model {k}: protos differ"
        assert a[1:] == b[1:], f"model {k}: answers differ {a[1:]} vs {b[1:]}"
    assert mine.status == theirs.status
    assert mine.layout == theirs.layout
    assert mine.cpsat_status == theirs.cpsat_status


def test_parameters_match_what_cp_model_solver_set():
    s = cp_model.CpSolver()
    s.parameters.num_workers = 3
    s.parameters.max_time_in_seconds = 7.5
    s.parameters.random_seed = 0
    s.parameters.catch_sigint_signal = False
    assert str(sat.parameters(3, 7.5)) == str(s.parameters)


def test_hand_built_model():
    """A model small enough to solve by hand: x0 + x1 + x2 == 1, S >= 5 x0 + 3 x1 + 9 x2, minimise S -> 3 (x1)."""
    m = sat.SatModel()
    x = [m.new_bool_var(f"x{i}") for i in range(3)]
    m.add_exactly_one(x)
    s = m.new_int_var(0, 100, "S")
    m.add(s >= sat.LinearExpr.weighted_sum(x, [5, 3, 9]))
    m.minimize(s)
    m.add_hint(x[2], True)
    r = sat.solve(m, sat.parameters(1, 10.0))
    assert r.status == sat.OPTIMAL
    assert r.objective_value == 3 and r.best_objective_bound == 3
    assert [r.boolean_value(v) for v in x] == [False, True, False]
    m.add(s >= 4)
    r = sat.solve(m, sat.parameters(1, 10.0))
    assert r.objective_value == 4 and r.boolean_value(x[1])
    m.add(s <= 2)
    assert sat.solve(m, sat.parameters(1, 10.0)).status == sat.INFEASIBLE
    with pytest.raises(TypeError):
        m.add(True)  # type: ignore[arg-type]
