"""The registry of decision dimensions: every parallel degree and layout option, in one place.

Each entry says what the dimension means, which workload size it must divide (alone or with a partner), whether it
is placed on the network levels, and which placement group carries its traffic. The layout types
(planner.schema.Layout, LayoutReport), the search space (planner.parallel.space), `check_layout`, the reports and the
CLI all iterate this registry; adding a dimension is one entry here plus its cost terms (planner.cost.terms).

Placement groups: the cost of a placed degree depends on its own factor vector, except pipeline and expert
parallelism, whose point-to-point traffic depends on both vectors jointly (App. 8.1.2: the joint frequencies), so
they form one group, "pp_ep".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.schema import Workload


@dataclass(frozen=True)
class Dimension:
    name: str
    """Field name in layouts, JSON and CLI flags (`--tp-ff` for tp_ff)."""
    symbol: str
    """The paper's symbol."""
    title: str
    """Row label in reports."""
    help: str
    """One line for field descriptions and CLI help."""
    placed: bool
    """A parallel degree: it multiplies into the GPU count and has a factor on every network level."""
    group: str | None = None
    """Placement group whose cost terms this degree's factor vector enters (None: not placed)."""
    divides: Callable[[Workload], int] | None = None
    """The workload size this dimension (times its partner) must divide."""
    divides_text: str = ""
    partner: str | None = None
    """A dimension whose value multiplies this one's in the divisibility rule (pp with interleave, dp with m)."""
    default: int | None = None
    """Value when the user leaves the dimension out (options only)."""
    greedy_rank: int = 0
    """Order in which a greedy placement gives this degree the fastest levels (lower first: most traffic)."""
    candidates: Callable[[Workload], tuple[int, ...]] | None = None
    """An option's values for a workload (options without a partner: sequence parallelism, recomputation, ZeRO)."""
    labels: tuple[str, ...] = ()
    """Names of an option's values 0, 1, ... (e.g. recompute: none, selective, full); empty: the number itself."""
    minimum: int = 1
    """Least value (0 for on/off and labelled options)."""
    transformer_only: bool = False
    """Only a real transformer can use values other than the default (the paper's toy has no sequences)."""

    def label(self, value: int) -> str:
        return self.labels[value] if self.labels and 0 <= value < len(self.labels) else str(value)

    def parse(self, text: str) -> int:
        """A value from its label or number (CLI and files)."""
        t = text.strip().lower()
        if t in self.labels:
            return self.labels.index(t)
        try:
            v = int(t)
        except ValueError:
            names = ", ".join(self.labels) if self.labels else "a whole number"
            raise ValueError(f"{self.name} must be {names}, got {text!r}") from None
        return v


def _per_expert_batch(wl: Workload) -> int:
    """Toy: N_DP m | b / E (whole-token nanobatches). Transformer: N_DP N_EP m | b / seq_len (whole sequences)."""
    if wl.transformer is not None:
        return wl.batch_tokens // wl.seq_len
    return wl.batch_tokens // wl.experts


def _tp_ff_size(wl: Workload) -> int:
    """Toy: d_ff. Transformer: Megatron's tp splits the query heads and every MLP's hidden width."""
    tr = wl.transformer
    if tr is None:
        return wl.d_ff
    sizes = [tr.heads]
    if wl.experts == 1 or tr.dense_layers:
        sizes.append(wl.d_ff)
    if wl.experts > 1:
        sizes.append(tr.expert_d_ff or wl.d_ff)
    return math.gcd(*sizes)


def _cp_size(wl: Workload) -> int:
    """N_CP | seq_len / 2: each rank holds two chunks of every sequence (one early, one late), which balances the
    causal mask's work (Megatron's and Llama 3's rule). The toy model has no sequences: N_CP = 1."""
    return wl.seq_len // 2 if wl.transformer is not None else 1


def _transformer_values(*values: int) -> Callable[[Workload], tuple[int, ...]]:
    def candidates(wl: Workload) -> tuple[int, ...]:
        return values if wl.transformer is not None else values[:1]
    return candidates


RECOMPUTE_LABELS = ("none", "selective", "full")
"""Activation recomputation: 'selective' re-runs the attention core in the backward pass (Korthikanti et al.
2022), 'full' the whole layer from its input."""


