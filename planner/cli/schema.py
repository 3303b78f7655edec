"""`schema` (the JSON Schema of `plan --json`) and `reference` (the file formats, generated from the code)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.app import app
from planner.cli.options import OutOpt
from planner.cli.output import SCHEMA_PATH, docs_dir
from planner.errors import InvalidInput

PACKAGED_SCHEMA = Path(__file__).resolve().parent.parent / "schema" / "plan.schema.json"
"""The same schema shipped as package data beside the documents it describes (planner/schema/), so that `planner
schema` prints it without building the pydantic models (about as long as the rest of the command line takes to
start); `planner schema --write` regenerates it, and tests/test_cli.py checks that it matches the code."""


def plan_schema_text() -> str:
    """The JSON Schema of what `plan --json` prints, as published in docs/plan.schema.json (sorted keys, so diffs stay
    readable): a Plan, a LaunchDocument (--emit with --json), a Comparison (several --gpu), or an ErrorDocument when
    the command failed before it had one."""
    import json

    from planner.schema import Comparison, ErrorDocument, LaunchDocument, Plan

    schema = Plan.model_json_schema()
    defs = schema.setdefault("$defs", {})
    for doc in (LaunchDocument, Comparison, ErrorDocument):
        other = doc.model_json_schema()
        defs.update(other.pop("$defs", {}))
        defs[doc.__name__] = other
    defs["Plan"] = {k: v for k, v in schema.items() if k != "$defs"}
    one_of = [{"$ref": f"#/$defs/{name}"} for name in ("Plan", "LaunchDocument", "Comparison", "ErrorDocument")]
    return json.dumps({"$defs": defs, "oneOf": one_of, "title": "planner --json output"}, indent=2,
                      sort_keys=True) + "\n"


@app.command("schema")
def schema_command(
    write: Annotated[bool, typer.Option(
        "--write", help="Also write it to the repository's docs/plan.schema.json.")] = False,
    out: OutOpt = None,
) -> None:
    """Print the JSON Schema of the document `plan --json` prints."""
    folder = docs_dir(write, out, SCHEMA_PATH.parent)
    if folder is None and PACKAGED_SCHEMA.is_file():
        sys.stdout.write(PACKAGED_SCHEMA.read_text(encoding="utf-8"))
        return
    from planner.files import check_output, write_text

    # --write without --out writes the repository's copy and the packaged one: both paths are checked first, so a
    # link or FIFO at the second leaves neither written
    targets = [] if folder is None else [folder / SCHEMA_PATH.name] + ([PACKAGED_SCHEMA] if out is None else [])
    for path in targets:
        check_output(path, "--write")
    text = plan_schema_text()
    sys.stdout.write(text)
    for path in targets:
        write_text(path, text, "--write")


@app.command("reference")
def reference_command(
    write: Annotated[bool, typer.Option(
        "--write", help="Write the pages to the repository's docs/reference/ instead of printing them.")] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Exit 1, naming them, if the checked-in pages differ from the code (for CI).")] = False,
    out: OutOpt = None,
) -> None:
    """The hardware, model, profile and failure file formats, field by field with units, generated from the code
    (docs/reference/*.md)."""
    from planner.files import check_output, write_text
    from planner.reference import REFERENCE_DIR, pages, stale_pages

    if (write or out is not None) and check:
        raise InvalidInput("--write regenerates the pages, --check compares them: give one")
    folder = docs_dir(write, out, REFERENCE_DIR)
    if check:
        stale = stale_pages()
        if stale:
            sys.stderr.write(f"stale: docs/reference/{', docs/reference/'.join(stale)} differ from the code; run "
                             "`planner reference --write`\n")
            raise typer.Exit(1)
        sys.stdout.write(f"docs/reference/ is up to date ({len(pages())} pages)\n")
    elif folder is not None:
        if out is None:
            folder.mkdir(parents=True, exist_ok=True)
        texts = pages()
        for name in texts:  # every page's path first: a link or FIFO at one of them writes none of them
            check_output(folder / name, "--write")
        for name, text in texts.items():
            path = write_text(folder / name, text, "--write")
            sys.stdout.write(f"wrote {path}\n")
    else:
        sys.stdout.write("\n".join(pages().values()))
