"""planner.search.satmodel builds the same CP-SAT models as OR-Tools' own Python front end (issue 29, part 4).

The search writes its models through the compiled helper so that a plan does not import pandas (which
`ortools.sat.python.cp_model` does at module level). These tests run real searches twice, once with the front end's
`CpModel` in place of `SatModel`, and compare every model CP-SAT received, as text, and every answer."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from planner.api import plan
from planner.search import cpsat as C
from planner.search import satmodel
from planner.workload import load_model_preset


def _models_of(monkeypatch: pytest.MonkeyPatch, front_end: bool, **request) -> tuple[list[tuple[str, int]], dict]:
    """Every model (text of its proto, with objective and hints) and its solve status, and the plan's answer."""
    seen: list[tuple[str, int]] = []
    solve = C.Model.solve

    def recording(self, objective, time_limit_s, workers):
        s, st = solve(self, objective, 60.0, 1)  # one worker, a generous limit: the same search both ways
        assert isinstance(self.m, cp_model.CpModel) == front_end  # the model really was built the way asked
        seen.append((str(self.m.model_proto), int(st)))
        return s, st

    with monkeypatch.context() as mp:
        mp.setattr(C.Model, "solve", recording)
        if front_end:
            mp.setattr(satmodel, "SatModel", cp_model.CpModel)
        doc = plan(**request)
    answer = {"gpus": doc.gpus, "layout": doc.layout.model_dump(), "status": doc.status,
              "step": doc.step_time_s}
    return seen, answer


