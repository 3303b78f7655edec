"""Whole-process wall time of `plan --model PRESET --gpus N` for the real-transformer presets (docs/benchmarks.md).

Each run is a fresh `plan` process (imports included), as a user sees it. Prints one Markdown row per preset: GPUs,
status, MFU, the chosen layout, the search's own wall time and the candidates CP-SAT decided among.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("llama3-405b", 16384, ["--batch-sequences", "2048"]),
    ("llama3-70b", 2048, []),
    ("llama3-8b", 256, []),
    ("gpt3-175b", 1024, []),
    ("nemotron4-340b", 6144, []),
    ("mixtral-8x7b", 512, []),
    ("deepseek-v3", 2048, []),
]


def main() -> None:
    print("| model | GPUs | status | MFU | layout (dp, tp_ff, tp_model, pp, i, ep, m, schedule) | whole process | "
          "search | CP-SAT chose among |")
    print("|---|---|---|---|---|---|---|---|")
    for name, gpus, extra in CASES:
        cmd = [sys.executable, "-c", "from planner.cli import plan_main; plan_main()", "--model", name, "--gpu", "h100",
               "--gpus", str(gpus), *extra, "--json"]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - t0
        doc = json.loads(out.stdout)
        lay = doc["layout"]
        s = doc["solver"]
        layout = (f"{lay['dp']}, {lay['tp_ff']}, {lay['tp_model']}, {lay['pp']}, {lay['interleave']}, {lay['ep']}, "
                  f"{lay['microbatches']}, {lay['schedule']}")
        print(f"| {name} | {gpus} | {doc['status']} | {doc['mfu']:.1%} | {layout} | {wall:.2f} s | {s['wall_s']:.2f} s "
              f"| {s['candidates']} tuples / {s['candidate_pairs']} placements |")


if __name__ == "__main__":
    main()
