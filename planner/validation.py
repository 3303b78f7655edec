"""Published training runs, priced by the cost model: how well a profile predicts real throughput.

`validation/runs.toml` holds one record per published run (model, hardware, layout, batch, precision, recomputation,
reported throughput and its exact source). `validate` prices each run's published layout (placed in the frameworks'
rank order, planner.export.RANK_ORDER) and compares the predicted throughput with the reported one, in tokens per
second per GPU (convention-free) and as MFU in the planner's FLOP convention. Runs are split into calibration and
held-out runs by a hash of their id, fixed before anything is fitted (`split_of`).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from planner.errors import MAX_TOML_BYTES, InvalidInput, parse_toml, read_text_file, validation_message
from planner.files import write_atomic, write_text
from planner.profile import ExecutionProfile, get_profile
from planner.schema import Hardware, Layout, Workload
from planner.schema.request import PlanRequest
from planner.schema.validation import PublishedRun, ValidationRow

RUNS_PATH = Path(__file__).resolve().parent.parent / "validation" / "runs.toml"

HARDWARE_OF_GPU = {"a100-40gb": "a100", "a100-80gb": "a100-80gb", "h100-80gb": "h100", "h100-96gb": "h100-96gb",
                   "h800": "h800", "h200": "h200", "b200": "b200", "b300": "b300", "gb200": "gb200-nvl72",
                   "gb300": "gb300-nvl72"}
"""The shipped hardware file each record's GPU is priced on."""

Convention = Literal["megatron-recompute", "megatron", "model", "6n"]


def load_runs(path: Path = RUNS_PATH) -> list[PublishedRun]:
    doc = parse_toml(read_text_file(path, "runs file", MAX_TOML_BYTES), f"runs file {path}")
    runs = doc.get("run")
    if set(doc) != {"run"} or not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        other = sorted(set(doc) - {"run"})
        raise InvalidInput(f"runs file {path}: expected only [[run]] tables" + (
            f", not {', '.join(repr(k) for k in other[:5])}" if other else ""))
    out = []
    for k, rec in enumerate(runs):
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
                "kv_lora_rank", "rope_head_dim", "v_head_dim", "sliding_window", "sliding_window_layers"):
        value = getattr(run, key)
        if value is not None:
            fields[key] = value
    if run.attention == "mla":
        fields["attention"] = "mla"
    wl = transformer_workload(run.d_model, run.d_ff, run.layers, run.experts, run.seq_len,
                              run.global_batch_sequences * run.seq_len, 1e12, fields, run.id)
    assert wl.transformer is not None
    shape = wl.transformer.model_copy(update={"attention_kernel": run.attention_kernel, "dropout": run.dropout})
    low = run.precision in ("fp8", "fp4")
    return Workload(**{**wl.model_dump(), "transformer": shape, "precision": run.precision if low else "bf16",
                       "recipe": run.recipe if low else None})


def layout_of(run: PublishedRun, hw: Hardware) -> Layout:
    """The published layout in the planner's terms, placed in the frameworks' rank order.

    Expert parallelism is carved from the data-parallel ranks (our N_DP = dp / ep) unless the run folds its expert
    layout (Megatron's parallel folding: an expert TP size other than tp, or an ep that dp does not hold): then the
    placed degrees are the attention layout (ep 1) and the expert layout is expert_ep x etp over dp x cp x tp."""
    from planner.api import folds_experts, megatron_placement

    folded = folds_experts(run.tp, run.dp, run.ep, run.etp)
    mbs = run.micro_batch or 1
    seqs_per_rank, rem = divmod(run.global_batch_sequences, run.dp)
    if rem or seqs_per_rank % mbs:
        raise InvalidInput(f"{run.id}: global batch {run.global_batch_sequences} is not dp {run.dp} x whole "
                           f"micro-batches of {mbs}")
    values = {"dp": run.dp if folded else run.dp // run.ep, "tp_ff": run.tp, "tp_model": 1, "pp": run.pp,
              "ep": 1 if folded else run.ep, "cp": run.cp,
              "interleave": run.vpp, "microbatches": seqs_per_rank // mbs, "sp": int(run.sp),
              "recompute": {"none": 0, "selective": 1, "full": 2}[run.recompute], "zero": run.zero}
    placement = megatron_placement(hw, values)
    if placement is None:
        raise InvalidInput(f"{run.id}: the layout cannot be placed on {hw.name} in rank order")
    extra: dict[str, int | None] = {"first_stage_layers": run.first_stage_layers,
                                    "last_stage_layers": run.last_stage_layers}
    if folded:
        extra.update(expert_ep=run.ep, etp=run.etp if run.etp is not None else run.tp)
    return Layout(**values, **extra, schedule="1f1b", placement=placement)


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


