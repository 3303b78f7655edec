"""From plan to launch: the chosen layout as Megatron-LM arguments or a torchtitan TOML job config.

Both frameworks are spelled as the named releases define them (MEGATRON, TORCHTITAN); tests/test_export.py reads the
field names out of those packages and fails on any name emitted here that they do not define. A layout a framework
cannot run exactly (the paper's second TP axis, ZB-H2, a placement its rank order cannot express, an option it does
not have) raises ExportError naming what to change; nothing is silently translated into a different layout.

Conventions (docs/model.md §1b, §7b): Megatron's data-parallel size counts the expert ranks (ours: N_DP N_EP);
its virtual pipeline size is the number of model chunks per rank (our interleave i); expert layers use N_TP,ff as
their tensor-parallel size. torchtitan shards data parallelism with FSDP (ZeRO-3) over N_DP N_EP ranks.
"""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.economics import fmt_pct
from planner.errors import InvalidInput
from planner.parallel.dimensions import DEGREES, DIMENSIONS
from planner.profile import framework_of
from planner.schema import LAYOUT_EXTRA, Hardware, LaunchDocument, Layout, Plan, Workload

MEGATRON = "megatron-core 0.16.1"
"""The release whose configuration names the Megatron arguments use (Megatron-LM spells each field with dashes)."""
TORCHTITAN = "torchtitan 0.2.2"
"""The release whose job-config dataclasses (torchtitan.config.job_config) the TOML sections and keys follow; later
releases replaced the TOML files with Python config registries."""

TARGETS = ("megatron", "torchtitan")

RANK_ORDER = ("tp_ff", "cp", "ep", "dp", "pp")
"""Innermost first: Megatron's default rank order 'tp-cp-ep-dp-pp' and torchtitan's device mesh (tp innermost, then
cp, the data-parallel shard, pp outermost). Consecutive ranks share the lowest network level."""


class ExportError(InvalidInput):
    """The layout cannot be launched exactly on the target framework."""


@dataclass(frozen=True)
class Launch:
    """The layout in the words both frameworks share."""

    tp: int
    pp: int
    vpp: int
    cp: int
    ep: int
    dp: int
    """Data-parallel size as both frameworks count it: N_DP N_EP (the dense layers' replicas)."""
    micro_batch: int
    """Sequences per microbatch per data-parallel rank."""
    global_batch: int
    seq_len: int
    sp: bool
    recompute: int
    zero: int
    fp8: bool
    """The layers' GEMMs in low precision (FP8 or FP4, `recipe` says which)."""
    layers_per_stage: int
    first_less: int
    """Layers the first virtual stage holds fewer than `layers_per_stage` (the last: `last_less`)."""
    last_less: int
    overlap: bool
    experts: int
    etp: int | None = None
    """Expert tensor-parallel size of a folded expert layout (None: tp); `ep` is then the folded expert degree."""
    first_layers: int | None = None
    """Custom layer counts of the first and last virtual stages (None: the automatic split above)."""
    last_layers: int | None = None
    recipe: str | None = None
    """Low-precision recipe (planner.schema.RecipeName; None with fp8: per-tensor current scaling)."""

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp


def layout_of(plan: Plan) -> Layout:
    lay = plan.layout
    if lay is None:
        raise ExportError(f"the plan has no layout (status '{plan.status}'); nothing to export")
    ones = (1,) * len(lay.levels)
    return Layout(**{d.name: getattr(lay, d.name) for d in DIMENSIONS}, **{k: getattr(lay, k) for k in LAYOUT_EXTRA},
                  schedule=lay.schedule, placement={d: tuple(lay.placement.get(d, ones)) for d in DEGREES})


def rank_order_placement(hw: Hardware, layout: Layout) -> dict[str, tuple[int, ...]] | None:
    """The placement the frameworks' rank order (RANK_ORDER) gives this layout's degrees on `hw`, or None if their
    ranks would straddle a level's groups (planner.parallel.space.rank_order_factors)."""
    from planner.parallel.space import Tuples, rank_order_factors

    fixed, ok = rank_order_factors(hw, Tuples.from_layouts([layout]), RANK_ORDER)
    return {d: tuple(int(x) for x in fixed[d][0]) for d in DEGREES} if ok[0] else None


