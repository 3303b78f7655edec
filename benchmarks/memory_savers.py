"""Solve time against space size with the memory savers as decisions (docs/benchmarks.md, "Memory savers").

For each case, in one process: the search with the new dimensions pinned to what the planner knew before (ZeRO-1,
no recomputation, no sequence or context parallelism) and with them free. Prints one Markdown row per (case, mode):
space size, search wall time, time inside CP-SAT, the candidates it decided among, the layout and MFU. The last line
times the README's main command (`plan --compute 1e28 --gpu h100 --days 90`, the paper's toy model, untouched by
the new dimensions) in process, best of three.
"""

from __future__ import annotations

import time

from planner.api import plan
from planner.schema import Workload
from planner.workload.scaling import load_model_preset

PINNED = {"zero": 1, "recompute": 0, "sp": 0, "cp": 1}


def _wl(name: str, seq_len: int | None = None) -> Workload:
    wl = load_model_preset(name)
    if seq_len is None:
        return wl
    return Workload(**{**wl.model_dump(), "seq_len": seq_len})


CASES = [
    ("llama3-8b", None, 256),
    ("llama3-70b", None, 2048),
    ("gpt3-175b", None, 1024),
    ("llama3-405b", None, 16384),
    ("llama3-405b", 131072, 16384),
    ("mixtral-8x7b", None, 512),
    ("deepseek-v3", None, 2048),
]


def main() -> None:
    print("| model | seq | GPUs | savers | space (tuples) | search | in CP-SAT | CP-SAT chose among | status | layout "
          "(dp, tp, pp, i, cp, ep, m; sp, recompute, ZeRO) | MFU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, seq, gpus in CASES:
        wl = _wl(name, seq)
        for mode, fixed in (("pinned", PINNED), ("free", {})):
            t0 = time.perf_counter()
            try:
                doc = plan(workload=wl, gpu="h100", gpus=gpus, fixed=fixed, time_limit_s=300)
            except Exception as exc:  # an infeasible pinned space is a result too
                wall = time.perf_counter() - t0
                print(f"| {name} | {wl.seq_len} | {gpus} | {mode} | | {wall:.2f} s | | | {type(exc).__name__} | | |")
                continue
            wall = time.perf_counter() - t0
            s, lay = doc.solver, doc.layout
            assert lay is not None and doc.mfu is not None
            layout = (f"{lay.dp}, {lay.tp_ff}x{lay.tp_model}, {lay.pp}, {lay.interleave}, {lay.cp}, {lay.ep}, "
                      f"{lay.microbatches}; {'on' if lay.sp else 'off'}, "
                      f"{['none', 'selective', 'full'][lay.recompute]}, {lay.zero}")
            print(f"| {name} | {wl.seq_len} | {gpus} | {mode} | {s.space_size:,} | {wall:.2f} s | {s.cpsat_s:.2f} s | "
                  f"{s.candidates} tuples / {s.candidate_pairs} placements | {doc.status} | {layout} | "
                  f"{doc.mfu:.1%} |")
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        doc = plan(1e28, "h100", 90)
        best = min(best, time.perf_counter() - t0)
    print(f"\nmain command in process (plan 1e28 h100 90 days): {doc.gpus:,} GPUs, {doc.status}, best of 3 "
          f"{best:.3f} s (search {doc.solver.wall_s:.3f} s)")


if __name__ == "__main__":
    main()