UNKNOWN_CHOICES: dict[str, tuple[object, ...]] = {
    "sp": (False, True), "recompute": ("none", "selective", "full"), "zero": (1, 2, 3),
    "tp_comm_overlap": (False, True)}
"""Values an unknown field may take (vpp and micro_batch: from the run's sizes, `_candidates`)."""

MAX_UNKNOWN_LAYOUTS = 4096
"""At most this many combinations of unknown values are priced per run (a record with more is refused)."""


def _candidates(run: PublishedRun, field: str) -> tuple[object, ...]:
    """The values an unknown field can take for this run: the whole interleaving degrees its layers allow (at least
    one layer per virtual stage, at most 16 stages per rank), the micro-batch sizes that divide a data-parallel
    rank's sequences, sequence parallelism only with tp > 1, the interleaved schedule's microbatches per virtual stage
    from a rank's sequences down to 1 (the Llama 3 paper's N may be fewer than the stages; Megatron's own range is
    [N_PP, m])."""
    if field == "vpp":
        if run.pp == 1:
            return (1,)
        return tuple(v for v in range(1, 17) if run.pp * v <= run.layers)
    if field == "micro_batch":
        per_rank = run.global_batch_sequences // run.dp
        return tuple(m for m in range(1, min(per_rank, 64) + 1) if per_rank % m == 0) or (1,)
    if field == "pipeline_microbatch_group":  # largest first: a tie keeps the larger group
        if run.pp == 1 or run.vpp == 1:
            return (None,)
        per_rank = run.global_batch_sequences // run.dp
        return tuple(range(per_rank, 0, -1))
    if field == "sp" and run.tp == 1:
        return (False,)
    return UNKNOWN_CHOICES[field]


def _variants(run: PublishedRun) -> list[tuple[PublishedRun, str]]:
    """The run with every combination of values for its unknown fields, each with a note of what it took ('' for a
    run with none unknown)."""
    if not run.unknown:
        return [(run, "")]
    fields = list(dict.fromkeys(run.unknown))
    combos = list(itertools.product(*(_candidates(run, f) for f in fields)))
    if len(combos) > MAX_UNKNOWN_LAYOUTS:
        raise InvalidInput(f"{run.id}: {len(combos)} combinations of unknown {', '.join(fields)} (at most "
                           f"{MAX_UNKNOWN_LAYOUTS})")
    out = []
    for values in combos:
        update: dict[str, object] = dict(zip(fields, values, strict=True))
        note = ", ".join(f"{k}={_show(v)}" for k, v in update.items())
        out.append((run.model_copy(update={**update, "unknown": []}), note))
    return out


def _took(row: ValidationRow) -> str:
    return f" (took {row.assumed})" if row.assumed else ""


def _show(v: object) -> str:
    return ("on" if v else "off") if isinstance(v, bool) else str(v)


def validate(runs: list[PublishedRun], profile: str | ExecutionProfile = "paper") -> list[ValidationRow]:
    """Price every run's published layout under `profile` (the profile's DP overlap default applies).

    A field the source does not give (`unknown`) is searched: every combination of its possible values is priced by
    the same cost model, and the row takes the fastest one that fits in memory with the profile's headroom (else the
    fastest that fits the device, else the fastest of all);
    `assumed` says which values it took. This is the planner's search restricted to the published degrees, done
    exhaustively because the combinations are few."""
    chosen = get_profile(profile) if isinstance(profile, str) else profile
    return [_best_variant(run, chosen)[1] for run in runs]


def resolve_unknowns(runs: list[PublishedRun], profile: str | ExecutionProfile) -> list[PublishedRun]:
    """Each run with its unknown fields set to the values `validate` takes under `profile` (runs it cannot price are
    returned unchanged): what a calibration prices repeatedly without searching again."""
    chosen = get_profile(profile) if isinstance(profile, str) else profile
    return [_best_variant(run, chosen)[0] for run in runs]


def _best_variant(run: PublishedRun, chosen: ExecutionProfile) -> tuple[PublishedRun, ValidationRow]:
    from planner.hardware import get_hardware

    hw = get_hardware(HARDWARE_OF_GPU[run.gpu])
    base = dict(id=run.id, split=split_of(run.id), gpu=run.gpu, gpus=run.gpus, model=_model_text(run),
                framework=run.framework, compiled=run.compiled, precision=run.precision,
                layout=_run_layout_text(run), source=run.source)
    try:
        variants = _variants(run)
        wl = workload_of(run)  # the unknown fields are layout fields: one workload serves every variant
    except InvalidInput as exc:
        return run, _unpriced(base, str(exc))
    best: tuple[tuple[bool, bool, float], PublishedRun, ValidationRow] | None = None
    first_problem = ""
    for variant, note in variants:
        row = _price(variant, wl, hw, chosen, base, note)
        if row.predicted_tokens_per_s is None:
            first_problem = first_problem or row.problem
            continue
        key = (bool(row.fits), bool(row.fits_device), row.predicted_tokens_per_s)
        if best is None or key > best[0]:
            best = (key, variant, row)
    return (best[1], best[2]) if best is not None else (run, _unpriced(base, first_problem))