def _placement_text(placement: dict[str, tuple[int, ...]]) -> str:
    return ";".join(f"{d}={','.join(map(str, f))}" for d, f in placement.items() if any(x > 1 for x in f))


def _end_split(hw: Hardware, wl: Workload, layout: Layout) -> int:
    """r_f of the priced layout (planner.cost.terms.end_split)."""
    from planner.cost import terms as T
    from planner.parallel.space import Tuples

    cols = Tuples.from_layouts([layout])
    shape = T.shape_times(hw, wl, cols)
    extra = T.recompute_extra({"fwd": shape["block_fwd_s"], "core_fwd": shape["block_core_fwd_s"]},
                              cols["recompute"])
    rf, _ = T.end_split(wl, cols, shape["block_s"] + extra, shape["embed_s"], shape["head_s"])
    return int(np.asarray(rf)[0])


def launch_of(plan: Plan, hw: Hardware, wl: Workload, target: str) -> Launch:
    """The plan's layout in the frameworks' words, or ExportError naming what `target` cannot run."""
    from planner.parallel.dimensions import stage_split

    if target not in TARGETS:
        raise ExportError(f"unknown export target '{target}'; choose one of {', '.join(TARGETS)}")
    name = {"megatron": "Megatron-LM", "torchtitan": "torchtitan"}[target]
    if wl.transformer is None:
        raise ExportError(f"the paper's toy model is not a {name} model: export needs a transformer (--model PRESET)")
    lay = layout_of(plan)
    fix = "re-plan with"
    if lay.tp_model > 1:
        raise ExportError(f"{name} has no second tensor-parallel axis (tp_model = {lay.tp_model}, the paper's 2D TP): "
                          f"{fix} --tp-model 1, or --emit {target} (which searches only what {name} runs)")
    tr = wl.transformer
    if tr.attention == "gqa" and tr.kv_heads % lay.tp_ff:
        raise ExportError(f"{name} splits the {tr.kv_heads} KV heads over the tensor-parallel ranks (no replication): "
                          f"tp {lay.tp_ff} must divide {tr.kv_heads}; {fix} --emit {target}")
    if lay.schedule == "zb-h2" and lay.pp > 1:  # with one stage there is no pipeline: both schedules are the same run
        raise ExportError(f"{name} has no ZB-H2 schedule: {fix} --schedule 1f1b, or --emit {target}")
    if target == "torchtitan":
        if lay.zero != 3 and lay.dp * lay.ep > 1:
            raise ExportError(f"torchtitan shards data parallelism with FSDP (ZeRO-3), not ZeRO-{lay.zero}: {fix} "
                              "--zero 3, or --emit torchtitan")
        if lay.recompute == 1:
            raise ExportError("torchtitan has no attention-core-only recomputation (its selective modes keep the "
                              f"attention output): {fix} --recompute none or full, or --emit torchtitan")
        if lay.tp_ff > 1 and not lay.sp:
            raise ExportError(f"torchtitan's tensor parallelism always shards the sequence: {fix} --sp on")
        if wl.recipe_name not in (None, "current", "rowwise"):
            raise ExportError(f"the torchtitan export writes torchao's float8 ('tensorwise' or 'rowwise'), not the "
                              f"'{wl.recipe_name}' recipe: re-plan with --precision fp8 or fp8-rowwise, or --emit "
                              "megatron")
    elif wl.recipe_name == "rowwise":
        raise ExportError("Megatron-LM has no row-wise FP8 recipe (--fp8-recipe tensorwise, delayed, blockwise, "
                          "mxfp8): re-plan with another --precision, or --emit torchtitan")
    if lay.interleave > 1 and lay.microbatches % lay.pp:
        raise ExportError(f"{name}'s interleaved schedule runs microbatches in rounds of pp = {lay.pp}, but this "
                          f"layout has {lay.microbatches}: re-plan with --emit {target}")
    expected = rank_order_placement(hw, lay)
    if expected is None:
        raise ExportError(f"{name}'s rank order (tp innermost, then cp, ep, dp, pp) would split a group of these "
                          f"degrees across {hw.name}'s network levels: re-plan with --emit {target}")
    if expected != {d: tuple(lay.placement[d]) for d in DEGREES}:
        raise ExportError(f"{name}'s rank order (tp innermost, then cp, ep, dp, pp) cannot express the placement "
                          f"{_placement_text(lay.placement)}; it would place the degrees as "
                          f"{_placement_text(expected)}: re-plan with --emit {target} (which searches only what it "
                          f"runs), or price that placement with `planner evaluate --plan FILE --placement "
                          f"'{_placement_text(expected)}'`")
    if target == "torchtitan" and (lay.folded or lay.custom_stages):
        raise ExportError("the torchtitan export has no folded expert layout (etp) or custom end stages: re-plan "
                          "without them, or --emit megatron")
    seqs = wl.batch_tokens // wl.seq_len
    eep, etp = lay.expert_degrees
    common = dict(tp=lay.tp_ff, pp=lay.pp, vpp=lay.interleave, cp=lay.cp, ep=eep, dp=lay.dp * lay.ep,
                  micro_batch=seqs // (lay.dp * lay.ep * lay.microbatches), global_batch=seqs, seq_len=wl.seq_len,
                  sp=bool(lay.sp), recompute=lay.recompute, zero=lay.zero, fp8=wl.precision != "bf16",
                  recipe=wl.recipe_name,
                  overlap=plan.dp_overlap, experts=wl.experts, etp=etp if lay.folded else None)
    if lay.custom_stages:  # the counts as priced (planner.cost.terms.custom_stage_layers)
        from planner.cost.terms import custom_stage_layers
        from planner.parallel.space import Tuples

        first, c_mid, last = (int(np.asarray(x)[0]) for x in
                              custom_stage_layers(wl, Tuples.from_layouts([lay])))
        return Launch(**common, layers_per_stage=c_mid, first_less=0, last_less=0,  # type: ignore[arg-type]
                      first_layers=first, last_layers=last)
    c, r = stage_split(wl.layers, lay.pp, lay.interleave)
    rf = _end_split(hw, wl, lay) if lay.pp > 1 and r else 0
    return Launch(**common, layers_per_stage=c if lay.pp > 1 else wl.layers,  # type: ignore[arg-type]
                  first_less=rf, last_less=r - rf)


