"""Why a request is infeasible, and what would be feasible (SPEC §7).

Every number here comes from cheap, *sound* bounds on the cost model of planner.cost, never from a search, so an
explanation never claims more than it proved:

* `floor_bound`: no layout's step can be shorter than the critical path of one microbatch through all L layers
  (planner.cost.step: step >= floor = lat_dp + t_dp + L (E / N_EP) block_critical_s + 2 (L lat_TP + lat_P2P)).
  The bound minimises that floor over the degrees it depends on, each term separately (so it can only be lower
  than the true floor of any layout): the GEMM term over (N_TP,ff, N_TP,model, nanobatch), the TP all-reduce
  latencies over each TP degree's placements, the expert-routing latency over N_EP's placements; N_PP = 1 and
  N_DP = 1 add nothing. Times D / b steps it is a lower bound on the training time: if it exceeds the deadline,
  the request is proven infeasible without any search (the latency wall).
* `min_memory_on`: the least per-GPU memory of any layout on exactly N GPUs, exact over the search space (memory
  depends on the degree tuple only; interleaving and more microbatches in flight never reduce it, so i = 1 and
  the largest microbatch count suffice).
* `can_form`: whether N GPUs can be formed at all: N must fill the network levels bottom-up (whole nodes once
  the cluster spans nodes) and split into degrees dividing d_ff, d_model, L, E and b / E (prime by prime).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from planner.cost import memory as mem
from planner.cost.pipeline import microbatches_in_flight
from planner.cost.step import SECONDS_PER_DAY, block_matmul_s
from planner.schema import Hardware, Workload
from planner.search.result import SearchResult
from planner.search.presolve import min_allreduce_latency_s, min_routing_latency_s
from planner.parallel.space import SearchOptions, divisors

GB = 1e9


# --------------------------------------------------------------------------------------------------
# The critical-path lower bound (the latency wall)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloorBound:
    """A lower bound on the step time of every layout of one workload on one hardware."""

    step_s: float
    days: float  # step_s * D / b / 86400: no layout trains faster
    tp_ff: int
    tp_model: int
    ep: int
    nanobatch: float


def floor_bound(hw: Hardware, wl: Workload, options: SearchOptions | None = None) -> FloorBound:
    """No layout of `wl` on `hw` has a shorter step than `step_s` (see the module docstring)."""
    per_expert = wl.batch_tokens // wl.experts if wl.batch_tokens % wl.experts == 0 else None
    if per_expert is None:  # no layout at all; the workload validator normally prevents this
        return FloorBound(math.inf, math.inf, 1, 1, 1, math.nan)
    cap = hw.max_gpus if options is None or options.gpus is None else options.gpus
    tf = np.array(divisors(wl.d_ff), dtype=np.int64)
    tm = np.array(divisors(wl.d_model), dtype=np.int64)
    u = np.array(divisors(per_expert), dtype=np.int64)  # N_DP * m
    A, B, C = np.meshgrid(tf, tm, u, indexing="ij")
    _, crit = block_matmul_s(hw, wl, A.ravel(), B.ravel(), per_expert / C.ravel().astype(np.float64))
    crit = crit.reshape(A.shape)
    best_u = crit.argmin(axis=2)
    crit_min = crit.min(axis=2)  # (tf, tm)
    lat_tf = np.array([min_allreduce_latency_s(hw, int(f)) for f in tf])
    lat_tm = np.array([min_allreduce_latency_s(hw, int(f)) for f in tm])
    L = wl.layers
    best = (math.inf, 1, 1, 1, math.nan)
    for ep in divisors(wl.experts):
        per_layer = (wl.experts / ep) * crit_min + 2.0 * (lat_tf[:, None] + lat_tm[None, :])
        if cap is not None:
            per_layer = np.where(tf[:, None] * tm[None, :] * ep <= cap, per_layer, np.inf)
        step = L * per_layer + 2.0 * max(L - 1, 0) * min_routing_latency_s(hw, ep)
        k = np.unravel_index(int(np.argmin(step)), step.shape)
        if step[k] < best[0]:
            best = (float(step[k]), int(tf[k[0]]), int(tm[k[1]]), ep, per_expert / float(u[best_u[k]]))
    step_s, f, m, ep, bn = best
    return FloorBound(step_s, step_s * wl.steps / SECONDS_PER_DAY, f, m, ep, bn)


def _law_of(wl: Workload) -> tuple[bool, str] | None:
    """(sparse, batch law) that `infer_workload` used for `wl`, or None for an explicit shape or preset."""
    if not wl.requested_compute_flop:
        return None
    from planner.workload import BATCH_LAWS, infer_workload

    for sparse in (wl.experts > 1, wl.experts == 1):
        for law in BATCH_LAWS:
            try:
                if infer_workload(wl.requested_compute_flop, sparse=sparse, batch_scaling=law) == wl:
                    return sparse, law
            except Exception:  # noqa: BLE001 - only a lookup
                continue
    return None


def largest_compute_within(hw: Hardware, days: float, sparse: bool, law: str,
                           options: SearchOptions | None = None) -> float | None:
    """Largest compute (FLOP, inferred shape) whose floor bound fits in `days`: an upper estimate, to ~1%.

    The bracket does not depend on what was asked for: whole decades are tried upward from the smallest accepted
    compute, and the first decade that does not fit is bisected in log compute. So every request past the same
    wall gets the same estimate (shape rounding makes the bound slightly non-monotone in compute, so a bracket
    taken from the request would move the answer by up to a few per cent).
    """
    from planner.workload import MIN_COMPUTE_FLOP, infer_workload

    def fits(c: float) -> bool:
        return floor_bound(hw, infer_workload(c, sparse=sparse, batch_scaling=law), options).days <= days

    lo = MIN_COMPUTE_FLOP
    if not fits(lo):
        return None
    hi = lo * 10.0
    while fits(hi):
        if hi >= 1e60:
            return hi
        lo, hi = hi, hi * 10.0
    a, b = math.log(lo), math.log(hi)
    while b - a > 0.01:
        mid = 0.5 * (a + b)
        if fits(math.exp(mid)):
            a = mid
        else:
            b = mid
    return math.exp(a)


# --------------------------------------------------------------------------------------------------
# GPU counts and memory
# --------------------------------------------------------------------------------------------------


def levels_allow(hw: Hardware, n: int) -> bool:
    """Whether n GPUs fill `hw`'s network levels bottom-up (and do not exceed the top level); as level_products."""
    prev = 1
    for lvl in hw.levels:
        cum = n if lvl.size is None else min(n, lvl.size)
        if cum % prev:
            return False
        prev = cum
    return prev == n


