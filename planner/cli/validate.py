"""`validate`: every published run priced and compared with its reported throughput (planner.validation)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli.app import app
from planner.cli.options import JsonOpt, OutOpt, ProfileOpt
from planner.cli.output import SCHEMA_PATH, docs_dir, emit_json, stdout_console


def mfu_counts(frameworks: list[str]) -> str:
    """What validate's MFU columns count, printed beside them: README's DeepSeek-V3 example once printed 12.9 % in
    `planner evaluate` where validate printed 16.2 % for the same layout, because validate applies the framework's
    overrides of the profile and evaluate does not."""
    return ("model FLOPs per token (6 x non-embedding active parameters + 12 x layers x seq x attention width + 6 x "
            "d_model x vocab; recomputation not counted), as `planner evaluate` counts them, against the dense peak at "
            "max clock in the run's precision (FP8 runs against the FP8 peak); a reported throughput is converted from "
            "its source's FLOP convention. Each run is priced with its framework's overrides of the profile "
            f"([framework.NAME] in the profile file: {', '.join(sorted(frameworks)) or 'none'}); `planner evaluate` "
            "prices with the profile as it is, so give it those values with --set to price a run as validate does.")


@app.command("validate")
def validate_command(
    runs: Annotated[Path | None, typer.Option(
        "--runs", help="Published runs (default: the repository's validation/runs.toml).", metavar="FILE.toml",
        show_default=False, dir_okay=False)] = None,
    write: Annotated[bool, typer.Option(
        "--write", help="Also write docs/validation.md and docs/validation-mfu.png (with --profile realistic, and "
        "the paper profile's aggregates beside).")] = False,
    profile: ProfileOpt = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Price every published run's layout and compare with its reported throughput (docs/validation.md)."""
    from planner.files import check_output
    from planner.profile import get_profile
    from planner.validation import RUNS_PATH, fit_word, load_runs, peak_memory_summary, summary, validate, write_docs

    folder = docs_dir(write, out, SCHEMA_PATH.parent)
    if folder is not None:
        for name in ("validation.md", "validation-mfu.png"):
            check_output(folder / name, "--write")
    prof = get_profile(profile or "realistic")
    if runs is None and not RUNS_PATH.is_file():  # an installed package: the runs ship as package data
        from importlib import resources

        runs = Path(str(resources.files("planner.published_runs") / "runs.toml"))
    published = load_runs(runs or RUNS_PATH)
    rows = validate(published, prof)
    if json_out:
        import json

        emit_json(json.dumps({"profile": prof.name, "mfu_counts": mfu_counts(list(prof.frameworks)),
                               "summary": summary(rows),
                               "peak_memory": peak_memory_summary(rows),
                               "runs": [r.model_dump() for r in rows]}, indent=2))
    else:
        from rich.table import Table

        from planner.economics import fmt_pct

        table = Table(title=f"Published runs: predicted ({prof.name} profile) vs reported", title_justify="left")
        for col in ("run", "split", "GPUs", "reported MFU", "predicted MFU", "ratio", "fits", "memory",
                    "peak GiB (pred. / rep.)"):
            table.add_column(col, justify="left" if col in ("run", "split") else "right")
        for r in rows:
            table.add_row(r.id, r.split, f"{r.gpus} {r.gpu}",
                          fmt_pct(r.reported_mfu),
                          fmt_pct(r.predicted_mfu),
                          "—" if r.ratio is None else f"{r.ratio:.2f}", "—" if r.fits is None else fit_word(r),
                          "—" if r.memory_GB is None else f"{r.memory_GB:.1f} GB",
                          "—" if r.reported_peak_GiB is None or r.predicted_peak_GiB is None
                          else f"{r.predicted_peak_GiB:.1f} / {r.reported_peak_GiB:.1f}")
        console = stdout_console()
        console.print(table)
        for split, a in summary(rows).items():
            console.print(f"{split}: {int(a['runs'])} runs, mean abs. error {a['mean_abs_error']:.1%}, median "
                          f"{a['median_abs_error']:.1%}, bias {a['bias']:+.1%}, Spearman {a['spearman']:.2f}")
        console.print(f"MFU (both columns): {mfu_counts(list(prof.frameworks))}")
        peak = peak_memory_summary(rows)
        if peak["runs"]:
            console.print(f"peak memory: {int(peak['runs'])} runs report one; predicted allocator peak vs reported: "
                          f"mean abs. error {peak['mean_abs_error']:.1%}, largest {peak['max_abs_error']:.1%}, bias "
                          f"{peak['bias']:+.1%}")
    if folder is not None:
        write_docs(published, prof, folder, rows=rows)