# --------------------------------------------------------------------------------------------------
# Megatron-LM
# --------------------------------------------------------------------------------------------------

MEGATRON_FIELD_OF_FLAG = {
    "--fp8-format": "fp8",
    "--fp4-format": "fp4",
    "--decoder-first-pipeline-num-layers": "num_layers_in_first_pipeline_stage",
    "--decoder-last-pipeline-num-layers": "num_layers_in_last_pipeline_stage",
}
"""Flags Megatron-LM spells differently from the configuration field they set; every other flag is its field with
dashes."""


def megatron_args(launch: Launch, wl: Workload) -> list[tuple[str, str | None]]:
    """(flag, value or None for a switch), in launch order."""
    a: list[tuple[str, str | None]] = [
        ("--tensor-model-parallel-size", str(launch.tp)),
        ("--pipeline-model-parallel-size", str(launch.pp)),
    ]
    if launch.vpp > 1:
        a.append(("--virtual-pipeline-model-parallel-size", str(launch.vpp)))  # model chunks per rank
    if launch.first_layers is not None and launch.last_layers is not None:  # custom end stages
        if launch.vpp == 1:
            a.append(("--decoder-first-pipeline-num-layers", str(launch.first_layers)))
            a.append(("--decoder-last-pipeline-num-layers", str(launch.last_layers)))
        else:  # Megatron's first/last counts are per rank; a virtual stage's needs the layout string
            a.append(("--pipeline-model-parallel-layout", pipeline_layout(launch)))
    elif launch.first_less or launch.last_less:
        if launch.vpp > 1 and (launch.first_less, launch.last_less) not in ((1, 1), (1, 0), (0, 1)):
            # More than one layer's worth at an end: Megatron's explicit per-virtual-stage layout says it.
            ends = replace(launch, first_layers=launch.layers_per_stage - launch.first_less,
                                       last_layers=launch.layers_per_stage - launch.last_less)
            a.append(("--pipeline-model-parallel-layout", pipeline_layout(ends)))
        elif launch.vpp > 1:
            if launch.first_less:
                a.append(("--account-for-embedding-in-pipeline-split", None))
            if launch.last_less:
                a.append(("--account-for-loss-in-pipeline-split", None))
        else:
            a.append(("--decoder-first-pipeline-num-layers", str(launch.layers_per_stage - launch.first_less)))
            a.append(("--decoder-last-pipeline-num-layers", str(launch.layers_per_stage - launch.last_less)))
    if launch.cp > 1:
        a.append(("--context-parallel-size", str(launch.cp)))
    if launch.experts > 1:
        a.append(("--expert-model-parallel-size", str(launch.ep)))
        a.append(("--expert-tensor-parallel-size", str(launch.tp if launch.etp is None else launch.etp)))
    if launch.sp:
        a.append(("--sequence-parallel", None))
    a += [("--micro-batch-size", str(launch.micro_batch)), ("--global-batch-size", str(launch.global_batch))]
    if launch.recompute == 1:
        a += [("--recompute-granularity", "selective"), ("--recompute-modules", "core_attn")]
    elif launch.recompute == 2:
        a += [("--recompute-granularity", "full"), ("--recompute-method", "uniform"), ("--recompute-num-layers", "1")]
    if launch.zero == 1:
        a.append(("--use-distributed-optimizer", None))
    else:
        a += [("--use-megatron-fsdp", None),
              ("--data-parallel-sharding-strategy", "optim_grads" if launch.zero == 2 else "optim_grads_params")]
    if launch.overlap:
        a += [("--overlap-grad-reduce", None), ("--overlap-param-gather", None)]
    a.append(("--bf16", None))
    if launch.fp8 and launch.recipe == "nvfp4":
        a += [("--fp4-format", "e2m1"), ("--fp4-recipe", "nvfp4")]
    elif launch.fp8:
        a += [("--fp8-format", "hybrid"), ("--fp8-recipe", MEGATRON_FP8_RECIPE[launch.recipe or "current"])]
    return a


