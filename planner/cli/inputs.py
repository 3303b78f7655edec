"""From flags and files to the library's objects: the workload the workload flags describe, and a saved plan's
hardware, workload and layout (`evaluate --plan`, `export`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from planner.choices import BatchScaling, Budget, Precision
from planner.errors import InvalidInput, read_text_file, validation_message
from planner.hardware import hardware_names
from planner.parallel.dimensions import DIMENSIONS
from planner.parallel.placement import greedy_placement
from planner.parallel.space import check_layout
from planner.schema import DEGREES, LAYOUT_EXTRA, Hardware, Layout, Plan, Workload
from planner.workload import load_model_preset, workload_from_shape
from planner.workload.families import workload_for_family
from planner.workload.scaling import check_compute


def workload_of_flags(compute: float | None, model: str | None, sparse: bool, batch_scaling: BatchScaling | None,
                      shape: Mapping[str, float | None], family: str | None = None,
                      budget: Budget = Budget.exact) -> Workload | None:
    """The workload the flags describe, or None for compute mode (the library infers the shape from --compute).
    --model-family with --compute scales that family to the budget (planner.workload.families).

    Exactly one source is allowed: --compute (with optional --sparse / --batch-scaling), --model, or the shape
    flags (--d-model, --d-ff, --layers, --batch-tokens required; --experts, --tokens optional).
    """
    given_shape = [flag for flag, v in shape.items() if v is not None]
    if family is not None and (model is not None or given_shape):
        other = "--model" if model is not None else ", ".join(given_shape)
        raise InvalidInput(f"contradictory workload flags: --model-family and {other}; a family's rules give the "
                           "shape, so give --compute with --model-family, or a preset or shape without it")
    if family is not None and compute is None:
        raise InvalidInput(f"--model-family {family} needs --compute FLOP: the budget the family is scaled to")
    sources = [name for name, on in (("--compute", compute is not None), ("--model", model is not None),
                                     (", ".join(given_shape), bool(given_shape))) if on]
    if len(sources) > 1:
        raise InvalidInput(f"contradictory workload flags: {' and '.join(sources)}; give only one of --compute, "
                           "--model, or an explicit shape")
    if not sources:
        raise InvalidInput("no workload: give --compute FLOP, --model PRESET|FILE.toml, or an explicit shape "
                           "(--d-model --d-ff --layers --batch-tokens)")
    if compute is not None:
        check_compute(compute, "--compute")  # the library's rule, said of the flag typed
    if compute is None and (sparse or batch_scaling is not None):
        used = " and ".join(f for f, on in (("--sparse", sparse), ("--batch-scaling", batch_scaling is not None)) if on)
        raise InvalidInput(f"{used} {'apply' if ' and ' in used else 'applies'} only with --compute (the scaling "
                           "laws); a preset or an explicit shape fixes E and the batch itself")
    if family is not None:
        if sparse:
            raise InvalidInput("--sparse does not apply with --model-family: the family's rules fix its experts")
        if budget != Budget.exact:
            raise InvalidInput("--budget paper does not apply with --model-family: a family trains the compute asked "
                               "for (D = 20 N, tokens in whole steps)")
        assert compute is not None  # checked with the sources above
        return workload_for_family(family, compute, (batch_scaling or BatchScaling.paper).value)
    if compute is not None:
        return None
    if model is not None:
        return load_model_preset(model)
    required = ("--d-model", "--d-ff", "--layers", "--batch-tokens")
    d_model, d_ff, layers, batch_tokens = (shape.get(f) for f in required)
    if d_model is None or d_ff is None or layers is None or batch_tokens is None:
        missing = [f for f in required if shape.get(f) is None]
        raise InvalidInput(f"an explicit shape needs --d-model, --d-ff, --layers and --batch-tokens; missing "
                           f"{', '.join(missing)}")
    experts = shape.get("--experts")
    return workload_from_shape(d_model, d_ff, layers, 1 if experts is None else experts, batch_tokens,
                               shape.get("--tokens"), label="explicit shape (command-line flags)")


def with_training(wl: Workload | None, seq_len: int | None, precision: Precision | None) -> Workload | None:
    """The workload with a new sequence length (the batch keeps its tokens: Llama 3's long-context phase kept 16M
    tokens per step) and GEMM precision (transformers only)."""
    if seq_len is None and precision is None:
        return wl
    flag = "--seq-len" if seq_len is not None else "--precision"
    if wl is None or wl.transformer is None:
        raise InvalidInput(f"{flag} applies to a transformer --model (the paper's toy model has no sequences and "
                           "trains in 16 bits)")
    update: dict[str, object] = {}
    if seq_len is not None:
        if seq_len < 1:
            raise InvalidInput(f"--seq-len must be a whole number >= 1, got {seq_len}")
        if wl.batch_tokens % seq_len:
            raise InvalidInput(f"--seq-len {seq_len} does not divide the batch of {wl.batch_tokens:,} tokens into "
                               "whole sequences; give --batch-sequences too")
        update["seq_len"] = seq_len
    if precision is not None:
        update["precision"], update["recipe"] = precision.precision_and_recipe
    try:
        return Workload(**{**wl.model_dump(), **update})
    except ValidationError as exc:
        raise InvalidInput(f"{flag}: {validation_message(exc)}") from None


def with_batch_sequences(wl: Workload | None, sequences: int | None, flag: str = "--batch-sequences"
                          ) -> Workload | None:
    """The workload with its global batch set to `sequences` whole sequences (transformers only)."""
    if sequences is None:
        return wl
    if wl is None or wl.transformer is None:
        raise InvalidInput(f"{flag} applies to a transformer --model (the toy model takes --batch-tokens)")
    if sequences < 1:
        raise InvalidInput(f"{flag} must be a whole number >= 1, got {sequences}")
    try:
        return Workload(**{**wl.model_dump(), "batch_tokens": sequences * wl.seq_len})
    except ValidationError as exc:
        raise InvalidInput(f"{flag} {sequences}: {exc.errors()[0]['msg']}") from None


def make_layout(values: Mapping[str, int], schedule: str, placement: Mapping[str, Sequence[int]],
                 extra: Mapping[str, int | None] | None = None) -> Layout:
    """`extra`: the layout fields outside the registry (etp, expert_ep, first/last_stage_layers)."""
    try:
        return Layout(**values, **(extra or {}), schedule=schedule,
                      placement={d: tuple(placement[d]) for d in DEGREES})
    except ValidationError as exc:
        raise InvalidInput(f"impossible layout: {validation_message(exc)}") from None


def load_plan_file(path: Path) -> Plan:
    text = read_text_file(path, "plan file")
    try:
        return Plan.model_validate_json(text)
    except ValidationError as exc:
        raise InvalidInput(f"'{path}' is not a plan document as printed by `plan --json`: "
                           f"{validation_message(exc)}{_which_document(text)}") from None


def _which_document(text: str) -> str:
    """For a file that is another of plan's JSON documents, the words that say which and where its plan is."""
    import json

    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth (hostile input)
        return ""
    if not isinstance(doc, dict):
        return ""
    if "options" in doc and "ranked_by" in doc:
        return ("; it is a Comparison (plan --gpu A,B --json): each plan is under options[k].plan, e.g. "
                "jq '.options[0].plan'")
    if "target" in doc and isinstance(doc.get("plan"), dict):
        return "; it is a LaunchDocument (plan --emit --json): its plan is under .plan, e.g. jq .plan"
    return ""


