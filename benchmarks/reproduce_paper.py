"""Regenerate docs/reproduction.md: the paper's Tables 2-4, Eqs. 15/17/18 and Figs. 6-9 beside ours (SPEC §8).

    python benchmarks/reproduce_paper.py                       # run every sweep, then write the document
    python benchmarks/reproduce_paper.py --points-per-decade 2 --jobs 2 --time-limit 30
    python benchmarks/reproduce_paper.py --only table3-dense   # one scenario (others are read from their cache)
    python benchmarks/reproduce_paper.py --doc-only            # rewrite the document from the cached sweeps

Each scenario's sweep is cached as docs/reproduction/<scenario>.json (a `planner.sweep.SweepResult`) as soon as it
finishes, so an interrupted run keeps what it finished and `--doc-only` marks the rest as missing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DATA = DOCS / "reproduction"
DOC = DOCS / "reproduction.md"


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    hardware: tuple[str, ...]
    compute_from: float
    compute_to: float
    sparse: bool = False
    batch_scaling: str = "paper"
    schedule: str = "auto"
    paper: tuple[float | None, ...] = ()
    """The paper's end of linear scaling per hardware (Table 3/4, Fig. 9), None when it gives none."""
    tolerance: float = 2.0
    time_limit_factor: float = 1.0
    """This scenario's CP-SAT time limit is --time-limit x this factor (the latency wall needs longer)."""
    latency_s: float | None = None
    """If set, every network level's one-way latency is replaced by this (a sensitivity; the name stays)."""

    def hardware_objects(self) -> list:
        from paper_search import with_latency

        from planner import api

        hws = [api.resolve_hardware(h) for h in self.hardware]
        return hws if self.latency_s is None else [with_latency(hw, self.latency_s) for hw in hws]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("table3-dense", "Table 3 / Fig. 6: dense, current hardware", ("v100", "a100", "h100"), 1e25, 1e32,
             paper=(3e27, 3e28, 2e28), tolerance=2.0),
    Scenario("table3-sparse", "Table 3: sparse (MoE), current hardware", ("v100", "a100", "h100"), 1e25, 1e32,
             sparse=True, paper=(2e27, 2e29, 7e28), tolerance=2.0),
    Scenario("table4-dense", "Table 4 / Fig. 8: dense, improved hardware",
             ("h100", "h100-low-latency", "h100-global-nvlink", "h100-global-nvlink-ll", "h100-infinite-ll"),
             1e26, 1e33, paper=(2e28, 1e29, 4e29, 5e31, 9e31), tolerance=3.0),
    Scenario("wall-h100", "Latency wall: dense H100 near 2e31, longer time limit", ("h100",), 5e30, 5e31,
             paper=(None,), tolerance=3.0, time_limit_factor=2.0),
    Scenario("fig9-deepseek", "Fig. 9: DeepSeek batch scaling (dense H100)", ("h100",), 1e26, 1e35,
             batch_scaling="deepseek", paper=(3e33,), tolerance=3.0),
    Scenario("fig9-fixed", "Fig. 9: fixed batch 2^22 tokens (dense H100)", ("h100",), 1e24, 1e31,
             batch_scaling="fixed", paper=(None,), tolerance=3.0),
    Scenario("table4-sparse", "Table 4: sparse (MoE), improved hardware",
             ("h100", "h100-low-latency", "h100-global-nvlink", "h100-global-nvlink-ll", "h100-infinite-ll"),
             1e26, 1e34, sparse=True, paper=(7e28, 7e28, 7e29, 1e32, 6e32), tolerance=3.0),
    # Sensitivity, not verdicts: the same Table 3 sweeps restricted to 1F1B, the schedule of the paper's released
    # simulator (see "What the paper's released simulator logs say").
    Scenario("table3-dense-1f1b", "Table 3, dense, 1F1B only (sensitivity)", ("v100", "a100", "h100"), 1e25, 1e32,
             schedule="1f1b", paper=(3e27, 3e28, 2e28), tolerance=2.0),
    Scenario("table3-sparse-1f1b", "Table 3, sparse, 1F1B only (sensitivity)", ("v100", "a100", "h100"), 1e25,
             1e32, sparse=True, schedule="1f1b", paper=(2e27, 2e29, 7e28), tolerance=2.0),
    # Sensitivity: Table 3 with the 5 us per level of every stored gpu_model.py we read (SPEC uses 1.125 us).
    Scenario("table3-dense-5us", "Table 3, dense, 5 us per network level (sensitivity)", ("v100", "a100", "h100"),
             1e25, 1e32, paper=(3e27, 3e28, 2e28), tolerance=2.0, latency_s=5e-6),
    Scenario("table3-sparse-5us", "Table 3, sparse, 5 us per network level (sensitivity)", ("v100", "a100", "h100"),
             1e25, 1e32, sparse=True, paper=(2e27, 2e29, 7e28), tolerance=2.0, latency_s=5e-6),
    # Sensitivity: the latency wall with the 5 us per level of every stored gpu_model.py (SPEC uses 1.125 us).
    Scenario("wall-h100-5us", "Latency wall, dense H100 at 5 us per network level (sensitivity)", ("h100",), 5e30,
             5e31, paper=(None,), tolerance=3.0, time_limit_factor=2.0, latency_s=5e-6),
)
BY_KEY = {s.key: s for s in SCENARIOS}


def _points(s: Scenario, per_decade: float) -> int:
    return max(2, int(round(math.log10(s.compute_to / s.compute_from) * per_decade)) + 1)


def run_scenario(s: Scenario, per_decade: float, jobs: int, time_limit: float) -> None:
    from planner.sweep import THREE_MONTHS_DAYS, sweep

    n = _points(s, per_decade)
    t0 = time.time()

    def progress(done: int, total: int, plan) -> None:
        mfu = "-" if plan.mfu is None else f"{plan.mfu:.3f}"
        req = plan.workload.requested_compute_flop or plan.workload.compute_flop
        print(f"  [{s.key}] {done}/{total} {plan.hardware} {req:.3g} {plan.status} mfu={mfu} "
              f"({plan.solver.wall_s:.1f} s; {time.time() - t0:.0f} s elapsed)", flush=True)

    print(f"{s.key}: {len(s.hardware)} hardware x {n} points, {s.compute_from:.0e}..{s.compute_to:.0e}", flush=True)
    res = sweep(s.hardware_objects(), s.compute_from, s.compute_to, n, days=THREE_MONTHS_DAYS, sparse=s.sparse,
                batch_scaling=s.batch_scaling, schedule=s.schedule, time_limit_s=time_limit, workers=1, jobs=jobs,
                progress=progress)
    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / f"{s.key}.retries.json").unlink(missing_ok=True)  # retries belong to the sweep they re-solved
    (DATA / f"{s.key}.json").write_text(res.model_dump_json(indent=1), encoding="utf-8")
    print(f"{s.key}: done in {time.time() - t0:.0f} s -> {DATA / (s.key + '.json')}", flush=True)


def retry_unproven(s: Scenario, time_limit: float) -> None:
    """Re-solve, with a longer time limit, the cached points of `s` that decide its numbers but hit the limit:
    time-limited gaps below the last feasible point, feasible-but-unproven points, and the first time-limited
    point above the last feasible one (only that one, to bound the time). The retried points
    are listed in docs/reproduction/<scenario>.retries.json and in the document."""
    from planner.sweep import solve_point

    res = load(s.key)
    if res is None:
        print(f"{s.key}: not cached, nothing to retry", flush=True)
        return
    plans = list(res.plans)
    n = len(res.compute_flop)
    retried = []
    for k, (hw, hwobj) in enumerate(zip(res.hardware, s.hardware_objects())):
        for j in range(n):
            idx = k * n + j
            p = plans[idx]
            if _proof(p).startswith("yes"):
                continue
            mine = plans[k * n:(k + 1) * n]
            last = max((i for i, q in enumerate(mine) if _has_plan(q)), default=-1)
            if not _has_plan(p) and j > last + 1:
                break  # above the first time-limited point past the wall: not worth the time
            c = res.compute_flop[j]
            t0 = time.time()
            q = solve_point(hwobj, c, res.days, res.sparse, res.batch_scaling, res.schedule, time_limit, 1, "cpsat")
            print(f"  [{s.key} retry] {hw} {c:.3g}: {p.status}/{p.solver.status} -> {q.status}/{q.solver.status} "
                  f"mfu={q.mfu} ({time.time() - t0:.0f} s)", flush=True)
            plans[idx] = q
            retried.append({"hardware": hw, "compute_flop": c, "time_limit_s": time_limit,
                            "before": f"{p.status}/{p.solver.status}", "after": f"{q.status}/{q.solver.status}"})
            _save_retried(s.key, res, plans, retried[-1:])  # after every point, so an interrupted retry keeps it
            if j > last:
                break  # at most one retry above the last feasible point per hardware (time)
    print(f"{s.key}: retried {len(retried)} point(s)", flush=True)