def _model_text(run: PublishedRun) -> str:
    return f"{run.layers}L d{run.d_model}" + (f" E{run.experts}" if run.experts > 1 else "")


def _run_layout_text(run: PublishedRun) -> str:
    def given(field: str, text: str) -> str:
        return "?" + field if field in run.unknown else text

    return (f"tp{run.tp} pp{run.pp} dp{run.dp} cp{run.cp} ep{run.ep} {given('vpp', f'vpp{run.vpp}')} "
            f"{given('micro_batch', f'mbs{run.micro_batch or 1}')} {given('sp', 'sp' if run.sp else 'nosp')} "
            f"{given('recompute', run.recompute)} {given('zero', f'zero{run.zero}')}"
            + (" ?tp-overlap" if "tp_comm_overlap" in run.unknown else " tp-overlap" if run.tp_comm_overlap else "")
            + (" ?mb-group" if "pipeline_microbatch_group" in run.unknown
               else f" mb-group{run.pipeline_microbatch_group}" if run.pipeline_microbatch_group is not None else "")
            + (f" etp{run.etp}" if run.etp is not None else "")
            + (f" ends{run.first_stage_layers},{run.last_stage_layers}"
               if run.first_stage_layers is not None or run.last_stage_layers is not None else ""))


def _unpriced(base: dict, problem: str) -> ValidationRow:
    return ValidationRow(**base, reported_tokens_per_s=None, predicted_tokens_per_s=None, reported_mfu=None,
                         predicted_mfu=None, ratio=None, fits=None, problem=problem)


def _price(run: PublishedRun, wl: Workload, hw: Hardware, chosen: ExecutionProfile, base: dict, assumed: str
           ) -> ValidationRow:
    """One run with every layout field known, priced (`wl`: its `workload_of`)."""
    from planner.cost.memory import allocator_peak_bytes
    from planner.cost.step import evaluate, peak_flops
    from planner.hardware import with_profile
    from planner.parallel.space import check_layout

    prof = chosen.for_framework(run.framework)
    if run.tp_comm_overlap:
        prof = prof.model_copy(update={"overlap_tp": prof.overlap_tp_comm})
    if run.ep_comm_overlap:
        prof = prof.model_copy(update={"overlap_ep": prof.overlap_ep_comm,
                                       "overlap_ep_stages": prof.overlap_ep_comm_stages})
    if run.cuda_graph_impl == "none":  # every kernel launched eagerly: the host-bound floor on the MoE layers
        prof = prof.model_copy(update={"host_moe_layer_s": prof.host_eager_moe_layer_s})
    if run.compiled:
        prof = prof.model_copy(update={"compiled": True})
    if run.mla_recompute_up_proj:
        prof = prof.model_copy(update={"mla_recompute_up_proj": True})
    if run.compiled_loss and prof.compiled_logits_bytes is not None:
        prof = prof.model_copy(update={"logits_bytes": prof.compiled_logits_bytes, "parallel_logits_bytes": None})
    if run.moe_dispatch_dedup is not None:
        prof = prof.model_copy(update={"moe_dispatch_dedup": run.moe_dispatch_dedup})
    if run.recompute_norm_act:
        prof = prof.model_copy(update={"recompute_norm_act": True})
    if run.activation_offload_layers:
        prof = prof.model_copy(update={"activation_offload_layers": run.activation_offload_layers})
    if run.pipeline_microbatch_group is not None:
        prof = prof.model_copy(update={"pipeline_microbatch_group": run.pipeline_microbatch_group})
    name = wl.recipe_name
    if run.bf16_layers is not None and name is not None and name in prof.recipes:
        if run.bf16_layers >= run.layers:
            return _unpriced(base, f"bf16_layers {run.bf16_layers}: a low-precision run keeps fewer than its "
                             f"{run.layers} layers in 16-bit")
        kept = prof.recipes[name].model_copy(update={"kept_layer_fraction": run.bf16_layers / run.layers})
        prof = prof.model_copy(update={"recipes": {**prof.recipes, name: kept}})
    if run.optimizer_state_bytes_per_param is not None:
        prof = prof.model_copy(update={"optimizer_state_bytes_per_param": run.optimizer_state_bytes_per_param})
    hw = with_profile(hw, prof)
    try:
        lay = layout_of(run, hw)
        problems = check_layout(hw, wl, lay)
        if run.activation_offload_layers and run.pp > 1:  # Megatron refuses CPU offloading with PP
            problems.append(f"activation_offload_layers {run.activation_offload_layers} with pp {run.pp}: "
                            "Megatron offloads activations only without pipeline parallelism")
        if lay.gpus != run.gpus:
            problems.append(f"tp x pp x dp x cp = {lay.gpus} GPUs, the source says {run.gpus}")
        if problems:
            raise InvalidInput("; ".join(problems))
    except InvalidInput as exc:
        return _unpriced(base, str(exc))
    ev = evaluate(hw, wl, lay, dp_overlap=hw.profile.dp_overlap)
    predicted = wl.batch_tokens / (ev.step.step_s * run.gpus)
    # Sources quote MFU / HFU against the 16-bit peak; the comparison's MFU is in the workload's precision.
    reported = reported_tokens_per_s(run, wl, hw.gpu.peak_flops)
    peak = peak_flops(hw, wl)
    return ValidationRow(
        **base, reported_tokens_per_s=reported, predicted_tokens_per_s=predicted,
        reported_mfu=None if reported is None else reported * wl.model_flop_per_token / peak,
        predicted_mfu=predicted * wl.model_flop_per_token / peak,
        ratio=None if reported is None else predicted / reported, fits=ev.memory.fits,
        fits_device=ev.memory.verdict != "does not fit", assumed=assumed,
        predicted_peak_GiB=allocator_peak_bytes(ev.memory) / 2**30, reported_peak_GiB=run.peak_memory_GiB,
        memory_GB=ev.memory.total_bytes / 1e9)


