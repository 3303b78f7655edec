"""Extreme but valid inputs: wall time, peak memory and outcome of each, one fresh `plan` process per case.

    python benchmarks/extremes.py [--time-limit 20] [--markdown]

Peak memory is the child's maximum resident set (resource.getrusage(RUSAGE_CHILDREN).ru_maxrss), measured in a
fresh wrapper process per case so that one case's peak does not mask the next. Results go to docs/benchmarks.md,
section "Extreme inputs".
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
PLAN = str(BIN / "plan")

FIVE_LEVELS = Path(__file__).resolve().parent.parent / "tests" / "data" / "five-level.toml"
"""The five-level hierarchy that tests/test_reliability.py also uses."""

WRAPPER = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
dt = time.perf_counter() - t0
rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"code": p.returncode, "wall_s": dt, "rss_mib": rss_kib / 1024, "stdout": p.stdout,
                  "stderr": p.stderr}))
"""


def cases(five: str) -> list[tuple[str, list[str]]]:
    return [
        ("1e35 FLOP, 90 days (h100)", ["--compute", "1e35", "--days", "90"]),
        ("1e35 FLOP on 1024 GPUs (h100)", ["--compute", "1e35", "--gpus", "1024"]),
        ("1e40 FLOP sparse, deepseek batch (h100)", ["--compute", "1e40", "--sparse", "--batch-scaling", "deepseek"]),
        ("five network levels, 1e22 FLOP", ["--compute", "1e22", "--gpu", five]),
        ("five network levels, 1e24 FLOP", ["--compute", "1e24", "--gpu", five]),
        ("2048 experts (d_model 1024, L 8, b 131072)", ["--d-model", "1024", "--d-ff", "4096", "--layers", "8",
                                                        "--experts", "2048", "--batch-tokens", "131072"]),
        ("--gpus 1, 1e24 FLOP (does not fit)", ["--compute", "1e24", "--gpus", "1"]),
        ("--gpus 1, d_model 1024 L 8 (fits)", ["--d-model", "1024", "--d-ff", "4096", "--layers", "8",
                                               "--batch-tokens", "4096", "--gpus", "1"]),
    ]


def run_case(argv: list[str], time_limit: float) -> dict:
    cmd = [sys.executable, "-c", WRAPPER, PLAN, *argv, "--time-limit", str(time_limit), "--json"]
    r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    try:
        doc = json.loads(r["stdout"])
    except json.JSONDecodeError:
        doc = {}
    solver = doc.get("solver") or {}
    if r["code"] == 0:
        outcome = (f"{doc['status']}: {doc['gpus']:,} GPUs, {doc['training_days']:.3g} days "
                   f"(solver {solver.get('status')}, {solver.get('wall_s', 0):.1f} s)")
    else:
        outcome = r["stderr"].splitlines()[0][:150] if r["stderr"] else f"exit {r['code']}"
        if solver:
            outcome += f" [solver {solver.get('status')}, {solver.get('wall_s', 0):.1f} s]"
    return {"code": r["code"], "wall_s": r["wall_s"], "rss_mib": r["rss_mib"], "outcome": outcome,
            "traceback": "Traceback" in r["stdout"] + r["stderr"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    rows = [(name, run_case(argv, args.time_limit)) for name, argv in cases(str(FIVE_LEVELS))]
    if args.markdown:
        print(f"`--time-limit {args.time_limit:g}`, {platform.machine()}, Python {platform.python_version()}; "
              "one fresh `plan --json` process per case.\n")
        print("| case | exit | wall s | peak RSS MiB | outcome |")
        print("|---|---:|---:|---:|---|")
        for name, r in rows:
            print(f"| {name} | {r['code']} | {r['wall_s']:.1f} | {r['rss_mib']:.0f} | "
                  f"{r['outcome'].replace('|', '/')} |")
    else:
        for name, r in rows:
            print(json.dumps({"case": name, **r}))
    if any(r["traceback"] or r["code"] not in (0, 1) for _, r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