def _save_retried(key: str, res, plans, retried: list[dict]) -> None:
    import json

    from planner import api
    from planner.sweep import summarise

    n = len(res.compute_flop)
    hws = [api.resolve_hardware(h) for h in res.hardware]
    summaries = [summarise(h, res.compute_flop, plans[i * n:(i + 1) * n]) for i, h in enumerate(hws)]
    new = res.model_copy(update={
        "plans": list(plans), "summaries": summaries,
        "end_of_linear_scaling_flop": {x.hardware: x.end_of_linear_scaling_flop for x in summaries},
        "last_feasible_flop": {x.hardware: x.last_feasible_flop for x in summaries}})
    (DATA / f"{key}.json").write_text(new.model_dump_json(indent=1), encoding="utf-8")
    rpath = DATA / f"{key}.retries.json"
    old = json.loads(rpath.read_text()) if rpath.exists() else []
    rpath.write_text(json.dumps(old + retried, indent=1), encoding="utf-8")


def load_retries(key: str) -> list[dict]:
    import json

    path = DATA / f"{key}.retries.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []


def load(key: str):
    from planner import api
    from planner.sweep import SweepResult, summarise

    path = DATA / f"{key}.json"
    if not path.exists():
        return None
    res = SweepResult.model_validate_json(path.read_text(encoding="utf-8"))
    # Summaries are recomputed from the cached plans, so that the document follows planner.sweep.summarise.
    n = len(res.compute_flop)
    summaries = [summarise(api.resolve_hardware(h), res.compute_flop, res.plans[i * n:(i + 1) * n])
                 for i, h in enumerate(res.hardware)]
    return res.model_copy(update={
        "summaries": summaries,
        "end_of_linear_scaling_flop": {x.hardware: x.end_of_linear_scaling_flop for x in summaries},
        "last_feasible_flop": {x.hardware: x.last_feasible_flop for x in summaries}})


PAPER_SEARCH = DATA / "paper-search.json"
"""Cache of the replay of the paper's own search space (benchmarks/paper_search.py) for the Table 3 curves."""


def run_paper_search(per_decade: float) -> None:
    from paper_search import SIX_MONTHS_DAYS, replay

    from planner.sweep import THREE_MONTHS_DAYS, compute_grid

    grid = compute_grid(1e25, 1e31, max(2, int(round(6 * per_decade)) + 1))
    curves = []
    for days in (THREE_MONTHS_DAYS, SIX_MONTHS_DAYS):
        for key in ("table3-dense", "table3-sparse"):
            for hw in BY_KEY[key].hardware:
                t0 = time.time()
                rows = replay(hw, BY_KEY[key].sparse, days, grid)
                curves.append({"scenario": key, "hardware": hw, "days": days, "rows": rows})
                print(f"paper-search {key} {hw} {days:.4g} days: {len(rows)} points, {time.time() - t0:.0f} s",
                      flush=True)
    DATA.mkdir(parents=True, exist_ok=True)
    PAPER_SEARCH.write_text(json.dumps({"grid": grid, "curves": curves}, indent=1), encoding="utf-8")


def paper_search_section(sweeps) -> str:
    from paper_search import end_of_linear_scaling

    if not PAPER_SEARCH.exists():
        return ("## The paper's own search space, replayed\n\nNot run (`python benchmarks/reproduce_paper.py "
                "--paper-search`).\n")
    data = json.loads(PAPER_SEARCH.read_text(encoding="utf-8"))
    ends = {(c["scenario"], c["hardware"], round(c["days"], 2)): end_of_linear_scaling(c["hardware"], c["rows"])
            for c in data["curves"]}
    days = sorted({k[2] for k in ends})
    L: list[str] = []
    w = L.append
    w("## The paper's own search space, replayed on our cost model\n")
    w("`benchmarks/paper_search.py` searches the space of the paper's released simulator instead of ours, "
      "exhaustively, pricing every layout with our cost model (the same float64 functions the planner uses): "
      "clusters of `E·2^k` GPUs only, 1F1B with one "
      "layer per virtual stage (`i = L/N_PP`), `m` the smallest divisor of `b/(E·N_DP)` that is at least `N_PP`, "
      "`N_TP,ff` within `[isqrt(N_TP), 4·isqrt(N_TP)]`, `N_EP = gcd(N, E)`, 5 µs per network level, DP in its own "
      "phase, and the simulator's memory check (the whole cluster's HBM against weights replicated over DP plus "
      "sharded optimizer state, no activations). These rules were read in the newest stored version of its "
      "notebook (`optimal_parallelism.ipynb` @ 3a871bed), whose printed H100 rows our model reproduces on the same "
      "layouts (previous section). Every main cell of every stored version of that notebook uses a **6-month** "
      "deadline (`years=0.5`); the paper's text says three months. So the replay is run at both. What stays ours: "
      "divisibility of each degree into its own dimension, levels filled bottom-up, bandwidth times overlapped "
      "across levels (the simulator sums them), the critical-path floor, our GEMM model and our shape rounding.\n")
    w("| curve | paper (Table 3) | planner, 3 months (our search) | "
      + " | ".join(f"replay, {d:g} days" for d in days) + " |")
    w("|---|---|---|" + "---|" * len(days))
    for key in ("table3-dense", "table3-sparse"):
        s = BY_KEY[key]
        res = sweeps.get(key)
        for hw, paper in zip(s.hardware, s.paper):
            ours = res.summary(hw).end_of_linear_scaling_flop if res is not None else None
            cells = []
            for d in days:
                e = ends.get((key, hw, d))
                cells.append("—" if e is None else f"{_sci(e)} ({e / paper:.2g}x)")
            w(f"| {key.split('-')[1]} {hw} | {_sci(paper, 1)} | {_sci(ours)} ({_ratio(ours, paper)}x) | "
              + " | ".join(cells) + " |")
    w("")
    within = {d: sum(1 for (k, hw, dd), e in ends.items() if dd == d and e is not None
                     and 0.5 <= e / dict(zip(BY_KEY[k].hardware, BY_KEY[k].paper))[hw] <= 2.0) for d in days}
    def names(d):
        return [f"{k.split('-')[1]} {hw}" for (k, hw, dd), e in ends.items() if dd == d and e is not None
                and 0.5 <= e / dict(zip(BY_KEY[k].hardware, BY_KEY[k].paper))[hw] <= 2.0]

    w("Within x2 of the printed table: " + ", ".join(f"{within[d]} of 6 curves at {d:g} days"
                                                     + (f" ({', '.join(names(d))})" if names(d) else "")
                                                     for d in days)
      + ". The curves that come within x2 only at the stored code's six-month deadline suggest that those printed "
      "values came from six-month runs. No single configuration we can derive from the paper or its stored code "
      "reproduces all six printed values.\n")
    w("Grid: " + f"{len(data['grid'])} points from {_sci(data['grid'][0])} to {_sci(data['grid'][-1])} FLOP; the "
      "crossing is read off the non-increasing fit, as everywhere on this page. The replay is a diagnostic, not a "
      "verdict: SPEC §8 asks for the planner's own three-month optimum. It changes the search space, the latency "
      "and the memory rule together, so it shows what the stored code's choices do on our cost model, not the "
      "effect of each alone.\n")
    return "\n".join(L)


# --------------------------------------------------------------------------------------------------
# The document
# --------------------------------------------------------------------------------------------------

PAPER_TABLE2 = {  # d', b', T_critical (FLOP) as printed in the paper's Table 2
    "v100": (26.7e3, 278, 1e27), "a100": (16.7e3, 401, 3e28), "h100": (26.4e3, 591, 2e28),
    "h100-superpod": (5.9e3, 16, 1e34),
}
PAPER_EQ = {"Eq. 15 (T, latency, utilisation-preserving)": 3e30, "Eq. 17 (N_p at the latency wall)": 4e14,
            "Eq. 18 (T_limit, latency wall)": 2e31}
PAPER_WALL_H100 = 2e31


def _sci(x, d: int = 2) -> str:
    if x is None:
        return "—"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    m, e = f"{x:.{d - 1}e}".split("e")
    return f"{m}e{int(e)}"


def _ratio(ours, paper) -> str:
    if ours is None or paper is None:
        return "—"
    return f"{ours / paper:.2f}"


def _verdict(ours, paper, tol: float) -> str:
    if paper is None:
        return "(no paper number)"
    if ours is None:
        return "MISSING"
    r = ours / paper
    return "pass" if 1 / tol <= r <= tol else "**FAIL**"


def _has_plan(p) -> bool:
    """A layout was found (status optimal or feasible). Status 'infeasible' or 'unknown' means none was."""
    return p.status in ("optimal", "feasible")


def _proof(p) -> str:
    """Whether the point's answer is proven: optimal layout, or no layout at all."""
    if p.status == "optimal":
        return "yes (optimal)"
    if p.status == "infeasible" and p.solver.status == "infeasible":
        return "yes (infeasible)"
    if p.status == "feasible":
        gap = p.solver.gap
        return "**no**: time limit" + ("" if gap is None else f", gap {gap:.1%}")
    return "**no**: time limit, no layout found"


def _time_limited(res) -> list[tuple[str, float, object]]:
    return [(p.hardware, c, p) for c, p in zip([c for _ in res.hardware for c in res.compute_flop], res.plans)
            if not _proof(p).startswith("yes")]


