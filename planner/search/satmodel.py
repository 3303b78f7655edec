"""The CP-SAT models the search builds, written through OR-Tools' compiled helper (`cp_model_helper`).

OR-Tools' Python front end, `ortools.sat.python.cp_model`, imports pandas (and with it pyarrow) at module level for
its Series helpers, which the planner never uses: 0.3-0.4 s of every planning process (docs/benchmarks.md). The
front end's model class is a thin layer over `cp_model_helper.CpBaseModel` (variables, linear constraints and
exactly-one are built in C++ there; the objective and hints are written into the model proto), and its solver
class is a thin layer over `cp_model_helper.SolveWrapper`. This module is the part of that layer the search uses
and nothing else, so the proto CP-SAT receives is the one the front end would build for the same calls
(tests/test_satmodel.py builds the planner's models both ways and compares the serialized protos byte for byte).
"""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model_helper as cmh
from ortools.util.python.sorted_interval_list import Domain

OPTIMAL = cmh.OPTIMAL
FEASIBLE = cmh.FEASIBLE
INFEASIBLE = cmh.INFEASIBLE
MODEL_INVALID = cmh.MODEL_INVALID
UNKNOWN = cmh.UNKNOWN

IntVar = cmh.IntVar
LinearExpr = cmh.LinearExpr
BoundedLinearExpression = cmh.BoundedLinearExpression


class SatModel(cmh.CpBaseModel):
    """A CP-SAT model: 0-1 and integer variables, linear constraints, exactly-one, one integer objective, hints."""

    def __init__(self) -> None:
        cmh.CpBaseModel.__init__(self, None)

    def new_bool_var(self, name: str) -> IntVar:
        return IntVar(self.model_proto).with_name(name).with_domain(Domain(0, 1))

    def new_int_var(self, lb: int, ub: int, name: str) -> IntVar:
        return IntVar(self.model_proto).with_name(name).with_domain(Domain(lb, ub))

    def add(self, ct: BoundedLinearExpression | bool) -> object:
        """A linear constraint written with ==, <= or >= between linear expressions (the helper's type stubs say
        such a comparison is a bool; at run time it is a BoundedLinearExpression, and nothing else is taken)."""
        if not isinstance(ct, BoundedLinearExpression):
            raise TypeError(f"not a linear constraint: {type(ct).__name__}")
        # the compiled base class's builders are not in OR-Tools' type stubs
        return self._add_bounded_linear_expression(ct)  # type: ignore[attr-defined]

    def add_exactly_one(self, literals: Sequence[IntVar]) -> object:
        kind = cmh.BoolArgumentConstraint.exactly_one
        return self._add_bool_argument_constraint(kind, literals)  # type: ignore[attr-defined]

    def minimize(self, objective: LinearExpr) -> None:
        """Minimise an integer linear expression (the only kind of objective the search states)."""
        proto = self.model_proto
        proto.clear_objective()
        proto.clear_floating_point_objective()
        if not (isinstance(objective, LinearExpr) and objective.is_integer()):
            raise TypeError(f"not an integer linear objective: {type(objective).__name__}")
        flat = cmh.FlatIntExpr(objective)
        for var in flat.vars:
            proto.objective.vars.append(var.index)
        proto.objective.scaling_factor = 1.0
        proto.objective.offset = flat.offset
        proto.objective.coeffs.extend(flat.coeffs)

    def add_hint(self, var: IntVar, value: bool | int) -> None:
        hint = self.model_proto.solution_hint
        if var.index >= 0:
            hint.vars.append(var.index)
            hint.values.append(int(value))
        else:  # a negated literal: hint its variable the other way
            hint.vars.append(-var.index - 1)
            hint.values.append(int(not value))

    def clear_hints(self) -> None:
        self.model_proto.clear_solution_hint()


class Solution:
    """What one solve returned: status, objective, bound and the literals' values."""

    def __init__(self, response: cmh.CpSolverResponse) -> None:
        self.response = response
        self.status = response.status

    @property
    def objective_value(self) -> float:
        return self.response.objective_value

    @property
    def best_objective_bound(self) -> float:
        return self.response.best_objective_bound

    def boolean_value(self, literal: IntVar) -> bool:
        return cmh.ResponseHelper.boolean_value(self.response, literal)


def solve(model: SatModel, *, time_limit_s: float, workers: int, seed: int = 0) -> Solution:
    """Solve with the search's parameters. CP-SAT's own SIGINT handler is off: it leaves SIGINT at its default
    action after a solve, so a later Ctrl-C would kill the process without the one-line message and exit code 130
    (planner.cli.run); Python's handler stays."""
    params = cmh.SatParameters()
    params.num_workers = workers
    params.max_time_in_seconds = time_limit_s
    params.random_seed = seed
    params.catch_sigint_signal = False
    wrapper = cmh.SolveWrapper()
    wrapper.set_parameters(params)
    return Solution(wrapper.solve(model.model_proto))