MEGATRON_FP8_RECIPE = {"current": "tensorwise", "delayed": "delayed", "blockwise": "blockwise", "mxfp8": "mxfp8"}
"""The planner's FP8 recipes in Megatron-LM's --fp8-recipe words."""


def comment_text(text: str) -> str:
    """`text` safe inside a one-line comment of bash and of TOML: every control character (a newline would end the
    comment and make the next words a command or a table) written as a visible escape. Names are refused with
    control characters where they are read (planner.schema.check_name); this holds whatever reaches here."""
    return "".join(c if (32 <= ord(c) < 127 or ord(c) >= 160) and c not in "\u2028\u2029" else repr(c)[1:-1]
                   for c in text)


def prediction_lines(plan: Plan) -> list[str]:
    """The plan's prediction as comment lines (bash and TOML alike): step time, MFU, peak memory per GPU, days, the
    profile that priced it and its proof status, so a launched job can be checked against it. Every line goes
    through comment_text."""
    if plan.step_time_s is None or plan.memory is None or plan.mfu is None:
        return []
    m = plan.memory
    days = "" if plan.training_days is None else f", {plan.training_days:.4g} days of compute"
    if plan.wall_clock_days is not None and plan.training_days is not None \
            and abs(plan.wall_clock_days - plan.training_days) > 1e-9:
        days += f" ({plan.wall_clock_days:.4g} wall-clock with failures)"
    proof = {"optimal": "proven optimal", "feasible": "not proven optimal", "infeasible": "INFEASIBLE",
             "unknown": "unknown"}[plan.status] if plan.solver.name != "none" else "evaluated, not searched"
    lines = [f"predicted by planner ({plan.profile} profile, {proof}): step {plan.step_time_s:.4g} s, MFU "
             f"{fmt_pct(plan.mfu)} of peak {plan.peak_flops / 1e12:.4g} TFLOP/s per GPU{days}",
             f"predicted memory per GPU: {m.total_bytes / 1e9:.4g} GB of {m.capacity / 1e9:.4g} GB usable HBM "
             f"({m.total_bytes / 2**30:.4g} of {m.capacity / 2**30:.4g} GiB)"
             + (f" (+ {m.headroom_bytes / 1e9:.3g} GB headroom kept free)" if m.headroom_bytes else "")
             + f"; bottleneck: {plan.bottleneck or '-'}"]
    from planner.cost.terms import HOST_FLOOR_UNPRICED

    if plan.depends_on is not None and HOST_FLOOR_UNPRICED in plan.depends_on.not_modelled:
        lines.append("MoE: no host-bound floor is priced: the step assumes the CPU issues the MoE layers' kernels "
                     "faster than the GPUs run them (CUDA graphs); launched eagerly it can be slower (profile.moe."
                     "eager_host_layer_us is what `planner validate` fits for published runs without graphs)")
    return ["# " + comment_text(line) for line in lines]


