"""What a search returns, whichever search it was."""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.schema import Layout


@dataclass
class SearchResult:
    """The chosen layout (None if infeasible) and what the search can say about it."""

    solver: str  # "cpsat" | "exhaustive" | "none" (a given layout, only evaluated)
    status: str  # "optimal" | "feasible" | "infeasible" | "unknown"
    layout: Layout | None
    wall_s: float
    space_size: int
    evaluated: int = 0  # layouts (tuple x placement) priced or modelled
    gap: float | None = 0.0  # relative gap on the objective stage that was cut short; 0 when proven
    bound: float | None = None  # proven lower bound of that stage's objective (same units)
    stage: str = ""  # which objective stage the status/gap refers to
    notes: list[str] = field(default_factory=list)
    cpsat_status: str = ""  # raw CP-SAT status names per stage
    cpsat_s: float = 0.0  # wall time inside CP-SAT's solves
    presolve_s: float = 0.0  # the rest: tables, bounds, model building
    cpsat_tuples: int = 0  # candidate degree tuples in the model that made the decision
    cpsat_pairs: int = 0  # (tuple, factor vector) pairs in that model
    cpsat_models: int = 0  # CP-SAT models solved
    cpsat_bound_rank: int = -1  # tuples of the deciding model whose bound is below the chosen tuple's (-1: none)
    step_q: int | None = None  # CP-SAT: the chosen layout's proven least integer step (quanta), when proven