def stage_split(layers: int, pp: int, interleave: int) -> tuple[int, int]:
    """(c, r) of a transformer's stages: c = ceil(L / (N_PP i)) layers per virtual stage, and r, how many fewer the
    first and last virtual stages hold together (planner.cost.terms.stage_layers is the same, vectorised)."""
    c = -(-layers // (pp * interleave))
    return c, pp * interleave * c - layers


def stage_problem(wl: Workload, pp: int, interleave: int) -> str | None:
    """Why (N_PP, i) cannot hold a transformer's layers (None: it can): each end keeps at least one layer per
    virtual stage, and without pipelining there is nothing to interleave."""
    if pp == 1:
        return None if interleave == 1 else "interleave must be 1 without pipeline parallelism (pp = 1)"
    c, r = stage_split(wl.layers, pp, interleave)
    if r > 2 * (c - 1):
        return (f"pp({pp}) * interleave({interleave}) = {pp * interleave} virtual stages cannot hold {wl.layers} "
                f"layers: with {c} per stage the first and last would need {r} fewer between them, at most "
                f"{2 * (c - 1)} (each keeps at least one)")
    return None


def kv_heads_ok(wl: Workload, tp_ff: int) -> bool:
    """GQA: N_TP,ff divides kv_heads, or kv_heads divides N_TP,ff (each KV head then replicated on
    N_TP,ff / kv_heads ranks). MLA and the toy model: no rule."""
    tr = wl.transformer
    if tr is None or tr.attention == "mla":
        return True
    return tr.kv_heads % tp_ff == 0 or tp_ff % tr.kv_heads == 0


DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("dp", "N_DP", "DP  (data)", "N_DP, data-parallel degree.", placed=True, group="dp",
              divides=_per_expert_batch, divides_text="batch / experts", partner="microbatches", greedy_rank=4),
    Dimension("tp_ff", "N_TP,ff", "TP,ff  (slices d_ff)", "N_TP,ff: tensor parallelism slicing d_ff (a transformer's "
              "heads, MLP width and vocabulary: Megatron's tp).",
              placed=True, group="tp_ff", divides=_tp_ff_size, divides_text="d_ff", greedy_rank=0),
    Dimension("tp_model", "N_TP,model", "TP,model  (slices d_model)",
              "N_TP,model: tensor parallelism slicing d_model.", placed=True, group="tp_model",
              divides=lambda wl: wl.d_model, divides_text="d_model", greedy_rank=1),
    Dimension("pp", "N_PP", "PP  (pipeline stages)", "N_PP, pipeline stages.", placed=True, group="pp_ep",
              divides=lambda wl: wl.layers, divides_text="layers", partner="interleave", greedy_rank=3),
    Dimension("interleave", "i", "interleave i", "i, virtual stages per pipeline stage (N_PP * i must divide L).",
              placed=False, default=1),
    Dimension("ep", "N_EP", "EP  (experts)", "N_EP, expert-parallel degree (must divide E).", placed=True,
              group="pp_ep", divides=lambda wl: wl.experts, divides_text="experts", default=1,
              greedy_rank=5),
    Dimension("cp", "N_CP", "CP  (context)", "N_CP, context-parallel degree: splits every sequence over N_CP ranks "
              "(ring attention; must divide seq_len / 2).", placed=True, group="cp", divides=_cp_size,
              divides_text="seq_len / 2", default=1, greedy_rank=2, transformer_only=True),
    Dimension("microbatches", "m", "microbatches m", "m, microbatches per step per data-parallel rank.",
              placed=False),
    Dimension("sp", "SP", "sequence parallel", "Sequence parallelism with N_TP,ff: 0 off, 1 on (reduce-scatter + "
              "all-gather instead of all-reduce; activations outside the TP regions sharded).", placed=False,
              default=0, minimum=0, labels=("off", "on"), candidates=_transformer_values(0, 1),
              transformer_only=True),
    Dimension("recompute", "R", "recompute", "Activation recomputation: 0 none, 1 selective (attention core), "
              "2 full (each layer from its input).", placed=False, default=0, minimum=0, labels=RECOMPUTE_LABELS,
              candidates=_transformer_values(0, 1, 2), transformer_only=True),
    Dimension("zero", "ZeRO", "ZeRO stage", "ZeRO stage over the data-parallel ranks: 1 optimizer state, 2 and "
              "gradients, 3 and parameters (FSDP).", placed=False, default=1, candidates=_transformer_values(1, 2, 3),
              transformer_only=True),
)
"""Every integer decision dimension. The pipeline schedule ('1f1b' or 'zb-h2') is the one categorical option."""