def family_model_lines(wl: Workload) -> list[str]:
    """For a shape scaled from a model family (--model-family), that shape as comment lines: the planner chose it,
    so the launch script cannot know it otherwise (a preset or a file the user already has). Every line goes
    through comment_text."""
    tr = wl.transformer
    if wl.family is None or tr is None:
        return []
    experts = (f", {wl.experts} experts (top-{tr.top_k}) of width {tr.expert_d_ff or wl.d_ff:,}"
               if wl.experts > 1 else "")
    lines = [f"model (the {wl.family} family scaled to {wl.compute_flop:.3g} FLOP; set it in your script): "
             f"{wl.layers} layers, hidden {wl.d_model:,}, FFN {wl.d_ff:,} ({tr.ffn}){experts}, {tr.heads} attention "
             f"heads of {tr.head_dim}, {tr.kv_heads} KV heads, vocabulary {tr.vocab:,}",
             f"data: sequences of {wl.seq_len:,} tokens, {wl.batch_tokens // wl.seq_len:,} per step, "
             f"{wl.steps:,.0f} steps ({wl.tokens:.3g} tokens)"]
    return ["# " + comment_text(line) for line in lines]


def pipeline_layout(launch: Launch) -> str:
    """Megatron's --pipeline-model-parallel-layout for custom end stages: the embedding (E) and the first virtual
    stage's layers (t), the middle virtual stages, the last one's layers and the loss (L); '|' separates stages."""
    def layers(n: int) -> str:
        return "" if n == 0 else "t" if n == 1 else f"t*{n}"

    middle = launch.pp * launch.vpp - 2
    return (f"E{layers(launch.first_layers or 0)}|"
            + (f"({layers(launch.layers_per_stage)}|)*{middle}" if middle else "")
            + f"{layers(launch.last_layers or 0)}L")


def megatron_text(plan: Plan, launch: Launch, wl: Workload) -> str:
    """A bash array to `source`: every value through shlex.quote, every name in the comment through comment_text."""
    lines = [f"# Megatron-LM arguments ({MEGATRON} names) for the {plan.status} plan on {plan.gpus} x "
             f"{comment_text(plan.gpu)}: "
             f"world size {launch.gpus} = tp {launch.tp} x cp {launch.cp} x pp {launch.pp} x dp {launch.dp}"
             + (f" (dp counts ep {launch.ep})" if launch.ep > 1 and launch.etp is None else "")
             + (f"; experts folded: ep {launch.ep} x etp {launch.etp} over dp x cp x tp" if launch.etp is not None
                else ""),
             *prediction_lines(plan),
             *_megatron_pricing(plan),
             *family_model_lines(wl),
             "# add the model, data and optimizer flags of your script; keep the default rank order (tp-cp-ep-dp-pp)",
             "PLANNER_ARGS=("]
    for flag, value in megatron_args(launch, wl):
        lines.append(f"  {shlex.quote(flag)}" + (f" {shlex.quote(value)}" if value is not None else ""))
    lines.append(")")
    return "\n".join(lines)


def parse_megatron(text: str) -> dict[str, str | None]:
    """Flags and values of megatron_text's output (for the round trip)."""
    tokens = [tok for line in text.splitlines() if line.strip().startswith("--") for tok in shlex.split(line)]
    out: dict[str, str | None] = {}
    for k, tok in enumerate(tokens):
        if tok.startswith("--"):
            nxt = tokens[k + 1] if k + 1 < len(tokens) else None
            out[tok] = None if nxt is None or nxt.startswith("--") else nxt
    return out


# --------------------------------------------------------------------------------------------------
# torchtitan
# --------------------------------------------------------------------------------------------------


