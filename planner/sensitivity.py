"""What the answer depends on: re-plan with each uncertain input moved by a stated amount (`plan --sensitivity`).

The inputs moved are every value whose source calls it an estimate or a fit (hardware, execution profile, failure
model: `Plan.depends_on.estimated_inputs`), plus the ones every capacity planner asks about: the network latency, the
top level's bandwidth and, when failures are modelled, the interruption rate and the restart time. Each is moved down
and up by a stated factor (`FACTORS`), through the same --set overrides a user would type (planner.overrides), so a
row can be reproduced by hand. The re-plans are a study of moved inputs on the study engine (`run_moves`:
`jobs` local processes, or a Ray cluster). Rows are ordered by how far they move
the GPU count (then the wall-clock days).

A re-plan whose move slows every layout (planner.monotone) cannot need fewer GPUs than the plan: its search starts at
the plan's count (`least_gpus`), which skips proving every smaller count infeasible again. The moves that may speed
layouts up are bounded by one certificate per family (`_certify`): every such move of a family applied at once, searched
over the counts below the plan's only; a single move is never faster than that corner, so the corner's count bounds
its re-plan, and for memory and failure inputs (which change which layouts fit, or the deadline a count gets, but no
step time) the plan's layout re-priced is the answer when the certificate shows the count cannot move.

A slowing move of a rate, latency or overlap may skip its search altogether (`_skip_proof`): when the plan's layout,
priced under the move, still meets the deadline on the plan's count and is strictly faster than the plan's runner-up
there, it is the re-plan's answer; a speeding step move certified at the plan's count may skip too, against the
runner-up of a corner of such moves (`_speeding_skip_proofs`). Failure moves that push the plan past its deadline are
re-planned in turn, the first one's count bounding the others (`_failure_chain`). Every re-plan that is searched
returns only its GPUs and days (api.replan_answer); one bounded at the plan's count is seeded with the plan's layout
(`_seed`).
"""

from __future__ import annotations

import fnmatch
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.errors import Infeasible, InvalidInput
from planner.schema.sensitivity import Sensitivity, SensitivityRow

if TYPE_CHECKING:
    from planner.api import SkipProof
    from planner.schema import Layout, Plan
    from planner.schema.request import PlanRequest

ESTIMATE_FACTORS = (0.8, 1.2)
"""An estimated or fitted value: +-20 %."""
WIDE_FACTORS = (0.5, 2.0)
"""Latency, failure rate and restart time: halved and doubled (published values spread that much)."""


