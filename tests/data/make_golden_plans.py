"""Generate tests/data/golden_plans.json: the plans of the pre-redesign code, pinned for tests/test_golden.py.

This is a *record*, not a specification. It pins what `planner.api.plan` returned for a set of headline requests
before the package internals (planner/cost, planner/solve, schema) were redesigned, so that the redesign can be
checked to change no plan: same status, GPU count and layout (degrees, schedule, placement), and the same float
step time, training days and memory to 1e-12 relative. The values must come from the code as it was *before* the
redesign; regenerate only deliberately, against a clean checkout of the commit you want to pin, and say in the
commit why the record changed.

Run it against a baseline checkout, never against a working tree that is being edited:

    cd /work/main && git worktree add /tmp/baseline <commit>        # once; reuse it if it exists
    cd /tmp/baseline && PYTHONPATH=/tmp/baseline \\
        /work/main/.venv/bin/python /work/main/tests/data/make_golden_plans.py --baseline /tmp/baseline

The script imports `planner` from the baseline (it checks `planner.__file__`), also loads the shipped hardware and
model files from the baseline (the editable install in the venv would otherwise map `planner.hardware_specs` to the
working tree), refuses a baseline with uncommitted changes to tracked files, and records the baseline's commit as
`generated_from`. It asserts the one number docs/benchmarks.md quotes: 1e28 FLOP on h100 in 90 days is 2,359,296
GPUs at a step time of 0.9728929667093671 s.

A case that raises or takes longer than SKIP_AFTER_S is left out of the record and listed under `skipped`; a case
that takes longer than SLOW_AFTER_S is recorded with `"slow": true` (the test marks it `pytest.mark.slow`).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

SKIP_AFTER_S = 20.0
SLOW_AFTER_S = 5.0

# (id, keyword arguments of planner.api.plan). Every value is JSON-serialisable; the test passes them unchanged.
CASES: list[tuple[str, dict]] = [
    ("h100-1e22", {"compute_flop": 1e22, "gpu": "h100", "days": 90.0}),
    ("h100-1e24", {"compute_flop": 1e24, "gpu": "h100", "days": 90.0}),
    ("h100-1e26", {"compute_flop": 1e26, "gpu": "h100", "days": 90.0}),
    ("h100-1e28", {"compute_flop": 1e28, "gpu": "h100", "days": 90.0}),
    ("h100-1e30", {"compute_flop": 1e30, "gpu": "h100", "days": 90.0}),
    ("h100-1e24-sparse", {"compute_flop": 1e24, "gpu": "h100", "days": 90.0, "sparse": True}),
    ("h100-1e26-sparse", {"compute_flop": 1e26, "gpu": "h100", "days": 90.0, "sparse": True}),
    ("h100-1e28-sparse", {"compute_flop": 1e28, "gpu": "h100", "days": 90.0, "sparse": True}),
    ("superpod-1e26", {"compute_flop": 1e26, "gpu": "h100-superpod", "days": 90.0}),
    ("superpod-1e28", {"compute_flop": 1e28, "gpu": "h100-superpod", "days": 90.0}),
    ("a100-1e26", {"compute_flop": 1e26, "gpu": "a100", "days": 90.0}),
    ("v100-1e26", {"compute_flop": 1e26, "gpu": "v100", "days": 90.0}),
    ("h100-1e28-dp-overlap", {"compute_flop": 1e28, "gpu": "h100", "days": 90.0, "dp_overlap": True}),
    ("h100-1e26-1f1b", {"compute_flop": 1e26, "gpu": "h100", "days": 90.0, "schedule": "1f1b"}),
    ("h100-1e26-fixed-23040", {"compute_flop": 1e26, "gpu": "h100", "days": None, "gpus": 23040}),
    ("h100-1e28-deepseek-batch", {"compute_flop": 1e28, "gpu": "h100", "days": 90.0, "batch_scaling": "deepseek"}),
]

# docs/benchmarks.md, "The 1e28 FLOP deadline-mode instance, enumerated to the end".
DOCUMENTED = ("h100-1e28", 2_359_296, 0.9728929667093671)

LAYOUT_KEYS = ("dp", "tp_ff", "tp_model", "pp", "interleave", "ep", "microbatches", "schedule", "placement")
WORKLOAD_KEYS = ("d_model", "d_ff", "layers", "experts", "batch_tokens", "tokens")


class _DataFromBaseline(importlib.abc.MetaPathFinder):
    """Resolve the data packages planner.hardware_specs / planner.models to the baseline's folders."""

    def __init__(self, root: Path):
        self.dirs = {"planner.hardware_specs": root / "hardware_specs", "planner.models": root / "models"}

    def find_spec(self, fullname, path=None, target=None):
        folder = self.dirs.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(fullname, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def import_baseline(root: Path):
    """Import planner (and its data packages) from `root`; fail loudly if any part comes from elsewhere."""
    if "planner" in sys.modules:
        raise SystemExit("planner is already imported; run this script in a fresh interpreter")
    sys.path.insert(0, str(root))
    sys.meta_path.insert(0, _DataFromBaseline(root))
    names = ("planner", "planner.api", "planner.hardware_specs", "planner.models")
    for mod in [importlib.import_module(name) for name in names]:
        where = Path(mod.__file__).resolve()
        if not where.is_relative_to(root):
            raise SystemExit(f"{mod.__name__} was imported from {where}, not from the baseline {root}")
    return sys.modules["planner"]


def record(plan_fn, case_id: str, args: dict) -> tuple[dict | None, str | None]:
    t0 = time.perf_counter()
    try:
        doc = plan_fn(**args).model_dump()
    except Exception as exc:  # noqa: BLE001 - a case that raises is listed as skipped, with the reason
        return None, f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    wall = time.perf_counter() - t0
    if wall > SKIP_AFTER_S:
        return None, f"took {wall:.1f} s (> {SKIP_AFTER_S:g} s)"
    lay = doc["layout"]
    return {
        "id": case_id,
        "args": args,
        "slow": wall > SLOW_AFTER_S,
        "generation_wall_s": round(wall, 3),
        "expected": {
            "status": doc["status"],
            "gpus": doc["gpus"],
            "nodes": doc["nodes"],
            "step_time_s": doc["step_time_s"],
            "training_days": doc["training_days"],
            "mfu": doc["mfu"],
            "layout": {k: lay[k] for k in LAYOUT_KEYS},
            "workload": {k: doc["workload"][k] for k in WORKLOAD_KEYS},
            "memory_total_bytes": doc["memory"]["total_bytes"],
        },
    }, None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, default=Path("/tmp/baseline"), help="checkout of the commit to pin")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "golden_plans.json")
    ap.add_argument("--allow-dirty", action="store_true", help="record even if the baseline has uncommitted changes")
    args = ap.parse_args(argv)

    root = args.baseline.resolve()
    commit = _git(root, "rev-parse", "HEAD")
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    if dirty and not args.allow_dirty:
        raise SystemExit(f"the baseline {root} has uncommitted changes:\n{dirty}")
    planner = import_baseline(root)
    print(f"planner from {planner.__file__} at {commit}", file=sys.stderr)

    cases, skipped = [], []
    for case_id, kwargs in CASES:
        entry, why = record(planner.api.plan, case_id, kwargs)
        if entry is None:
            skipped.append({"id": case_id, "args": kwargs, "reason": why})
            print(f"  {case_id}: SKIPPED ({why})", file=sys.stderr)
            continue
        e = entry["expected"]
        print(f"  {case_id}: {e['status']} {e['gpus']} GPUs, step {e['step_time_s']!r} s "
              f"({entry['generation_wall_s']} s)", file=sys.stderr)
        cases.append(entry)

    by_id = {c["id"]: c for c in cases}
    doc_id, doc_gpus, doc_step = DOCUMENTED
    assert doc_id in by_id, f"the documented case {doc_id} was not recorded"
    assert by_id[doc_id]["expected"]["gpus"] == doc_gpus, by_id[doc_id]["expected"]["gpus"]
    assert by_id[doc_id]["expected"]["step_time_s"] == doc_step, repr(by_id[doc_id]["expected"]["step_time_s"])

    out = {
        "description": ("Plans of planner.api.plan before the internals redesign (pre-redesign record); "
                        "generated by tests/data/make_golden_plans.py, checked by tests/test_golden.py"),
        "generated_from": commit,
        "python": sys.version.split()[0],
        "cases": cases,
        "skipped": skipped,
    }
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {len(cases)} cases ({len(skipped)} skipped) to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