def torchtitan_sections(launch: Launch) -> dict[str, dict[str, object]]:
    """TOML sections (dotted paths into JobConfig) and their keys."""
    parallelism: dict[str, object] = {
        "data_parallel_replicate_degree": 1,
        "data_parallel_shard_degree": launch.dp,
        "fsdp_reshard_after_forward": "always",  # gathered again for the backward pass, as priced (ZeRO-3)
        "tensor_parallel_degree": launch.tp,
        "pipeline_parallel_degree": launch.pp,
        "context_parallel_degree": launch.cp,
    }
    if launch.pp > 1:
        parallelism.update({
            "pipeline_parallel_schedule": "Interleaved1F1B" if launch.vpp > 1 else "1F1B",
            "pipeline_parallel_microbatch_size": launch.micro_batch,
            "pipeline_parallel_layers_per_stage": launch.layers_per_stage,
            "pipeline_parallel_first_stage_less_layers": launch.first_less,
            "pipeline_parallel_last_stage_less_layers": launch.last_less,
        })
    if launch.experts > 1:
        parallelism["expert_parallel_degree"] = launch.ep
        parallelism["expert_tensor_parallel_degree"] = launch.tp
    # With pipelining, the local batch is split into microbatches of pipeline_parallel_microbatch_size; without, the
    # local batch is one microbatch and torchtitan accumulates global / (local x dp) of them.
    local = launch.global_batch // launch.dp if launch.pp > 1 else launch.micro_batch
    sections: dict[str, dict[str, object]] = {
        "training": {"local_batch_size": local, "global_batch_size": launch.global_batch, "seq_len": launch.seq_len},
        "parallelism": parallelism,
        "activation_checkpoint": {"mode": {0: "none", 2: "full"}[launch.recompute]},
    }
    if launch.fp8:
        sections["model"] = {"converters": ["quantize.linear.float8"]}
        # torchao's per-tensor current scaling ('tensorwise') or its row-wise scaling
        sections["quantize.linear.float8"] = {"recipe_name": "rowwise" if launch.recipe == "rowwise" else "tensorwise"}
    return sections


TOML_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def toml_string(v: str) -> str:
    """A TOML basic string: quote, backslash and every control character escaped as TOML 1.0 requires."""
    return '"' + "".join(TOML_ESCAPES.get(c) or (f"\\u{ord(c):04X}" if ord(c) < 32 or ord(c) == 127 else c)
                         for c in v) + '"'


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return toml_string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return str(v)


def _framework_of(profile: str) -> str | None:
    """FRAMEWORK of a 'NAME/FRAMEWORK' profile name (planner.profile.framework_of), else None."""
    pair = framework_of(profile)
    return pair[1] if pair is not None and all(pair) else None


def _torchtitan_pricing(plan: Plan) -> list[str]:
    """What priced the torchtitan config: the profile as torchtitan runs it ('NAME/torchtitan'), as another
    framework runs it ('NAME/OTHER'), or, for a profile without a [framework.torchtitan] section, the profile as it
    is."""
    framework = _framework_of(plan.profile)
    if framework == "torchtitan":
        return [f"# priced as torchtitan runs it (eager, no torch.compile): the "
                f"{comment_text(plan.profile.partition('/')[0])} profile with its [framework.torchtitan] values "
                "(attention kernels, per-layer time, loss memory, FP8 TP gathers), as `planner validate` prices "
                "torchtitan's published runs"]
    priced = (f"the {comment_text(plan.profile)} profile prices stock Megatron-LM" if framework is None
              else f"{comment_text(framework)} runs it (the {comment_text(plan.profile)} profile)")
    return [f"# priced as {priced}, not as torchtitan runs it (`plan "
            "--emit torchtitan` prices with 'realistic/torchtitan': torchtitan's attention kernels, per-layer time, "
            "loss memory and FP8 TP gathers)"]


def _megatron_pricing(plan: Plan) -> list[str]:
    """A comment when a Megatron-LM launch was priced as another framework runs it ('NAME/FRAMEWORK')."""
    framework = _framework_of(plan.profile)
    if framework is None:
        return []
    base = comment_text(plan.profile.partition("/")[0])
    return [f"# priced as {comment_text(framework)} runs it (the {comment_text(plan.profile)} profile: its "
            f"[framework.{comment_text(framework)}] values), not as stock Megatron-LM (`plan --emit megatron` prices "
            f"with '{base}')"]


