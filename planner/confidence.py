"""How sure: the fewest GPUs that meet the deadline with probability P (`plan --confidence P`, docs/confidence.md).

The uncertain inputs (planner.uncertainty: each estimate's spread, the step-time model's measured error) are sampled
at `samples` randomized quasi-Monte Carlo points (scrambled Halton, a fixed seed). A sample is a set of --set
overrides (planner.overrides, the strings a user would type) and a step-time factor f. What is reused:

- The factor needs no search of its own: every layout's step time scales by f and goodput does not depend on the step
  (planner.goodput), so a sample meets a deadline of D days exactly when its inputs meet D / f. One search per sample
  (api.plan with its overrides and deadline D / f) gives its fewest GPUs N_s; samples with the same overrides and
  deadline share it.
- A cluster of N GPUs is then checked without searching again where it can be: a sample with N_s > N misses (N_s is
  its fewest), one with N_s = N meets in its own plan's days, and for the rest the layouts already known on N (the
  point estimate's plan on N) are re-priced under the sample's inputs (planner.cost.step.evaluate): a re-priced
  layout that meets the deadline proves the sample meets it. Only a sample that no known layout decides is searched
  again on exactly N GPUs.

The answer is the smallest of the samples' own counts N_s on which at least P of the samples meet the deadline (no
cluster below the P-quantile of N_s can: a sample misses every count below its N_s).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from planner import api
from planner.errors import Infeasible, InvalidInput, is_count, is_number
from planner.goodput import goodput_at, wall_clock_days
from planner.overrides import parse_overrides
from planner.schema import Confidence, Layout, Plan, Spread, UncertainInput, Workload
from planner.schema.request import PlanRequest
from planner.sensitivity import _fmt, _move, candidates
from planner.uncertainty import DEFAULT_SPREAD, ModelError, model_error
from planner.workload import infer_workload

DEFAULT_SAMPLES = 64
DEFAULT_SEED = 0
MAX_SAMPLES = 4096

LEAVES_OUT = (
    "correlated failures (a bad batch of parts, a power or cooling event taking many nodes at once): the failure "
    "model's interruptions are independent",
    "schedule slips before and during the run: late hardware, software bugs, restarts from a diverged loss, "
    "changes of plan",
    "inputs the files do not mark as estimates (datasheet numbers, the workload's shape and token count)",
    "errors of the step-time model beyond those the held-out published runs show (other frameworks, scales or "
    "model families than validation/runs.toml holds)",
)


PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103,
          107, 109, 113, 127, 131, 137, 139, 149, 151, 157, 163, 167, 173, 179, 181, 191, 193, 197, 199, 211, 223,
          227, 229, 233, 239, 241, 251, 257, 263, 269, 271, 277, 281, 283, 293, 307, 311)


def scrambled_halton(n: int, dims: int, seed: int) -> np.ndarray:
    """n points of the Halton sequence in `dims` dimensions, each digit of each dimension put through its own random
    permutation (random digit scrambling, seeded): a randomized quasi-Monte Carlo point set in (0, 1)^dims. In
    dimension 0 (base 2) the first 2^k points fall one in each interval [j / 2^k, (j + 1) / 2^k)."""
    if dims > len(PRIMES):
        raise InvalidInput(f"at most {len(PRIMES)} uncertain inputs can be sampled, got {dims}")
    rng = np.random.default_rng(seed)
    idx = np.arange(n, dtype=np.int64)
    out = np.zeros((n, dims))
    for d in range(dims):
        b = PRIMES[d]
        depth = max(1, int(53 / math.log2(b)))  # digits down to double precision
        scale = 1.0
        q = idx.copy()
        for _ in range(depth):
            perm = rng.permutation(b)
            scale /= b
            out[:, d] += perm[q % b] * scale
            q //= b
    return np.clip(out, 1e-12, 1.0 - 1e-12)



def check_probability(p: object) -> float:
    if not is_number(p) or not (0.0 < float(p) < 1.0):
        raise InvalidInput(f"--confidence must be a probability strictly between 0 and 1 (e.g. 0.9), got {p!r}")
    return float(p)


def _check_whole(name: str, value: object, lo: int, hi: int) -> int:
    if not is_count(value) or not lo <= value <= hi:
        raise InvalidInput(f"{name} must be a whole number from {lo} to {hi}, got {value!r}")
    return value


def _base_sets(kw: Mapping[str, Any]) -> list[str]:
    """The request's own --set strings, with --memory-headroom as the override api.plan makes of it."""
    sets = list(kw.get("overrides", ()))
    if kw.get("memory_headroom_GB") is not None:
        sets.append(f"profile.memory.headroom_GB={kw['memory_headroom_GB']!r}")
    return sets