def _fmt(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


EXCESS_OVER_ONE = ("moe.imbalance",)
"""Profile values that are ratios of at least 1: their excess over 1 is what is estimated, so it is what moves."""


def _scaled(value: Any, factor: float, cap: float | None) -> Any:
    if isinstance(value, list):
        return [_scaled(v, factor, cap) for v in value]
    out = float(value) * factor
    return min(out, cap) if cap is not None else out


def _move(field: str, value: Any, factor: float, cap: float | None) -> Any:
    """The value tried for `field`: scaled by `factor` (capped), or for a ratio of at least 1 (EXCESS_OVER_ONE),
    1 + its excess x factor; a whole-number hardware field (`_whole`: an estimated SM count) to the nearest whole
    number, at least 1."""
    if field.removeprefix("profile.") in EXCESS_OVER_ONE and not isinstance(value, list):
        return 1.0 + (float(value) - 1.0) * factor
    moved = _scaled(value, factor, cap)
    if _whole(field):
        return [max(1, round(v)) for v in moved] if isinstance(moved, list) else max(1, round(moved))
    return moved


def _whole(field: str) -> bool:
    """Whether `field` holds a whole number (--set rejects a fraction there): a hardware field of
    planner.hardware_keys.INT_FIELDS, or a profile field typed as an integer (an offloaded layer count)."""
    from planner.hardware_keys import GPU_KEYS, INT_FIELDS, LEVEL_KEYS

    if field.startswith("goodput."):
        return False
    if field.startswith("profile."):
        from planner.profile import FIELDS
        from planner.schema.profile import ExecutionProfile

        info = ExecutionProfile.model_fields.get(FIELDS.get(field.removeprefix("profile."), ""))
        return info is not None and info.annotation in (int, int | None)
    keys = LEVEL_KEYS if field.startswith("levels.") else GPU_KEYS
    return keys.get(field.rsplit(".", 1)[-1], ("", None))[0] in INT_FIELDS


SHAPE_FIELDS = ("gpus_per_node", "size", "unit", "usable")
"""Hardware fields that say how the machine is built (GPUs per node, a level's size, its unit and usable GPUs), not a
rate: a file may call one an estimate, but a value moved by a factor is no machine the levels allow (8 GPUs a node
moved to 6 does not fill a node of 8), so the sensitivity and --confidence leave them where they are."""


def _shape_field(item: str) -> bool:
    return not item.startswith(("profile.", "goodput.")) and item.rsplit(".", 1)[-1] in SHAPE_FIELDS


def _fraction(key: str) -> bool:
    """Profile values that are shares of a peak or of traffic: at most 1."""
    return any(w in key for w in ("fraction", "overlap.", "sustained_factor", "sustained_clock_factor", "dp_exposed"))


def candidates(gpu: str, profile: str | None, failures: str, plan: Plan) -> list[tuple[str, str, Any, float | None,
                                                                                        tuple[float, float]]]:
    """(--set field, why, current value, cap, factors) of every input to move."""
    from planner.goodput import failure_model_names, failures_dir
    from planner.hardware import _spec_dir, hardware_names
    from planner.profile import profile_dir, profile_names, shipped_framework
    from planner.sourced import file_of, load_toml

    def doc_of(name: str, names: list[str], folder: Path, what: str) -> dict:
        return load_toml(file_of(name, names, folder, what)[0], f"{what} file")

    def raw(doc: Any, keys: Sequence[str]) -> Any:
        node = doc
        for k in keys:
            node = node[int(k)] if isinstance(node, list) else node[k]
        return node["value"] if isinstance(node, dict) and "value" in node else node

    hw_doc = doc_of(gpu, hardware_names(), _spec_dir(), "hardware")
    pair = shipped_framework(profile or "paper")
    if pair is not None:
        # 'NAME/FRAMEWORK' (planner.profile.get_profile): the shipped file with its [framework.FRAMEWORK] values
        base_doc = doc_of(pair[0], profile_names(), profile_dir(), "profile")
        prof_doc = {k: dict(v) if isinstance(v, dict) else v for k, v in base_doc.items() if k != "framework"}
        for section, values in base_doc.get("framework", {}).get(pair[1], {}).items():
            if isinstance(values, dict):
                prof_doc.setdefault(section, {}).update(values)
    else:
        prof_doc = doc_of(profile or "paper", profile_names(), profile_dir(), "profile")
    fm_doc = doc_of(failures, failure_model_names(), failures_dir(), "failure model")
    out: list[tuple[str, str, Any, float | None, tuple[float, float]]] = []
    seen: set[str] = set()

    def add(field: str, why: str, value: Any, factors: tuple[float, float], cap: float | None = None) -> None:
        if field in seen or isinstance(value, bool) or not isinstance(value, (int, float, list)) \
                or _shape_field(field):
            return
        if isinstance(value, list) and not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                               for v in value):
            return
        if _move(field, value, factors[0], cap) == _move(field, value, factors[1], cap):
            return  # both ends equal (a zero): moving it cannot change the plan
        seen.add(field)
        out.append((field, why, value, cap, factors))

    from planner import api

    hw = api.resolve(gpu, profile)

    def kind(src: str) -> str:
        return "fitted" if "fitted" in src.lower() else "estimate"

    estimated = plan.depends_on.estimated_inputs if plan.depends_on else []
    levels_doc = hw_doc.get("levels", [])
    for item in estimated:
        if item.startswith("profile."):
            key = item[len("profile."):]
            add(item, kind(hw.profile.sources.get(key, "")), raw(prof_doc, key.split(".")), ESTIMATE_FACTORS,
                1.0 if _fraction(key) else None)
        elif item.startswith("goodput."):
            key = item[len("goodput."):]
            add(item, "estimate", raw(fm_doc, [key]), WIDE_FACTORS)
        elif item.startswith("levels."):
            _, name, key = item.split(".", 2)
            names = [str(lv.get("name", "")) for lv in levels_doc]
            if name in names:
                k = names.index(name)
                add(item, kind(hw.sources.get(f"levels[{k}].{key}", "")), raw(levels_doc[k], [key]),
                    ESTIMATE_FACTORS)
        else:
            add(item, kind(hw.sources.get(item, "")), raw(hw_doc, item.split(".")), ESTIMATE_FACTORS,
                1.0 if _fraction(item) else None)
    levels = hw_doc.get("levels", [])
    prof_lat = prof_doc.get("network", {}).get("latency_us")
    if prof_lat is not None:
        add("profile.network.latency_us", "what-if", raw(prof_doc, ["network", "latency_us"]), WIDE_FACTORS)
    elif levels:
        add("levels.*.lat_us", "what-if", raw(levels[-1], ["lat_us"]), WIDE_FACTORS)
    if levels:
        top = levels[-1]
        add(f"levels.{top.get('name', len(levels) - 1)}.bw_bidir_GBps", "what-if", raw(top, ["bw_bidir_GBps"]),
            WIDE_FACTORS)
    if plan.goodput is not None:
        for key in ("interruptions_per_gpu_hour", "restart_minutes"):
            add(f"goodput.{key}", "what-if", raw(fm_doc, [key]), WIDE_FACTORS)
    return out