def torchtitan_text(plan: Plan, launch: Launch, wl: Workload | None = None) -> str:
    lines = [f"# torchtitan job config ({TORCHTITAN} JobConfig sections) for the {plan.status} plan on {plan.gpus} x "
             f"{comment_text(plan.gpu)}: {launch.gpus} ranks = pp {launch.pp} x dp_shard {launch.dp} x cp {launch.cp} "
             f"x tp {launch.tp}",
             *prediction_lines(plan),
             *(_torchtitan_pricing(plan) if prediction_lines(plan) else []),
             *(family_model_lines(wl) if wl is not None else []),
             "# merge into your model's TOML ([job], [model] name and flavor, [optimizer], ... stay yours)"]
    for section, keys in torchtitan_sections(launch).items():
        lines += ["", f"[{section}]"] + [f"{k} = {_toml_value(v)}" for k, v in keys.items()]  # fixed bare keys
    return "\n".join(lines) + "\n"


def parse_torchtitan(text: str) -> dict[str, object]:
    return tomllib.loads(text)


# --------------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------------


def export_text(plan: Plan, hw: Hardware, wl: Workload, target: str) -> str:
    launch = launch_of(plan, hw, wl, target)
    if target == "megatron":
        return megatron_text(plan, launch, wl)
    return torchtitan_text(plan, launch, wl)


def launch_document(plan: Plan, hw: Hardware, wl: Workload, target: str) -> LaunchDocument:
    """`plan --emit TARGET --json`: the plan and its launch configuration in one document (the configuration null
    when the plan is not feasible)."""
    if plan.layout is None or plan.status in ("infeasible", "unknown"):
        return LaunchDocument(status=plan.status, target=target, release=_RELEASE[target],
                              plan=plan)
    launch = launch_of(plan, hw, wl, target)
    if target == "megatron":
        text = megatron_text(plan, launch, wl)
        return LaunchDocument(status=plan.status, target="megatron", release=MEGATRON, plan=plan, text=text,
                              megatron_args=[[flag, value] for flag, value in megatron_args(launch, wl)])
    return LaunchDocument(status=plan.status, target="torchtitan", release=TORCHTITAN, plan=plan,
                          text=torchtitan_text(plan, launch, wl), torchtitan_config=torchtitan_sections(launch))


_RELEASE = {"megatron": MEGATRON, "torchtitan": TORCHTITAN}


def degrees_from_megatron(args: dict[str, str | None]) -> dict[str, int]:
    """Our degrees back from Megatron arguments (the round trip)."""
    def num(flag: str, default: int = 1) -> int:
        v = args.get(flag)
        return int(v) if v is not None else default

    return {"tp_ff": num("--tensor-model-parallel-size"), "pp": num("--pipeline-model-parallel-size"),
            "interleave": num("--virtual-pipeline-model-parallel-size"), "cp": num("--context-parallel-size"),
            "ep": num("--expert-model-parallel-size"), "sp": int("--sequence-parallel" in args),
            "recompute": {None: 0, "selective": 1, "full": 2}[args.get("--recompute-granularity")],
            "zero": 1 if "--use-distributed-optimizer" in args else
            {"optim_grads": 2, "optim_grads_params": 3}[str(args.get("--data-parallel-sharding-strategy"))],
            "micro_batch": num("--micro-batch-size"), "global_batch": num("--global-batch-size")}


def degrees_from_torchtitan(doc: dict[str, object]) -> dict[str, int]:
    par = doc["parallelism"]
    tr = doc["training"]
    assert isinstance(par, dict) and isinstance(tr, dict)
    schedule = par.get("pipeline_parallel_schedule", "1F1B")
    return {"tp_ff": par["tensor_parallel_degree"], "pp": par["pipeline_parallel_degree"],
            "cp": par["context_parallel_degree"], "ep": par.get("expert_parallel_degree", 1),
            "dp_shard": par["data_parallel_shard_degree"],
            "interleave_schedule": int(schedule == "Interleaved1F1B"),
            "global_batch": tr["global_batch_size"], "local_batch": tr["local_batch_size"]}


def emitted_names(target: str, text: str) -> Sequence[str]:
    """Every configuration name an export uses: Megatron flags, or torchtitan 'section.key' paths."""
    if target == "megatron":
        return list(parse_megatron(text))
    doc = parse_torchtitan(text)
    out: list[str] = []

    def walk(prefix: str, node: object) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            out.append(prefix)

    walk("", doc)
    return out