def _workload(kw: Mapping[str, Any]) -> Workload:
    """The workload api.plan prices for these keyword arguments."""
    if kw.get("workload") is not None:
        return kw["workload"]
    return infer_workload(kw["compute_flop"], sparse=kw.get("sparse", False),
                          batch_scaling=kw.get("batch_scaling", "paper"), budget=kw.get("budget", "exact"))


def sampled_inputs(plan: Plan, kw: Mapping[str, Any], include: Sequence[str] | None = None
                   ) -> tuple[list[tuple[UncertainInput, Any, float | None]], ModelError | None]:
    """(row, file value, cap) of every input --confidence samples, and the model's error (None: not measured for
    this profile). `include` keeps only the inputs named (None: all); the user's own --set fields are fixed."""
    if plan.depends_on is None:
        return [], None
    gpu, profile, failures = kw.get("gpu", "h100"), kw.get("profile") or plan.profile, kw.get("failures", "default")
    if not isinstance(gpu, str) or not isinstance(failures, str):
        raise InvalidInput("--confidence needs the hardware and failure model by name or file")
    mine = {t.split("=", 1)[0].strip() for t in _base_sets(kw)}
    values = {c[0]: (c[2], c[3]) for c in candidates(gpu, profile, failures, plan)}
    rows = []
    for row in plan.depends_on.uncertain:
        if row.kind == "model error" or not row.sampled or row.input in mine or row.input not in values:
            continue
        if include is not None and row.input not in include:
            continue
        value, cap = values[row.input]
        rows.append((row, value, cap))
    me = model_error(plan.profile, plan.workload.precision or "bf16")
    if include is not None and "step-time model" not in include:
        me = None
    return rows, me


def draw(plan: Plan, plan_kwargs: Mapping[str, Any], samples: int, seed: int, include: Sequence[str] | None = None,
         model: ModelError | None = None
         ) -> tuple[list[tuple[UncertainInput, Any, float | None]], ModelError | None, list[tuple[str, ...]],
                    list[float]]:
    """The samples: (inputs sampled, model error, per sample its --set strings, per sample its step-time factor).
    Dimension 0 of the point set is the model's error (when measured), the rest the inputs in depends_on's order."""
    rows, me = sampled_inputs(plan, plan_kwargs, include)
    if model is not None:
        me = model
    dims = len(rows) + (1 if me is not None else 0)
    if dims == 0:
        raise InvalidInput("--confidence: nothing uncertain to sample (every estimated input is fixed by --set and "
                           "this profile has no measured model error)")
    u = scrambled_halton(samples, dims, seed)
    sample_sets: list[tuple[str, ...]] = []
    factors: list[float] = []
    for k in range(samples):
        col = 0
        f = 1.0
        if me is not None:
            f, col = me.factor(float(u[k, 0])), 1
        sets = []
        for j, (row, value, cap) in enumerate(rows):
            factor = _spread(row).factor(float(u[k, col + j]))
            sets.append(f"{row.input}={_fmt(_move(row.input, value, factor, cap))}")
        sample_sets.append(tuple(sets))
        factors.append(f)
    return rows, me, sample_sets, factors


