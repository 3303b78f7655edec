"""Published training runs, priced by the cost model: how well a profile predicts real throughput.

`validation/runs.toml` holds one record per published run (model, hardware, layout, batch, precision, recomputation,
reported throughput and its exact source). `validate` prices each run's published layout (placed in the frameworks'
rank order, planner.export.RANK_ORDER) and compares the predicted throughput with the reported one, in tokens per
second per GPU (convention-free) and as MFU in the planner's FLOP convention. Runs are split into calibration and
held-out runs by a hash of their id, fixed before anything is fitted (`split_of`).
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import MAX_TOML_BYTES, InvalidInput, read_text_file, validation_message
from planner.schema import Hardware, Layout, Workload

RUNS_PATH = Path(__file__).resolve().parent.parent / "validation" / "runs.toml"

HARDWARE_OF_GPU = {"a100-40gb": "a100", "a100-80gb": "a100-80gb", "h100-80gb": "h100", "h100-96gb": "h100-96gb",
                   "h800": "h800"}
"""The shipped hardware file each record's GPU is priced on."""

Convention = Literal["megatron-recompute", "megatron", "model", "6n"]


class PublishedRun(BaseModel):
    """One published run (validation/runs.toml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    source: str = Field(description="Paper or repository, table or page.")
    gpu: Literal["a100-40gb", "a100-80gb", "h100-80gb", "h100-96gb", "h800"]
    gpus: int = Field(gt=0)
    precision: Literal["bf16", "fp16", "fp8"] = "bf16"
    layers: int = Field(gt=0)
    d_model: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int | None = Field(None, gt=0)
    head_dim: int | None = Field(None, gt=0)
    ffn: Literal["gelu", "swiglu", "relu2"] = "gelu"
    d_ff: int = Field(gt=0)
    vocab: int = Field(gt=0)
    seq_len: int = Field(gt=0)
    experts: int = Field(1, gt=0)
    top_k: int | None = Field(None, gt=0)
    expert_d_ff: int | None = Field(None, ge=0)
    shared_experts: int | None = Field(None, ge=0)
    dense_layers: int | None = Field(None, ge=0)
    attention: Literal["gqa", "mla"] = "gqa"
    q_lora_rank: int | None = Field(None, ge=0)
    kv_lora_rank: int | None = Field(None, ge=0)
    rope_head_dim: int | None = Field(None, ge=0)
    v_head_dim: int | None = Field(None, ge=0)
    global_batch_sequences: int = Field(gt=0)
    tp: int = Field(1, gt=0)
    pp: int = Field(1, gt=0)
    dp: int = Field(gt=0, description="Data-parallel size as the framework counts it (expert ranks included).")
    cp: int = Field(1, gt=0)
    ep: int = Field(1, gt=0)
    vpp: int = Field(1, gt=0)
    micro_batch: int | None = Field(None, gt=0, description="Sequences per microbatch (None: 1).")
    sp: bool = False
    recompute: Literal["none", "selective", "full"] = "none"
    zero: int = Field(1, ge=1, le=3)
    tflops_per_gpu: float | None = Field(None, gt=0)
    tokens_per_s_per_gpu: float | None = Field(None, gt=0)
    mfu: float | None = Field(None, gt=0, lt=1)
    hfu: float | None = Field(None, gt=0, lt=1)
    flop_convention: str = ""
    notes: str = ""


def load_runs(path: Path = RUNS_PATH) -> list[PublishedRun]:
    try:
        doc = tomllib.loads(read_text_file(path, "runs file", MAX_TOML_BYTES))
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"runs file {path}: {exc}") from None
    out = []
    for k, rec in enumerate(doc.get("run", [])):
        try:
            out.append(PublishedRun(**rec))
        except ValidationError as exc:
            raise InvalidInput(f"runs file {path}, run {k + 1} ({rec.get('id', '?')}): "
                               f"{validation_message(exc)}") from None
    ids = [r.id for r in out]
    if len(set(ids)) != len(ids):
        raise InvalidInput(f"runs file {path}: duplicate ids")
    return out


def split_of(run_id: str) -> Literal["calibration", "held-out"]:
    """A third of the runs are held out, chosen by the SHA-1 of the id (fixed before any fitting)."""
    return "held-out" if int(hashlib.sha1(run_id.encode()).hexdigest(), 16) % 3 == 0 else "calibration"


def workload_of(run: PublishedRun) -> Workload:
    from planner.workload.scaling import transformer_workload

    fields: dict[str, object] = {"heads": run.heads, "vocab": run.vocab, "ffn": run.ffn}
    for key in ("kv_heads", "head_dim", "top_k", "expert_d_ff", "shared_experts", "dense_layers", "q_lora_rank",
                "kv_lora_rank", "rope_head_dim", "v_head_dim"):
        value = getattr(run, key)
        if value is not None:
            fields[key] = value
    if run.attention == "mla":
        fields["attention"] = "mla"
    wl = transformer_workload(run.d_model, run.d_ff, run.layers, run.experts, run.seq_len,
                              run.global_batch_sequences * run.seq_len, 1e12, fields, run.id)
    if run.precision == "fp8":
        wl = Workload(**{**wl.model_dump(), "precision": "fp8"})
    return wl


def layout_of(run: PublishedRun, hw: Hardware) -> Layout:
    """The published layout in the planner's terms, placed in the frameworks' rank order."""
    from planner.export import RANK_ORDER
    from planner.parallel.space import rank_order_factors

    if run.dp % run.ep:
        raise InvalidInput(f"{run.id}: dp {run.dp} is not a multiple of ep {run.ep}")
    mbs = run.micro_batch or 1
    seqs_per_rank, rem = divmod(run.global_batch_sequences, run.dp)
    if rem or seqs_per_rank % mbs:
        raise InvalidInput(f"{run.id}: global batch {run.global_batch_sequences} is not dp {run.dp} x whole "
                           f"micro-batches of {mbs}")
    values = {"dp": run.dp // run.ep, "tp_ff": run.tp, "tp_model": 1, "pp": run.pp, "ep": run.ep, "cp": run.cp,
              "interleave": run.vpp, "microbatches": seqs_per_rank // mbs, "sp": int(run.sp),
              "recompute": {"none": 0, "selective": 1, "full": 2}[run.recompute], "zero": run.zero}
    cols = {k: np.array([v], dtype=np.int64) for k, v in values.items()}
    fixed, ok = rank_order_factors(hw, {**cols, "zero_bubble": np.array([False])}, RANK_ORDER)
    if not ok[0]:
        raise InvalidInput(f"{run.id}: the layout cannot be placed on {hw.name} in rank order")
    return Layout(**values, schedule="1f1b", placement={d: tuple(int(x) for x in fixed[d][0]) for d in fixed})


def reported_flop_per_token(run: PublishedRun, wl: Workload) -> float:
    """FLOPs per token in the convention the source's TFLOP/s use (`flop_convention`)."""
    conv = run.flop_convention.lower()
    s, h, layers, v = run.seq_len, run.d_model, run.layers, run.vocab
    if conv.startswith("megatron-recompute"):  # Narayanan et al. 2021, Eq. (3): recomputation counted
        return 96.0 * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
    if conv.startswith("megatron"):  # Korthikanti et al. 2022: model FLOPs of a GPT layer stack
        return 72.0 * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))
    if conv.startswith("6n"):
        return 6.0 * wl.active_params
    return wl.model_flop_per_token