Task = tuple["PlanRequest", "int | None", "SkipProof | None", "Layout | None"]
"""One re-plan: the request, its proven least GPU count or None, a skip proof or None, a seed or None (the plan's
layout when the count is the plan's: api.replan_answer)."""


def _replan(task: Task) -> tuple[int | None, float | None]:
    """(GPUs, wall-clock days) of one re-plan (`Task`)."""
    from planner import api

    return api.replan_answer(*task)


def _set_fields(request: PlanRequest) -> list[str]:
    """The --set fields the request itself sets (--memory-headroom is one)."""
    fields = [t.split("=", 1)[0].strip() for t in request.overrides]
    if request.memory_headroom_GB is not None:
        fields.append("profile.memory.headroom_GB")
    return fields


def _boundable(plan: Plan, request: PlanRequest, field: str) -> bool:
    """Whether the plan's count can bound a re-plan that moves `field` alone: the plan is the proven fewest GPUs in
    deadline mode, without a buyer's limit, and the request does not set `field` itself."""
    if plan.status != "optimal" or plan.gpus is None or plan.fixed_gpus or plan.deadline_days is None:
        return False
    if plan.fewest_gpus is not None:
        return False  # the plan took more GPUs in fewer racks: its count is not the fewest, so bounds nothing
    if request.gpus is not None or request.power_mw is not None or request.max_gpus is not None:
        return False  # a buyer's limit: keep the re-plan's own path
    if any(f == field or fnmatch.fnmatchcase(f, field) or fnmatch.fnmatchcase(field, f) for f in _set_fields(request)):
        return False  # the request sets this input itself: the file value is not the plan's
    return "*" not in field  # one value for every level, compared with one level's: the others may move the other way


def least_gpus(plan: Plan, request: PlanRequest, field: str, before: Any, after: Any) -> int | None:
    """A proven lower bound on the GPU count of the re-plan that moves `field` from `before` (its file value) to
    `after`: the plan's own count when the move slows every layout (planner.monotone) and the plan is the proven
    fewest GPUs for the same request without the move; None otherwise (the re-plan searches from the compute bound,
    unless a certificate of its family bounds it: `_certify`).
    """
    from planner.monotone import slows

    if not _boundable(plan, request, field):
        return None
    return plan.gpus if slows(field, before, after) else None


def _speeds(plan: Plan, request: PlanRequest, field: str, before: Any, after: Any) -> bool:
    """Whether the move is the reverse of a slowing one (it may speed layouts up) on a plan that can bound it."""
    from planner.monotone import slows

    return _boundable(plan, request, field) and slows(field, after, before) and not slows(field, before, after)


def _family(field: str) -> str:
    """The certificate family of a speeding move (`_certify`): memory inputs change no step time, failure inputs
    only the deadline each count gets, the rest (rates, latencies, overlaps) the step times."""
    if field.startswith("profile.memory."):
        return "memory"
    return "goodput" if field.startswith("goodput.") else "step"


ONLY_REMOVES = ("profile.memory.", "goodput.restart_minutes")
"""Inputs whose increase only takes options away and changes no layout's step time: every memory term grows (fewer
layouts fit; planner.cost.memory), a longer restart lowers goodput on every count (Daly's interval does not depend on
it). Moved up, the plan's own layout, if it still fits and meets the deadline, is still the answer: every smaller
count stayed infeasible and the layout kept its place in the order (fewest GPUs, least step time, least network
time) among the layouts left. Re-pricing it replaces the re-plan (_reused)."""


def _reused(plan: Plan, request: PlanRequest, field: str, factor: float, sets: Sequence[str]
            ) -> tuple[int | None, float | None] | None:
    """The re-plan's answer without a search when an ONLY_REMOVES input moves up and the plan's layout survives it;
    None when a search is needed."""
    if factor <= 1.0 or not field.startswith(ONLY_REMOVES) or plan.status != "optimal" or plan.layout is None:
        return None
    if request.gpus is not None or plan.gpus is None or plan.deadline_days is None:
        return None
    if request.power_mw is not None or request.max_gpus is not None:
        return None  # a buyer's limit: the plan may be the fastest within it, not the fewest GPUs
    return _repriced(plan, request, sets)