def confidence(plan: Plan, plan_kwargs: PlanRequest | Mapping[str, Any], probability: float,
               samples: int = DEFAULT_SAMPLES,
               seed: int = DEFAULT_SEED, jobs: int | None = None, include: Sequence[str] | None = None,
               model: ModelError | None = None) -> Confidence:
    """The fewest GPUs that meet `plan`'s deadline with `probability` (plan made by api.plan(**plan_kwargs)).
    `include` limits the sampled inputs to those named ('step-time model' for the model's error); `model` replaces
    the measured model error (tests)."""
    p = check_probability(probability)
    plan_kwargs = fields_of(plan_kwargs)
    samples = _check_whole("--samples", samples, 2, MAX_SAMPLES)
    seed = _check_whole("--seed", seed, 0, 2**32 - 1)
    check_request(p, samples, seed, plan_kwargs.get("gpus"),
                  limits=plan_kwargs.get("power_mw") is not None or plan_kwargs.get("max_gpus") is not None)
    deadline = float(plan_kwargs.get("days") or 90.0)
    rows, me, sample_sets, factors = draw(plan, plan_kwargs, samples, seed, include, model)
    dims = len(rows) + (1 if me is not None else 0)
    base_sets = _base_sets(plan_kwargs)
    kw = {k: v for k, v in plan_kwargs.items() if k not in ("days", "overrides", "memory_headroom_GB")}
    # 1. Each distinct sample's fewest GPUs: one search at deadline D / f with its overrides.
    keys = sorted({(s, deadline / f) for s, f in zip(sample_sets, factors)})
    tasks = [{**kw, "overrides": [*base_sets, *s], "days": d, "workers": 1} for s, d in keys]
    found = dict(zip(keys, _run(tasks, jobs)))
    n_s = [found[(s, deadline / f)][0] for s, f in zip(sample_sets, factors)]
    own_days = [found[(s, deadline / f)][1] for s, f in zip(sample_sets, factors)]
    replans = len(tasks)

    wl = _workload(plan_kwargs)
    known: dict[int, Layout | None] = {}
    exact: dict[tuple[tuple[str, ...], int], float] = {}
    repriced = 0
    priced: dict[tuple[tuple[str, ...], int], float] = {}

    def layout_on(n: int) -> Layout | None:
        """The point estimate's fastest layout on n GPUs (one search per cluster size, shared by every sample)."""
        nonlocal replans
        if n not in known:
            from planner.export import layout_of

            replans += 1
            try:
                known[n] = layout_of(api.plan(**{**kw, "overrides": base_sets, "gpus": n, "days": None}))
            except Infeasible:
                known[n] = None
        return known[n]

    def reprice(sets: tuple[str, ...], n: int) -> float:
        """Wall-clock days of the known layout on n GPUs under a sample's inputs (inf: it does not fit)."""
        nonlocal repriced
        key = (sets, n)
        if key not in priced:
            lay = layout_on(n)
            days = math.inf
            if lay is not None:
                repriced += 1
                parsed = parse_overrides([*base_sets, *sets])
                hw = api.resolve(plan_kwargs.get("gpu", "h100"), plan_kwargs.get("profile") or plan.profile, parsed)
                try:
                    ev = api.evaluate(lay, hw, wl, dp_overlap=plan.dp_overlap)
                    g = None if plan.goodput is None else goodput_at(
                        api.failure_model(plan_kwargs.get("failures", "default"), parsed), n, wl.params).goodput
                    days = wall_clock_days(ev.training_days if ev.memory.fits else math.inf, g)
                except InvalidInput:
                    days = math.inf
            priced[key] = days
        return priced[key]

    def searched(sets: tuple[str, ...], n: int) -> float:
        """Fastest wall-clock days on exactly n GPUs with a sample's inputs: a fixed-cluster search."""
        nonlocal replans
        key = (sets, n)
        if key not in exact:
            replans += 1
            try:
                exact[key] = api.plan(**{**kw, "overrides": [*base_sets, *sets], "gpus": n, "days": None,
                                         "workers": 1}).wall_clock_days or math.inf
            except Infeasible:
                exact[key] = math.inf
        return exact[key]

    def days_on(n: int) -> tuple[list[float], list[bool]]:
        """Per sample: wall-clock days on n GPUs (factor applied) and whether it meets the deadline."""
        days, meets = [], []
        for k in range(samples):
            f, sets, ns = factors[k], sample_sets[k], n_s[k]
            if ns == n:
                d = f * float(own_days[k] or math.inf)  # its own plan: the fastest layout on n
                days.append(d)
                meets.append(d <= deadline * (1 + 1e-9))
                continue
            d = f * reprice(sets, n)
            if ns is not None and ns < n and d > deadline * (1 + 1e-9):
                d = min(d, f * searched(sets, n))  # no known layout decides: search n for this sample
            days.append(d)
            meets.append(ns is not None and ns <= n and d <= deadline * (1 + 1e-9))
        return days, meets

    counts = sorted({n for n in n_s if n is not None})

    def smallest(q: float) -> tuple[int | None, list[float], list[bool]]:
        need = math.ceil(q * samples - 1e-9)
        for n in counts:
            if sum(1 for x in n_s if x is not None and x <= n) < need:
                continue  # below the q-quantile of the samples' own counts: cannot reach q
            days, meets = days_on(n)
            if sum(meets) >= need:
                return n, days, meets
        return None, [], []

    gpus, days, meets = smallest(p)
    g50 = smallest(0.5)[0]
    g90 = smallest(0.9)[0]
    qs = (np.quantile(np.array(days), [0.1, 0.5, 0.9], method="inverted_cdf").tolist() if days else
          [None, None, None])
    method = (f"randomized quasi-Monte Carlo: {samples} points of a scrambled Halton sequence (random digit "
              f"permutations, seed {seed}) over {dims} uncertain input{'s' if dims > 1 else ''}; the model's error "
              "as a factor on every layout's step time (no search of its own: a deadline D / f); each distinct "
              "sample's fewest GPUs searched once, clusters checked by re-pricing known layouts, searched again "
              "only where that could not decide")
    inputs = [r for r, _, _ in rows] + ([me.row()] if me is not None else [])
    return Confidence(probability=p, samples=samples, seed=seed, method=method, deadline_days=deadline, gpus=gpus,
                      met=(sum(meets) / samples) if meets else 0.0, days_p10=qs[0], days_p50=qs[1], days_p90=qs[2],
                      gpus_p50=g50, gpus_p90=g90, point_gpus=plan.gpus, inputs=inputs, replans=replans,
                      repriced=repriced, leaves_out=list(LEAVES_OUT))