BY_NAME: dict[str, Dimension] = {d.name: d for d in DIMENSIONS}

DEGREES: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.placed)
"""Names of the parallel degrees, in the order used everywhere (placement keys, tables, JSON)."""

OPTIONS: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if not d.placed)
"""Integer options that are not placed (interleaving, microbatches, sequence parallelism, recomputation, ZeRO)."""

CHOICES: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.candidates is not None)
"""Options chosen from a short list of values (sequence parallelism, recomputation, ZeRO stage)."""

GROUPS: dict[str, tuple[str, ...]] = {}
"""Placement group -> the degrees whose factor vectors it is priced on."""
for _d in DIMENSIONS:
    if _d.group is not None:
        GROUPS.setdefault(_d.group, ())
        GROUPS[_d.group] += (_d.name,)

SCHEDULES: tuple[str, ...] = ("1f1b", "zb-h2")


def divisibility_problems(wl: Workload, values: dict[str, int]) -> list[str]:
    """Every divisibility rule the values break, in words (the rules of the registry)."""
    problems = []
    tr = wl.transformer
    for d in DIMENSIONS:
        if d.divides is None:
            continue
        v = values[d.name] * (values[d.partner] if d.partner else 1)
        if d.name == "dp" and tr is not None:  # whole sequences per microbatch on every dense-layer DP rank
            seqs = wl.batch_tokens // wl.seq_len
            denom = v * values["ep"]
            if seqs % denom:
                problems.append(f"batch {seqs} sequences is not divisible by dp({values['dp']}) * ep({values['ep']}) "
                                f"* microbatches({values['microbatches']}) = {denom}: every microbatch must be whole "
                                "sequences on each of the dense layers' dp * ep data-parallel ranks")
            continue
        if d.name == "dp":  # the nanobatch b / (E N_DP m) must be whole tokens
            denom = wl.experts * v
            if wl.batch_tokens % denom:
                problems.append(f"batch {wl.batch_tokens:,} tokens is not divisible by experts({wl.experts}) * "
                                f"dp({values['dp']}) * microbatches({values['microbatches']}) = {denom}: the "
                                "nanobatch must be whole tokens")
            continue
        if d.name == "pp" and tr is not None:
            problem = stage_problem(wl, values["pp"], values["interleave"])
            if problem:
                problems.append(problem)
            continue
        target = d.divides(wl)
        if d.name == "cp" and tr is None and v != 1:
            problems.append(f"cp={v} needs a transformer workload (the paper's toy model has no sequences)")
            continue
        if target % v:
            what = (f"{d.name}={v}" if d.partner is None
                    else f"{d.name}({values[d.name]}) * {d.partner}({values[d.partner]})")
            text = d.divides_text
            if d.name == "tp_ff" and tr is not None:
                text = "gcd(heads, MLP widths)"
            problems.append(f"{what} does not divide {text}={target}")
    for d in DIMENSIONS:
        v = values.get(d.name, d.default if d.default is not None else 1)
        if d.candidates is not None and v not in d.candidates(wl):
            if d.transformer_only and tr is None:
                problems.append(f"{d.name}={d.label(v)} needs a transformer workload (the paper's toy model has no "
                                f"attention or sequences): leave it at {d.label(d.default or 0)}")
            else:
                allowed = ", ".join(d.label(c) for c in d.candidates(wl))
                problems.append(f"{d.name}={v} is not one of {allowed}")
    if values.get("sp", 0) and values["tp_ff"] == 1:
        problems.append("sp=on needs tensor parallelism (tp_ff > 1): sequence parallelism shards over the TP ranks")
    if tr is not None and not kv_heads_ok(wl, values["tp_ff"]):
        problems.append(f"tp_ff={values['tp_ff']} must divide kv_heads={tr.kv_heads} or be a multiple of it (KV heads "
                        "are then replicated)")
    return problems
