"""Why a request is infeasible, and what would be feasible (SPEC §7)."""

from __future__ import annotations

from planner.schema import Hardware, Workload
from planner.solve.result import SearchResult
from planner.solve.space import SearchOptions


def explain_infeasible(hw: Hardware, wl: Workload, options: SearchOptions, days: float | None,
                       result: SearchResult) -> str:
    """A first sentence saying why, then what would be feasible."""
    if result.status == "unknown":
        return ("no feasible layout was found before the time limit stopped the search; it was not proven "
                "infeasible (raise --time-limit)")
    if options.gpus is not None:
        return f"no layout of this model fits on {options.gpus} GPUs of {hw.name}"
    return f"no layout of {hw.name} GPUs trains this model within {days:g} days"
