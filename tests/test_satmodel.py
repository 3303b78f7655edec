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