def peak_memory_summary(rows: list[ValidationRow]) -> dict[str, float]:
    """Over the rows whose source reports a peak: how many, the mean and largest |predicted / reported - 1|, and the
    mean predicted / reported - 1 (bias)."""
    both = [(r.predicted_peak_GiB, r.reported_peak_GiB) for r in rows
            if r.predicted_peak_GiB is not None and r.reported_peak_GiB is not None]
    if not both:
        return {"runs": 0}
    errs = [p / q - 1.0 for p, q in both]
    return {"runs": len(both), "mean_abs_error": sum(map(abs, errs)) / len(errs),
            "max_abs_error": max(map(abs, errs)), "bias": sum(errs) / len(errs)}


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


def dense_16bit(rows: list[ValidationRow]) -> list[ValidationRow]:
    """The dense (no experts) 16-bit runs: the must-show subset of docs/validation.md."""
    return [r for r in rows if r.precision in ("bf16", "fp16") and " E" not in r.model]


def low_precision(rows: list[ValidationRow]) -> list[ValidationRow]:
    """The FP8 and FP4 runs."""
    return [r for r in rows if r.precision in ("fp8", "fp4")]


BLACKWELL = ("b200", "b300", "gb200", "gb300")


def precision_pairs(rows: list[ValidationRow]) -> list[tuple[ValidationRow, ValidationRow]]:
    """(low-precision run, 16-bit run) pairs of the same source, model, GPUs and layout, both compiled or both
    eager: what FP8 / FP4 buys on the same layout, published against predicted."""
    def key(r: ValidationRow) -> tuple[str, ...]:
        return r.id.split("-")[0], r.model, str(r.gpus), r.gpu, r.layout, r.framework, str(r.compiled)

    sixteen = {key(r): r for r in rows if r.precision in ("bf16", "fp16") and r.ratio is not None}
    return [(r, sixteen[key(r)]) for r in low_precision(rows) if r.ratio is not None and key(r) in sixteen]


def _agg_lines(title: str, agg: dict[str, dict[str, float]]) -> list[str]:
    out = []
    for split, a in agg.items():
        out.append(f"| {title} | {split} | {int(a['runs'])} | {a['mean_abs_error']:.1%} | {a['median_abs_error']:.1%} "
                   f"| {a['bias']:+.1%} | {a['spearman']:.2f} |")
    return out


TARGETS = {"dense": 0.08, "low": 0.10, "spearman": 0.8, "peak": 0.15}
"""Issue 25's must-show targets on the held-out runs: mean absolute error of dense 16-bit and of FP8 / FP4 runs,
Spearman on MFU over all of them; and every reported peak memory within 15 %."""


def fit_word(r: ValidationRow) -> str:
    """The fits column: 'yes' (with the headroom), 'tight' (the device only), 'NO'."""
    return "yes" if r.fits else "tight" if r.fits_device else "NO"