CASES = {
    "the paper's main command": dict(compute_flop=1e28, gpu="h100", days=90),
    "a dense transformer on a fixed cluster": dict(workload=load_model_preset("llama3-8b"), gpu="h100", gpus=64,
                                                    profile="realistic"),
    "a mixture of experts by deadline": dict(compute_flop=1e24, gpu="h100", days=30, sparse=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_satmodel_builds_the_front_ends_models(monkeypatch, case):
    ours, answer = _models_of(monkeypatch, False, **CASES[case])
    theirs, answer_front = _models_of(monkeypatch, True, **CASES[case])
    assert len(ours) >= 2  # the search did solve models (an incumbent, then the decision)
    assert all("exactly_one" in text and "objective" in text for text, _ in ours)
    assert [st for _, st in ours] == [st for _, st in theirs]
    for (a, _), (b, _) in zip(ours, theirs, strict=True):
        assert a == b
    assert answer == answer_front


def test_satmodel_solves_a_small_model_by_hand():
    """min 2x + 3y + 5z with exactly one of x, y, z and 2x + 3y + 5z >= 3: y alone (3) is the optimum."""
    m = satmodel.SatModel()
    x, y, z = (m.new_bool_var(n) for n in "xyz")
    m.add_exactly_one([x, y, z])
    cost = satmodel.LinearExpr.weighted_sum([x, y, z], [2, 3, 5])
    m.add(cost >= 3)
    m.minimize(cost)
    m.add_hint(z, True)
    s = satmodel.solve(m, time_limit_s=5.0, workers=1)
    assert s.status == satmodel.OPTIMAL
    assert s.objective_value == 3 and s.best_objective_bound == 3
    assert [s.boolean_value(v) for v in (x, y, z)] == [False, True, False]
    m.add(cost <= 2)
    assert satmodel.solve(m, time_limit_s=5.0, workers=1).status == satmodel.INFEASIBLE
    with pytest.raises(TypeError):
        m.add(True)  # type: ignore[arg-type]


# The same comparison, stricter on three counts: the protos as OR-Tools serialises them (binary, written by its own
# CpSatHelper.write_model_to_file; the text above omits nothing either, but bytes leave no doubt about field order
# and defaults), each model solved by cp_model's own CpSolver on the front end's side (so the answers do not come
# through satmodel.solve both ways), and more search shapes: fixed clusters, zero-bubble and 1F1B schedules,
# data-parallel overlap, MoE, three hardware presets, and an instance with no layout.


class _FrontEndSolution:
    """cp_model.CpSolver read the way cpsat.py reads a satmodel.Solution."""

    def __init__(self, solver: cp_model.CpSolver, status) -> None:
        self.solver, self.status = solver, status
        self.objective_value = solver.objective_value
        self.best_objective_bound = solver.best_objective_bound

    def boolean_value(self, v) -> bool:
        return self.solver.boolean_value(v)


def _front_end_solve(model, *, time_limit_s: float, workers: int, seed: int = 0):
    """What Model.solve did before satmodel (d491434): a CpSolver with these four parameters set on it."""
    s = cp_model.CpSolver()
    s.parameters.num_workers = workers
    s.parameters.max_time_in_seconds = time_limit_s
    s.parameters.random_seed = seed
    s.parameters.catch_sigint_signal = False
    return _FrontEndSolution(s, s.solve(model))


def _search_bytes(monkeypatch, tmp_path, front_end: bool, hw, wl, opts, deadline):
    """One search (cpsat.solve_cpsat) through satmodel or the front end: its result and, per solve, the model's
    serialised proto, the status and the objective value."""
    import types

    from ortools.sat.python import cp_model_helper as cmh

    seen: list[tuple[bytes, int, float]] = []
    solve = _front_end_solve if front_end else satmodel.solve

    def recording(model, **kw):
        path = tmp_path / f"{'front' if front_end else 'ours'}{len(seen)}.pb"
        assert cmh.CpSatHelper.write_model_to_file(model.model_proto, str(path))
        r = solve(model, **kw)
        seen.append((path.read_bytes(), int(r.status), r.objective_value))
        return r

    backend = {**vars(satmodel), "solve": recording}
    if front_end:
        backend["SatModel"] = cp_model.CpModel
    with monkeypatch.context() as mp:
        mp.setattr(C, "sat", types.SimpleNamespace(**backend))
        C._SHARED.clear()
        res = C.solve_cpsat(hw, wl, opts, deadline, time_limit_s=60.0)
    C._SHARED.clear()
    return res, seen


SEARCHES = [
    # hardware, shape (d_model, d_ff, layers, experts, batch), deadline s, fixed GPUs, schedule, dp overlap
    # (instances of tests/test_solver.py's CP-SAT = enumerator cases)
    ("h100", (128, 512, 2, 4, 256), 6.2, None, "auto", False),
    ("h100", (512, 2048, 2, 1, 2048), 2.63, None, "auto", True),
    ("h100-global-nvlink", (512, 2048, 8, 4, 1024), 330.0, None, "1f1b", False),
    ("h100-global-nvlink", (512, 2048, 8, 4, 1024), None, 32, "1f1b", True),
    ("h100", (1024, 4096, 2, 1, 1024), None, 16, "auto", False),
    ("h100", (1024, 4096, 2, 1, 1024), None, 8, "zb-h2", False),
    ("h100-superpod", (256, 1024, 4, 2, 128), None, 64, "auto", False),
    ("h100", (256, 1024, 2, 1, 512), 1.688, None, "auto", False),  # no layout
]


@pytest.mark.parametrize("hw_name,shape,deadline,gpus,schedule,overlap", SEARCHES)
def test_same_proto_bytes_and_answers_as_the_front_end(monkeypatch, tmp_path, hw_name, shape, deadline, gpus,
                                                       schedule, overlap):
    from planner.hardware import get_hardware
    from planner.parallel.space import SearchOptions
    from planner.workload import workload_from_shape

    hw, wl = get_hardware(hw_name), workload_from_shape(*shape)
    opts = SearchOptions(schedule=schedule, gpus=gpus, dp_overlap=overlap)
    ours, seen_ours = _search_bytes(monkeypatch, tmp_path, False, hw, wl, opts, deadline)
    front, seen_front = _search_bytes(monkeypatch, tmp_path, True, hw, wl, opts, deadline)
    assert len(seen_ours) == len(seen_front) >= ours.cpsat_models  # every model, each solve of it
    if ours.status != "infeasible":
        assert len(seen_ours) >= 2
    for k, (a, b) in enumerate(zip(seen_ours, seen_front, strict=True)):
        assert a[0] == b[0], f"model {k}: the serialised protos differ"
        assert a[1:] == b[1:], f"model {k}: status/objective {a[1:]} vs {b[1:]}"
    assert (ours.status, ours.layout, ours.cpsat_status) == (front.status, front.layout, front.cpsat_status)
