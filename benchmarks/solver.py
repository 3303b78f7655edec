"""CP-SAT versus the exhaustive enumerator (docs/benchmarks.md), on two ladders, plus the `plan` process time.

Ladder 1, inferred shapes: 1e22 ... 1e31 FLOP, dense and sparse, on h100 and h100-superpod, 90-day deadline. The
enumerator cannot finish these (hours each), so the ratio there is only a lower bound.

Ladder 2, mid-size explicit shapes (workload_from_shape, d_ff = 4 d_model; SHAPES below) on h100 and
h100-superpod, each in fixed-cluster mode (--gpus TARGET_GPUS) and in deadline mode (deadline = 1.5 x the training
time of the fixed-cluster optimum, so the answer is a mid-size cluster). Here the enumerator finishes, so the
ratio and the agreement of the optima are measured.

Ladder 3, inferred shapes in fixed-cluster mode: the ladder-1 shapes at FIXED_COMPUTES, each with --gpus set to
the GPU count of its own 90-day deadline-mode optimum (found by CP-SAT first, in the same run). The enumerator
then prices only that GPU count, so it finishes even at 1e28-1e30 FLOP: the large instances (>= 1e28 FLOP)
where the ratio and the agreement are measured, not bounded.

Both searches run in the same process, one after the other, and the table reports:

- the space size (degree tuples; placements are counted separately by the searches),
- CP-SAT wall time, split into presolve (windows, bounds, tables, model building) and the time inside CP-SAT's
  solves (SearchResult.cpsat_s), status, and candidates / pairs (degree tuples and (tuple, factor vector) pairs of
  the CP-SAT model that made the decision),
- exhaustive wall time, or "did not finish in X s" with the fraction of its chunks completed (chunks are slices
  of the (N_DP, m) list; they are not equal in cost, so the fraction is only indicative). The enumerator checks
  its time limit per sub-batch; it still runs in a forked process that is terminated at the limit (+1 s) as a guard,
- the ratio exhaustive / CP-SAT (a lower bound on the ratio when the enumerator was stopped),
- whether the optima agree (GPU count and float step time, both re-priced with planner.cost.step.evaluate).

Then `plan --compute 1e28 --gpu h100 --days 90 --json` is timed as a whole process (target: 1.5 s, issue 10).

Usage:
    python benchmarks/solver.py [--quick] [--ladder inferred|shapes|fixed|all] [--exhaustive-limit S]
                                [--shape-exhaustive-limit S] [--fixed-exhaustive-limit S] [--cpsat-limit S]
                                [--markdown] [--no-plan]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from planner.cost.step import evaluate
from planner.hardware import get_hardware
from planner.parallel.space import SearchOptions, build_space, model_parallel_rows
from planner.search import exhaustive as exh_mod
from planner.search.cpsat import solve_cpsat
from planner.workload import infer_workload, workload_from_shape

DAYS = 90.0
COMPUTES = [1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31]
FIXED_COMPUTES = [1e22, 1e24, 1e26, 1e28, 1e30]
QUICK = [(1e22, False, "h100"), (1e25, True, "h100"), (1e28, False, "h100"), (1e24, False, "h100-superpod")]


def _exhaustive_child(conn, counter, hw, wl, opts, deadline_s, limit):
    """Runs in a forked process; the parent terminates it at the limit (+1 s) in case a sub-batch overruns."""
    orig = exh_mod.tuples_for_model_parallel

    def counting(*args, **kwargs):  # one call per chunk
        with counter.get_lock():
            counter.value += 1
        return orig(*args, **kwargs)

    exh_mod.tuples_for_model_parallel = counting
    res = exh_mod.solve_exhaustive(hw, wl, opts, deadline_s, time_limit_s=limit)
    conn.send(res)


def run_exhaustive(hw, wl, opts, deadline_s, limit):
    """(SearchResult or None if killed at the limit, wall seconds, chunks started)."""
    ctx = mp.get_context("fork")
    counter = ctx.Value("i", 0)
    parent, child = ctx.Pipe(duplex=False)
    t0 = time.perf_counter()
    proc = ctx.Process(target=_exhaustive_child, args=(child, counter, hw, wl, opts, deadline_s, limit))
    proc.start()
    res = parent.recv() if parent.poll(limit + 1.0) else None
    wall = time.perf_counter() - t0
    if res is None:
        proc.terminate()
    proc.join()
    return res, wall, counter.value


def total_chunks(hw, wl, options) -> int:
    space = build_space(hw, wl, options)
    chunk = max(1, 200_000 // max(len(model_parallel_rows(space)["pp"]), 1))
    return math.ceil(len(space.dp_m["dp"]) / chunk)


def run_instance(compute: float, sparse: bool, hw_name: str, exh_limit: float, cp_limit: float) -> dict:
    wl = infer_workload(compute, sparse=sparse, budget="paper")
    row = run_case(get_hardware(hw_name), wl, SearchOptions(), DAYS * 86400.0, exh_limit, cp_limit)
    row.update(compute=f"{compute:.0e}", hw=hw_name, kind="sparse" if sparse else "dense")
    return row


def run_case(hw, wl, opts: SearchOptions, deadline_s, exh_limit: float, cp_limit: float) -> dict:
    cp = solve_cpsat(hw, wl, opts, deadline_s, time_limit_s=cp_limit, workers=2)
    prove_s, survivors, pairs = cp.cpsat_s, cp.cpsat_tuples, cp.cpsat_pairs
    ex, ex_wall, started = run_exhaustive(hw, wl, opts, deadline_s, exh_limit)
    n_chunks = total_chunks(hw, wl, opts)
    finished = ex is not None and ex.status in ("optimal", "infeasible")
    # chunks completed: all of them if it finished; if stopped (by its own limit or killed), the one in progress
    # did not complete
    done = n_chunks if finished else max(started - 1, 0)

    def priced(res):
        if res is None or res.layout is None:
            return None
        ev = evaluate(hw, wl, res.layout, dp_overlap=opts.dp_overlap)
        return ev.gpus, ev.step.step_s

    pc, pe = priced(cp), priced(ex)
    if not finished:
        agree = "n/a (enumerator stopped)"
        if pe is not None and pc is not None and (pe[0], pe[1]) < (pc[0], pc[1] - 1e-8):
            agree = f"NO: partial enumeration found better ({pe[0]} GPUs, {pe[1]:.6g} s)"
    elif cp.status not in ("optimal", "infeasible") or (pc is None) != (pe is None):
        agree = "NO" if cp.status == "optimal" else f"n/a (cpsat {cp.status})"
    elif pc is None:
        agree = "yes (both infeasible)"
    else:
        agree = "yes" if pc[0] == pe[0] and abs(pc[1] - pe[1]) <= 1e-8 else (
            f"NO: cpsat {pc[0]} GPUs {pc[1]:.9g} s, exhaustive {pe[0]} GPUs {pe[1]:.9g} s")
    return {
        "shape": f"d{wl.d_model} L{wl.layers} E{wl.experts} b{wl.batch_tokens}",
        "space": cp.space_size, "cp_s": cp.wall_s, "cp_status": cp.status, "cp_stages": cp.cpsat_status,
        "prove_s": prove_s, "survivors": survivors, "pairs": pairs,
        "modelled": cp.evaluated, "gpus": pc[0] if pc else None, "step_s": pc[1] if pc else None,
        "ex_s": ex.wall_s if finished else ex_wall, "ex_finished": finished, "ex_chunks": (done, n_chunks),
        "ratio": (ex.wall_s if finished else ex_wall) / cp.wall_s if cp.wall_s > 0 else float("nan"),
        "agree": agree, "notes": "; ".join(cp.notes),
    }


# Mid-size explicit shapes (d_model, layers, experts, batch tokens; d_ff = 4 d_model) where the enumerator finishes.
SHAPES = [(512, 8, 1, 2 ** 12), (1024, 16, 1, 2 ** 14), (1024, 16, 4, 2 ** 14), (2048, 24, 1, 2 ** 15),
          (2048, 32, 8, 2 ** 16), (4096, 48, 1, 2 ** 16)]
TARGET_GPUS = 64
"""Fixed-cluster mode: --gpus TARGET_GPUS. Deadline mode: deadline = 1.5 x the training time of the fixed-cluster
optimum, so the answer is a mid-size cluster of at most TARGET_GPUS GPUs."""


def shape_instances():
    out = []
    for hw_name in ("h100", "h100-superpod"):
        for d, layers, experts, b in SHAPES:
            for mode in ("fixed", "deadline"):
                out.append((hw_name, d, layers, experts, b, mode))
    return out


def run_shape(hw_name, d, layers, experts, b, mode, exh_limit, cp_limit) -> dict:
    hw = get_hardware(hw_name)
    wl = workload_from_shape(d, 4 * d, layers, experts, b)
    if mode == "deadline":
        fixed = solve_cpsat(hw, wl, SearchOptions(gpus=TARGET_GPUS), None, time_limit_s=cp_limit, workers=2)
        if fixed.layout is None:
            return None
        step = evaluate(hw, wl, fixed.layout).step.step_s
        deadline_s = 1.5 * step * wl.steps
        opts = SearchOptions()
        label = f"deadline {deadline_s:.3g} s"
    else:
        deadline_s, opts, label = None, SearchOptions(gpus=TARGET_GPUS), f"fixed {TARGET_GPUS} GPUs"
    row = run_case(hw, wl, opts, deadline_s, exh_limit, cp_limit)
    row.update(compute=f"{wl.compute_flop:.1e}", hw=hw_name, kind=label)
    return row


def run_fixed(compute: float, sparse: bool, hw_name: str, exh_limit: float, cp_limit: float) -> dict | None:
    """Ladder 3: the inferred shape at --gpus N, N the deadline-mode optimum's GPU count."""
    hw = get_hardware(hw_name)
    wl = infer_workload(compute, sparse=sparse, budget="paper")
    found = solve_cpsat(hw, wl, SearchOptions(), DAYS * 86400.0, time_limit_s=cp_limit, workers=2)
    if found.layout is None:
        return None
    n = found.layout.gpus
    row = run_case(hw, wl, SearchOptions(gpus=n), None, exh_limit, cp_limit)
    row.update(compute=f"{compute:.0e}", hw=hw_name, kind=f"{'sparse' if sparse else 'dense'}, fixed {n:,} GPUs")
    return row