def reported_tokens_per_s(run: PublishedRun, wl: Workload, peak_flops: float) -> float | None:
    """Tokens per second per GPU as reported: given directly, or from TFLOP/s, or from MFU (model FLOPs) or HFU
    (hardware FLOPs, Megatron's recompute-counting convention) against the GPU's dense 16-bit peak, in the source's
    FLOP convention."""
    if run.tokens_per_s_per_gpu is not None:
        return run.tokens_per_s_per_gpu
    per_token = reported_flop_per_token(run, wl)
    if run.tflops_per_gpu is not None:
        return run.tflops_per_gpu * 1e12 / per_token
    if run.mfu is not None and not run.flop_convention.startswith("megatron-recompute"):
        return run.mfu * peak_flops / per_token
    if run.hfu is not None and run.flop_convention.startswith("megatron-recompute"):
        return run.hfu * peak_flops / per_token
    return None


class ValidationRow(BaseModel):
    id: str
    split: Literal["calibration", "held-out"]
    gpu: str
    gpus: int
    model: str
    precision: str
    layout: str
    reported_tokens_per_s: float | None
    predicted_tokens_per_s: float | None
    reported_mfu: float | None
    predicted_mfu: float | None
    ratio: float | None = Field(description="Predicted / reported throughput.")
    fits: bool | None
    source: str
    problem: str = ""