def _bracket_gap(res, hw: str, threshold: float):
    """If the end of linear scaling is interpolated between two feasible points with time-limited (no-plan) points
    between them, return (lower feasible compute, upper feasible compute, number of points in between)."""
    grid, plans = res.compute_flop, res.plans_for(hw)
    feas = [j for j, q in enumerate(plans) if _has_plan(q) and q.mfu is not None]
    for a, b in zip(feas, feas[1:]):
        if plans[a].mfu >= threshold > plans[b].mfu:
            k = b - a - 1
            return (grid[a], grid[b], k) if k > 0 else None
    return None


def _jitter_example(res) -> str:
    """', e.g. ...': the grid point of `res` furthest below both of its neighbours, named with its shape."""
    best = None
    if res is not None:
        for hw in res.hardware:
            ps = res.plans_for(hw)
            for k in range(1, len(ps) - 1):
                a, p, b = ps[k - 1], ps[k], ps[k + 1]
                if None in (a.mfu, p.mfu, b.mfu):
                    continue
                dip = min(a.mfu, b.mfu) - p.mfu
                if best is None or dip > best[0]:
                    best = (dip, hw, res.compute_flop[k], p, a, b)
    if best is None or best[0] <= 0:
        return ""
    dip, hw, c, p, a, b = best
    return (f", by as much as {100 * dip:.0f} points (dense {hw} at {_sci(c)} FLOP rounds to a "
            f"{_sci(p.workload.compute_flop)}-FLOP shape at MFU {p.mfu:.2f}, between neighbours at {a.mfu:.2f} "
            f"and {b.mfu:.2f})")


def _trend_at(res, hw: str, x: float | None) -> float | None:
    """Our MFU trend (the non-increasing fit the crossing is read from) at compute x, log-interpolated; None
    outside the feasible points."""
    from planner.sweep import non_increasing_fit

    feas = [(c, p.mfu) for c, p in zip(res.compute_flop, res.plans_for(hw)) if p.status != "infeasible"
            and p.mfu is not None]
    if x is None or not feas or not feas[0][0] <= x <= feas[-1][0]:
        return None
    xs = [math.log10(c) for c, _ in feas]
    ys = non_increasing_fit([m for _, m in feas])
    lx = math.log10(x)
    for k in range(1, len(xs)):
        if xs[k] >= lx:
            f = (lx - xs[k - 1]) / (xs[k] - xs[k - 1])
            return ys[k - 1] + f * (ys[k] - ys[k - 1])
    return ys[0]


def _first_infeasible_after(res, hw, last):
    for c, p in zip(res.compute_flop, res.plans_for(hw)):
        if not _has_plan(p) and (last is None or c > last):
            return c, p
    return None, None