def _repriced(plan: Plan, request: PlanRequest, sets: Sequence[str]) -> tuple[int | None, float | None] | None:
    """(GPUs, wall-clock days) of the plan's own layout priced under the request with `sets`; None when it no longer
    fits or misses the deadline."""
    from planner import api
    from planner.goodput import goodput_at, wall_clock_days
    from planner.overrides import parse_overrides

    if plan.gpus is None or plan.deadline_days is None or plan.layout is None:
        return None
    priced = _priced(plan, request, sets)
    if priced is None:
        return None
    ev, wl = priced
    if not ev.memory.fits:
        return None  # the move took this layout away: search
    parsed = parse_overrides(sets)
    g = None if plan.goodput is None else goodput_at(api.failure_model(request.failures, parsed), plan.gpus,
                                                     wl.params).goodput
    days = wall_clock_days(ev.training_days, g)
    return (plan.gpus, days) if days <= plan.deadline_days * (1 + 1e-12) else None


def run_moves(tasks: Sequence[Task], jobs: int | None = None, ray: str | None = None,
              search_s: float | None = None) -> list[tuple[int | None, float | None]]:
    """The scheduling side of --sensitivity: `_replan` (the per-move work) of every task, in order, on the study
    engine (planner.workers.map_tasks): `jobs` local worker processes (default: `default_jobs`, at most one per task;
    1: here, in order), or the Ray cluster at `ray` ('auto', 'local', 'HOST:PORT', as `planner study --ray`; a local
    one gets `jobs` CPUs, default every core).
    `search_s`: what one search of the plan took (its solver's wall time), for `default_jobs`."""
    from planner.workers import map_tasks

    if jobs is None:  # on Ray: every core of a local cluster, as `study --ray local`
        jobs = default_jobs(tasks, search_s) if ray is None else os.cpu_count() or 1
    jobs = max(1, min(jobs, len(tasks) or 1))
    return map_tasks(_replan, tasks, jobs=jobs, ray=ray)


WORKER_START_S = 1.5
"""What a worker process costs before it helps, in wall-clock seconds: spawning it and importing the planner and
OR-Tools (0.75-1.1 s for two workers, measured on the 2-core development machine, docs/benchmarks.md) and its
first search, which builds from cold what this process already holds (the model-parallel rows, shape tables, count
records)."""


def default_jobs(tasks: Sequence[Task], search_s: float | None) -> int:
    """Local processes for the re-plans when the caller names none: one per core when the searches left are expected
    to take long enough for the other cores to win back WORKER_START_S, else 1 (here, in order, reusing this process's
    tables and count records). Expected: one search of the plan's length per task without a skip proof (a task with
    one usually only re-prices the plan's layout). The answers are the same either way; only the time differs."""
    cores = os.cpu_count() or 1
    if cores == 1 or search_s is None:
        return cores
    serial = search_s * sum(t[2] is None for t in tasks)
    return cores if serial * (1.0 - 1.0 / cores) > WORKER_START_S else 1


CERTIFY_MIN_MOVES = 2
"""A family certificate (`_certify`) is tried for at least this many speeding moves: for one move it costs about
what it saves."""
CERTIFY_TRIES = 3
"""Corners tried per family: a corner whose count falls below the plan's drops its fastest move and is tried again
(each try costs about one search below the plan's count)."""