def _targets(rows: list[ValidationRow]) -> list[str]:
    """One paragraph: each of issue 25's targets, the value reached, met or missed."""
    dense = summary(dense_16bit(rows)).get("held-out", {})
    low = summary(low_precision(rows)).get("held-out", {})
    rho = summary(rows).get("held-out", {}).get("spearman")
    peaks = [r for r in rows if r.reported_peak_GiB and r.predicted_peak_GiB]
    within = sum(abs((r.predicted_peak_GiB or 0) / (r.reported_peak_GiB or 1) - 1) <= TARGETS["peak"] for r in peaks)
    trained = [r for r in rows if r.fits is not None]
    misfits = sum(not r.fits_device for r in trained)
    tight = [r.id for r in trained if r.fits_device and not r.fits]

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    items = []
    if dense:
        items.append(f"held-out dense 16-bit error {dense['mean_abs_error']:.1%} (target <= {TARGETS['dense']:.0%}: "
                     f"{verdict(dense['mean_abs_error'] <= TARGETS['dense'])})")
    if low:
        items.append(f"held-out FP8 / FP4 error {low['mean_abs_error']:.1%} (target <= {TARGETS['low']:.0%}: "
                     f"{verdict(low['mean_abs_error'] <= TARGETS['low'])})")
    if rho is not None:
        items.append(f"Spearman on MFU over the held-out runs {rho:.2f} (target >= {TARGETS['spearman']}: "
                     f"{verdict(rho >= TARGETS['spearman'])})")
    items.append(f"{misfits} 'does not fit' verdict{'' if misfits == 1 else 's'} on the {len(trained)} runs that "
                 f"trained (target 0: {verdict(misfits == 0)})"
                 + (f"; {len(tight)} of them tight, inside the profile's headroom ({', '.join(tight)})"
                    if tight else ""))
    if peaks:
        items.append(f"{within} of {len(peaks)} reported peaks within {TARGETS['peak']:.0%} (target all: "
                     f"{verdict(within == len(peaks))})")
    return ["Issue 25's targets: " + "; ".join(items) + ".", ""]


def _ratios(priced: list[ValidationRow], named: tuple[tuple[str, str], ...]) -> str:
    """'name 1.23x, ...' for the named runs that were priced."""
    by_id = {r.id: r for r in priced}
    return ", ".join(f"{name} {by_id[rid].ratio:.2f}x" for name, rid in named
                     if rid in by_id and by_id[rid].ratio is not None)


