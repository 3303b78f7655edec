"""How much of the decision CP-SAT makes, and what it costs: this search against the previous split.

For each instance (inferred shapes, 90-day deadline, h100 and h100-superpod, dense and sparse) it runs the current
search in this process and reports: wall time; presolve (windows, bounds, tables, model building) and the time
inside CP-SAT's solves; CP-SAT's share of the search; the models solved; and the degree tuples and (tuple, factor
vector) pairs inside the model that made the decision.

With `--baseline DIR` (a checkout of commit 838bc3c, the last version whose search priced whole layouts with numpy
and gave CP-SAT only the survivors), the same instance is also solved there, in a subprocess, with its CP-SAT proof
timed by wrapping `_prove`: wall time, pricing / proof split, and the survivors the old CP-SAT model saw. Both
answers are re-priced here with the float model and compared (GPUs and step time).

Then `plan --compute 1e28 --gpu h100 --days 90` is timed as a whole process, five times.

`--placement-free` presolves with the placement-free bound only (no branch-wise bound), so that the CP-SAT models
hold every tuple that bound leaves: the variant that leaves the most to CP-SAT.

Usage:
    python benchmarks/cpsat_decides.py [--baseline DIR] [--quick] [--markdown] [--placement-free]
      (make a baseline with: git worktree add /tmp/baseline 838bc3c)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from planner.cost.step import evaluate
from planner.hardware import get_hardware
from planner.parallel.space import SearchOptions
from planner.schema import Layout
from planner.search.cpsat import solve_cpsat
from planner.workload import infer_workload

DAYS = 90.0
INSTANCES = [(c, s, h) for h in ("h100", "h100-superpod") for s in (False, True)
             for c in (1e22, 1e24, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31)]
QUICK = [(1e24, False, "h100"), (1e26, False, "h100"), (1e28, False, "h100"), (1e28, True, "h100"),
         (1e28, False, "h100-superpod")]

_BASELINE_CHILD = r"""
import json, sys, time
from planner.solve import cpsat as cp_mod  # the previous layout of the package
from planner.hardware import get_hardware
from planner.workload import infer_workload
from planner.solve.space import SearchOptions
box = {}
orig = cp_mod._prove
def timed(hw, wl, t, terms, tables, *a, **k):
    box["survivors"] = len(t); box["pairs"] = sum(len(x.tup) for x in tables.values())
    t0 = time.perf_counter()
    try:
        return orig(hw, wl, t, terms, tables, *a, **k)
    finally:
        box["proof_s"] = time.perf_counter() - t0
cp_mod._prove = timed
c, sparse, hw_name = float(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
days, limit = float(sys.argv[4]), float(sys.argv[5])
hw, wl = get_hardware(hw_name), infer_workload(c, sparse=sparse, budget="paper")
t0 = time.perf_counter()
r = cp_mod.solve_cpsat(hw, wl, SearchOptions(), days * 86400.0, time_limit_s=limit)
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "status": r.status, "layout": None if r.layout is None else r.layout.model_dump(),
                  **box}))
"""


def run_baseline(baseline: Path, compute: float, sparse: bool, hw_name: str, limit: float) -> dict | None:
    env = dict(os.environ, PYTHONPATH=str(baseline))
    proc = subprocess.run([sys.executable, "-c", _BASELINE_CHILD, repr(compute), "1" if sparse else "0", hw_name,
                           repr(DAYS), repr(limit)], capture_output=True, text=True, env=env, cwd=baseline,
                          timeout=limit + 120)
    if proc.returncode:
        print(proc.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_instance(compute: float, sparse: bool, hw_name: str, baseline: Path | None, limit: float) -> dict:
    hw, wl = get_hardware(hw_name), infer_workload(compute, sparse=sparse, budget="paper")
    t0 = time.perf_counter()
    r = solve_cpsat(hw, wl, SearchOptions(), DAYS * 86400.0, time_limit_s=limit)
    wall = time.perf_counter() - t0
    row = {"compute": compute, "hw": hw_name, "kind": "sparse" if sparse else "dense", "wall_s": wall,
           "status": r.status, "presolve_s": r.presolve_s, "cpsat_s": r.cpsat_s, "models": r.cpsat_models,
           "tuples": r.cpsat_tuples, "pairs": r.cpsat_pairs, "rank": r.cpsat_bound_rank, "gpus": None,
           "step_s": None}
    if r.layout is not None:
        ev = evaluate(hw, wl, r.layout)
        row.update(gpus=ev.gpus, step_s=ev.step.step_s)
    if baseline is not None:
        old = run_baseline(baseline, compute, sparse, hw_name, limit)
        row["old"] = old
        if old is not None and old.get("layout"):
            ev = evaluate(hw, wl, Layout(**old["layout"]))
            row["agree"] = (ev.gpus == row["gpus"] and row["step_s"] is not None
                            and abs(ev.step.step_s - row["step_s"]) <= 1e-12 * row["step_s"])
    return row


def fmt(rows: list[dict], with_old: bool) -> str:
    head = ["compute", "hardware", "kind", "GPUs", "wall", "presolve / in CP-SAT (s)", "CP-SAT share", "models",
            "deciding model: tuples / pairs", "lower bounds than the choice"]
    if with_old:
        head += ["previous: wall", "previous: pricing / proof (s)", "previous: tuples / pairs in CP-SAT",
                 "same optimum"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [f"{r['compute']:.0e}", r["hw"], r["kind"], f"{r['gpus']:,}" if r["gpus"] else r["status"],
                 f"{r['wall_s']:.2f} s", f"{r['presolve_s']:.2f} / {r['cpsat_s']:.2f}",
                 f"{r['cpsat_s'] / max(r['wall_s'], 1e-9):.0%}", str(r["models"]),
                 f"{r['tuples']:,} / {r['pairs']:,}", str(r["rank"]) if r["rank"] >= 0 else "-"]
        if with_old:
            o = r.get("old")
            if o is None:
                cells += ["failed", "", "", ""]
            else:
                proof = o.get("proof_s", 0.0)
                cells += [f"{o['wall_s']:.2f} s", f"{o['wall_s'] - proof:.2f} / {proof:.2f}",
                          f"{o.get('survivors', 0):,} / {o.get('pairs', 0):,}",
                          "yes" if r.get("agree") else "NO"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def time_plan_process(runs: int = 5) -> list[float]:
    exe = Path(sys.executable).with_name("plan")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "planner.cli"]
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd + ["--compute", "1e28", "--gpu", "h100", "--days", "90", "--json"], check=True,
                       capture_output=True)
        walls.append(time.perf_counter() - t0)
    return walls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, help="checkout of the previous search (commit 838bc3c)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--limit", type=float, default=120.0, help="time limit per search (s)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--placement-free", action="store_true",
                    help="presolve with the placement-free bound only (cpsat.BRANCH_BOUNDS = False)")
    args = ap.parse_args()
    if args.placement_free:
        from planner.search import cpsat

        cpsat.BRANCH_BOUNDS = False
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}", flush=True)
    rows = []
    for c, s, h in (QUICK if args.quick else INSTANCES):
        rows.append(run_instance(c, s, h, args.baseline, args.limit))
        if not args.markdown:
            print(rows[-1], flush=True)
    print(fmt(rows, args.baseline is not None))
    walls = time_plan_process()
    print(f"\nplan --compute 1e28 --gpu h100 --days 90 --json, whole process: "
          f"{', '.join(f'{w:.2f}' for w in walls)} s (median {sorted(walls)[len(walls) // 2]:.2f} s)")


if __name__ == "__main__":
    main()
