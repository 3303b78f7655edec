"""Rich tables for a Plan (the answer of `plan`, or of `evaluate` on a given layout) and for hardware specs.

Everything here reads validated pydantic objects and returns rich renderables; nothing computes physics. The
only arithmetic is presentation: unit scaling, shares of the step time, GPU-hours already in the Plan.
Units shown: seconds scaled to ns/µs/ms/s, memory in GB (1e9 bytes, as GPU datasheets quote HBM), FLOP/s in
TFLOP/s or PFLOP/s.
"""

from __future__ import annotations

import math
from typing import TypeVar

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from planner.economics import fmt_MW, fmt_pct
from planner.parallel.dimensions import BY_NAME
from planner.render.light import fmt_flops, fmt_time
from planner.render.light import kv_table as _kv_table
from planner.render.limits import fmt_sci, fmt_si
from planner.schema import DEGREES, OPTIMIZER_SHARDING, Plan, UncertainInput
from planner.schema.sensitivity import SensitivityRow

T = TypeVar("T")



RECIPE_WORDS = {"current": "per-tensor current scaling", "delayed": "per-tensor delayed scaling",
                "rowwise": "row-wise scaling (one scale per row)",
                "blockwise": "1 x 128 / 128 x 128 block scaling", "mxfp8": "MXFP8 (32-element blocks)",
                "nvfp4": "NVFP4 (16-element blocks, some layers kept in 16-bit)"}


def _precision_text(precision: str, recipe: str | None) -> str:
    if precision == "bf16":
        return "bf16"
    how = f", {RECIPE_WORDS.get(recipe or '', recipe)}" if recipe else ""
    return (f"{precision}{how}: the transformer layers' GEMMs in {precision.upper()} with their inputs quantized "
            "(element-wise work); attention, the LM head and the optimizer state in 16/32-bit")

def _part(value: T | None, what: str) -> T:
    """A part of the plan that only a plan with a layout has (the callers render only such plans)."""
    if value is None:
        raise ValueError(f"an infeasible plan has no {what} to render")
    return value



# --------------------------------------------------------------------------------------------------
# Number formatting
# --------------------------------------------------------------------------------------------------


def rack_scale(plan: Plan) -> bool:
    """Whether the plan's `racks` are racks: an NVLink domain over several nodes (GB200 / GB300 NVL72), or one held
    whole beyond the GPUs used. On DGX-style systems the NVLink domain is the 8-GPU node: text calls it a node."""
    if plan.racks is None:
        return False
    return plan.racks != plan.nodes or (plan.held_gpus or 0) > (plan.gpus or 0)


def fmt_gb(n_bytes: float | None) -> str:
    if n_bytes is None:
        return "—"
    if not math.isfinite(n_bytes):
        return "∞"
    gb = n_bytes / 1e9
    # '.4g' turns 12,430 into '1.243e+04': whole GB with separators from 10,000 on (a checkpoint of a large model)
    return f"{gb:,.0f} GB" if 1e4 <= abs(gb) < 1e15 else f"{gb:,.4g} GB"


def fmt_count(x: float | None) -> str:
    """A large count both ways: '9.9e12 (9.9T)'; small ones plainly."""
    if x is None:
        return "—"
    if not math.isfinite(x):
        return "∞"
    if abs(x) < 1e4:
        return f"{x:,.6g}"
    return f"{fmt_sci(x, 3)} ({fmt_si(x, 3)})"


def fmt_days(days: float | None) -> str:
    if days is None:
        return "—"
    if not math.isfinite(days):
        return "∞"
    if days >= 0.1:
        return f"{days:,.3f} days"
    return f"{days:.3g} days ({fmt_time(days * 86400.0)})"