def _spread(row: UncertainInput):
    if row.shape not in ("uniform", "triangular", "loguniform"):
        return DEFAULT_SPREAD
    return Spread(low=row.low, high=row.high, shape=row.shape, why=row.why)


def _replan(kw: Mapping[str, Any]) -> tuple[int | None, float | None]:
    """(GPUs, wall-clock days) of one sample's plan; (None, None) when it has none."""
    try:
        p = api.plan(**kw)
    except Infeasible:
        return None, None
    return p.gpus, p.wall_clock_days


def fields_of(request: PlanRequest | Mapping[str, Any]) -> dict[str, Any]:
    """A request as api.plan's keyword arguments (a PlanRequest field by field, its objects kept)."""
    if isinstance(request, PlanRequest):
        return {k: getattr(request, k) for k in PlanRequest.model_fields}
    return dict(request)


def _run(tasks: list[dict[str, Any]], jobs: int | None) -> list[tuple[int | None, float | None]]:
    jobs = max(1, min(jobs or (os.cpu_count() or 1), len(tasks) or 1))
    if jobs == 1:
        return [_replan(t) for t in tasks]
    from planner.workers import worker_pool

    with worker_pool(jobs) as pool:
        futures = [pool.submit(_replan, t) for t in tasks]
        return [f.result() for f in futures]


def check_request(probability: object, samples: object, seed: object, gpus: object = None, sensitivity: bool = False,
                  emit: bool = False, limits: bool = False) -> None:
    """The --confidence options checked before any search (one-line errors)."""
    check_probability(probability)
    _check_whole("--samples", samples, 2, MAX_SAMPLES)
    _check_whole("--seed", seed, 0, 2**32 - 1)
    if gpus is not None:
        raise InvalidInput("--confidence finds the cluster: drop --gpus")
    if sensitivity:
        raise InvalidInput("--confidence and --sensitivity: give one")
    if emit:
        raise InvalidInput("--confidence and --emit: give one (--emit with --gpus N from the --confidence answer)")
    if limits:
        raise InvalidInput("--confidence with --power-mw or --max-gpus is not supported: drop the limit, then compare "
                           "the answer with it")


def with_confidence(point: Plan, plan_kwargs: PlanRequest | Mapping[str, Any], probability: float,
                    samples: int = DEFAULT_SAMPLES,
                    seed: int = DEFAULT_SEED, jobs: int | None = None) -> Plan:
    """The cluster that meets the deadline of `point` (made by api.plan(**plan_kwargs)) with `probability`: its plan
    document (the point estimate's fastest layout on it; `point` itself when the counts agree) with the Confidence
    attached."""
    plan_kwargs = fields_of(plan_kwargs)
    conf = confidence(point, plan_kwargs, probability, samples, seed, jobs)
    doc = point
    if conf.gpus is not None and conf.gpus != point.gpus:
        try:
            doc = api.plan(**{**plan_kwargs, "gpus": conf.gpus, "days": None})
        except Infeasible as exc:
            doc = exc.plan if exc.plan is not None else point
        doc = doc.model_copy(update={"deadline_days": point.deadline_days, "fixed_gpus": False})
    return doc.model_copy(update={"confidence": conf})


def plan_with_confidence(plan_kwargs: Mapping[str, Any], probability: float, samples: int = DEFAULT_SAMPLES,
                         seed: int = DEFAULT_SEED, jobs: int | None = None) -> Plan:
    """api.plan(**plan_kwargs) with --confidence: with_confidence of its point estimate."""
    check_request(probability, samples, seed, plan_kwargs.get("gpus"))
    return with_confidence(api.plan(**plan_kwargs), plan_kwargs, probability, samples, seed, jobs)


__all__ = ["DEFAULT_SAMPLES", "DEFAULT_SEED", "LEAVES_OUT", "check_probability", "check_request", "confidence", "draw",
           "plan_with_confidence", "sampled_inputs", "scrambled_halton", "with_confidence"]