def validate(runs: list[PublishedRun]) -> list[ValidationRow]:
    from planner.cost.step import evaluate
    from planner.hardware import get_hardware
    from planner.parallel.space import check_layout

    rows = []
    for run in runs:
        hw = get_hardware(HARDWARE_OF_GPU[run.gpu])
        model = f"{run.layers}L d{run.d_model}" + (f" E{run.experts}" if run.experts > 1 else "")
        layout_text = (f"tp{run.tp} pp{run.pp} dp{run.dp} cp{run.cp} ep{run.ep} vpp{run.vpp} "
                       f"mbs{run.micro_batch or 1} {'sp ' if run.sp else ''}{run.recompute} zero{run.zero}")
        base = dict(id=run.id, split=split_of(run.id), gpu=run.gpu, gpus=run.gpus, model=model,
                    precision=run.precision, layout=layout_text, source=run.source)
        try:
            wl = workload_of(run)
            lay = layout_of(run, hw)
            problems = check_layout(hw, wl, lay)
            if lay.gpus != run.gpus:
                problems.append(f"tp x pp x dp x cp = {lay.gpus} GPUs, the source says {run.gpus}")
            if problems:
                raise InvalidInput("; ".join(problems))
        except InvalidInput as exc:
            rows.append(ValidationRow(**base, reported_tokens_per_s=None, predicted_tokens_per_s=None,
                                      reported_mfu=None, predicted_mfu=None, ratio=None, fits=None,
                                      problem=str(exc)))
            continue
        ev = evaluate(hw, wl, lay)
        predicted = wl.batch_tokens / (ev.step.step_s * run.gpus)
        from planner.cost.step import peak_flops

        # Sources quote MFU / HFU against the 16-bit peak; the comparison's MFU is in the workload's precision.
        reported = reported_tokens_per_s(run, wl, hw.gpu.peak_flops)
        peak = peak_flops(hw, wl)
        rows.append(ValidationRow(
            **base, reported_tokens_per_s=reported, predicted_tokens_per_s=predicted,
            reported_mfu=None if reported is None else reported * wl.model_flop_per_token / peak,
            predicted_mfu=predicted * wl.model_flop_per_token / peak,
            ratio=None if reported is None else predicted / reported, fits=ev.memory.fits))
    return rows


def _spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=v.__getitem__)
        r = [0.0] * len(v)
        for pos, k in enumerate(order):
            r[k] = float(pos)
        return r

    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (sx * sy) if sx and sy else float("nan")