def _fastest_first(plan: Plan, family: str, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The speeding moves of a certificate (`sensitivity`) ordered by how much each speeds the plan's layout up, the
    most first: a guess that only orders the corners' tries, not a bound. Only the step family's moves change that
    layout's step (memory and failure inputs change no step time: planner.monotone): ordered by its integer step
    under each (api.layout_quanta_shared, which the corner proofs read again), the others kept in their order."""
    from planner import api

    layout = _plan_layout(plan)
    if family != "step" or layout is None:
        return list(members)
    wl = api.request_workload(members[0]["request"])
    return sorted(members, key=lambda m: api.layout_quanta_shared(api.request_hardware(m["request"]), wl, layout,
                                                                  plan.dp_overlap))


_PRICED: dict[tuple[int, tuple[str, ...]], Any] = {}
"""`_priced`'s answers within one `sensitivity` call (cleared at its start), by (the plan's id, the --set texts)."""


def _priced(plan: Plan, request: PlanRequest, sets: Sequence[str]) -> tuple[Any, Any] | None:
    """(the evaluation, the workload) of the plan's layout priced under the request with `sets`; None when it is no
    layout of that hardware. Shared by `_repriced` and `_failure_chain`."""
    from planner import api
    from planner.cost.step import evaluate
    from planner.export import layout_of
    from planner.overrides import parse_overrides
    from planner.parallel.space import check_layout

    key = (id(plan), tuple(sets))
    if key in _PRICED:
        return _PRICED[key]
    hw = api.resolve(request.gpu, request.profile or plan.profile, parse_overrides(sets))
    wl = api.request_workload(request)
    layout = layout_of(plan)
    out = None if check_layout(hw, wl, layout) else (evaluate(hw, wl, layout, dp_overlap=plan.dp_overlap), wl)
    _PRICED[key] = out
    return out


SEED = True
"""Re-plans bounded at the plan's count are seeded with the plan's layout (api.replan_answer's `seed`); False only
to measure what the seed saves (benchmarks/replan_speed.py --no-seed) and in the tests that compare."""


def _seed(plan: Plan) -> Layout | None:
    """The plan's layout as the seed of the re-plans bounded at its count: it is a layout of that count (the seed
    lowers only that count's cap, and only when it still fits and meets the deadline under the move)."""
    return _plan_layout(plan) if SEED else None


def _plan_layout(plan: Plan) -> Layout | None:
    """The plan's layout as a search layout (planner.export.layout_of), None when the plan has none or it is not a
    layout of the plan's count."""
    from planner.export import layout_of

    if plan.layout is None or plan.gpus is None:
        return None
    layout = layout_of(plan)
    return layout if layout.gpus == plan.gpus else None


def _certify(plan: Plan, request: PlanRequest, family: str, texts: Sequence[str], least: int | None = None
             ) -> tuple[int | None, bool]:
    """A lower bound on the GPU count of every re-plan that moves one of `texts` (speeding moves of one `family`),
    and whether each such re-plan's answer is the plan's own layout re-priced.

    The *corner* request moves all of them at once. Each single move is the corner with every other input moved back
    in its slowing direction (planner.monotone: never faster, never more layouts fitting, never more goodput), so no
    single re-plan needs fewer GPUs than the corner: the corner's fewest GPUs bound them all. It is found by a search
    over the counts below the plan's only (`api.fewest_below`): usually it proves none, and the bound is the plan's
    count N. Then:
    - failure inputs change only the deadline each count gets, never which layout of a count is fastest, and a move
      that speeds goodput keeps the plan's layout within its deadline: each re-plan is the plan's layout on N GPUs,
      re-priced;
    - memory inputs change no step time, only which layouts fit: each re-plan's layouts on N GPUs lie between the
      plan's and the corner's, so when the corner's own choice on N GPUs (a search from N) is the plan's layout, that
      layout is every re-plan's choice too: re-priced;
    - otherwise each re-plan searches from the bound.
    `least`: a proven lower bound on the corner's count (a previous corner's count, when `texts` are some of its
    moves: this corner is that one with the other moves moved back the slowing way), where its search starts.
    (None, False) when the corner did not settle or is infeasible."""
    from planner import api

    assert plan.gpus is not None
    corner = request.model_copy(update={"overrides": (*request.overrides, *texts), "workers": 1, "why_smaller": False})
    try:
        bound = api.fewest_below(corner, plan.gpus, least)
    except (Infeasible, InvalidInput):
        return None, False
    if bound != plan.gpus:
        return bound, False
    if family == "goodput":
        return bound, True
    if family == "memory":
        layout = _plan_layout(plan)
        if layout is None or corner.power_mw is not None:
            return bound, False
        return bound, api.replan_layout(corner, bound, layout if SEED else None) == layout
    return bound, False


def _failure_chain(plan: Plan, request: PlanRequest, pending: list[dict[str, Any]],
                   results: list[tuple[int | None, float | None] | None]) -> tuple[int, int]:
    """Failure moves in their slowing direction, each bounded (`least_gpus`), re-planned one after another: the one
    with the most goodput on the plan's count first, here (its answer goes into `results`), then each other starts at
    that answer's count when it proves nothing smaller. Returns (re-plans searched here: 0 or 1, how many others were
    bounded that way).

    A failure input changes only the deadline cap each count N gets (deadline x g(N) of compute; the tuples, bounds
    and models of N are the same), and the cap only grows with g. The first re-plan proves every count below its
    answer n_a infeasible under its own g_a (below its bound by the bound, from it up by the search). So for another
    move b with g_b(N) <= g_a(N) on every count from b's bound to n_a - 1, those counts are infeasible for b too (a
    smaller cap), and b's fewest GPUs are at least n_a."""
    import numpy as np

    from planner import api
    from planner.goodput import goodput_fraction
    from planner.overrides import parse_overrides

    members = [p for p in pending if results[p["slot"]] is None and p["bound"] is not None
               and _family(p["field"]) == "goodput" and not p["speeds"]]
    priced = _priced(plan, request, request.overrides) if plan.layout is not None else None
    if len(members) < 2 or plan.goodput is None or plan.gpus is None or priced is None:
        return 0, 0
    params = priced[1].params

    def g(m: dict[str, Any]) -> Any:
        return goodput_fraction(api.failure_model(request.failures, parse_overrides(m["request"].overrides)), params)

    n0 = float(plan.gpus)
    members.sort(key=lambda m: -float(g(m)(n0)))
    first = members[0]
    answer = api.replan_answer(first["request"], first["bound"])
    results[first["slot"]] = answer
    n_a = answer[0]
    if n_a is None:
        return 1, 0
    chained = 0
    for m in members[1:]:
        counts = np.arange(m["bound"], n_a, dtype=np.float64)
        if len(counts) and np.all(g(m)(counts) <= g(first)(counts)):
            m["bound"] = n_a
            chained += 1
    return 1, chained


SKIP_MIN_MOVES = 2
"""The runner-up search behind a skip proof (`_skip_proof`) is made for at least this many moves that can use it: it
costs about one bounded re-plan."""


def _skip_proof(plan: Plan, request: PlanRequest, members: Sequence[dict[str, Any]]) -> SkipProof | None:
    """The skip proof (api.SkipProof) shared by the re-plans in `members`: moves of the step family (rates,
    latencies, overlaps) in their slowing direction, each bounded by the plan's count N (`least_gpus`).

    Such a move never shortens any layout's step, in the float model and (each term, hence each rounded-up part) in
    CP-SAT's integer reading, and changes neither which layouts fit (no memory term reads it) nor the goodput
    (planner.monotone; tests/test_monotone.py checks both readings). So every layout but the plan's L keeps an integer
    step of at least the runner-up step of the plan's own request on N (`api.runner_up_quanta`: CP-SAT's best on N
    with L left out; a layout that misses the deadline there has a step above N's cap, and stays above it). A re-plan
    whose L is still within the cap and below that runner-up is L on N, re-priced, without a search
    (api.replan_answer). The plan's layout was CP-SAT's choice; the proof only shows that the move cannot change
    it. None when too few moves can use it, or the runner-up search did not settle."""
    from planner import api
    from planner.export import layout_of

    if len(members) < SKIP_MIN_MOVES or plan.layout is None or plan.gpus is None:
        return None
    if request.solver != "cpsat" or request.runs_on is not None:
        return None
    layout = layout_of(plan)
    if layout.gpus != plan.gpus:
        return None
    base = request.model_copy(update={"workers": 1, "why_smaller": False})
    runner_up = api.runner_up_quanta(base, layout)
    return None if runner_up is None else api.SkipProof(layout, runner_up, api.request_hardware(base))


CORNER_PROOF_TRIES = 3
"""Runner-up searches tried for the speeding step moves (`_speeding_skip_proofs`); each drops the fastest move."""


def _speeding_skip_proofs(plan: Plan, request: PlanRequest, members: list[dict[str, Any]],
                          runner_up: int | None = None) -> int:
    """Skip proofs for step moves in their speeding direction bounded at the plan's count N by their family's
    certificate (`_certify`): sets p["proof"] on each member it covers; returns how many.

    The plan's runner-up bounds nothing for a move that may speed every layout, but the runner-up R_C of a *corner*
    C of such moves does, on N (`api.runner_up_quanta` under C: CP-SAT's least integer step over every layout of N
    GPUs but the plan's layout L): each member m is C with the other members moved back the slowing way, which
    lowers no part of any layout's integer step and changes neither which layouts fit nor the goodput
    (planner.monotone; tests/test_monotone.py), so every layout but L has an integer step of at least R_C under m,
    and no smaller cluster meets the deadline (the certificate). So api.SkipProof(L, R_C) holds for m, and its
    re-plan is L re-priced when L's integer step under m is below R_C and within N's cap (api._skip_search checks
    both). Members are tried least speeding first (by L's integer step under each, api.layout_quanta_shared): first
    those whose step stays above S_L^2 / R (a corner that speeds L by no more than the plan's own margin), then,
    while some member of the try is not covered, without its fastest member (at most CORNER_PROOF_TRIES runner-up
    searches). `runner_up`: the plan's own runner-up step when known (the slowing moves' proof). How this stays
    within "CP-SAT decides": docs/model.md §10."""
    from planner import api

    layout = _plan_layout(plan)
    base = request.model_copy(update={"workers": 1, "why_smaller": False})
    if len(members) < SKIP_MIN_MOVES or layout is None or request.solver != "cpsat" or request.runs_on is not None:
        return 0
    if request.gpus is not None or request.deadline_days is None:
        return 0
    wl = _priced(plan, request, request.overrides)
    if runner_up is None:
        runner_up = api.runner_up_quanta(base, layout)  # the plan's own, unless the slowing moves' proof has it
    if wl is None or runner_up is None:
        return 0
    s0 = api.layout_quanta_shared(api.request_hardware(base), wl[1], layout, plan.dp_overlap)
    steps = {id(m): api.layout_quanta_shared(api.request_hardware(m["request"]), wl[1], layout, plan.dp_overlap)
             for m in members}
    group = sorted(members, key=lambda m: -steps[id(m)])
    group = [m for m in group if steps[id(m)] * runner_up >= s0 * s0] or group[:SKIP_MIN_MOVES]
    covered = 0
    for _ in range(CORNER_PROOF_TRIES):
        if len(group) < SKIP_MIN_MOVES:
            break
        corner = base.model_copy(update={"overrides": (*base.overrides, *(m["text"] for m in group))})
        r_c = api.runner_up_quanta(corner, layout)
        if r_c is None:
            break
        proof = api.SkipProof(layout, r_c)
        left = []
        for m in group:
            if steps[id(m)] < r_c:
                m["proof"] = proof
                covered += 1
            else:
                left.append(m)
        if not left:
            break
        group = [m for m in left if m is not group[-1]]  # drop the fastest member; the covered ones are done
    return covered


def sensitivity(plan: Plan, request: PlanRequest, jobs: int | None = None, stats: dict[str, int] | None = None,
                ray: str | None = None) -> Sensitivity:
    """Re-plan `plan` (the answer to `request`) with each input of `candidates` moved down and up: each re-plan is
    the request with one more --set override, on one CP-SAT worker (from the plan's count when `least_gpus` proves
    it, or from its family's certificate, `_certify`; the direction is read off the value as typed, after rounding).
    `stats`, when given, receives how many re-plans were moved, searched and bounded, and the certificates. The
    searches left are a study of moved inputs run by `run_moves` on the study engine (local processes, or the Ray
    cluster at `ray`)."""
    from planner.overrides import parse_overrides

    if not isinstance(request.gpu, str) or not isinstance(request.failures, str):
        raise InvalidInput("--sensitivity needs the hardware by name or file")
    _PRICED.clear()
    rows_in = candidates(request.gpu, request.profile or plan.profile, request.failures, plan)
    results: list[tuple[int | None, float | None] | None] = []
    pending: list[dict[str, Any]] = []  # the re-plans not re-priced: slot, field, text, request, bound
    for field, _why, value, cap, (lo, hi) in rows_in:
        for factor in (lo, hi):
            text = f"{field}={_fmt(_move(field, value, factor, cap))}"
            results.append(_reused(plan, request, field, factor, (*request.overrides, text)))
            if results[-1] is None:
                after = parse_overrides([text])[0].value
                bound = least_gpus(plan, request, field, value, after)
                if bound is not None and _family(field) == "goodput" and _repriced(
                        plan, request, (*request.overrides, text)) is None:
                    # A failure input changes only the deadline each count gets, never which layout of a count is
                    # fastest: the plan's layout is the fastest on its count, so when it misses the moved deadline
                    # every layout of that count does.
                    bound += 1
                pending.append({"slot": len(results) - 1, "field": field, "text": text,
                                "request": request.model_copy(update={"overrides": (*request.overrides, text),
                                                                      "workers": 1, "why_smaller": False}),
                                "bound": bound, "slows": bound is not None and _family(field) == "step",
                                "speeds": _speeds(plan, request, field, value, after)})
    families: dict[str, list[dict[str, Any]]] = {}
    for p in pending:
        if p["bound"] is None and p["speeds"]:
            families.setdefault(_family(p["field"]), []).append(p)
    certified = repriced = 0
    for family, members in families.items():
        if len(members) < CERTIFY_MIN_MOVES:
            continue
        # Fastest first, by the plan's own layout re-priced under each move (a guess that only orders the tries: a
        # corner that fails drops its fastest move and tries again; every bound is proven by the corner's search).
        group = _fastest_first(plan, family, members)
        least = None
        for _ in range(CERTIFY_TRIES):
            bound, reprice = _certify(plan, request, family, [m["text"] for m in group], least)
            certified += 1
            if bound is None:
                break
            for m in group:
                m["bound"] = bound
                again = _repriced(plan, request, m["request"].overrides) if reprice else None
                if again is not None:
                    results[m["slot"]] = again
                    repriced += 1
            if bound == plan.gpus or len(group) <= CERTIFY_MIN_MOVES:
                break
            group = group[1:]  # fewer speeding moves: the next corner needs at least this one's count
            least = bound
    first, chained = _failure_chain(plan, request, pending, results)
    proof = _skip_proof(plan, request, [p for p in pending if results[p["slot"]] is None and p["slows"]])
    for p in pending:
        p["proof"] = proof if p["slows"] else None
    corner_proofs = _speeding_skip_proofs(plan, request, [
        p for p in pending if results[p["slot"]] is None and p["speeds"] and p["bound"] == plan.gpus
        and _family(p["field"]) == "step"], proof.runner_up_q if proof is not None else None)
    seed = _seed(plan)
    tasks: list[Task] = [(p["request"], p["bound"], p["proof"],
                          seed if seed is not None and p["bound"] == plan.gpus else None)
                         for p in pending if results[p["slot"]] is None]
    if stats is not None:
        stats.update(moved=len(results), searched=len(tasks) + first,
                     bounded=sum(t[1] is not None for t in tasks) + first,
                     certificates=certified, certified_repriced=repriced, skip_proofs=sum(
                         t[2] is not None for t in tasks), chained=chained, corner_proofs=corner_proofs,
                     seeded=sum(t[3] is not None for t in tasks))
    _PRICED.clear()
    searched = run_moves(tasks, jobs, ray, plan.solver.wall_s)
    fill = iter(searched)
    done = [r if r is not None else next(fill) for r in results]

    def rel(value: float | None, base: float | None) -> float:
        """|value / base - 1|; infinite when one of the two plans is infeasible (None) and the other not."""
        if base is None or not base:
            return 0.0 if value is None else math.inf
        return math.inf if value is None else abs(value / base - 1.0)

    rows = []
    for k, (field, why, value, cap, (lo, hi)) in enumerate(rows_in):
        (g_lo, d_lo), (g_hi, d_hi) = done[2 * k], done[2 * k + 1]
        rows.append(SensitivityRow(input=field, why=why, base=_fmt(value), low=_fmt(_move(field, value, lo, cap)),
                                   high=_fmt(_move(field, value, hi, cap)), gpus_low=g_lo, gpus_high=g_hi,
                                   days_low=d_lo, days_high=d_hi, swing=max(rel(g_lo, plan.gpus), rel(g_hi, plan.gpus)),
                                   days_swing=max(rel(d_lo, plan.wall_clock_days), rel(d_hi, plan.wall_clock_days))))

    rows.sort(key=lambda r: (-r.swing, -r.days_swing, r.input))
    return Sensitivity(base_gpus=plan.gpus, base_days=plan.wall_clock_days, rows=rows)


def tornado_png(s: Sensitivity, path: str, title: str) -> str:
    """A tornado chart: per input, the GPU count with its low and high value against the plan's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(reversed(s.rows))
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.5))
    base = s.base_gpus or 0
    for y, r in enumerate(rows):
        for k, (g, colour, label) in enumerate(((r.gpus_low, "tab:blue", r.low),
                                                (r.gpus_high, "tab:orange", r.high))):
            dy = -0.2 if k == 0 else 0.2  # low above high: the two labels never share a line
            if g is None:
                ax.text(base, y + dy, f" {label}: infeasible", va="center", fontsize=7, color=colour)
                continue
            ax.barh(y + dy, g - base, left=base, height=0.38, color=colour, alpha=0.8)
            ax.text(max(g, base), y + dy, f" {label}" + (" (no change)" if g == base else ""), va="center",
                    fontsize=7)
    ax.axvline(base, color="black", linewidth=1)
    ax.set_yticks(range(len(rows)), [r.input for r in rows], fontsize=8)
    ax.set_xlabel(f"GPUs (plan: {base:,}); blue = low value, orange = high value")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["Sensitivity", "SensitivityRow", "candidates", "sensitivity", "tornado_png"]