def fmt_row(r: dict, exh_limit: float) -> list[str]:
    if r["ex_finished"]:
        ex = f"{r['ex_s']:.2f} s"
        ratio = f"{r['ratio']:.1f}x"
    else:
        done, total = r["ex_chunks"]
        ex = f"did not finish in {exh_limit:g} s ({done}/{total} chunks done)"
        ratio = f">{r['ratio']:.1f}x"
    gpus = f"{r['gpus']:,}" if r["gpus"] is not None else "-"
    split = f"{r['cp_s'] - r['prove_s']:.2f} / {r['prove_s']:.2f}"
    surv = f"{r['survivors']:,} / {r['pairs']:,}"
    return [r["compute"], r["hw"], r["kind"], r["shape"], f"{r['space']:,}", f"{r['cp_s']:.2f} s", split,
            r["cp_status"], surv, gpus, ex, ratio, r["agree"]]


HEADER = ["compute", "hardware", "kind", "shape", "space (tuples)", "CP-SAT", "presolve / in CP-SAT (s)", "status",
          "candidates / pairs in the deciding model", "GPUs",
          "exhaustive", "exh/CP-SAT", "optima agree"]


def time_plan(repeats: int = 3) -> list[float]:
    exe = Path(sys.executable).parent / "plan"
    cmd = [str(exe), "--compute", "1e28", "--gpu", "h100", "--days", "90", "--json"]
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        out.append(time.perf_counter() - t0)
        if p.returncode != 0:
            print(f"plan exited {p.returncode}: {p.stderr.strip()[:300]}", file=sys.stderr)
        else:
            import json
            doc = json.loads(p.stdout)
            print(f"  plan run: {out[-1]:.2f} s, status {doc.get('status')}, gpus {doc.get('gpus')}", flush=True)
    return out


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} logical CPUs (nproc), {cpu}, Python {platform.python_version()}"