def summary(rows: list[ValidationRow]) -> dict[str, dict[str, float]]:
    """Per split: runs priced, mean and median absolute error of MFU (relative), bias (mean predicted / reported - 1)
    and Spearman's rank correlation of predicted and reported MFU."""
    out = {}
    for split in ("calibration", "held-out"):
        priced = [r for r in rows if r.split == split and r.ratio is not None]
        if not priced:
            continue
        errs = sorted(abs(r.ratio - 1.0) for r in priced)  # type: ignore[operator]
        n = len(errs)
        median = errs[n // 2] if n % 2 else (errs[n // 2 - 1] + errs[n // 2]) / 2
        out[split] = {"runs": n, "mean_abs_error": sum(errs) / n, "median_abs_error": median,
                      "bias": sum(r.ratio for r in priced) / n - 1.0,  # type: ignore[misc]
                      "spearman": _spearman([r.predicted_mfu for r in priced],  # type: ignore[misc]
                                            [r.reported_mfu for r in priced])}  # type: ignore[misc]
    return out


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


def write_report(rows: list[ValidationRow], doc_path: Path, png_path: Path, profile: str) -> None:
    """docs/validation.md: the scatter plot first, then the aggregates per split, then every run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    priced = [r for r in rows if r.ratio is not None]
    fig, ax = plt.subplots(figsize=(6, 6))
    for split, marker in (("calibration", "o"), ("held-out", "s")):
        pts = [r for r in priced if r.split == split]
        ax.scatter([r.reported_mfu or 0.0 for r in pts], [r.predicted_mfu or 0.0 for r in pts], marker=marker,
                   label=split)
    top = max([0.8] + [max(r.reported_mfu or 0, r.predicted_mfu or 0) for r in priced])
    ax.plot([0, top], [0, top], color="grey", linewidth=1)
    ax.set_xlabel("reported MFU (planner's FLOP convention)")
    ax.set_ylabel(f"predicted MFU ({profile} profile)")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.legend()
    ax.set_title("Published runs: predicted vs reported MFU")
    fig.savefig(png_path, dpi=110, bbox_inches="tight")
    plt.close(fig)

    agg = summary(rows)
    lines = [
        "# Validation: how well the cost model predicts published training runs",
        "",
        "Generated by `planner validate --write` from `validation/runs.toml` (every run's source is in the table and "
        "the file). Each run's published layout is priced as published (placed in the frameworks' rank order) and "
        "the predicted throughput compared with the reported one; MFU is in the planner's FLOP convention "
        "(6 N + attention + LM head) for both, so sources with other conventions compare on tokens per second. "
        f"Profile: **{profile}**.",
        "",
        f"![predicted vs reported MFU]({png_path.name})",
        "",
        "| split | runs | mean abs. error | median abs. error | bias (mean predicted / reported − 1) | Spearman |",
        "|---|---|---|---|---|---|",
    ]
    for split, a in agg.items():
        lines.append(f"| {split} | {int(a['runs'])} | {a['mean_abs_error']:.1%} | {a['median_abs_error']:.1%} | "
                     f"{a['bias']:+.1%} | {a['spearman']:.2f} |")
    skipped = [r for r in rows if r.ratio is None]
    lines += ["", "Split: a run is held out when the SHA-1 of its id is divisible by 3 (fixed before any fitting; "
              "nothing has been fitted yet).", ""]
    lines += ["| run | split | GPUs | model | precision | layout | reported tok/s/GPU | predicted | ratio | "
              "reported MFU | predicted MFU | fits |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(priced, key=lambda r: r.id):
        lines.append(f"| {r.id} | {r.split} | {r.gpus} {r.gpu} | {r.model} | {r.precision} | {r.layout} | "
                     f"{r.reported_tokens_per_s:,.0f} | {r.predicted_tokens_per_s:,.0f} | {r.ratio:.2f} | "
                     f"{_pct(r.reported_mfu)} | {_pct(r.predicted_mfu)} | {'yes' if r.fits else 'NO'} |")
    if skipped:
        lines += ["", "Not priced:", ""] + [f"- {r.id}: {r.problem or 'no reported throughput'}" for r in skipped]
    lines += ["", "Sources:", ""] + [f"- {r.id}: {r.source}" for r in sorted(rows, key=lambda r: r.id)]
    doc_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
