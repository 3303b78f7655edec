"""Regenerate docs/validation.md and docs/validation-mfu.png: every published run of validation/runs.toml priced by
the realistic profile (the paper profile's aggregates beside), and propose mode: the planner's optimum at each dense
run's published GPU count and batch (a layout Megatron-LM runs), beside the published layout, both priced by the
realistic profile.

    python benchmarks/validate.py            # the must-show runs in propose mode
    python benchmarks/validate.py --all      # every dense 16-bit run in propose mode
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from planner.profile import get_profile
from planner.validation import MUST_SHOW, RUNS_PATH, dense_16bit, load_runs, validate, write_docs

DOCS = Path(__file__).resolve().parent.parent / "docs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="propose for every dense 16-bit run, not only the must-show")
    args = ap.parse_args()
    t0 = time.perf_counter()
    runs = load_runs(RUNS_PATH)
    profile = get_profile("realistic")
    rows = validate(runs, profile)
    ids = sorted(r.id for r in dense_16bit(rows) if r.ratio is not None) if args.all else list(MUST_SHOW)
    for o in write_docs(runs, profile, DOCS, ids, rows):
        print(o)
    print(f"docs/validation.md written in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