def write_report(rows: list[ValidationRow], doc_path: Path, png_path: Path, profile: str,
                 baseline: list[ValidationRow] | None = None, proposals: list[str] | None = None,
                 fitted: dict[str, str] | None = None) -> None:
    """docs/validation.md: the scatter plot first, then the aggregates per split (all runs and the dense 16-bit
    ones, and the paper profile's beside), the fitted values, every run, and the propose-mode table if given."""
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
    write_atomic(png_path, lambda fh: fig.savefig(fh, format="png", dpi=110, bbox_inches="tight"), "--write",
                 binary=True)
    plt.close(fig)

    lines = [
        "# Validation: how well the cost model predicts published training runs",
        "",
        "Generated by `planner validate --write` or `benchmarks/validate.py` (`--all`: propose mode for every dense "
        "run, not only the four below) from "
        "`validation/runs.toml` (every run's source is in the table and the file). Each run's published layout is "
        "priced as published (placed in the frameworks' rank order) and the predicted throughput compared with the "
        "reported one; MFU is in the planner's FLOP convention (6 N + attention + LM head) for both, so sources with "
        f"other conventions compare on tokens per second. Profile: **{profile}** (`profiles/{profile}.toml`).",
        "",
        f"![predicted vs reported MFU]({png_path.name})",
        "",
        "Error is |predicted / reported throughput − 1|; bias is the mean of predicted / reported − 1.",
        "",
        "| profile and runs | split | runs | mean abs. error | median abs. error | bias | Spearman (MFU) |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += _agg_lines(f"{profile}, dense 16-bit", summary(dense_16bit(rows)))
    lines += _agg_lines(f"{profile}, FP8 and FP4", summary(low_precision(rows)))
    lines += _agg_lines(f"{profile}, Blackwell", summary([r for r in rows if r.gpu in BLACKWELL]))
    lines += _agg_lines(f"{profile}, all", summary(rows))
    if baseline is not None:
        lines += _agg_lines("paper, dense 16-bit", summary(dense_16bit(baseline)))
        lines += _agg_lines("paper, all", summary(baseline))
    lines += ["", "Split: a run is held out when the SHA-1 of its id is divisible by 3, fixed before anything was "
              "fitted. The realistic profile's fitted values (below) were chosen on the calibration runs only "
              "(`benchmarks/calibrate.py`); the held-out runs never entered a fit.", ""]
    worst = sorted(priced, key=lambda r: -abs((r.ratio or 1.0) - 1.0))[:6]
    lines += _targets(rows)
    lines += ["What limits it further. The largest errors: " + "; ".join(
        f"{r.id} ({r.ratio:.2f}x)" for r in worst) + ". Most are mixture-of-experts runs: GPT-OSS 120B as "
        "Megatron-Bridge runs it is over-predicted 1.3-1.7x on every system, bf16 and MXFP8, even with the "
        "recipes' recomputation, ZeRO, dispatcher and expert-parallel overlap recorded and its 128-token sliding "
        "windows priced as such (which makes the over-prediction larger, not smaller), by a cause not yet found "
        "(its attention sinks run in Transformer Engine's fused cuDNN attention in these containers, so an unfused "
        "backend is ruled out; head dimension 64, biased and clamped SwiGLU experts are priced as plain kernels); "
        "the recipes' expert-parallel overlap (records' ep_comm_overlap) is priced as Megatron schedules it, each "
        "quarter of the all-to-all under one sub-module of another microbatch (docs/model.md §1c), which, with "
        "MXFP8's grouped expert GEMMs at their measured rate, puts the force-balanced Qwen3 and DeepSeek-V3 runs "
        "inside one NVL72 rack or node at 0.85-1.06x (Qwen3-30B-A3B on B200 aside, 1.23x); the ones whose "
        "all-to-all crosses InfiniBand: (" + _ratios(priced, (
            ("DeepSeek-V3 EP 32 on B200", "mbridge260401-deepseek-v3-256gpu-mxfp8-b200"),
            ("Qwen3-235B EP 32 on H100", "mbridge260401-qwen3-235b-a22b-256gpu-fp8"))) + "); the records now carry the "
        "recipes' CUDA-graph settings (cuda_graph_impl, cuda_graph_scope), and the MoE layers of the runs that "
        "capture none are floored by the host's launch time (docs/model.md §1c, a fitted time per layer and "
        "microbatch), which brings Qwen3-30B-A3B on H100 to " + _ratios(priced, (
            ("EP 16", "mbridge2606-qwen3-30b-a3b-16gpu-fp8"),
            ("PP 2 x VPP 12", "mbridge260201-qwen3-30b-a3b-16gpu-fp8-pp2"))) + " "
        "and leaves GPT-OSS's eager and fully graphed rows over-predicted alike (host overhead is not its cause). "
        "Node-limited "
        "routing, grouped-GEMM "
        "efficiency on small experts and routing work are approximations. Where a record leaves "
        "a field unknown validate takes the fastest variant that fits; the fields the recipes, configs and papers "
        "give are recorded (each record's notes quote where), and the remaining unknowns rarely move a row by more "
        "than a few per cent (ZeRO-1 against ZeRO-3 on the NeMo dense runs: under 4 %). Recording what the recipes "
        "ran also turned up memory over-counts, now priced as the code the runs used keeps memory: Megatron-Bridge's "
        "performance recipes compute the loss with Transformer Engine's fused cross-entropy, which writes the "
        "gradient over the bf16 logits (2 bytes per logit, not Megatron's 6), so Llama 3 70B on 64 GB200s with 40 "
        "layers offloaded fits, and AutoModel builds GPT-OSS 120B in bf16 under a plain Adam (4 bytes of optimizer "
        "state per parameter, no fp32 master), so its EP 64 row on H100 fits. MPT 1B on A100-40GB (mbs 10, no "
        "checkpointing) is priced within the 42.5 GB the runtime offers but 0.9 GB into the 2 GB headroom (tight), "
        "with nothing found over-counted in what llm-foundry's code of that commit keeps (docs/model.md §7b); Llama 3 "
        "405B's 8K-sequence rows without "
        "recomputation fit only with Meta's "
        "schedule's unpublished microbatches per virtual stage searched down to 14 of their 16 stages, whose priced "
        "dependency stalls put them at 0.80x and 0.64x of the published throughput: Meta did not run them so, and "
        "their memory over-count is still to be found. Then come torchtitan's Llama 3.1 8B long-context rows on one "
        "node (CP 4 and CP 8 over-predicted about 1.3x once ring attention is priced as PyTorch runs it, "
        "docs/model.md §7b, while CP 2 and the 405B rows over InfiniBand are within 7 %) "
        "and DeepSpeed's 2021 ZeRO-3 at 1,536-2,240 GPUs. Dense 16-bit runs of Megatron-style frameworks are where "
        "the profile is most accurate; the rest is reported, not hidden.", ""]
    pairs = precision_pairs(rows)
    if pairs:
        lines += ["**Low precision against 16-bit on the same layout.** Pairs of runs from one source with the same "
                  "model, GPUs and layout; the gain is the low-precision run's throughput over the 16-bit one's.", "",
                  "| low-precision run | 16-bit run | published gain | predicted gain | predicted / published |",
                  "|---|---|---|---|---|"]
        for low, hi in pairs:
            pub = (low.reported_tokens_per_s or 0.0) / (hi.reported_tokens_per_s or 1.0)
            pred = (low.predicted_tokens_per_s or 0.0) / (hi.predicted_tokens_per_s or 1.0)
            lines.append(f"| {low.id} | {hi.id} | {pub:.2f}x | {pred:.2f}x | {pred / pub:.2f} |")
        lines.append("")
    peaks = [r for r in rows if r.reported_peak_GiB and r.predicted_peak_GiB]
    trained = [r for r in rows if r.fits is not None]
    misfits = [r for r in trained if not r.fits_device]
    tight = [r for r in trained if r.fits_device and not r.fits]
    lines += [f"**Memory.** {len(trained) - len(misfits)} of the {len(trained)} priced runs fit under this profile"
              + (": " + ", ".join(r.id for r in misfits)
                 + (" does not, though it trained" if len(misfits) == 1 else " do not, though they trained")
                 if misfits else " (every run that trained)")
              + (f"; {len(trained) - len(misfits) - len(tight)} with the profile's headroom left free and "
                 f"{len(tight)} tight, predicted within the device but inside the headroom a plan keeps ("
                 + ", ".join(r.id for r in tight) + "): a search does not choose such a layout, and `evaluate` calls "
                 "it tight, not 'does not fit'" if tight else ", all with the profile's headroom left free") + ".", ""]
    if peaks:
        lines += ["Peak memory where the source reports one (predicted: the caching allocator's peak, what "
                  "`torch.cuda.max_memory_reserved` reads):", "",
                  "| run | reported GiB | predicted GiB | predicted / reported |", "|---|---|---|---|"]
        for r in sorted(peaks, key=lambda r: r.id):
            lines.append(f"| {r.id} | {r.reported_peak_GiB:.1f} | {r.predicted_peak_GiB:.1f} | "
                         f"{(r.predicted_peak_GiB or 0) / (r.reported_peak_GiB or 1):.2f} |")
        lines.append("")
    lines += ["MLPerf Training submissions are in neither split on purpose: they are the independent check of the "
              "model, never fitted to.", ""]
    if fitted:
        lines += ["Fitted values (everything else in the profile comes from a published measurement, see "
                  "`profiles/realistic.toml`):", ""] + [f"- `{k}` = {v}" for k, v in fitted.items()] + [""]
    lines += ["| run | split | framework | GPUs | model | precision | layout | reported tok/s/GPU | predicted | ratio "
              "| reported MFU | predicted MFU | fits |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(priced, key=lambda r: r.id):
        lines.append(f"| {r.id} | {r.split} | {r.framework} | {r.gpus} {r.gpu} | {r.model} | {r.precision} | "
                     f"{r.layout}{_took(r)} | {r.reported_tokens_per_s:,.0f} | {r.predicted_tokens_per_s:,.0f} | "
                     f"{r.ratio:.2f} | "
                     f"{_pct(r.reported_mfu)} | {_pct(r.predicted_mfu)} | {fit_word(r)} |")
    skipped = [r for r in rows if r.ratio is None]
    if skipped:
        lines += ["", "Not priced:", ""] + [f"- {r.id}: {r.problem or 'no reported throughput'}" for r in skipped]
    if proposals:
        lines += ["", *proposals]
    lines += ["", "Sources:", ""] + [f"- {r.id}: {r.source}" for r in sorted(rows, key=lambda r: r.id)]
    write_text(doc_path, "\n".join(lines) + "\n", "--write")


MUST_SHOW = ("llama3-405b-16k-gpus-8k-seq", "llama3-405b-8k-gpus-8k-seq", "nemotron4-340b-6144gpu-bf16",
             "narayanan2021-t1-1008b")
"""Llama 3 405B, Nemotron-4 340B and Megatron-LM 2021's 1T run: propose mode at their published GPU counts."""


def fitted_values(profile: str) -> dict[str, str]:
    """The values a shipped profile marks as fitted, as its TOML file states them (section.key -> value)."""
    from planner.profile import profile_dir

    doc = tomllib.loads((profile_dir() / f"{profile}.toml").read_text(encoding="utf-8"))
    out: dict[str, str] = {}

    def walk(node: dict, path: str) -> None:
        for key, value in node.items():
            here = f"{path}.{key}" if path else key
            if isinstance(value, dict) and "value" in value:
                if "fitted" in str(value.get("source", "")):
                    out[here] = str(value["value"])
            elif isinstance(value, dict):
                walk(value, here)

    walk(doc, "")
    return out


def _layout_text(lay) -> str:
    sp = " sp" if lay.sp else ""
    rec = ("none", "selective", "full")[lay.recompute]
    return (f"tp{lay.tp_ff} pp{lay.pp} dp{lay.dp * lay.ep} cp{lay.cp} ep{lay.ep} vpp{lay.interleave} "
            f"m{lay.microbatches}{sp} {rec} zero{lay.zero}")


def propose(ids: list[str] | tuple[str, ...], runs: list[PublishedRun], priced: list[ValidationRow]
            ) -> tuple[list[str], list[dict]]:
    """Propose mode (docs/validation.md): the planner's optimum at each run's published GPU count and batch, among
    the layouts Megatron-LM runs, beside the published layout (`priced`: the runs priced by the realistic
    profile)."""
    import time

    from planner import api
    from planner.errors import PlannerError

    by_id = {r.id: r for r in runs}
    rows = {r.id: r for r in priced}
    lines = [
        "## Propose mode: the planner's layout at the published GPU count",
        "",
        "For each run the planner searches the layouts Megatron-LM runs (`plan --emit megatron`'s space: 1D TP, "
        "1F1B or interleaved, ranks in Megatron's order) on the published number of GPUs with the published batch "
        "and sequence length, priced by the realistic profile (the run's framework overrides and TP-overlap flag "
        "are not applied: the proposal is stock Megatron). `published` is the published layout priced the same way "
        "(the table above). TP on NVLink: the proposal's TP factor on the node's NVLink level.",
        "",
        "| run | GPUs | published layout | published predicted MFU | reported MFU | proposed layout | TP on NVLink | "
        "proposed MFU | proposed / published | search |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    out = []
    for rid in ids:
        run = by_id[rid]
        row = rows[rid]
        t0 = time.perf_counter()
        try:
            plan = api.plan(PlanRequest(gpu=HARDWARE_OF_GPU[run.gpu], workload=workload_of(run), gpus=run.gpus,
                                        profile="realistic", runs_on="megatron", time_limit_s=120.0))
        except PlannerError as exc:
            lines.append(f"| {rid} | {run.gpus} | {row.layout} | — | — | no layout: {exc} | — | — | — | — |")
            continue
        secs = time.perf_counter() - t0
        lay = plan.layout
        assert lay is not None and plan.mfu is not None
        tp_nvlink = lay.placement["tp_ff"][0] == lay.tp_ff
        pub = row.predicted_mfu
        ratio = "—" if not pub else f"{plan.mfu / pub:.2f}"
        lines.append(f"| {rid} | {run.gpus} | {row.layout} | {pub:.1%} | {row.reported_mfu:.1%} | "
                     f"{_layout_text(lay)} {lay.schedule} | {'yes' if tp_nvlink else 'NO'} | {plan.mfu:.1%} | "
                     f"{ratio} | {plan.status}, {secs:.1f} s |")
        out.append({"id": rid, "tp_on_nvlink": tp_nvlink, "proposed_mfu": plan.mfu, "published_mfu": pub})
    return lines + [""] + _why_they_differ(), out


def _why_they_differ() -> list[str]:
    return [
        "Why they differ. Every proposal keeps TP inside the NVLink node and predicts more throughput than the "
        "published layout priced by the same profile; the differences are Megatron options the published runs "
        "did not use or did not state:",
        "",
        "- Llama 3 405B: the paper states TP 8, PP 16, DP 64/128 but not the interleaving degree or sequence "
        "parallelism, so the record has one virtual stage and no SP. Priced that way, 16 microbatches on 16 stages "
        "leave a 1F1B bubble of 15/31 and the TP all-reduces move whole-sequence activations, which is why the "
        "published layout prices at 24-31% against the reported 40-44% (the record, not the planner, lacks "
        "Meta's interleaved schedule). The proposal interleaves 4 virtual stages, turns SP on, halves TP to 4 "
        "and adds CP 4 so that each data-parallel rank still gets whole sequences with more microbatches.",
        "- Nemotron-4 340B: TP 4 with SP and CP 2 instead of TP 8, and 12 virtual stages on 8 pipeline stages: "
        "less exposed TP traffic per GPU and a smaller bubble.",
        "- Megatron-LM 2021 1T: the 2021 run used full recomputation and a 64-stage pipeline without interleaving "
        "(sequence parallelism and selective recomputation came in 2022). The proposal uses both, with 16 stages "
        "of 8 virtual stages each: less recomputation, a smaller bubble.",
    ]


def write_docs(runs: list[PublishedRun], profile: ExecutionProfile, docs: Path,
               propose_ids: list[str] | tuple[str, ...] = MUST_SHOW, rows: list[ValidationRow] | None = None
               ) -> list[dict]:
    """docs/validation.md and its PNG for `profile` (`rows`: the runs already priced by it), with the paper
    profile's aggregates beside; for the realistic profile also the fitted values and propose mode for
    `propose_ids`. Returns the proposals' summaries."""
    from planner.profile import profile_names

    rows = validate(runs, profile) if rows is None else rows
    lines: list[str] | None = None
    out: list[dict] = []
    if profile.name == "realistic":
        lines, out = propose(propose_ids, runs, rows)
    write_report(rows, docs / "validation.md", docs / "validation-mfu.png", profile.name,
                 baseline=validate(runs, "paper"), proposals=lines,
                 fitted=fitted_values(profile.name) if profile.name in profile_names() else None)
    return out