def _tokens(x: float) -> str:
    """A token count: whole ones with separators (5,242,880, never 5.24288e+06), a fraction to six figures."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,.6g}"


def _share(part: float, whole: float | None) -> str:
    if not whole or not math.isfinite(part) or not math.isfinite(whole):
        return ""
    return fmt_pct(part / whole)




# --------------------------------------------------------------------------------------------------
# Plan
# --------------------------------------------------------------------------------------------------


def summary_line(plan: Plan, evaluated: bool = False) -> Text:
    """One sentence on top: what was found, on what, how long, how efficient."""
    if plan.status == "infeasible" and plan.layout is not None:  # does not fit (evaluate), or too slow
        verdict = "fits" if plan.memory is None else plan.memory.verdict
        head = ("Evaluated layout " if evaluated else "") + {
            "fits": "MISSES THE DEADLINE: ", "tight": "INSIDE THE MEMORY HEADROOM: "}.get(verdict, "CANNOT RUN: ")
        return Text.assemble((head, "bold red"), (f"{plan.gpus:,} x {plan.gpu}", "bold cyan"),
                             f" (hardware '{plan.hardware}', priced by the {plan.profile} profile): "
                             f"{plan.explanation}.")
    if plan.status in ("infeasible", "unknown"):
        if plan.status == "infeasible" and plan.solver.status == "infeasible":
            return Text(f"INFEASIBLE on {plan.hardware} ({plan.gpu}), priced by the {plan.profile} profile: no layout "
                        "satisfies the request.", style="bold red")
        return Text(f"NO LAYOUT FOUND on {plan.hardware} ({plan.gpu}), priced by the {plan.profile} profile: the "
                    "search stopped before finding one (infeasibility not proven).", style="bold red")
    what = "Evaluated layout" if evaluated else ("Optimal plan" if plan.status == "optimal" else "Best plan found")
    c = plan.confidence
    if c is not None and c.gpus is not None and not evaluated:  # the cluster is the P-cluster, not the point answer
        what = (f"Plan at P={c.probability:g} (meets {c.deadline_days:g} days in {fmt_pct(c.met)} of samples; point "
                f"estimate {c.point_gpus or 0:,} GPUs)")
    if plan.warnings:  # optimal under the cost model, but not a cluster anyone has announced: never just "Optimal"
        what += " under the cost model, BEYOND ANY ANNOUNCED BUILD (see warnings)"
    nodes = f"{plan.nodes:,} node{'s' if plan.nodes != 1 else ''}"
    if plan.spare_gpus and rack_scale(plan):  # racks used in part (GB200 NVL72): say what is bought
        nodes += f" in {plan.racks:,} rack{'s' if plan.racks != 1 else ''}, {plan.spare_gpus:,} spare GPUs"
    elif plan.spare_gpus:  # a part-used 8-GPU node is not a rack
        nodes += f", {plan.spare_gpus:,} spare GPU{'s' if plan.spare_gpus != 1 else ''} in it"
    g = plan.goodput
    wall = ("" if g is None else f" ({fmt_days(plan.wall_clock_days)} wall-clock at {fmt_pct(g.goodput)} goodput)")
    return Text.assemble(
        (f"{what}: ", "bold"),
        (f"{plan.gpus:,} x {plan.gpu}", "bold cyan"),
        f" ({nodes}, hardware '{plan.hardware}'), training {fmt_days(plan.training_days)}{wall} at MFU ",
        (fmt_pct(plan.mfu), "bold"),
        f", priced by the {plan.profile} profile" + (f", with {', '.join(plan.overrides)}" if plan.overrides else "")
        + ".",
    )


def goodput_table(plan: Plan) -> Table:
    """Failures, checkpoints and restarts (planner.goodput), or the line saying they are not modelled."""
    g = plan.goodput
    if g is None:
        return _kv_table("Goodput", [("failures", "not modelled: the days above are compute time with no "
                                      "interruption (--goodput plans with failures and checkpoints)")])
    every = "never" if g.mtbf_s == float("inf") else f"every {fmt_time(g.mtbf_s)} (1 / (rate x {g.gpus:,} GPUs))"
    rows = [
        ("goodput", f"{fmt_pct(g.goodput)} of wall-clock time trains (Daly's expected time, failure model "
                    f"'{g.failure_model}')"),
        ("wall-clock", f"{fmt_days(plan.wall_clock_days)} (compute {fmt_days(plan.training_days)})"),
        ("interrupted", every),
        ("checkpoint", f"{fmt_gb(g.checkpoint_bytes)} (weights + optimizer state), written in "
                       f"{fmt_time(g.checkpoint_s)}, every {fmt_time(g.interval_s)} of compute"),
        ("restart", f"{fmt_time(g.restart_s)} per interruption (fixed restart + reading the checkpoint)"),
    ]
    return _kv_table("Goodput", rows)


def sensitivity_table(plan: Plan, width: int | None = None) -> Table:
    """--sensitivity: each input moved down and up, the GPUs and wall-clock days that follow, largest swing first.

    With `width` (the terminal's columns) narrower than the seven columns need with every input name whole, the
    rows stack instead: the name (whole, as `--set` takes it) with its kind and value, beside the two re-plans and
    the swings, so no name is folded mid-word and nothing is cut."""
    sens = _part(plan.sensitivity, "sensitivity")
    title = (f"What moves the answer: re-planned with one input changed (plan: {sens.base_gpus or 0:,} GPUs, "
             f"{fmt_days(sens.base_days)})")

    def cell(value: str, g: int | None, d: float | None, unit: str = "") -> str:
        return f"{value} -> infeasible" if g is None else f"{value} -> {g:,}{unit}, {fmt_days(d)}"

    def swings(r: SensitivityRow) -> tuple[str, str]:
        return ("infeasible" if r.swing == float("inf") else fmt_pct(r.swing),
                "infeasible" if r.days_swing == float("inf") else fmt_pct(r.days_swing))

    t = Table(title=title, title_justify="left")
    for col in ("input", "kind", "value", "low -> GPUs, days", "high -> GPUs, days", "GPU\nswing", "days\nswing"):
        t.add_column(col, justify="right" if "swing" in col else "left", overflow="fold", no_wrap=col == "input")
    for r in sens.rows:
        t.add_row(r.input, r.why, r.base, cell(r.low, r.gpus_low, r.days_low), cell(r.high, r.gpus_high, r.days_high),
                  *swings(r))
    # each text column beside the names keeps at least 8 characters, as a narrow terminal can still read them
    if width is None or Console(width=10_000, markup=False).measure(t).minimum + 8 * 4 <= width:
        return t
    t = Table(title=title, title_justify="left")
    t.add_column("input (kind): value", no_wrap=True)
    t.add_column("re-planned with the input low / high; swing", overflow="fold")

    for r in sens.rows:
        gpu_swing, day_swing = swings(r)
        t.add_row(f"{r.input}\n  ({r.why}): {r.base}",
                  f"low {cell(r.low, r.gpus_low, r.days_low, ' GPUs')}\n"
                  f"high {cell(r.high, r.gpus_high, r.days_high, ' GPUs')}\n"
                  f"swing: GPUs {gpu_swing}, days {day_swing}")
    return t


def _spread_text(u: UncertainInput) -> str:
    rng = f"x{u.low:.3g}-{u.high:.3g} {u.shape}"
    return f"{u.input} {rng}" if u.sampled else f"{u.input} (fitted: in the model error)"


def confidence_table(plan: Plan) -> Table:
    """--confidence P: the cluster that meets the deadline with probability P, its days' spread, what was sampled."""
    c = _part(plan.confidence, "confidence")
    gpus = "none of the samples' own counts reaches P" if c.gpus is None else (
        f"{c.gpus:,} ({fmt_pct(c.met)} of samples meet {c.deadline_days:g} days; point estimate {c.point_gpus or 0:,})")

    def count(n: int | None) -> str:
        return "none" if n is None else f"{n:,}"

    rows: list[tuple[str, RenderableType]] = [
        (f"GPUs at P={c.probability:g}", gpus),
        ("wall-clock days", "-" if c.days_p50 is None else
         f"P10 {fmt_days(c.days_p10)}, P50 {fmt_days(c.days_p50)}, P90 {fmt_days(c.days_p90)} on that cluster"),
        ("GPUs for P50 / P90", f"{count(c.gpus_p50)} / {count(c.gpus_p90)}"),
        ("uncertain", "; ".join(_spread_text(u) for u in c.inputs)),
        ("samples", f"{c.samples}, seed {c.seed}: {c.replans} searches, {c.repriced} layouts re-priced"),
        ("method", c.method),
        ("leaves out", "; ".join(c.leaves_out)),
    ]
    return _kv_table("How sure (--confidence, docs/confidence.md)", rows)


def depends_table(plan: Plan) -> Table:
    """What the answer rests on: the model's scope and the inputs that are estimates."""
    d = _part(plan.depends_on, "assumptions")
    rows: list[tuple[str, RenderableType]] = [
        ("modelled", "; ".join(d.modelled)),
        ("not modelled", "; ".join(d.not_modelled)),
        ("estimated inputs", (", ".join(d.estimated_inputs) or "none")
         + " (--sensitivity shows which move the answer)"),
    ]
    if d.uncertain:
        rows.append(("uncertain", "; ".join(_spread_text(u) for u in d.uncertain)
                     + " (factors on the value; --confidence samples them)"))
    if plan.overrides:
        rows.append(("overrides", ", ".join(plan.overrides)))
    return _kv_table("What this answer depends on", rows)


def _transformer_model_table(plan: Plan) -> Table:
    """A real transformer's shape (docs/model.md §1b) and its FLOP accounting."""
    wl = plan.workload
    tr = wl.transformer
    assert tr is not None
    attn = (f"MLA: {tr.heads} heads, q latent {tr.q_lora_rank}, kv latent {tr.kv_lora_rank}, head dims "
            f"{tr.head_dim}+{tr.rope_head_dim} (rotary) / {tr.value_dim} (value)" if tr.attention == "mla" else
            f"{tr.heads} heads x {tr.head_dim}, {tr.kv_heads} KV heads ("
            + ("MHA" if tr.kv_heads == tr.heads else "MQA" if tr.kv_heads == 1 else "GQA") + ")")
    rows = [
        ("source", wl.label or "—"),
        ("parameters", fmt_count(wl.params)),
        ("active parameters", fmt_count(wl.active_params)),
        ("layers", f"{wl.layers:,}" + (f" ({tr.dense_layers} dense, then MoE)" if tr.dense_layers else "")),
        ("d_model", f"{wl.d_model:,}"),
        ("attention", attn),
        ("MLP", f"{tr.ffn}, d_ff {wl.d_ff:,}"),
    ]
    if wl.experts > 1:
        rows.append(("experts", f"{wl.experts} routed of d_ff {tr.expert_d_ff or wl.d_ff:,}, top-{tr.top_k}"
                     + (f", {tr.shared_experts} shared" if tr.shared_experts else "")))
    rows += [
        ("vocabulary", f"{tr.vocab:,} ({'tied' if tr.tied_embeddings else 'untied'} embedding and LM head)"),
        ("sequence length", f"{wl.seq_len:,}"),
        ("batch", f"{wl.batch_tokens // wl.seq_len:,} sequences = {wl.batch_tokens:,} tokens"),
        ("training tokens D", fmt_count(wl.tokens)),
        ("optimizer steps D / b", fmt_count(wl.steps)),
        ("model FLOPs per token", f"{fmt_sci(wl.model_flop_per_token, 4)} (attention "
         f"{fmt_pct(wl.attention_flop_per_token / wl.model_flop_per_token)}, not halved for the causal mask)"),
        ("training compute", f"{fmt_sci(wl.compute_flop, 4)} FLOP"),
    ]
    if wl.requested_compute_flop:
        rows.append(("requested compute", f"{fmt_sci(wl.requested_compute_flop, 4)} FLOP "
                     f"({wl.compute_flop / wl.requested_compute_flop:.4f}x trained)"))
    return _kv_table("Model (transformer)", rows)


def ops_table(plan: Plan) -> Table:
    """The op-level breakdown: each operation's seconds per step on the busiest device, before overlap."""
    table = Table(title="Operations per step on the busiest device (before overlap)", title_justify="left")
    table.add_column("operation", style="bold")
    table.add_column("kind")
    table.add_column("where")
    table.add_column("time", justify="right")
    table.add_column("of matmul", justify="right")
    matmul = plan.breakdown.matmul_s if plan.breakdown else None
    for op in sorted(plan.ops, key=lambda o: -o.seconds):
        table.add_row(op.name, op.kind, op.where, fmt_time(op.seconds), _share(op.seconds, matmul))
    return table


def model_table(plan: Plan) -> Table:
    """The trained model (docs/model.md §1, workload and the FLOP convention): shape, size, batch, tokens and the
    compute it implies."""
    wl = plan.workload
    if wl.transformer is not None:
        return _transformer_model_table(plan)
    rows = [
        ("source", wl.label or "—"),
        ("parameters N_p", fmt_count(wl.params)),
        ("active parameters N_p / E", fmt_count(wl.active_params)),
        ("d_model", f"{wl.d_model:,}"),
        ("d_ff", f"{wl.d_ff:,}"),
        ("layers L", f"{wl.layers:,}"),
        ("experts E", f"{wl.experts:,}" + (" (dense)" if wl.experts == 1 else " (top-1 routing)")),
        ("batch b", f"{wl.batch_tokens:,} tokens"),
        ("training tokens D", fmt_count(wl.tokens)),
        ("optimizer steps D / b", fmt_count(wl.steps)),
        ("training compute 6 (N_p / E) D", f"{fmt_sci(wl.compute_flop, 4)} FLOP"),
    ]
    if wl.requested_compute_flop:
        ratio = wl.compute_flop / wl.requested_compute_flop
        rows.append(("requested compute", f"{fmt_sci(wl.requested_compute_flop, 4)} FLOP"))
        why = ("the tokens absorb the shape's hardware-friendly rounding, in whole steps" if abs(ratio - 1) <= 0.005
               else "paper budget: D = 20 N_p of the hardware-friendly rounded shape")
        rows.append(("actual / requested", f"{ratio:.4f}x ({why})"))
    return _kv_table("Model", rows)


def cluster_table(plan: Plan) -> Table:
    rows: list[tuple[str, RenderableType]] = [
        ("GPUs", f"{plan.gpus:,} x {plan.gpu}"),
        ("nodes", f"{plan.nodes:,}"),
    ]
    if plan.racks is not None:
        if rack_scale(plan):
            per = "" if plan.racks == 1 else f", {plan.gpus_per_rack:,} GPUs used in each"
            rows.append(("racks", f"{plan.racks:,} of the {plan.rack_level} level{per}"))
        held = (plan.held_gpus or 0) > (plan.gpus or 0)
        rows.append(("spare GPUs", "0" if not plan.spare_gpus else f"{plan.spare_gpus:,} " + (
            "(held with the racks, idle: in the wall-clock cost and the power, not in GPU-hours or the compute-only "
            "cost)" if held else "(idle in a part-used node; not rented, not in GPU-hours or cost)")))
    rows.append(("GPU-hours", fmt_count(plan.gpu_hours)))
    rows += economics_rows(plan)
    if plan.deadline_days is not None:
        rows.append(("deadline", fmt_days(plan.deadline_days)))
    rows.append(("priced by", f"{plan.profile} profile" + (
        " (the paper's idealised model; --profile realistic for the one validated against published runs)"
        if plan.profile == "paper" else " (profiles/*.toml; accuracy in docs/validation.md)")
        + ". Default: the paper profile for the paper's toy workload (--compute), the realistic one for a real "
        "transformer and for launch configurations"))
    return _kv_table(f"Cluster ({plan.hardware})", rows)


def _usd(x: float) -> str:
    return f"${x:,.0f}" if x >= 1000 else f"${x:,.2f}"


def economics_rows(plan: Plan) -> list[tuple[str, RenderableType]]:
    """Cost (wall-clock held and compute-only, labelled), the price and its source, power and energy
    (planner.economics)."""
    rows: list[tuple[str, RenderableType]] = []
    held = plan.held_gpus or plan.gpus or 0
    if plan.cost_usd is not None and plan.compute_cost_usd is not None and plan.held_days is not None:
        spares = "" if held == plan.gpus else f", {held:,} GPUs incl. spares"
        rows.append((f"cost (wall-clock, {fmt_days(plan.held_days)} held{spares})", _usd(plan.cost_usd)))
        rows.append(("cost (compute-only)", f"{_usd(plan.compute_cost_usd)} (GPU-hours x price: no failures, "
                     "restarts or spares)"))
        rows.append(("price", f"${plan.price_per_gpu_hour:,.2f} per GPU-hour ({plan.price_source})"))
    else:
        rows.append(("cost", "no price: --price-per-gpu-hour (or [economics] in the hardware file) prices it"))
    if plan.facility_power_MW is not None and plan.it_power_MW is not None:
        rows.append(("power (facility)", f"{fmt_MW(plan.facility_power_MW)} = IT {fmt_MW(plan.it_power_MW)} x PUE "
                     f"{plan.pue:g} (boards, nodes and switches of {held:,} GPUs held)"))
        if plan.energy_MWh is not None and plan.held_days is not None:
            rows.append(("energy", f"{plan.energy_MWh:,.0f} MWh over {fmt_days(plan.held_days)} held"))
    else:
        rows.append(("power", f"not in the hardware file ({plan.hardware}: no [economics] board_W)"))
    for w in plan.warnings:
        rows.append(("WARNING", Text(w, style="bold red")))
    return rows


def _shard_ranks(lay) -> str:
    """The data-parallel ranks a dense weight's state is sharded over: DP x EP x CP (planner.cost.memory)."""
    parts = [f"{name} {v}" for name, v in (("DP", lay.dp), ("EP", lay.ep), ("CP", lay.cp)) if v > 1 or name == "DP"]
    n = lay.dp * lay.ep * lay.cp
    return " x ".join(parts) + (f" = {n} ranks" if len(parts) > 1 else f" ({n} rank{'s' if n > 1 else ''})")


def layout_table(plan: Plan) -> Table:
    """Each degree and its factor on each network level (columns named by the levels, bottom-up)."""
    lay = _part(plan.layout, "layout")
    table = Table(title="Layout: factor of each degree per network level", title_justify="left")
    table.add_column("degree", style="bold")
    table.add_column("total", justify="right", style="bold cyan")
    for name in lay.levels:
        table.add_column(name, justify="right")
    ones = [1] * len(lay.levels)
    for d in DEGREES:
        if d == "cp" and lay.cp == 1 and plan.workload.transformer is None:
            continue  # the paper's toy model has no sequences to split
        table.add_row(BY_NAME[d].title, f"{getattr(lay, d):,}", *[f"{f:,}" for f in lay.placement.get(d, ones)])
    products = [math.prod(lay.placement.get(d, ones)[h] for d in DEGREES) for h in range(len(lay.levels))]
    table.add_section()
    table.add_row("GPUs", f"{plan.gpus:,}", *[f"{p:,}" for p in products], style="dim")
    return table


def _auto(value: int | None) -> str:
    return "auto" if value is None else str(value)


def schedule_table(plan: Plan) -> Table:
    lay = _part(plan.layout, "layout")
    bubble_note = ("zero bubble" if lay.schedule == "zb-h2" else "interleaved one-forward-one-backward"
                   if lay.interleave > 1 else "one-forward-one-backward")
    if lay.pp == 1:
        bubble_note += "; no pipeline (pp = 1), so no bubble under either schedule"
    savers: list[tuple[str, RenderableType]] = []
    if plan.workload.transformer is not None:
        savers = [
            ("sequence parallel", BY_NAME["sp"].label(lay.sp)),
            ("recomputation", BY_NAME["recompute"].label(lay.recompute)
             + {0: "", 1: " (attention core re-run in backward)",
                2: " (every layer re-run from its input)"}[lay.recompute]),
            ("ZeRO stage", f"{lay.zero} (" + {1: "optimizer state", 2: "optimizer state and gradients",
                                               3: "optimizer state, gradients and weights: FSDP"}[lay.zero]
             + f" sharded over {_shard_ranks(lay)})"),
            ("precision", _precision_text(plan.workload.precision, plan.workload.recipe)),
        ]
    extra: list[tuple[str, RenderableType]] = []
    if lay.etp is not None or lay.expert_ep is not None:  # Megatron's parallel folding (docs/model.md §1c)
        eep, etp = lay.expert_ep or 1, lay.etp if lay.etp is not None else lay.tp_ff
        edp = lay.dp * lay.ep * lay.cp * lay.tp_ff * lay.tp_model // (eep * etp)
        extra.append(("expert layout (folded)", f"ep {eep} x etp {etp} x expert-dp {edp} over each stage's dp x cp "
                      "x tp ranks"))
    if lay.first_stage_layers is not None or lay.last_stage_layers is not None:
        extra.append(("end stages (layers)", f"first {_auto(lay.first_stage_layers)}, last "
                      f"{_auto(lay.last_stage_layers)} (virtual stages; the others split the rest evenly)"))
    return _kv_table("Pipeline schedule and memory savers" if savers else "Pipeline schedule", [
        *savers,
        ("schedule", f"{lay.schedule} ({bubble_note})"),
        ("interleave i", str(lay.interleave)),
        *extra,
        ("microbatches m (per DP rank)", str(lay.microbatches)),
        (("microbatch b / (N_DP N_EP N_CP m)", f"{_tokens(lay.nanobatch_tokens)} tokens") if plan.workload.transformer
         else ("nanobatch b / (E N_DP m)", f"{_tokens(lay.nanobatch_tokens)} tokens")),
    ])


def time_table(plan: Plan) -> Table:
    """Step time and its breakdown (Eq. 21 plus the critical-path floor, docs/model.md §6)."""
    b = _part(plan.breakdown, "step-time breakdown")
    step = b.step_s
    table = Table(title="Time per optimizer step", title_justify="left")
    table.add_column("component", style="bold")
    table.add_column("time", justify="right")
    table.add_column("of step", justify="right")
    table.add_column("note")
    table.add_row("step time", fmt_time(step), "100%", "the larger of Eq. 21 and the floor below", style="bold")
    table.add_row("  matmul", fmt_time(b.matmul_s), _share(b.matmul_s, step), "GEMMs, all microbatches")
    table.add_row("  TP bandwidth", fmt_time(b.tp_s), _share(b.tp_s, step),
                  "TP + PP/EP hide under matmuls if their sum is less")
    table.add_row("  PP/EP bandwidth", fmt_time(b.pp_ep_s), _share(b.pp_ep_s, step), "counted with TP (row above)")
    if b.zero_s:
        table.add_row("  ZeRO-2/3 traffic", fmt_time(b.zero_s), _share(b.zero_s, step),
                      "reduce-scatters / all-gathers during the microbatches, counted with TP")
    if b.cp_s:
        table.add_row("  CP key/value ring", fmt_time(b.cp_s), _share(b.cp_s, step),
                      "hides under the attention kernels only")
    table.add_row("  DP bandwidth", fmt_time(b.dp_s), _share(b.dp_s, step),
                  "gradient all-reduce, overlapped with compute (--dp-overlap)" if plan.dp_overlap
                  else "gradient all-reduce, in its own phase")
    table.add_row("  serial latency", fmt_time(b.latency_s), _share(b.latency_s, step),
                  "Eq. 21's t_lat (DP, and 1F1B's TP/PP/EP hops)")
    table.add_row("  bubble", fmt_time(b.bubble_s), _share(b.bubble_s, step), f"f_b = {b.bubble_fraction:.3g}")
    table.add_section()
    table.add_row("Eq. 21", fmt_time(b.eq21_s), _share(b.eq21_s, step), "pipelined time (shares above overlap)")
    table.add_row("critical path", fmt_time(b.critical_path_s), _share(b.critical_path_s, step),
                  "1 microbatch, all L blocks")
    table.add_row("floor", fmt_time(b.floor_s), _share(b.floor_s, step), "DP + critical path: no step is shorter")
    table.add_row("network (all)", fmt_time(b.network_s), _share(b.network_s, step), "hidden or not")
    return table


def run_table(plan: Plan) -> Table:
    """Training time, MFU (with its peak and FLOP convention stated, docs/model.md §1 and §6) and the binding
    bottleneck."""
    rows: list[tuple[str, RenderableType]] = [("training time", fmt_days(plan.training_days))]
    if plan.deadline_days is not None:
        rows.append(("deadline", fmt_days(plan.deadline_days)))
    rows += [
        ("MFU", fmt_pct(plan.mfu)),
        ("HFU", fmt_pct(plan.hfu) + " (model + recomputed FLOPs)"),
        ("  against peak", f"{fmt_flops(plan.peak_flops)} per GPU (dense "
         f"{'16-bit' if plan.workload.precision == 'bf16' else plan.workload.precision.upper()}, max clock)"),
        ("  FLOP counted as", plan.flop_convention),
        ("bottleneck", Text(plan.bottleneck or "—", style="bold yellow")),
    ]
    return _kv_table("Run", rows)


def memory_table(plan: Plan) -> Table:
    """Bytes per GPU by component (docs/model.md §7, memory) against HBM capacity."""
    m = _part(plan.memory, "memory breakdown")
    table = Table(title="Memory per GPU", title_justify="left")
    table.add_column("component", style="bold")
    table.add_column("GB", justify="right")
    table.add_column("of HBM", justify="right")
    lay = plan.layout
    zero = lay.zero if lay is not None and plan.workload.transformer is not None else None
    sharding = f"{OPTIMIZER_SHARDING} over DP" if zero is None or lay is None else \
        f"ZeRO-{zero} over {_shard_ranks(lay)}"
    for label, value in (
        ("weights (16-bit)" + (", shard + gathered units" if zero == 3 else ""), m.weights_bytes),
        ("gradients (16-bit)" + (", shard + 1 full unit" if zero in (2, 3) else ""), m.grads_bytes),
        (f"optimizer (fp32 master + Adam, {sharding})", m.optimizer_bytes),
        ("activations kept for backward", m.activations_bytes),
        ("allocator fragmentation (reserved, not allocated)", m.fragmentation_bytes),
        ("GEMM workspaces (cuBLAS, Transformer Engine)", m.workspace_bytes),
        ("NCCL communicator buffers", m.nccl_bytes),
        ("CUDA context and framework baseline", m.context_bytes),
        ("reserve (context, workspace)" if m.context_bytes == 0 else "reserve", m.reserve_bytes),
    ):
        if value == 0 and label.split()[0] in ("allocator", "GEMM", "NCCL", "CUDA", "reserve"):
            continue  # a profile that does not price a component (the paper's: all but the reserve)
        table.add_row(label, fmt_gb(value), _share(value, m.capacity))
    table.add_section()
    table.add_row("total", fmt_gb(m.total_bytes), _share(m.total_bytes, m.capacity), style="bold")
    if m.headroom_bytes > 0:
        table.add_row("headroom kept free (total + headroom <= HBM)", fmt_gb(m.headroom_bytes),
                      _share(m.headroom_bytes, m.capacity))
    # Decimal GB throughout; the GiB beside it is the unit of datasheets' "80 GB" (an H100 shows 85.07 GB = 79.2 GiB).
    table.add_row("capacity (HBM usable)", f"{fmt_gb(m.capacity)} ({m.capacity / 2**30:.1f} GiB)", "100%")
    verdict = {"fits": ("fits", "green"), "tight": ("TIGHT: fits HBM, not the headroom", "bold yellow")}.get(
        m.verdict, ("DOES NOT FIT", "bold red"))
    table.add_row("", Text(verdict[0], style=verdict[1]), "")
    return table


def _decision_rows(s) -> list[tuple[str, str]]:
    """CP-SAT's share of the decision: what its deciding model chose among, and where the time went."""
    share = s.cpsat_s / s.wall_s if s.wall_s > 0 else 0.0
    return [
        ("CP-SAT chose among", f"{s.candidates:,} degree tuple{'' if s.candidates == 1 else 's'} and "
                               f"{s.candidate_pairs:,} placement choice{'' if s.candidate_pairs == 1 else 's'} "
                               "(every tuple no sound bound rules out)"),
        ("models solved", f"{s.models:,} ({s.evaluated:,} tuples and placement choices in all)"),
        ("time in CP-SAT", f"{fmt_time(s.cpsat_s)} ({fmt_pct(share)} of the search; the rest is presolve and model "
                           "building)"),
    ]


def solver_table(plan: Plan) -> Table:
    """What the search proved. 'proven optimal' appears only when the solver's status is optimal."""
    s = plan.solver
    rows = [
        ("solver", s.name),
        ("status", s.status),
        ("wall time", fmt_time(s.wall_s)),
        ("space size", f"{s.space_size:,} degree tuples"),
        *(_decision_rows(s) if s.name == "cpsat" else [("layouts evaluated", f"{s.evaluated:,}")]),
        ("gap", "unknown" if s.gap is None else f"{s.gap:.3g}"),
    ]
    if s.bound is not None:
        rows.append(("proven bound", f"{s.bound:.6g}" + (f" ({s.stage})" if s.stage else "")))
    elif s.stage:
        rows.append(("objective stage", s.stage))
    if s.detail:
        rows.append(("detail", s.detail))
    return _kv_table("Solver", rows)


def proof_line(plan: Plan) -> Text:
    s = plan.solver
    if s.status == "optimal":
        goal = "fewest GPUs, then least step time, then least network time"
        if plan.fewest_gpus is not None:
            goal = "fewest racks held, then fewest GPUs, then least step time, then least network time"
        if plan.fixed_gpus or plan.deadline_days is None:
            goal = "least step time on this many GPUs, then least network time"
        return Text.assemble(("proven optimal", "bold green"), f" ({goal}) over the whole search space.")
    if s.status == "infeasible":
        return Text.assemble(("proven infeasible", "bold red"),
                             ": no layout in the search space satisfies the request.")
    if plan.layout is None:
        return Text.assemble(("NOT PROVEN INFEASIBLE", "bold red"),
                             ": the search stopped before finding any layout; raise --time-limit to search longer.")
    bound = "unknown" if s.bound is None else f"{s.bound:.6g}"
    gap = "unknown" if s.gap is None else f"{s.gap:.3g}"
    return Text.assemble(("NOT PROVEN OPTIMAL", "bold red"),
                         f": best layout found before the search stopped; proven bound {bound}, gap {gap}.")


def why_text(plan: Plan) -> Text:
    """The explanation of a plan without a layout, one bullet per line (what would be feasible included)."""
    lines = [ln.strip() for ln in plan.explanation.splitlines() if ln.strip()]
    return Text.assemble(("Why:", "bold"), *(f"\n  - {ln}" for ln in lines))


def smaller_text(plan: Plan) -> Text:
    """Why the cluster is not smaller: the next sizes below the plan's and why each fails."""
    fewest = plan.fewest_gpus or plan.gpus or 0
    return Text.assemble((f"Why not fewer than {fewest:,} GPUs:", "bold"),
                         *(f"\n  - {c.gpus:,}: {c.status.replace('_', ' ')}: {c.why}" for c in plan.smaller_clusters))


def plan_renderables(plan: Plan, evaluated: bool = False, width: int | None = None) -> list[RenderableType]:
    """Everything `plan` (or `evaluate`, with evaluated=True: no solver section) prints, in order; `width` (the
    terminal's columns) lets a wide table take a narrow form."""
    out: list[RenderableType] = [summary_line(plan, evaluated), model_table(plan)]
    if plan.layout is None:
        out += [solver_table(plan), proof_line(plan)]
        if plan.explanation:  # the report on stdout says why, not only the error line on stderr
            out.append(why_text(plan))
        return out
    out += [cluster_table(plan), layout_table(plan), schedule_table(plan), time_table(plan)]
    if plan.workload.transformer is not None and plan.ops:
        out.append(ops_table(plan))
    out += [run_table(plan), goodput_table(plan), memory_table(plan)]
    if plan.depends_on is not None:
        out.append(depends_table(plan))
    if plan.sensitivity is not None:
        out.append(sensitivity_table(plan, width))
    if plan.confidence is not None:
        out.append(confidence_table(plan))
    if evaluated:
        out.append(Text("Layout given (flags or --plan file): priced with the cost model, not searched.",
                        style="italic"))
    else:
        out += [solver_table(plan), proof_line(plan)]
        if plan.smaller_clusters:
            out.append(smaller_text(plan))
    for note in plan.notes:
        out.append(Text(f"note: {note}"))
    return out


def print_plan(console: Console, plan: Plan, evaluated: bool = False) -> None:
    for item in plan_renderables(plan, evaluated, console.width):
        console.print(item)


# --------------------------------------------------------------------------------------------------
# Hardware
# --------------------------------------------------------------------------------------------------