def hardware_of_plan(doc: Plan, gpu: str | None) -> str:
    """--gpu, else the hardware the plan names; a plan made on a user file names only the file's `name`, which the
    library cannot find again, so say to give the file."""
    if gpu is not None or doc.hardware.lower() in hardware_names():
        return gpu or doc.hardware
    raise InvalidInput(f"the plan was made on '{doc.hardware}', which is not a shipped system (a user hardware file?): "
                       "give it again with --gpu FILE.toml")


def workload_of_plan(doc: Plan) -> Workload:
    w = doc.workload
    try:
        return Workload(d_model=w.d_model, d_ff=w.d_ff, layers=w.layers, experts=w.experts,
                        batch_tokens=w.batch_tokens, tokens=w.tokens, seq_len=w.seq_len,
                        requested_compute_flop=w.requested_compute_flop, label=w.label, transformer=w.transformer,
                        precision=w.precision, family=w.family)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InvalidInput(f"plan file workload: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def layout_of_plan(doc: Plan, hw: Hardware, wl: Workload) -> tuple[Layout, list[str]]:
    """The plan's layout on `hw`; re-placed greedily (with a note) if its placement does not fit `hw`'s levels."""
    lay = doc.layout
    if lay is None:
        raise InvalidInput(f"the plan has no layout (status '{doc.status}'); nothing to evaluate")
    values = {d.name: getattr(lay, d.name) for d in DIMENSIONS}
    extra = {k: getattr(lay, k) for k in LAYOUT_EXTRA}
    degrees = {d: values[d] for d in DEGREES}
    n_levels = len(hw.levels)
    kept = None
    if all(len(v) == n_levels for v in lay.placement.values()):
        ones = [1] * n_levels
        kept = make_layout(values, lay.schedule, {d: lay.placement.get(d, ones) for d in DEGREES}, extra)
        problems = check_layout(hw, wl, kept)
        if not problems:
            return kept, []
        reason = "its placement does not fit: " + "; ".join(problems)
    else:
        reason = (f"the plan has {len(lay.levels)} network level(s) ({', '.join(lay.levels)}) but {hw.name} has "
                  f"{n_levels} ({', '.join(lvl.name for lvl in hw.levels)})")
    replaced = make_layout(values, lay.schedule, greedy_placement(hw, degrees), extra)
    if kept is not None and check_layout(hw, wl, replaced):
        return kept, []  # not a placement problem: let evaluation report the real one
    note = (f"re-placed on {hw.name}: {reason}; degrees kept, factors assigned greedily (TP first, then CP, PP, DP, "
            f"EP, lowest level first), which is not necessarily the best placement")
    return replaced, [note]