def divisors_allow(wl: Workload, n: int) -> bool:
    """Whether n splits into N_DP | b/E, N_TP,ff | d_ff, N_TP,model | d_model, N_PP | L, N_EP | E (prime by prime)."""
    if wl.batch_tokens % wl.experts:
        return False
    for k in (wl.d_ff, wl.d_model, wl.layers, wl.experts, wl.batch_tokens // wl.experts):
        n //= math.gcd(n, k)
    return n == 1


def can_form(hw: Hardware, wl: Workload, n: int) -> bool:
    return levels_allow(hw, n) and divisors_allow(wl, n)


def nearby_counts(hw: Hardware, wl: Workload, n: int, limit: int | None = None) -> tuple[int | None, int | None]:
    """The nearest usable GPU counts below and above n (None when there is none within reach).

    The scan reaches `limit` counts each way: by default half of n (usable counts thin out as n grows), at least
    100,000 and at most 1,000,000 (about a second)."""
    if limit is None:
        limit = min(max(100_000, n // 2), 1_000_000)
    below = next((k for k in range(n - 1, max(0, n - limit), -1) if can_form(hw, wl, k)), None)
    top = n + limit if hw.max_gpus is None else min(hw.max_gpus, n + limit)
    above = next((k for k in range(n + 1, top + 1) if can_form(hw, wl, k)), None)
    return below, above


@dataclass(frozen=True)
class MemoryFit:
    total_bytes: float
    tuple_text: str  # the best-fitting degree tuple, in words


def min_memory_on(hw: Hardware, wl: Workload, options: SearchOptions, n: int,
                  max_rows: int = 2_000_000) -> MemoryFit | None:
    """Least per-GPU memory of any layout on exactly n GPUs (None if no degree tuple has product n)."""
    if wl.batch_tokens % wl.experts:
        return None
    pe = wl.batch_tokens // wl.experts
    rows = []
    for tf in divisors(math.gcd(wl.d_ff, n)):
        r1 = n // tf
        for tm in divisors(math.gcd(wl.d_model, r1)):
            r2 = r1 // tm
            for ep in divisors(math.gcd(wl.experts, r2)):
                r3 = r2 // ep
                for pp in divisors(math.gcd(wl.layers, r3)):
                    dp = r3 // pp
                    if pe % dp:
                        continue
                    m = pe // dp  # most microbatches: least activation memory (see the module docstring)
                    if options.schedule in ("auto", "1f1b"):
                        rows.append((dp, tf, tm, pp, ep, m, 0))
                    elif m >= 2 * pp - 1:
                        rows.append((dp, tf, tm, pp, ep, m, 1))
                    if len(rows) > max_rows:
                        break
    if not rows:
        return None
    a = np.array(rows, dtype=np.int64)
    dp, tf, tm, pp, ep, m = (a[:, k].astype(np.float64) for k in range(6))
    zb = a[:, 6].astype(bool)
    in_flight = microbatches_in_flight(pp, np.ones_like(pp), m, zb)
    bn = wl.batch_tokens / (wl.experts * dp * m)
    total = mem.memory_components(wl.params, wl.d_model, wl.d_ff, wl.layers, wl.experts, hw.gpu.word_bytes,
                                  dp, tf, tm, pp, ep, bn, in_flight)["total_bytes"]
    k = int(np.argmin(total))
    r = rows[k]
    text = (f"dp={r[0]}, tp_ff={r[1]}, tp_model={r[2]}, pp={r[3]}, ep={r[4]}, microbatches={r[5]}, "
            f"{'zb-h2' if r[6] else '1f1b'}")
    return MemoryFit(float(total[k]), text)


def fits_memory_on(hw: Hardware, wl: Workload, options: SearchOptions, n: int) -> bool:
    fit = min_memory_on(hw, wl, options, n)
    return fit is not None and fit.total_bytes <= hw.gpu.hbm_bytes


def gpus_to_fit(hw: Hardware, wl: Workload, options: SearchOptions, budget_s: float = 3.0) -> int | None:
    """Fewest GPUs on which some layout fits in memory (None if none is found within the budget or the system)."""
    reserve = mem.RESERVE_BYTES
    room = hw.gpu.hbm_bytes - reserve
    if room <= 0:
        return None
    # weights + grads + optimizer >= 16 N_p / N bytes per GPU on N GPUs: a count below this cannot fit.
    n = max(1, math.ceil(16.0 * wl.params / room))
    top = hw.max_gpus
    t0 = time.monotonic()
    while (top is None or n <= top) and time.monotonic() - t0 < budget_s:
        if can_form(hw, wl, n) and fits_memory_on(hw, wl, options, n):
            return n
        n += 1
    return None


# --------------------------------------------------------------------------------------------------
# The explanation
# --------------------------------------------------------------------------------------------------


def _fmt_days(d: float) -> str:
    if d >= 1:
        return f"{d:,.1f} days"
    return f"{d:.3g} days ({d * 24:.3g} hours)"


def _level_rule(hw: Hardware) -> str:
    sizes = [lvl.size for lvl in hw.levels if lvl.size]
    names = [lvl.name for lvl in hw.levels if lvl.size]
    if not sizes:
        return "its network levels"
    return (f"its network levels bottom-up (groups of {', '.join(f'{s} ({nm})' for s, nm in zip(sizes, names))}): "
            "a cluster larger than a group must be a whole number of groups"
            + ("" if hw.max_gpus is None else f", and at most {hw.max_gpus} GPUs"))


def _missing_factor(wl: Workload, n: int) -> int:
    for k in (wl.d_ff, wl.d_model, wl.layers, wl.experts, wl.batch_tokens // max(wl.experts, 1)):
        n //= math.gcd(n, k)
    return n


def _nearby_text(hw: Hardware, wl: Workload, options: SearchOptions, n: int) -> str:
    below, above = nearby_counts(hw, wl, n)
    found = [k for k in (below, above) if k is not None]
    if not found:
        return "no nearby GPU count can be formed either"
    parts = []
    for k in found:
        parts.append(f"{k}" if fits_memory_on(hw, wl, options, k) else f"{k} (too little memory for this model)")
    text = f"the nearest usable counts are {' and '.join(parts)}"
    if all("memory" in p for p in parts):
        need = gpus_to_fit(hw, wl, options)
        if need is not None:
            text += f"; the fewest GPUs on which some layout fits in memory is {need:,}"
    return text


def _memory_line(hw: Hardware, wl: Workload, options: SearchOptions, n: int, fit: MemoryFit) -> str:
    need = gpus_to_fit(hw, wl, options)
    cap = hw.gpu.hbm_bytes
    head = (f"the model does not fit in memory on {n} GPU{'s' if n != 1 else ''} of {hw.name}: the best-fitting "
            f"layout ({fit.tuple_text}) needs {fit.total_bytes / GB:,.1f} GB per GPU but the {hw.gpu.name} has "
            f"{cap / GB:.4g} GB of HBM ({fit.total_bytes / cap:.3g}x as much is needed)")
    if need is not None:
        tail = (f"the fewest GPUs on which some layout fits is {need:,} (use --gpus {need} or more; to meet a "
                f"deadline as well, drop --gpus and give --days, and the planner sizes the cluster)")
    else:
        lower = math.ceil(16.0 * wl.params / max(cap - mem.RESERVE_BYTES, 1.0))
        tail = (f"no GPU count of {hw.name} was found on which it fits; weights, gradients and optimizer state "
                f"alone need at least {lower:,} GPUs")
    return head + "\n" + tail


def explain_infeasible(hw: Hardware, wl: Workload, options: SearchOptions, days: float | None,
                       result: SearchResult, confirm_s: float = 0.0) -> str:
    """A first line saying why, then what would be feasible.

    `confirm_s` > 0 lets the deadline explanation confirm its largest-compute estimate with a real search of at
    most that many seconds (off by default: the estimate is labelled an upper estimate either way)."""
    try:
        if options.gpus is not None:
            return _explain_fixed(hw, wl, options, result)
        return _explain_deadline(hw, wl, options, days, result, confirm_s)
    except Exception as exc:  # noqa: BLE001 - the explanation must never turn an answer into a crash
        return (f"no feasible layout ({result.status}); the explanation failed: {type(exc).__name__}: {exc}")


def _explain_fixed(hw: Hardware, wl: Workload, options: SearchOptions, result: SearchResult) -> str:
    n = options.gpus
    if not levels_allow(hw, n):
        return (f"{n} GPUs cannot form a cluster of {hw.name}: the GPUs must fill {_level_rule(hw)}\n"
                f"{_nearby_text(hw, wl, options, n)}")
    if not divisors_allow(wl, n):
        missing = _missing_factor(wl, n)
        return (f"no layout can split this model over exactly {n} GPUs: the degrees must divide d_ff={wl.d_ff}, "
                f"d_model={wl.d_model}, L={wl.layers}, E={wl.experts} and b/E={wl.batch_tokens // wl.experts}, and "
                f"together they lack the factor {missing} of {n}\n{_nearby_text(hw, wl, options, n)}")
    fit = min_memory_on(hw, wl, options, n)
    if fit is None:
        return (f"no layout with the {options.schedule} schedule uses exactly {n} GPUs (zb-h2 needs microbatches "
                f">= 2 pp - 1)\n{_nearby_text(hw, wl, options, n)}")
    if fit.total_bytes > hw.gpu.hbm_bytes:
        return _memory_line(hw, wl, options, n, fit)
    if result.status == "unknown":
        return (f"the search stopped at its time limit (after {result.wall_s:.1f} s) before finding any layout on "
                f"{n} GPUs; this was NOT proven infeasible: a layout fitting in memory exists ({fit.tuple_text} needs "
                f"{fit.total_bytes / GB:,.1f} GB per GPU); raise --time-limit")
    return (f"no layout of this model on {n} GPUs of {hw.name} satisfies every rule of the search space, although "
            f"the degree tuple {fit.tuple_text} fits in memory ({fit.total_bytes / GB:,.1f} GB per GPU): no valid "
            f"placement on the network levels\n{_nearby_text(hw, wl, options, n)}")


def _explain_deadline(hw: Hardware, wl: Workload, options: SearchOptions, days: float | None,
                      result: SearchResult, confirm_s: float) -> str:
    fb = floor_bound(hw, wl, options)
    lines: list[str] = []
    if days is not None and fb.days > days:
        lines.append(
            f"past the latency wall: no layout of {hw.name} trains this model in {days:g} days; no layout can be "
            f"faster than {_fmt_days(fb.days)} (the critical path of one microbatch through all L={wl.layers} "
            f"layers, {fb.step_s * 1e3:.4g} ms per step, times D/b = {wl.steps:,.0f} steps)")
        lines.append(
            f"shortest possible duration: at least {_fmt_days(fb.days)} (a lower bound: {wl.layers} layers x "
            f"{fb.step_s / wl.layers * 1e6:.3g} us of GEMM and network latency per layer at best, with tp_ff="
            f"{fb.tp_ff}, tp_model={fb.tp_model}, ep={fb.ep} and {fb.nanobatch:g}-token nanobatches); the actual "
            f"shortest run can be longer")
        if result.status == "unknown":
            lines.append(f"(proven by this bound; the search itself stopped at its time limit after "
                         f"{result.wall_s:.1f} s)")
        law = _law_of(wl)
        if law is not None:
            sparse, batch_law = law
            est = largest_compute_within(hw, days, sparse, batch_law, options)
            if est is None:
                lines.append(f"even the smallest accepted compute cannot be trained in {days:g} days")
            else:
                lines.append(f"largest compute trainable in {days:g} days: at most about {est:.3g} FLOP (an upper "
                             f"estimate from the same bound, {'sparse' if sparse else 'dense'}, {batch_law} batch "
                             f"law; the real limit can be lower)" + _confirm(hw, est, days, sparse, batch_law,
                                                                             options, confirm_s))
        else:
            tokens = days * SECONDS_PER_DAY / fb.step_s * wl.batch_tokens
            lines.append(f"most tokens trainable with this shape in {days:g} days: at most {tokens:.3g} (an upper "
                         f"estimate from the same bound; requested {wl.tokens:.3g})")
        return "\n".join(lines)

    if result.status == "unknown":
        return (f"the search stopped at its time limit (after {result.wall_s:.1f} s) before finding any layout; the "
                f"request was NOT proven infeasible (raise --time-limit)\n"
                f"for reference, no layout can be faster than {_fmt_days(fb.days)} (critical-path lower bound), "
                f"which is within the {days:g} days asked")
    need = gpus_to_fit(hw, wl, options)
    if need is None and hw.max_gpus is not None:
        fit = min_memory_on(hw, wl, options, hw.max_gpus)
        got = f"{fit.total_bytes / GB:,.1f} GB" if fit else "no layout"
        return (f"the model does not fit in memory on any cluster of {hw.name} (at most {hw.max_gpus} GPUs; the "
                f"largest needs {got} per GPU, HBM is {hw.gpu.hbm_bytes / GB:.4g} GB)\n"
                f"use hardware with a larger top network level or more HBM")
    return (f"no layout of {hw.name} trains this model within {days:g} days (proven by the search)\n"
            f"the critical-path lower bound alone would allow {_fmt_days(fb.days)}, but bubbles, bandwidth and "
            f"memory limits make every layout slower; the shortest possible duration is longer than {days:g} days")


def _confirm(hw: Hardware, compute: float, days: float, sparse: bool, law: str, options: SearchOptions,
             budget_s: float) -> str:
    if budget_s <= 0:
        return ""
    from planner import api
    from planner.errors import Infeasible, PlannerError

    try:
        p = api.plan(compute, hw, days, sparse=sparse, batch_scaling=law, schedule=options.schedule,
                     dp_overlap=options.dp_overlap, time_limit_s=budget_s)
    except Infeasible:
        return f"; a {budget_s:g} s search did not confirm it"
    except PlannerError:
        return ""
    return (f"; confirmed by a search: {compute:.3g} FLOP trains in {p.training_days:.1f} days on {p.gpus:,} GPUs "
            f"({p.solver.status})")