def write_doc(a) -> None:
    from planner.limits import eq15_flop, eq17_paper_params, eq18_flop, limits_for
    from planner.render.sweep import plot_mfu, plot_parallelism

    sweeps = {s.key: load(s.key) for s in SCENARIOS}
    L: list[str] = []
    w = L.append
    w("# Reproduction of the paper's results (SPEC §8)\n")
    w("Generated by `python benchmarks/reproduce_paper.py` (do not edit by hand; rerun it). Paper: Erdil & "
      "Schneider-Joseph, *Data movement limits to frontier model training*, §5 (Table 2, Eqs. 15-18) and "
      "§6.2-6.3 (Tables 3-4, Figs. 6-9). All simulated runs are three-month runs (365.25/4 = 91.31 days), "
      "planned by `planner.api.plan` (fewest GPUs that meet the deadline, then least step time) at each point of "
      "a log-spaced compute grid; MFU is against the max-clock peak, so a single GPU's ceiling is the sustained "
      "clock factor (V100 0.90, A100 0.85, H100 0.70) and linear scaling ends where MFU < 0.8 x ceiling. "
      "Because each grid point's model is rounded to hardware-friendly integers, MFU jumps from one grid point "
      "to the next" + _jitter_example(sweeps.get("table3-dense")) + ". A *nanobatch* is the tokens one GEMM sees "
      "at a time, "
      "`b/(E·N_DP·m)`. The crossing is therefore read off the trend: the least-squares "
      "non-increasing fit to the feasible points (`planner.sweep.non_increasing_fit`), interpolated in log "
      "compute between the two grid points around it. Where the raw points dip below the line materially "
      "earlier, the notes under each table say so.\n")
    done = [k for k, v in sweeps.items() if v is not None]
    missing = [k for k, v in sweeps.items() if v is None]
    if done:
        any_res = sweeps[done[0]]
        per_dec = (len(any_res.compute_flop) - 1) / math.log10(any_res.compute_flop[-1] / any_res.compute_flop[0])
        w(f"Grid: about {per_dec:.3g} points per decade, CP-SAT time limit {any_res.time_limit_s:g} s per plan. "
          "A point whose search hit the time limit is either `feasible` (a layout, not proven optimal: its GPU "
          "count may be above the optimum, so its MFU may be *below* the true curve) or infeasible-but-not-proven "
          "(no layout found in time); both are marked in the per-point tables. The grid resolution limits every "
          "end-of-linear-scaling number below to the interpolation between neighbouring points.\n")
    if missing:
        w("**Missing (not finished in the time available):** " + ", ".join(f"`{k}`" for k in missing)
          + f". Regenerate with `python benchmarks/reproduce_paper.py --only {missing[0]} ...` (the finished "
          "scenarios are cached in `docs/reproduction/*.json`; `--doc-only` rewrites this file from the cache).\n")

    # Table 2 -----------------------------------------------------------------------------------------
    score = []
    for title, keys in (("Table 3", ("table3-dense", "table3-sparse")), ("Table 4", ("table4-dense", "table4-sparse"))):
        verdicts = []  # (curve, verdict)
        for k in keys:
            res = sweeps[k]
            for hw, paper in zip(BY_KEY[k].hardware, BY_KEY[k].paper):
                end = res.summary(hw).end_of_linear_scaling_flop if res is not None else None
                verdicts.append((f"{k.split('-')[1]} {hw}", _verdict(end, paper, BY_KEY[k].tolerance)))
        fails = [name for name, v in verdicts if v != "pass"]
        score.append(f"{title}: {len(verdicts) - len(fails)} of {len(verdicts)} within x{BY_KEY[keys[0]].tolerance:g}"
                     + (f" (outside: {', '.join(fails)})" if fails else ""))
    w("**Scoreboard.** Table 2 and Eqs. 15, 17, 18: all to the paper's printed precision. " + "; ".join(score)
      + ". The latency wall and Fig. 9 have their own sections below. What we found, in short:\n")
    w("- **Per layout, the cost models agree.** Given the same layout and the same latency constant, our cost "
      "model gives the MFU that the newest stored version of the paper's simulator prints, within 1 % on the four "
      "H100 rows checked. Against the older version that wrote the released logs, our MFU is lower on the same "
      "layouts (its GEMM model was faster at small nanobatches). See \"The same layouts priced by both models\".")
    w("- **The searches and settings differ.** We also search ZB-H2, any microbatch count and GPU counts that are "
      "not `E·2^k`; the stored code runs six-month deadlines (the text says three months) and 5 µs per network "
      "level (SPEC §4 says 1.125 µs). The latency constant moves the latency wall but not Table 3.")
    w("- **The printed table is not reproduced by any single configuration we could derive.** Replaying the "
      "stored code's own search on our cost model (\"The paper's own search space, replayed\") does not reproduce "
      "the whole printed table at either deadline. The mechanisms are listed under \"Why our numbers differ from "
      "the paper's\"; they do not "
      "account for every miss quantitatively.\n")
    w("## Table 2 and Eqs. 15, 17, 18 (closed form, `planner limits`)\n")
    w("| system | d' ours | d' paper | ratio | b' ours | b' paper | ratio | T_critical ours | paper | ratio |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for hw, (dp, bp, tc) in PAPER_TABLE2.items():
        r = limits_for(hw)
        w(f"| {hw} | {r.d_prime / 1e3:.3g}k | {dp / 1e3:.3g}k | {_ratio(r.d_prime, dp)} | {r.b_prime:.3g} | {bp:.3g} | "
          f"{_ratio(r.b_prime, bp)} | {_sci(r.t_critical_flop)} | {_sci(tc, 1)} | {_ratio(r.t_critical_flop, tc)} |")
    w("")
    w("| equation | ours | paper | ratio |")
    w("|---|---|---|---|")
    for (name, paper), ours in zip(PAPER_EQ.items(), (eq15_flop(), eq17_paper_params(), eq18_flop())):
        w(f"| {name} | {_sci(ours)} | {_sci(paper, 1)} | {_ratio(ours, paper)} |")
    w("\nAll agree with the paper's printed values to its printed precision (checked in `tests/test_limits.py`).\n")

    # Tables 3/4 --------------------------------------------------------------------------------------
    def table(keys: list[str], title: str, intro: str = "") -> None:
        w(f"## {title}\n")
        if intro:
            w(intro + "\n")
        w("| scenario | hardware | end of linear scaling, ours | paper | ratio | tolerance | verdict | "
          "our MFU at the paper's compute (trend) / threshold | last feasible (ours) | unproven points |")
        w("|---|---|---|---|---|---|---|---|---|---|")
        for key in keys:
            s = BY_KEY[key]
            res = sweeps[key]
            for hw, paper in zip(s.hardware, s.paper):
                if res is None:
                    w(f"| {key} | {hw} | not run | {_sci(paper, 1)} | — | x{s.tolerance:g} | MISSING | — | — | — |")
                    continue
                sm = res.summary(hw)
                end = sm.end_of_linear_scaling_flop
                br = _bracket_gap(res, hw, sm.threshold_mfu)
                verdict = _verdict(end, paper, s.tolerance)
                shown = _sci(end)
                if br is not None:
                    lo, hi, k = br
                    shown = (f"{_sci(end)} (*uncertain*: bracket {_sci(lo)}–{_sci(hi)} spans {k} point(s) "
                             "without a plan)")
                    lo_ok = paper is not None and lo / paper <= s.tolerance
                    hi_ok = paper is not None and hi / paper >= 1 / s.tolerance
                    verdict = (verdict + " (inconclusive)") if lo_ok and hi_ok else verdict
                at = _trend_at(res, hw, paper)
                vertical = "—" if at is None else f"{at:.3f} / {sm.threshold_mfu:.3f} ({at / sm.threshold_mfu:.2f}x)"
                last_txt = _sci(sm.last_feasible_flop) + (
                    " (grid end)" if sm.last_feasible_flop == res.compute_flop[-1] else "")
                w(f"| {key} | {hw} | {shown} | {_sci(paper, 1)} | {_ratio(end, paper)} | x{s.tolerance:g} | "
                  f"{verdict} | {vertical} | {last_txt} | "
                  f"{sum(not _proof(q).startswith('yes') for q in res.plans_for(hw))} |")
        w("")
        for key in keys:
            res = sweeps[key]
            if res is None:
                continue
            for sm in res.summaries:
                mine = res.plans_for(sm.hardware)
                for note in sm.notes:
                    if "hit the solver time limit" in note or note.startswith("no plan found below"):
                        continue  # recounted below (the library's count misses status 'unknown' plans)
                    w(f"- `{key}` {sm.hardware}: {note}")
                tl = [c for c, q in zip(res.compute_flop, mine) if not _proof(q).startswith("yes")]
                if tl:
                    w(f"- `{key}` {sm.hardware}: {len(tl)} point(s) hit the solver time limit: "
                      + ", ".join(_sci(c) for c in tl) + " FLOP (see \"Solver proofs\")")
                last = sm.last_feasible_flop
                gaps = [c for c, q in zip(res.compute_flop, mine) if not _has_plan(q) and last is not None and c < last]
                if gaps:
                    w(f"- `{key}` {sm.hardware}: no plan found below the last feasible point at "
                      + ", ".join(_sci(c) for c in gaps) + " FLOP (interpolated over)")
        w("")

    vertical_intro = ("The column \"our MFU at the paper's compute\" reads the same trend vertically: our trend MFU "
                      "at the compute where the paper says linear scaling ends, the threshold MFU (0.8 x the "
                      "ceiling), and their ratio. A ratio above 1 means our curve is still above the line there. It "
                      "does not sort passes from fails, because the slope after that point differs from curve to "
                      "curve.")
    table(["table3-dense", "table3-sparse"], "Table 3: end of linear scaling, current hardware (tolerance x2)",
          vertical_intro)
    table(["table4-dense", "table4-sparse"], "Table 4: end of linear scaling, improved hardware (tolerance x3)")
    table(["table3-dense-1f1b", "table3-sparse-1f1b"], "Sensitivity: Table 3 with 1F1B only (not a verdict)",
          "The same sweeps as Table 3 with `--schedule 1f1b`: no zero-bubble schedule, as in the paper's released "
          "simulator (next sections). The paper's text allows either schedule (App. 8.1.3) and does not say which "
          "its Table 3 used; our default, `auto`, searches both and is what the verdicts above are made on. The "
          "'verdict' column here only says whether this variant would fall within the tolerance.")
    def variant_ends(suffix: str):
        """(curve name, paper, end in Table 3, end in the `suffix` variant) for every curve both sweeps have."""
        for key in ("table3-dense", "table3-sparse"):
            a, b = sweeps.get(key), sweeps.get(key + suffix)
            if a is None or b is None:
                continue
            for hw, paper in zip(BY_KEY[key].hardware, BY_KEY[key].paper):
                ea, eb = a.summary(hw).end_of_linear_scaling_flop, b.summary(hw).end_of_linear_scaling_flop
                if ea and eb and paper:
                    yield f"{key.split('-')[1]} {hw}", paper, ea, eb

    rows = [f"{name}: auto {_sci(ea)} ({ea / paper:.2g}x the paper), 1F1B only {_sci(eb)} ({eb / paper:.2g}x)"
            for name, paper, ea, eb in variant_ends("-1f1b")]
    if rows:
        w("What this says, per curve: " + "; ".join(rows) + ". Searching ZB-H2 moves every end of linear scaling "
          "later, because a zero-bubble schedule with many microbatches keeps GEMMs busy where 1F1B pays a bubble "
          "or a smaller nanobatch. On H100, both dense and sparse, the paper's printed numbers lie within x2 of "
          "where our "
          "1F1B-only curves cross. That agreement is probably a coincidence: the paper's stored code is 1F1B only "
          "but also restricts cluster sizes and microbatch counts and runs six months, and replaying its whole "
          "search at three months ends linear scaling an order of magnitude earlier still (\"The paper's own search "
          "space, replayed\"). On V100 and A100 the picture is mixed (1F1B-only dense V100 and sparse A100 fall "
          "outside the tolerance on the other side), so no single schedule choice reproduces the whole table; we "
          "keep `auto`, the optimum of the model the paper's text describes, and report these rows as a "
          "sensitivity.\n")

    table(["table3-dense-5us", "table3-sparse-5us"], "Sensitivity: Table 3 at 5 µs per network level (not a verdict)",
          "The same sweeps as Table 3 with every network level's latency set to 5 µs, the value in every stored "
          "version of the paper's `gpu/gpu_model.py` we could read (SPEC §4 and our hardware files use 1.125 µs).")
    moved = [eb / ea for _, _, ea, eb in variant_ends("-5us")]
    if moved:
        span = (f"the same as at 1.125 µs on every curve (ratio {min(moved):.2f})" if max(moved) - min(moved) < 0.005
                else f"{min(moved):.2f}-{max(moved):.2f}x where it is at 1.125 µs")
        w(f"Across the {len(moved)} curves, the end of linear scaling at 5 µs is {span}: Table 3's knees are set by "
          "bandwidth and GEMM efficiency, not by network latency.\n")

    # Latency wall ------------------------------------------------------------------------------------
    w("## The dense H100 latency wall (paper: ~2e31 FLOP, §6.2; tolerance x3)\n")
    pts = []  # (compute, plan, scenario) for dense H100 under the paper's batch law, from every sweep that has it
    for k in ("table3-dense", "table4-dense", "wall-h100"):
        if sweeps[k] is not None and "h100" in sweeps[k].hardware:
            pts += [(c, p, k) for c, p in zip(sweeps[k].compute_flop, sweeps[k].plans_for("h100"))]
    lo = None
    if not pts:
        w("MISSING: needs the `table3-dense`, `table4-dense` or `wall-h100` sweep.\n")
    else:
        feas = [(c, p, k) for c, p, k in pts if _has_plan(p)]
        last = max(feas, key=lambda t: t[0]) if feas else None
        above = sorted([(c, p, k) for c, p, k in pts if not _has_plan(p) and (last is None or c > last[0])],
                       key=lambda t: t[0])
        proven = [t for t in above if t[1].solver.status == "infeasible"]
        srcs = sorted({k for _, _, k in pts})
        w(f"Combining the dense H100 points of {', '.join('`' + k + '`' for k in srcs)}:\n")
        w(f"- last feasible point: {_sci(last[0]) if last else '—'} FLOP"
          + (f" (`{last[2]}`, MFU {last[1].mfu:.3f}, {last[1].gpus:,} GPUs, solver {last[1].status})" if last else ""))
        w(f"- first point above it without a plan: {_sci(above[0][0]) if above else '—'} FLOP"
          + (f" ({'proven infeasible' if above[0][1].solver.status == 'infeasible' else 'NOT proven: time limit'})"
             if above else ""))
        w(f"- first proven-infeasible point above it: {_sci(proven[0][0]) if proven else '— (none in the grid)'}")
        lo = last[0] if last else None
        verdict = _verdict(lo, PAPER_WALL_H100, 3.0)
        if verdict == "**FAIL**" and lo is not None and lo < PAPER_WALL_H100 and (
                not above or above[0][1].solver.status != "infeasible"):
            verdict = "**inconclusive** (no plan found above it, but not proven infeasible: solver time limit)"
        w(f"\nSo the wall is at or above {_sci(lo)} FLOP"
          + (f" and below {_sci(proven[0][0])} FLOP" if proven else "")
          + f". The paper's value is ~2e31 (Eq. 18 in closed form gives {_sci(eq18_flop())}). Last feasible / paper = "
          f"{_ratio(lo, PAPER_WALL_H100)} -> {verdict} against the factor-3 tolerance"
          + ("" if proven else " (the true wall may be higher: the points above it were not proven infeasible)")
          + ".\n")
        if above and above[0][1].explanation:
            w(f"The planner's explanation at {_sci(above[0][0])} FLOP:\n")
            w("```\n" + above[0][1].explanation.strip() + "\n```\n")
    res5 = sweeps.get("wall-h100-5us")
    if res5 is not None:
        from planner.explain import largest_compute_within
        from planner.sweep import THREE_MONTHS_DAYS

        mine = list(zip(res5.compute_flop, res5.plans_for("h100")))
        last5 = max((c for c, p in mine if _has_plan(p)), default=None)
        over5 = [(c, p) for c, p in mine if not _has_plan(p) and (last5 is None or c > last5)]
        bound5 = largest_compute_within(BY_KEY["wall-h100-5us"].hardware_objects()[0], THREE_MONTHS_DAYS, False,
                                        "paper")
        w("**Sensitivity: 5 µs per network level.** Every stored version of the paper's `gpu/gpu_model.py` we could "
          "read uses 5 µs per level; SPEC §4 and our hardware files use 1.125 µs, which SPEC attributes to the "
          "simulator's commit b1f771c. With 5 µs "
          f"(`wall-h100-5us`), the last feasible dense H100 point is {_sci(last5)} FLOP "
          f"({_ratio(last5, PAPER_WALL_H100)}x the paper's 2e31)"
          + (f", the first point above it without a plan is {_sci(over5[0][0])} FLOP ("
             + ("proven infeasible" if over5[0][1].solver.status == "infeasible" else "not proven: time limit")
             + ")" if over5 else ", and every point of the grid up to 5e31 has a plan")
          + f", and the critical-path bound caps a three-month run at about {_sci(bound5)} FLOP. Eq. 18 puts the "
          "wall at the inverse square of the per-layer latency, but most of that latency is GEMM time and kernel "
          "latency, which the network constant does not touch, so 4.4x more network latency moves the wall by "
          f"{_ratio(lo, last5)}x (last feasible points)."
          + (" Changing only this constant is enough to bring the wall inside the factor-3 tolerance."
             if _verdict(last5, PAPER_WALL_H100, 3.0) == "pass" and _verdict(lo, PAPER_WALL_H100, 3.0) != "pass"
             else "") + "\n")

    # Fig. 9 ------------------------------------------------------------------------------------------
    w("## Fig. 9: batch-size scaling laws (dense H100; tolerance x3)\n")
    w("| batch law | end of linear scaling, ours | paper | ratio | verdict | last feasible (ours) |")
    w("|---|---|---|---|---|---|")
    for label, key, paper in (("paper (default)", "table3-dense", 2e28), ("deepseek", "fig9-deepseek", 3e33),
                              ("fixed 2^22 tokens", "fig9-fixed", None)):
        res = sweeps[key]
        if res is None:
            w(f"| {label} | not run | {_sci(paper, 1)} | — | MISSING | — |")
            continue
        sm = res.summary("h100")
        end = sm.end_of_linear_scaling_flop
        w(f"| {label} | {_sci(end)} | {_sci(paper, 1)} | {_ratio(end, paper)} | {_verdict(end, paper, 3.0)} | "
          f"{_sci(sm.last_feasible_flop)} |")
    w("")

    # Figures -----------------------------------------------------------------------------------------
    w("## Figures\n")
    n_unproven = sum(q.status == "feasible" for r in sweeps.values() if r is not None for q in r.plans)
    w("The x axis is the *requested* compute (log scale, padded so that markers at the grid's ends stay clear of "
      "the frame) and MFU is against the max-clock peak. The dotted horizontal lines are 80 % of each GPU's "
      "sustained-clock ceiling. Dashed verticals mark the end of linear scaling (where the non-increasing fit "
      "crosses that line) and dotted verticals the last feasible grid point, in each curve's colour. Filled "
      "circles are proven-optimal plans; hollow circles would be feasible plans whose proof hit the time limit "
      "(" + (f"{n_unproven} in this run" if n_unproven else "none in this run") + "). Points with no layout sit "
      "on the x axis: a cross when proven infeasible, a hollow "
      "triangle when the time limit stopped the search first; the line joins the plans around them.\n")
    figs = []
    if sweeps["table3-dense"] is not None:
        r = sweeps["table3-dense"]
        figs.append(("fig6-mfu-dense.png", "Fig. 6: MFU of dense three-month runs on V100, A100, H100 DGX clusters",
                     lambda pth, r=r: plot_mfu([(h, r, h) for h in r.hardware], pth,
                                               "Fig. 6: dense 3-month runs, current hardware")))
        figs.append(("fig7-parallelism-h100.png", "Fig. 7: parallelism split log N_X / log N_GPU, dense H100",
                     lambda pth, r=r: plot_parallelism(r, "h100", pth, "Fig. 7: parallelism split, dense H100")))
    if sweeps["table3-sparse"] is not None:
        r = sweeps["table3-sparse"]
        figs.append(("table3-mfu-sparse.png", "MFU of sparse three-month runs (Table 3, sparse column)",
                     lambda pth, r=r: plot_mfu([(h, r, h) for h in r.hardware], pth,
                                               "Sparse 3-month runs, current hardware")))
    if sweeps["table4-dense"] is not None:
        r = sweeps["table4-dense"]
        figs.append(("fig8-mfu-hardware.png", "Fig. 8: MFU with improved hardware (dense)",
                     lambda pth, r=r: plot_mfu([(h, r, h) for h in r.hardware], pth,
                                               "Fig. 8: dense 3-month runs, improved H100 hardware")))
    if sweeps["table4-sparse"] is not None:
        r = sweeps["table4-sparse"]
        figs.append(("table4-mfu-sparse.png", "MFU with improved hardware (sparse)",
                     lambda pth, r=r: plot_mfu([(h, r, h) for h in r.hardware], pth,
                                               "Sparse 3-month runs, improved H100 hardware")))
    curves = [(lab, sweeps[k], "h100") for lab, k in (("paper batch law", "table3-dense"),
                                                      ("DeepSeek batch law", "fig9-deepseek"),
                                                      ("fixed batch 2^22", "fig9-fixed")) if sweeps[k] is not None]
    if curves:
        figs.append(("fig9-mfu-batch-laws.png", "Fig. 9: dense H100 under three batch-size laws",
                     lambda pth, c=curves: plot_mfu(c, pth, "Fig. 9: dense H100, batch-size scaling laws")))
    for name, caption, make in figs:
        make(DATA / name)
        w(f"![{caption}](reproduction/{name})\n\n*{caption}.*\n")
    if not figs:
        w("MISSING: no sweep finished.\n")

    # Proofs ------------------------------------------------------------------------------------------
    w("## Solver proofs: which points are proven, which hit the time limit\n")
    w("Every sweep point is one `planner.api.plan` call with the CP-SAT time limit above (the `wall-h100` scenario "
      "gets twice that). A point is *proven* when CP-SAT proved its layout optimal (fewest GPUs, then least step "
      "time) or proved that no layout meets the deadline. The per-point tables below give the status of every "
      "point.\n")
    w("| scenario | points | proven optimal | proven infeasible | hit the time limit |")
    w("|---|---|---|---|---|")
    for key in done:
        res = sweeps[key]
        n_opt = sum(p.status == "optimal" for p in res.plans)
        n_inf = sum(p.status == "infeasible" and p.solver.status == "infeasible" for p in res.plans)
        tl = _time_limited(res)
        w(f"| `{key}` | {len(res.plans)} | {n_opt} | {n_inf} | {len(tl)} |")
    for key in missing:
        w(f"| `{key}` | not run | — | — | — |")
    w("")
    for key in done:
        rs = load_retries(key)
        if rs:
            w(f"- `{key}` points re-solved with a longer time limit (`--retry-unproven`): " + "; ".join(
                f"{r['hardware']} {_sci(r['compute_flop'])} ({r['time_limit_s']:g} s: {r['before']} -> {r['after']})"
                for r in rs))
    for key in done:
        tl = _time_limited(sweeps[key])
        if tl:
            w(f"- `{key}` time-limited points: " + "; ".join(
                f"{hw} {_sci(c)} ({'feasible, not proven optimal' if p.status == 'feasible' else 'no layout found'}"
                f", {p.solver.wall_s:.0f} s)" for hw, c, p in tl))
    old = [k for k in done if any(q.status == "infeasible" and q.solver.status == "unknown" for q in sweeps[k].plans)]
    if old:
        w("Library versions: " + ", ".join(f"`{k}`" for k in old) + " ran with a library from before commit 1a3a277. "
          "That version labelled a point where the time limit stopped the search before any layout was found as "
          "`infeasible` with solver status `unknown`; the current library labels it `unknown`. Both mean the "
          "same here (\"no plan (time limit)\", not proven infeasible). The same commit also changed how the "
          "search pairs windows (a speed change, not a model change).\n")

    # Released logs -----------------------------------------------------------------------------------
    w(released_logs_section(sweeps["table3-dense"]))
    w(paper_search_section(sweeps))

    # Per-point tables --------------------------------------------------------------------------------
    w("## Per-point results\n")
    for key in done:
        res = sweeps[key]
        w(f"<details><summary>{BY_KEY[key].title} (`{key}`)</summary>\n")
        w("| hardware | compute requested (FLOP) | actual | GPUs | MFU | days | dp | tp_ff | tp_model | pp | ep | "
          "schedule | m | status | proven? | solve s |")
        w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c, p in zip([c for _ in res.hardware for c in res.compute_flop], res.plans):
            lay = p.layout
            st = p.status if _has_plan(p) else (
                "infeasible" if p.solver.status == "infeasible" else "no plan (time limit)")
            degs = "| — | — | — | — | — | — | — " if lay is None else (
                f"| {lay.dp} | {lay.tp_ff} | {lay.tp_model} | {lay.pp} | {lay.ep} | {lay.schedule}"
                + (f" i={lay.interleave}" if lay.interleave > 1 else "") + f" | {lay.microbatches}")
            w(f"| {p.hardware} | {_sci(c)} | {_sci(p.workload.compute_flop)} | {p.gpus if p.gpus else '—'} | "
              f"{'—' if p.mfu is None else f'{p.mfu:.3f}'} | "
              f"{'—' if p.training_days is None else f'{p.training_days:.1f}'} {degs} | {st} | {_proof(p)} | "
              f"{p.solver.wall_s:.1f} |")
        w("\n</details>\n")

    w(differences(sweeps))
    DOC.write_text("\n".join(L) + "\n", encoding="utf-8")
    print(f"wrote {DOC}")


# The released simulator's dense logs (ege-erdil/limits_to_distributed_training, logs/base_comparison.txt and
# logs/grand_comparison_dense.txt, read with optimal_parallelism.ipynb): where MFU first falls below 0.8 x the
# sustained-clock ceiling, read off the logged rows (approximate: the logs are not on our grid).
RELEASED_LOGS_END = {"v100": 5e28, "a100": 1e29, "h100": 1.5e29}
PAPER_TABLE3_DENSE = {"v100": 3e27, "a100": 3e28, "h100": 2e28}


# Six rows of the released H100 log (logs/1f1b_latency_dense_superpod_comparison.txt @ 94a35ee, its "H100 SXM"
# section): shape, layout (factors per level, NVLink then InfiniBand), and what the log prints for it.
# (d_model, L, batch tokens, dp, tp_model, tp_ff, pp, i, m, util, months, TP months, DP months, latency months)
RELEASED_H100_ROWS = (
    (12288, 192, 7340032, (1, 128), (1, 1), (8, 1), (1, 1), 1, 1, 0.700, 3.46, 0.506, 0.553, 0.001),
    (28672, 384, 14680064, (8, 256), (1, 1), (1, 8), (1, 8), 48, 8, 0.681, 3.29, 1.808, 0.916, 0.015),
    (49152, 576, 25165824, (1, 1024), (8, 1), (1, 8), (1, 32), 18, 32, 0.641, 4.26, 1.850, 1.462, 0.097),
    (61440, 640, 29360128, (1, 1024), (8, 1), (1, 16), (1, 64), 10, 64, 0.590, 3.48, 1.998, 0.945, 0.160),
    (81920, 768, 37748736, (1, 1024), (8, 2), (1, 16), (1, 128), 6, 128, 0.515, 4.54, 2.374, 0.836, 0.447),
    (106496, 1024, 50331648, (1, 1024), (8, 4), (1, 32), (1, 256), 4, 256, 0.315, 4.71, 2.548, 0.398, 1.007),
)
# Four H100 rows printed by the newest stored notebook (optimal_parallelism.ipynb @ 3a871bed, first output cell),
# which runs DP in its own phase as we do: same fields as RELEASED_H100_ROWS except PP months, kept out here.
NEWEST_H100_ROWS = (
    (12288, 192, 7340032, (1, 16), (4, 1), (2, 4), (1, 2), 96, 2, 0.680, 3.56, 3.108, 0.065, 0.003),
    (40960, 512, 20971520, (1, 256), (8, 1), (1, 16), (1, 32), 16, 32, 0.562, 3.70, 3.031, 0.333, 0.064),
    (49152, 576, 25165824, (2, 256), (4, 2), (1, 16), (1, 32), 18, 32, 0.559, 4.88, 3.965, 0.405, 0.136),
    (53248, 576, 25165824, (1, 256), (2, 4), (4, 8), (1, 64), 9, 64, 0.518, 3.62, 2.727, 0.251, 0.205),
)
RELEASED_V100_ROW = (28672, 384, 14680064, (1, 1024), (8, 1), (1, 8), (1, 8), 48, 8, 0.877, 5.04)
"""logs/base_comparison.txt @ d4833dc, "V100 SXM" section, the 7.65e26 FLOP row: same fields as above, to months."""


def _log_row(d: int, n_l: int, b: int, dp, tpm, tpff, pp, i: int, m: int):
    """(workload, layout) of a logged row: dense, d_ff = 4 d_model, Chinchilla tokens, 1F1B, the row's placement
    (each degree's factors per network level)."""
    from planner.schema import Layout, Workload

    wl = Workload(d_model=d, d_ff=4 * d, layers=n_l, experts=1, batch_tokens=b, tokens=20 * 8 * n_l * d * d)
    lay = Layout(dp=math.prod(dp), tp_ff=math.prod(tpff), tp_model=math.prod(tpm), pp=math.prod(pp), interleave=i,
                 ep=1, microbatches=m, schedule="1f1b",
                 placement={"dp": dp, "tp_ff": tpff, "tp_model": tpm, "pp": pp, "ep": (1, 1)})
    return wl, lay


def same_layout_section() -> str:
    """Price the released log's own layouts with our cost model: as shipped, and with the released code's
    5 us latency and overlapped DP."""
    from paper_search import released_hardware

    from planner.api import resolve_hardware
    from planner.cost.step import evaluate

    month = 365.25 / 12 * 86400
    hw = resolve_hardware("h100")
    hw5 = released_hardware(hw)
    L: list[str] = []
    w = L.append
    w("### The same layouts priced by both models\n")
    w("Six rows of the released H100 log (`logs/1f1b_latency_dense_superpod_comparison.txt`, commit 94a35ee), "
      "priced by our cost model on the log's own shape and layout (1F1B, its `i` and `m`, its placement). "
      "'Matched' uses the released code's two settings that differ from ours: 5 µs per network level and DP "
      "overlapped with compute. Months are 365.25/12 days; component times are per run. The last column is "
      "the GEMM time over the arithmetic-only time at the sustained clock: ours from our model, the log's "
      "back-computed by us from its printed totals as (months − latency) x (1 − bubble fraction), shown only where "
      "that exceeds the log's overlapped communication.\n")
    w("| d_model | L | layout (dp, tp_ff, tp_model, pp, i, m) | nanobatch | log MFU | ours, matched | "
      "ours, as shipped | TP months log / ours | DP months log / ours | latency months log / ours | "
      "GEMM time / arithmetic time, log / ours |")
    w("|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for d, n_l, b, dp, tpm, tpff, pp, i, m, util, months, ltp, ldp, llat in RELEASED_H100_ROWS:
        wl, lay = _log_row(d, n_l, b, dp, tpm, tpff, pp, i, m)
        matched, shipped = evaluate(hw5, wl, lay, dp_overlap=True), evaluate(hw, wl, lay)
        steps = wl.tokens / b
        st = matched.step
        ratios.append(matched.mfu / util)
        # Arithmetic alone at the sustained clock, per run; the log's GEMM time is its pipelined term with the
        # latency and bubble taken out, when that term is above its overlapped communication (else GEMMs hide).
        arith = 6.0 * wl.active_params * wl.tokens / (lay.gpus * hw.gpu.sustained_flops) / month
        f_b = (lay.pp - 1) / (lay.pp - 1 + i * m)
        log_term = (months - llat) * (1 - f_b)
        log_gemm = f"{log_term / arith:.2f}" if log_term > 1.02 * (ltp + ldp + 0.1) else "hidden by comm."
        ours_gemm = st.matmul_s * steps / month / arith
        w(f"| {d} | {n_l} | {lay.dp}, {lay.tp_ff}, {lay.tp_model}, {lay.pp}, {i}, {m} | {b // (lay.dp * m)} | "
          f"{util:.3f} | {matched.mfu:.3f} | {shipped.mfu:.3f} | {ltp:.3f} / {st.tp_s * steps / month:.3f} | "
          f"{ldp:.3f} / {st.dp_s * steps / month:.3f} | {llat:.3f} / {st.latency_s * steps / month:.3f} | "
          f"{log_gemm} / {ours_gemm:.2f} |")
    w("")
    w("The newest stored notebook (@ 3a871bed) runs DP in its own phase, as we do, so only the latency needs "
      "matching there. Four of the H100 rows it prints, priced the same way:\n")
    w("| d_model | L | layout (dp, tp_ff, tp_model, pp, i, m) | its MFU | ours (5 µs) | months, its / ours | "
      "TP months, its / ours | DP months, its / ours |")
    w("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for d, n_l, b, dp, tpm, tpff, pp, i, m, util, months, ltp, ldp, _llat in NEWEST_H100_ROWS:
        wl, lay = _log_row(d, n_l, b, dp, tpm, tpff, pp, i, m)
        ev = evaluate(hw5, wl, lay)
        steps = wl.tokens / b
        worst = max(worst, abs(ev.mfu / util - 1))
        w(f"| {d} | {n_l} | {lay.dp}, {lay.tp_ff}, {lay.tp_model}, {lay.pp}, {i}, {m} | {util:.3f} | {ev.mfu:.3f} | "
          f"{months:.2f} / {ev.training_s / month:.2f} | {ltp:.3f} / {ev.step.tp_s * steps / month:.3f} | "
          f"{ldp:.3f} / {ev.step.dp_s * steps / month:.3f} |")
    w("")
    w(f"The MFU agrees within {worst:.1%}. The TP and DP times differ only where that degree spans both network "
      "levels, because the simulator sums the levels' bandwidth times; where only TP differs, TP is hidden behind "
      "the GEMMs and the MFU does not move. So the newest stored simulator and our cost model "
      "price a layout the same way, up to that sum and the latency constant.\n")
    d, n_l, b, dp, tpm, tpff, pp, i, m, v_util, v_months = RELEASED_V100_ROW
    wl, lay = _log_row(d, n_l, b, dp, tpm, tpff, pp, i, m)
    v_ev = evaluate(released_hardware(resolve_hardware("v100")), wl, lay, dp_overlap=True)
    w(f"With the two settings matched, our MFU is {min(ratios):.2f}-{max(ratios):.2f}x the log's on the same "
      "layout. The network terms agree to the printed digits wherever a degree sits on one network level; where "
      "one spans both levels (DP in row 2, tp_model in rows 5-6) the log's is larger, because it sums the levels' "
      "bandwidth times where App. 8.1.2 and SPEC §5.2 overlap them. The rest of the gap is GEMM time (last "
      "column: time over arithmetic-only time at the sustained clock): the log's GEMMs run close to the "
      "arithmetic down to small nanobatches, while our GEMM model, whose byte counts follow `gpu/gpu_model.py` "
      "@ 00b203e, has the shared-memory traffic bind above the arithmetic, more so the smaller the nanobatch. "
      "On a GPU without distributed shared memory the two agree: for a DGX-1 row of `logs/base_comparison.txt` "
      f"(d_model {d}, L {n_l}, {lay.gpus:,} V100s, 1F1B i={i}, m={m}, nanobatch {b // (lay.dp * m)}) the matched "
      f"evaluation gives MFU {v_ev.mfu:.3f} and {v_ev.training_s / month:.2f} months against the log's "
      f"{v_util:.3f} and {v_months:.2f}. The H100 log was therefore written by a GEMM model that differs from the "
      "current `gpu_model.py` on Hopper; we have not identified the term (turning distributed shared memory off "
      "makes ours slower still, 1.35x instead of 1.09x on row 3's GEMMs). So on a given layout our model is, if "
      "anything, *more* pessimistic than the "
      "code that produced the logs. Our later ends of linear scaling come from the search (ZB-H2, microbatch "
      "counts, GPU counts that are not `E·2^k`), not from cheaper layouts.\n")
    return "\n".join(L)


def released_logs_section(res) -> str:
    L: list[str] = []
    w = L.append
    w("## What the paper's released simulator logs say\n")
    w("We read the paper's public repository, `ege-erdil/limits_to_distributed_training` (`logs/*.txt` and six "
      "of the stored versions of `optimal_parallelism.ipynb` and `gpu/gpu_model.py`). Applying the paper's own "
      "rule (linear scaling ends where MFU < 0.8 x the sustained-clock ceiling) to the *dense* logs "
      "(`logs/base_comparison.txt`, `logs/grand_comparison_dense.txt`), the threshold is crossed at about "
      "**1.5e29 FLOP for H100, ~5e28 for V100 and ~1e29 for A100**, 3-17x later than the printed Table 3 (2e28, "
      "3e27, 3e28). The newest stored notebook (commit 3a871bed) prints dense H100 rows whose MFU first falls below "
      "0.56 at **1.49e28 FLOP** (0.559, after 0.562-0.570 at 5.7e27-8.3e27), near the printed 2e28; its runs last "
      "3.6-4.9 months. What the stored code does, against the paper's text:\n")
    w("- a **6-month** deadline: every main cell of every version read sets `years=0.5`, and the logged runs last "
      "3.0-6.0 months (cluster sizes double from one candidate to the next). The text says three months;")
    w("- **1F1B only** (`zero_bubble_pp = False` in every main cell), with interleaving `i = L/N_PP` (one layer "
      "per virtual stage) and `m` the smallest divisor of `b/(E·N_DP)` that is at least `N_PP`;")
    w("- **5 µs** per network level in every version of `gpu/gpu_model.py` we could read (SPEC §4 and our hardware "
      "files use 1.125 µs per level, from commit b1f771c, which we could not open);")
    w("- DP **overlapped** with compute inside the bubble term in the older versions (those that wrote the logs); "
      "the newest version runs DP in its own phase, as SPEC §5.2 does;")
    w("- network bandwidth time **summed** over levels (App. 8.1.2's text, and SPEC §5.2, take the max);")
    w("- clusters restricted to **`E·2^k` GPUs**, `N_TP,ff` to `[isqrt(N_TP), 4·isqrt(N_TP)]` and `N_EP` to "
      "`gcd(N, E)` (we allow any divisor, SPEC §6); memory checked for the whole cluster without activations.\n")
    w("| hardware | paper, Table 3 (printed) | ours | paper's released logs (approx.) | ours between the two? | "
      "SPEC §8 verdict (x2 of printed) |")
    w("|---|---|---|---|---|---|")
    betweens = []
    for hw, printed in PAPER_TABLE3_DENSE.items():
        logs = RELEASED_LOGS_END[hw]
        end = None
        if res is not None and hw in res.hardware:
            end = res.summary(hw).end_of_linear_scaling_flop
        between = "—" if end is None else ("yes" if printed <= end <= logs else
                                           ("no (below both)" if end < printed else "no (above both)"))
        betweens.append((hw, between))
        w(f"| {hw} | {_sci(printed, 1)} | {_sci(end)} | {_sci(logs)} | {between} | "
          f"{_verdict(end, printed, 2.0)} |")
    w("")
    if betweens and all(b == "yes" for _, b in betweens):
        lead = ("**Conclusion.** Our dense Table 3 numbers fall between the paper's printed table and its released "
                "logs on all three GPUs.")
    else:
        lead = ("**Conclusion.** Our dense Table 3 numbers fall between the paper's printed table and its released "
                "logs on " + (", ".join(h for h, b in betweens if b == "yes") or "none") + " of the GPUs (see the "
                "table for the others).")
    w(lead + " We have **not** tuned the model toward either. It implements "
      "the paper's text and SPEC §5 as written, and the differences are listed below. SPEC §8's tolerances are "
      "stated against the printed table, so the verdicts above and in the Table 3 section are against the "
      "printed values. A failing row is a documented difference, not a fitted one.\n")
    w(same_layout_section())
    return "\n".join(L)


def differences(sweeps) -> str:
    one_gpu = ""
    r = sweeps.get("table3-dense")
    if r is not None:
        parts = []
        for hw in r.hardware:
            p = r.plans_for(hw)[0]
            if p.mfu is not None:
                parts.append(f"{hw} {p.mfu:.3f}")
        if parts:
            one_gpu = (f" At the first grid point ({_sci(r.compute_flop[0])} FLOP, well inside linear scaling) our "
                       f"MFUs are {', '.join(parts)}, against ceilings 0.90 / 0.85 / 0.70.")
    sched = ""
    lays = [p.layout for key, res in sweeps.items() if res is not None and BY_KEY[key].schedule == "auto"
            for p in res.plans if p.layout is not None and p.status in ("optimal", "feasible")]
    if lays:
        zb = [x for x in lays if x.schedule == "zb-h2"]
        ratios = sorted(x.microbatches / x.pp for x in zb) if zb else []
        sched = (f" Across the finished sweeps that search both schedules, {len(zb)} of {len(lays)} plans use ZB-H2"
                 + (f" (m/N_PP from {ratios[0]:.3g} to {ratios[-1]:.3g}, median {ratios[len(ratios) // 2]:.3g})"
                    if ratios else "")
                 + f"; the other {len(lays) - len(zb)} use 1F1B"
                 + f" ({sum(x.schedule != 'zb-h2' and x.interleave > 1 for x in lays)} of them interleaved).")
    ratios = [p.workload.compute_flop / p.workload.requested_compute_flop for res in sweeps.values()
              if res is not None for p in res.plans if p.workload.requested_compute_flop]
    rounding = (f"from {min(ratios):.2f}x to {max(ratios):.2f}x the requested grid value" if ratios
                else "from the requested grid value")
    return (DIFFERENCES.replace("{ONE_GPU}", one_gpu).replace("{SCHED}", sched)
            .replace("{ROUNDING}", rounding))


DIFFERENCES = """## Why our numbers differ from the paper's

Each item says what differs, which way it pushes our numbers, and where it matters most; the items are
mechanisms, and together they do not account for every miss quantitatively (replaying the paper's own search,
for one, still misses the V100 and sparse curves). "Released code" means the paper's public simulator
(`ege-erdil/limits_to_distributed_training`), described under "What the paper's released simulator logs say";
where its stored versions differ, the item says which.

1. **The latency floor (SPEC §5.4).** Our step is never shorter than the DP phase plus the critical path of one
   microbatch through all `L` blocks, forward and backward: the `4·L` serial GEMMs at the nanobatch's matmul time
   (times the experts a GPU runs one after another), plus every serial TP, PP and EP latency on that path. The
   paper's text lets zero-bubble schedules hide all non-DP latency behind other microbatches. Taken alone, the
   floor lowers our MFU near the latency wall and moves our wall earlier than a model without it. The net
   effect is not that direction: our dense H100 wall is later than the paper's 2e31, mostly because of the
   latency constant (item 8; the wall section gives the wall at 5 µs). If the paper's runs were 1F1B only, as
   its stored code is, zero-bubble latency hiding never entered its printed numbers.
2. **1F1B latency accounting.** The paper says only that latencies count by their serial occurrences. Under
   1F1B we charge each GPU `m/N_PP` times one microbatch's serial TP/PP/EP latency path (its share of the
   layers, for every microbatch), plus the DP all-reduce latency once per step (docs/model.md §4). The
   released code charges one microbatch's path per step. The two coincide when `m = N_PP`, which is what its
   search picks on the logged rows, and there our latency times match its logged ones to the printed digits
   ("The same layouts priced by both models"). They part whenever `m ≠ N_PP`: our 1F1B plans often use fewer
   or more microbatches than stages, and for those the match is not verified.
3. **ZB-H2 with many microbatches is searched.** We search both 1F1B (any interleaving with `N_PP·i | L`) and
   zero-bubble ZB-H2 (`m ≥ 2·N_PP − 1`) with any microbatch count the batch divides into. The optimum is
   usually ZB-H2 with `m` at least `2·N_PP` (e.g. 2e28 FLOP on H100: pp 192, m 384), so it has no
   bubble.{SCHED} The released code uses 1F1B only, with `i = L/N_PP` and `m` the smallest divisor of
   `b/(E·N_DP)` that is at least `N_PP`. Searching ZB-H2 pushes our MFU up and our ends of linear scaling
   later (see "Sensitivity: Table 3 with 1F1B only" for how much, curve by curve). The latency floor (item 1) is
   what stops ZB-H2 from hiding latency without limit.
4. **Shapes rounded to hardware-friendly numbers; actual vs requested compute (SPEC §3).** `d_model`, `L` and
   `E` are rounded to `f·2^k`, `f ∈ {1,3,5,7,9}`, and the batch to a friendly multiple of `E`. The trained
   compute therefore ranges {ROUNDING} across these sweeps (2e28 requested trains 1.487e28, for instance), and
   neighbouring grid points can round to the same shape. The x axis and the tables use the *requested*
   compute; MFU uses the *actual* compute (both are in the per-point tables). Rounding also changes `b/L`, which
   the bounds depend on quadratically (Eq. 13), so the curves jitter from point to point. That moves an
   interpolated crossing by up to a fraction of a grid step.
5. **GPU counts not restricted to powers of two (SPEC §6).** Degrees are any divisors the shape allows (e.g.
   `tp_model = 3`, `pp = 192`), and `N_TP,ff` / `N_TP,model` may be split in any ratio. The objective is the
   fewest GPUs that meet the deadline, then the least step time. The released code allows only `E·2^k` GPUs,
   `N_TP,ff ∈ [isqrt(N_TP), 4·isqrt(N_TP)]` and `N_EP = gcd(N, E)`. Our space is not simply larger (our memory
   constraint, item 6, removes layouts it accepts), and fewer GPUs do not by themselves mean a higher MFU, since
   the run may then take longer; "The paper's own search space, replayed" measures the effect.
6. **Memory capacity is a constraint here (SPEC §5.5), not in the paper.** Weights, gradients, ZeRO-1 optimizer
   state, activations of the microbatches in flight (1F1B `N_PP`, ZB-H2 `2·N_PP − 1`) and a 2 GB reserve must fit
   in HBM. This rules out layouts with little model parallelism, especially at small scale, on the 32 GB V100,
   and for sparse models with their large expert weights. It can force more GPUs or more model parallelism than
   the paper would choose, which lowers MFU.
7. **Our GEMM byte model (SPEC §5.1).** Three-interface tiling (HBM↔L2, L2↔shared memory, shared
   memory↔registers) with 75 % occupancy, padding to multiples of 8, Hopper DSMEM multicast and a 4.5 µs kernel
   latency. For the H100 49152×12288 weight at 8192 tokens this gives **14.91 ms**, against the ≈ 14.3 ms SPEC
   quotes, which is the compute term alone (14.29 ms). Our shared-memory term binds by about 4 % (docs/model.md
   §1).{ONE_GPU} The released code pads to 16 and pads only the FLOP count; otherwise the newest stored
   `gpu_model.py` counts bytes as we do. The version that wrote the H100 logs did not: on the logged layouts our
   GEMMs take longer than their arithmetic alone, the more so the smaller the nanobatch (the tokens one GEMM
   sees, `b/(E·N_DP·m)`), while the GEMM times implied by the logs stay close to it ("The same layouts priced by
   both models"). Against those logs, this makes our MFU lower on the same layout.
8. **Network latency 1.125 µs per level (SPEC §4).** SPEC §4 attributes this value to the simulator's commit
   b1f771c, which we could not open to verify. Every stored version of `gpu/gpu_model.py` we could read (e.g.
   00b203e, 3a871bed) uses 5 µs per level. The smaller latency moves our latency wall *later* (5 µs: see the
   wall section) and leaves Table 3 unchanged (see "Sensitivity: Table 3 at 5 µs per network level").
9. **Bandwidth time is the max over network levels (App. 8.1.2's text, SPEC §5.2),** and latencies add. The
   released code sums the bandwidth times over levels. That makes its hierarchical collectives slower than ours
   and, taken alone, would make its curves bend *earlier*.
10. **DP in its own phase.** We do not overlap the DP all-reduce with compute (SPEC §5.2 default; `--dp-overlap`
    exists). The older stored versions of the released code (those that wrote the logs) overlap DP inside the
    bubble term, which is more optimistic at large DP; the newest stored version runs DP in its own phase, like
    ours.
11. **Finite search time.** Each plan had a CP-SAT time limit (see "Solver proofs" above). A point that hit it
    is either `feasible` (a layout not proven optimal, possibly with too many GPUs, so its MFU is a lower bound
    on the model's) or "no plan (time limit)" (not proven infeasible). A "no plan" point *below* the last
    feasible point is a gap the crossing interpolates over. One *above* it means the wall is bounded only from
    below.
12. **Grid resolution and jitter.** The end of linear scaling is interpolated in log compute between grid
    points a fraction of a decade apart, on the non-increasing fit (top of this page). Near the knee the
    jitter of item 4 is as large as the decline between neighbouring points, so the crossing is uncertain to
    about a grid step either way (a factor of about 1.5 at 6 points per decade). An earlier run of this
    document at 2 points per decade, read off the raw points, gave dense V100 6.6e27, H100 5.7e28 and sparse
    V100 7.5e27: the same curves, sampled differently.
13. **Three-month runs and the 80 % line.** We use exactly 365.25/4 = 91.3125 days and 0.8 × the
    sustained-clock factor, as the paper defines them. Our "ceiling" is the clock factor itself, not the
    (slightly lower) MFU our GEMM model gives one GPU (item 7). The threshold is therefore marginally stricter
    than "80 % of what one GPU achieves". The paper's stored code runs six-month deadlines ("What the paper's
    released simulator logs say").
14. **Table 4's low-latency scenarios divide every latency by ten,** network and kernel alike, as §6.3.1 says.
    The stored code's matching GPU objects (`H100_SXM5_Zero_Latency`, `H100_SXM5_Global_NVLink_Zero_Latency`,
    `H100_SXM5_Infinite_Network_Zero_Latency` in `gpu/gpu_model.py`) set both to zero instead. Zero latency can
    only raise MFU, so it would move those curves later still; it does not explain our rows that land later than
    the printed ones.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points-per-decade", type=float, default=3.0, help="grid density (default 3)")
    ap.add_argument("--points", type=int, default=None, help="alternative: total points per scenario")
    ap.add_argument("--jobs", type=int, default=2, help="plans solved in parallel (default 2)")
    ap.add_argument("--time-limit", type=float, default=30.0, help="CP-SAT time limit per plan, s (default 30)")
    ap.add_argument("--only", action="append", choices=sorted(BY_KEY), help="run only these scenarios")
    ap.add_argument("--doc-only", action="store_true", help="no sweeps: rewrite the document from the cache")
    ap.add_argument("--run-only", action="store_true", help="run the sweeps, do not write the document")
    ap.add_argument("--paper-search", action="store_true",
                    help="no sweeps: replay the paper's own search space for Table 3 (benchmarks/paper_search.py), "
                         "cache it, then write the document")
    ap.add_argument("--retry-unproven", type=float, default=None, metavar="SECONDS",
                    help="no sweeps: re-solve the cached time-limited points that decide a scenario's numbers with "
                         "this longer time limit (with --only: those scenarios), then write the document")
    a = ap.parse_args(argv)
    if a.paper_search:
        run_paper_search(a.points_per_decade)
    elif a.retry_unproven:
        for s in SCENARIOS:
            if not a.only or s.key in a.only:
                retry_unproven(s, a.retry_unproven)
    elif not a.doc_only:
        for s in SCENARIOS:
            if a.only and s.key not in a.only:
                continue
            per_decade = a.points_per_decade
            if a.points:
                per_decade = (a.points - 1) / math.log10(s.compute_to / s.compute_from)
            run_scenario(s, per_decade, a.jobs, a.time_limit * s.time_limit_factor)
    if not a.run_only:
        write_doc(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
