"""The slice of CP-SAT the planner uses, through OR-Tools' compiled helper alone.

`ortools.sat.python.cp_model` imports pandas (and, through it, pyarrow) at module level; the planner never uses
either, and importing them cost a third of a second of every `plan` (docs/benchmarks.md, "Startup: CP-SAT without
pandas"). Its model and solver classes are thin Python over `cp_model_helper` (a pybind11 module, OR-Tools 9.15):
the proto, the variable and expression types, the linear-constraint and exactly-one builders, the parameters and
the solve wrapper all live there. This module keeps only the calls the search makes (planner/search/cpsat.py):

* `SatModel`: Boolean and integer variables, exactly-one, linear ==, >=, <= between weighted sums (the helper's own
  expressions and its own normalisation into the proto), minimise, solution hints (clear, add).
* `solve`: the same parameters the search sets, through `SolveWrapper`; a `Response` gives the status, the
  objective value, the best objective bound and Boolean values.

tests/test_satmodel.py builds the planner's real models both through this module and through `cp_model` and checks
that the serialised protos are byte-identical, and that the solved answers agree.
"""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model_helper as cmh
from ortools.util.python.sorted_interval_list import Domain

LinearExpr = cmh.LinearExpr
IntVar = cmh.IntVar

UNKNOWN = cmh.CpSolverStatus.UNKNOWN
MODEL_INVALID = cmh.CpSolverStatus.MODEL_INVALID
FEASIBLE = cmh.CpSolverStatus.FEASIBLE
INFEASIBLE = cmh.CpSolverStatus.INFEASIBLE
OPTIMAL = cmh.CpSolverStatus.OPTIMAL


class SatModel(cmh.CpBaseModel):
    """A CP-SAT model proto, built through the helper's own builders (the ones `cp_model.CpModel` calls)."""

    def __init__(self) -> None:
        cmh.CpBaseModel.__init__(self, None)

    def new_bool_var(self, name: str) -> IntVar:
        return IntVar(self.model_proto).with_name(name).with_domain(Domain(0, 1))

    def new_int_var(self, lb: int, ub: int, name: str) -> IntVar:
        return IntVar(self.model_proto).with_name(name).with_domain(Domain(lb, ub))

    def add(self, ct: cmh.BoundedLinearExpression | bool) -> cmh.Constraint:
        """A linear constraint (`a == b`, `a >= b`, `a <= b` between expressions; their stubs type them bool)."""
        if not isinstance(ct, cmh.BoundedLinearExpression):
            raise TypeError(f"not a linear constraint: {type(ct).__name__}")
        return self._add_bounded_linear_expression(ct)  # type: ignore[attr-defined]  # compiled, not in the stub

    def add_exactly_one(self, literals: Sequence[IntVar]) -> cmh.Constraint:
        kind = cmh.BoolArgumentConstraint.exactly_one
        return self._add_bool_argument_constraint(kind, literals)  # type: ignore[attr-defined]  # not in the stub

    def minimize(self, obj: cmh.LinearExpr) -> None:
        """Minimise an integer linear expression (replaces any objective)."""
        if not obj.is_integer():
            raise TypeError("the objective must be an integer linear expression")
        proto = self.model_proto
        proto.clear_objective()
        proto.clear_floating_point_objective()
        flat = cmh.FlatIntExpr(obj)
        for var in flat.vars:
            proto.objective.vars.append(var.index)
        proto.objective.scaling_factor = 1.0
        proto.objective.offset = flat.offset
        proto.objective.coeffs.extend(flat.coeffs)

    def clear_hints(self) -> None:
        self.model_proto.clear_solution_hint()

    def add_hint(self, var: IntVar, value: bool | int) -> None:
        if var.index >= 0:
            self.model_proto.solution_hint.vars.append(var.index)
            self.model_proto.solution_hint.values.append(int(value))
        else:  # a negated literal
            self.model_proto.solution_hint.vars.append(-var.index - 1)
            self.model_proto.solution_hint.values.append(int(not value))


class Response:
    """What a solve returned: status, objective value and bound, Boolean values."""

    def __init__(self, response: cmh.CpSolverResponse) -> None:
        self.response = response

    @property
    def status(self) -> cmh.CpSolverStatus:
        return self.response.status

    @property
    def objective_value(self) -> float:
        return self.response.objective_value

    @property
    def best_objective_bound(self) -> float:
        return self.response.best_objective_bound

    def boolean_value(self, literal: IntVar) -> bool:
        return cmh.ResponseHelper.boolean_value(self.response, literal)


def parameters(workers: int, time_limit_s: float) -> cmh.SatParameters:
    """The search's parameters: workers, a time limit, a fixed seed, and Python's own SIGINT handling."""
    p = cmh.SatParameters()
    p.num_workers = workers
    p.max_time_in_seconds = time_limit_s
    p.random_seed = 0
    # CP-SAT's own SIGINT handler leaves SIGINT at its default action after a solve, so a later Ctrl-C killed the
    # process without the one-line message and exit code 130 (planner.cli.run); Python's handler stays.
    p.catch_sigint_signal = False
    return p


def solve(model: SatModel, params: cmh.SatParameters) -> Response:
    wrapper = cmh.SolveWrapper()
    wrapper.set_parameters(params)
    return Response(wrapper.solve(model.model_proto))
