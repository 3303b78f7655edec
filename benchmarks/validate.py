"""Regenerate docs/validation.md and docs/validation-mfu.png: every published run of validation/runs.toml priced by
the cost model (`planner validate --write`), timed."""

from __future__ import annotations

import time

from planner.cli import app, run


def main() -> None:
    t0 = time.perf_counter()
    code = run(app, ["validate", "--write"], "planner")
    print(f"\nplanner validate --write: exit {code}, {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