def print_table(rows, exh_limit, markdown):
    table = [fmt_row(r, exh_limit) for r in rows]
    print()
    if markdown:
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "---|" * len(HEADER))
        for t in table:
            print("| " + " | ".join(t) + " |")
    else:
        widths = [max(len(x) for x in col) for col in zip(HEADER, *table)]
        for t in [HEADER] + table:
            print("  ".join(x.ljust(w) for x, w in zip(t, widths)))
    print(flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few instances only")
    ap.add_argument("--exhaustive-limit", type=float, default=120.0, help="enumerator time limit per instance (s)")
    ap.add_argument("--cpsat-limit", type=float, default=60.0, help="CP-SAT time limit per instance (s)")
    ap.add_argument("--markdown", action="store_true", help="emit a Markdown table")
    ap.add_argument("--ladder", choices=("inferred", "shapes", "fixed", "both", "all"), default="all",
                    help="inferred-shape ladder (1e22..1e31), mid-size explicit shapes, inferred shapes at a fixed "
                         "cluster, both (the first two) or all")
    ap.add_argument("--shape-exhaustive-limit", type=float, default=150.0,
                    help="enumerator time limit per explicit-shape instance (s)")
    ap.add_argument("--fixed-exhaustive-limit", type=float, default=300.0,
                    help="enumerator time limit per fixed-cluster inferred-shape instance (s)")
    ap.add_argument("--no-plan", action="store_true", help="skip timing the plan process")
    args = ap.parse_args(argv)

    print(f"# machine: {machine()}", flush=True)
    if args.ladder in ("inferred", "both", "all"):
        if args.quick:
            instances = QUICK
        else:
            instances = [(c, s, h) for h in ("h100", "h100-superpod") for s in (False, True) for c in COMPUTES]
        print("# inferred-shape ladder, 90-day deadline", flush=True)
        rows = []
        for c, s, h in instances:
            r = run_instance(c, s, h, args.exhaustive_limit, args.cpsat_limit)
            rows.append(r)
            print("  " + " | ".join(fmt_row(r, args.exhaustive_limit)) + f"  [{r['cp_stages']}] {r['notes']}",
                  flush=True)
        print_table(rows, args.exhaustive_limit, args.markdown)
    if args.ladder in ("shapes", "both", "all"):
        print("# mid-size explicit shapes", flush=True)
        rows = []
        for inst in shape_instances():
            r = run_shape(*inst, args.shape_exhaustive_limit, args.cpsat_limit)
            if r is None:
                continue
            rows.append(r)
            print("  " + " | ".join(fmt_row(r, args.shape_exhaustive_limit)) + f"  [{r['cp_stages']}] {r['notes']}",
                  flush=True)
        print_table(rows, args.shape_exhaustive_limit, args.markdown)
    if args.ladder in ("fixed", "all"):
        print("# inferred shapes, fixed cluster at the deadline-mode optimum", flush=True)
        rows = []
        for h in ("h100", "h100-superpod"):
            for sp in (False, True):
                for c in FIXED_COMPUTES:
                    r = run_fixed(c, sp, h, args.fixed_exhaustive_limit, args.cpsat_limit)
                    if r is None:
                        continue
                    rows.append(r)
                    print("  " + " | ".join(fmt_row(r, args.fixed_exhaustive_limit))
                          + f"  [{r['cp_stages']}] {r['notes']}", flush=True)
        print_table(rows, args.fixed_exhaustive_limit, args.markdown)
    if args.no_plan:
        return 0
    print("\n# plan --compute 1e28 --gpu h100 --days 90 --json (whole process, 3 repeats)", flush=True)
    times = time_plan(3)
    print("plan wall times: " + ", ".join(f"{t:.2f} s" for t in times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
