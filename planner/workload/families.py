"""Model families: a published architecture (Llama 3, Qwen3 MoE, ...) scaled to a compute budget (docs/families.md).

A family file (`models/families/NAME.toml`) lists the family's published members and the sizes every member shares
(head width, KV heads, vocabulary, experts, top-k, sequence length); the rules below read the rest off the members:

* heads = attention_width x d_model / head_dim (the members' ratio), so d_model is a multiple of
  heads_multiple x head_dim / attention_width (heads a whole multiple of the KV heads, as GQA needs, or of the
  family's heads_multiple for MLA);
* depth: the piecewise-linear line through the members' (log d_model, log layers), extrapolated past the end
  members with the slope of the nearest segment; or ('fit') the least-squares slope over the members, through the
  last one;
* MLP width: the family's own rule (`d_ff_rule`): Meta's SwiGLU width for Llama, a fixed ratio of d_model for
  the experts of Qwen3 MoE and for DeepSeek-V3's experts and dense layers.

The budget follows the same law as `--compute` for the paper's model (App. 8.1.4): D = 20 N tokens, N every weight
(total parameters for MoE, as the paper's sparse law counts them), and the trained compute C = (model FLOPs per
token) x D in the project's FLOP convention (`Workload.model_flop_per_token`: 6 x non-embedding active params +
attention + LM head, so an MoE's compute follows its active parameters). So N solves
20 N x FLOP/token(N) = C; the search picks integer (d_model, layers) near the depth rule whose parameter count (the
workload's own count) meets it within TOLERANCE, and the tokens, in whole batches, train C. Written with f the
shape's FLOP per token per parameter: N* = sqrt(C / (20 f)), D* = 20 N*; the plan's N and D are both within 0.5 %
of them and its compute within 0.5 % of C.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Callable
from functools import cache
from typing import Any

from pydantic import ValidationError

from planner.errors import InvalidInput, validation_message
from planner.schema import MAX_TRANSFORMER_LAYER_EXPERTS, MAX_TRANSFORMER_LAYERS, Workload
from planner.schema.family import FamilyMember, ModelFamily
from planner.workload.scaling import (
    BATCH_LAWS,
    _preset_dir,
    batch_tokens_law,
    check_compute,
    friendly_round,
    transformer_workload,
)

TOKENS_PER_PARAM = 20.0
"""D = 20 N: the Chinchilla rule `--compute` uses for the paper's model (App. 8.1.4), here on every weight."""

TOLERANCE = 0.0045
"""How far the chosen shape's N may be from the law's N* (the budget's): with D = C / (FLOP per token) in whole
batches, D is then within the same 0.45 % of D* = 20 N* (D ~ 1 / N at fixed C and FLOP per parameter), and the
whole-batch rounding adds at most half a step; both stay inside the 0.5 % that `--budget exact` promises."""

_SEARCH_STEPS = 8
"""d_model candidates examined on each side of where the depth rule meets the budget."""

_WIDTH_STEPS = 2
"""MLP widths examined on each side of the rule's, in `width_quantum` steps. d_model moves in steps of
kv_heads x head_dim / attention_width (1024 for Llama 3) and layers in whole layers (1.2 % of N at 80 layers), so
the rule's own MLP width often leaves no shape within TOLERANCE near the depth rule; a width a quantum or two off
the rule does, and the search charges its distance from the rule like the depth's."""


# --------------------------------------------------------------------------------------------------
# Family files (the document, planner.schema.family.ModelFamily, read and validated here)
# --------------------------------------------------------------------------------------------------


def _family_dir():
    return _preset_dir().joinpath("families")


def families() -> list[str]:
    """Names of the shipped families (the stems of `models/families/*.toml`), sorted: for `planner models list`."""
    return sorted(p.name[: -len(".toml")] for p in _family_dir().iterdir() if p.name.endswith(".toml"))


@cache
def read_family(name: str) -> ModelFamily:
    """A shipped family by name; an unknown name is a one-line InvalidInput listing the families."""
    key = str(name).strip().lower()
    names = families()
    if key not in names:
        close = difflib.get_close_matches(key, names, n=2, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InvalidInput(f"unknown model family '{name}'{hint} (known: {', '.join(names)})")
    origin = f"models/families/{key}.toml"
    try:
        doc = tomllib.loads(_family_dir().joinpath(f"{key}.toml").read_text(encoding="utf-8"))
        return ModelFamily(name=key, **doc)
    except (tomllib.TOMLDecodeError, ValidationError, TypeError) as exc:
        detail = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
        raise InvalidInput(f"{origin}: {detail}") from None


# --------------------------------------------------------------------------------------------------
# The rules (docs/families.md)
# --------------------------------------------------------------------------------------------------


def d_model_step(fam: ModelFamily) -> int:
    """d_model is a multiple of this: heads = attention_width d_model / head_dim must be a multiple of the family's
    group_heads (GQA: kv_heads). attention_width is a float read from TOML (DeepSeek-V3's is 16 / 7), so 'whole'
    allows rounding error."""
    step = fam.group_heads * fam.head_dim / fam.attention_width
    if abs(step - round(step)) > 1e-9 * step:
        raise InvalidInput(f"family {fam.name}: heads multiple x head_dim / attention_width = {step:g} is not whole")
    return round(step)


def rule_heads(fam: ModelFamily, d_model: int) -> int:
    return round(fam.attention_width * d_model / fam.head_dim)


def depth_fit_slope(fam: ModelFamily) -> float:
    """depth_rule 'fit': the least-squares slope of log(layers) on log(d_model) over every member."""
    xs = [math.log(m.d_model) for m in fam.members]
    ys = [math.log(m.layers) for m in fam.members]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def rule_layers(fam: ModelFamily, d_model: float) -> float:
    """Depth for a width. 'piecewise': the members' log-log line, extrapolated with the nearest segment's slope;
    'fit': the fitted slope through the last member (docs/families.md)."""
    x = math.log(d_model)
    if fam.depth_rule == "fit":
        anchor = fam.members[-1]
        return anchor.layers * math.exp(depth_fit_slope(fam) * (x - math.log(anchor.d_model)))
    pts = [(math.log(m.d_model), math.log(m.layers)) for m in fam.members]
    i = 0 if x <= pts[0][0] else len(pts) - 2 if x >= pts[-1][0] else \
        next(j for j in range(len(pts) - 1) if pts[j][0] <= x <= pts[j + 1][0])
    (x0, y0), (x1, y1) = pts[i], pts[i + 1]
    return math.exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0))


def _nearest_member(fam: ModelFamily, d_model: float) -> FamilyMember:
    return min(fam.members, key=lambda m: (abs(math.log(m.d_model / d_model)), m.d_model))


def rule_expert_d_ff(fam: ModelFamily, d_model: int) -> int:
    """MoE: the expert width, expert_d_ff_ratio x d_model to the nearest multiple of expert_d_ff_multiple."""
    if fam.experts == 1:
        return 0
    q = fam.expert_d_ff_multiple
    return max(q, q * round(fam.expert_d_ff_ratio * d_model / q))


def rule_d_ff(fam: ModelFamily, d_model: int) -> int:
    """The dense MLP width. 'llama': Meta's FeedForward (llama/model.py): hidden = int(2 x 4 d / 3), times
    ffn_dim_multiplier (truncated), rounded up to multiple_of, with the nearest member's two constants. 'ratio':
    d_ff_ratio x d_model to the nearest multiple of d_ff_multiple."""
    if fam.d_ff_rule == "expert":
        return rule_expert_d_ff(fam, d_model)
    if fam.d_ff_rule == "ratio":
        q = fam.d_ff_multiple
        return max(q, q * round(fam.d_ff_ratio * d_model / q))
    m = _nearest_member(fam, d_model)
    assert m.ffn_dim_multiplier is not None and m.multiple_of is not None  # checked on load
    hidden = int(m.ffn_dim_multiplier * int(2 * 4 * d_model / 3))
    return m.multiple_of * -(-hidden // m.multiple_of)


def width_quantum(fam: ModelFamily) -> int:
    """The step of the MLP width the search may take off the rule: the smallest multiple_of a member publishes
    (Llama 3 8B: 1024), or the expert-width multiple."""
    if fam.d_ff_rule == "llama":
        return min(m.multiple_of for m in fam.members if m.multiple_of is not None)
    if fam.d_ff_rule == "ratio" and fam.experts == 1:
        return fam.d_ff_multiple
    return fam.expert_d_ff_multiple


def family_workload(fam: ModelFamily, d_model: int, layers: int, batch_tokens: int, tokens: float | None,
                    label: str, requested_compute_flop: float | None = None, width_offset: int = 0) -> Workload:
    """The family's transformer at this width and depth (the other sizes by the rules, the MLP width moved by
    `width_offset` quanta: the dense width, or the experts' for an MoE family, whose few leading dense layers keep
    their rule's width), validated as any preset."""
    heads = rule_heads(fam, d_model)
    fields: dict[str, Any] = dict(heads=heads, kv_heads=fam.kv_heads or heads, head_dim=fam.head_dim,
                                  ffn=fam.ffn, vocab=fam.vocab, tied_embeddings=fam.tied_embeddings)
    if fam.attention == "mla":
        fields.update(attention="mla", q_lora_rank=fam.q_lora_rank, kv_lora_rank=fam.kv_lora_rank,
                      rope_head_dim=fam.rope_head_dim, v_head_dim=fam.v_head_dim)
    shift = width_offset * width_quantum(fam)
    d_ff = rule_d_ff(fam, d_model) + (shift if fam.experts == 1 else 0)
    if fam.experts > 1:
        expert = rule_expert_d_ff(fam, d_model) + shift
        fields.update(top_k=fam.top_k, expert_d_ff=expert, shared_experts=fam.shared_experts,
                      dense_layers=fam.dense_layers)
        if fam.d_ff_rule == "expert":
            d_ff = expert
    wl = transformer_workload(d_model, d_ff, layers, fam.experts, fam.seq_len, batch_tokens,
                              tokens, fields, label=label)
    return wl.model_copy(update={"family": fam.name, "requested_compute_flop": requested_compute_flop})


# --------------------------------------------------------------------------------------------------
# The search: integer (d_model, layers) near the depth rule that meet a target
# --------------------------------------------------------------------------------------------------


def _linear_in_layers(fam: ModelFamily, d_model: int, width_offset: int) -> tuple[float, float, float, float]:
    """(a, b, f0, f1) with params = a + b L and FLOP/token = f0 + f1 L at this width: both are affine in L past the
    dense layers, so two workloads (the project's own counts) give them exactly."""
    lo = fam.dense_layers + 1
    w1 = family_workload(fam, d_model, lo, fam.seq_len, 1.0, "", width_offset=width_offset)
    w2 = family_workload(fam, d_model, lo + 1, fam.seq_len, 1.0, "", width_offset=width_offset)
    b, f1 = w2.params - w1.params, w2.model_flop_per_token - w1.model_flop_per_token
    return w1.params - b * lo, b, w1.model_flop_per_token - f1 * lo, f1


Target = Callable[[float, float, float, float], float]
"""Given (a, b, f0, f1) of a width: the real-valued depth that meets the target exactly."""


def _n_ratio(wl: Workload, compute_flop: float | None, params: float | None) -> float:
    """The chosen shape's N over the N the target asks for."""
    if params is not None:
        return wl.params / params
    assert compute_flop is not None
    return math.sqrt(TOKENS_PER_PARAM * wl.params * wl.model_flop_per_token / compute_flop)


def _depth_for(compute_flop: float | None, params: float | None) -> Target:
    def depth(a: float, b: float, f0: float, f1: float) -> float:
        if params is not None:
            return (params - a) / b
        assert compute_flop is not None
        # 20 (a + b L)(f0 + f1 L) = C, the positive root
        qa, qb, qc = b * f1, a * f1 + b * f0, a * f0 - compute_flop / TOKENS_PER_PARAM
        return (-qb + math.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)
    return depth


Shape = tuple[int, int, int]
"""(d_model, layers, MLP-width offset in quanta)."""


def _search(fam: ModelFamily, compute_flop: float | None = None, params: float | None = None) -> tuple[Shape, float]:
    """The shape closest to the rules (|log(L / rule(d))| + |log(width / rule width)|) among those whose N is within
    TOLERANCE of the target, and its N ratio; if none is (tiny models), the one nearest the target."""
    step, lo_layers = d_model_step(fam), fam.dense_layers + 1
    depth = _depth_for(compute_flop, params)

    def exact_depth(k: int, offset: int = 0) -> float:
        return depth(*_linear_in_layers(fam, k * step, offset))

    def needs_wider(k: int) -> bool:
        """The target needs more layers than the rule gives at this width (a width past the planner's limits,
        e.g. more than 1024 heads, counts as too wide)."""
        try:
            return exact_depth(k) > rule_layers(fam, k * step)
        except InvalidInput:
            return False

    # log(L_needed(d) / L_rule(d)) falls as d grows: bisect for the width where the rule meets the target.
    k_lo, k_hi = 1, 1
    while needs_wider(k_hi) and k_hi < 2**20:
        k_lo, k_hi = k_hi, 2 * k_hi
    while k_hi - k_lo > 1:
        mid = (k_lo + k_hi) // 2
        if needs_wider(mid):
            k_lo = mid
        else:
            k_hi = mid
    candidates: list[tuple[float, float, Shape, float]] = []
    problems: list[str] = []
    for k in range(max(1, k_lo - _SEARCH_STEPS), k_hi + _SEARCH_STEPS + 1):
        d = k * step
        rule_width = rule_expert_d_ff(fam, d) if fam.experts > 1 else rule_d_ff(fam, d)
        for offset in range(-_WIDTH_STEPS, _WIDTH_STEPS + 1):
            width = rule_width + offset * width_quantum(fam)
            if width <= 0:
                continue
            try:
                real = exact_depth(k, offset)
            except InvalidInput as exc:
                problems.append(f"d_model {d}: {exc}")
                continue
            for layers in {max(lo_layers, math.floor(real)), max(lo_layers, math.ceil(real))}:
                try:
                    wl = family_workload(fam, d, layers, fam.seq_len, 1.0, "", width_offset=offset)
                except InvalidInput as exc:
                    problems.append(f"d_model {d} x {layers} layers: {exc}")
                    continue
                r = _n_ratio(wl, compute_flop, params)
                off_rule = abs(math.log(layers / rule_layers(fam, d))) + abs(math.log(width / rule_width))
                miss = 0.0 if abs(r - 1) <= TOLERANCE else abs(math.log(r))
                candidates.append((miss, off_rule, (d, layers, offset), r))
    if not candidates:
        raise InvalidInput(f"family {fam.name}: no shape of the family fits the planner's limits near "
                           f"{problems[len(problems) // 2] if problems else 'this size'}"
                           + (f"; {_depth_limit_clause(fam)}" if fam.experts > 1 else ""))
    _, _, shape, r = min(candidates)
    return shape, r


def max_layers(fam: ModelFamily) -> int:
    """The most layers the planner accepts for this family: its bounds on layers, and on layers x experts
    (planner.schema.MAX_TRANSFORMER_LAYER_EXPERTS, a bound on the search's work, docs/reliability.md)."""
    return min(MAX_TRANSFORMER_LAYERS, MAX_TRANSFORMER_LAYER_EXPERTS // fam.experts)


def _depth_limit_clause(fam: ModelFamily) -> str:
    return (f"with {fam.experts} experts the planner accepts at most {max_layers(fam)} layers (its bound of "
            f"{MAX_TRANSFORMER_LAYER_EXPERTS} layers x experts on the search's work, docs/reliability.md)")


def depth_limit_note(fam: ModelFamily, d_model: int, layers: int) -> str:
    """A sentence when the planner's depth bound, not the rules, set the depth (empty otherwise)."""
    rule = rule_layers(fam, d_model)
    if layers < max_layers(fam) or rule < max_layers(fam) + 0.5:
        return ""
    return (f"depth held at {layers} layers, not the depth rule's {rule:.0f} at d_model {d_model}: "
            f"{_depth_limit_clause(fam)}")


def shape_for_params(name: str, params: float, batch_sequences: int = 1) -> Workload:
    """The family's shape with (about) `params` weights: what the rules say a member of that size looks like."""
    fam = read_family(name)
    n = float(params)
    if not (math.isfinite(n) and n > 0):
        raise InvalidInput(f"parameter count must be a positive finite number, got {params!r}")
    (d, layers, offset), _ = _search(fam, params=n)
    return family_workload(fam, d, layers, batch_sequences * fam.seq_len, None,
                           label=f"{fam.name} family rules at {n:.4g} parameters", width_offset=offset)


def workload_for_family(name: str, compute_flop: float, batch_scaling: str = "paper") -> Workload:
    """The compute-optimal member of family `name` at `compute_flop` FLOP (docs/families.md).

    1. N: 20 N x FLOP/token = C (D = 20 N, App. 8.1.4's rule; C in the project's FLOP convention);
    2. the integer d_model (a multiple of `d_model_step`) and layers nearest the family's depth rule with N within
       TOLERANCE; every other size by the family's rules;
    3. the batch: `batch_tokens_law` at C with E / top_k as the sparsity (each expert sees top_k / E of the
       tokens, as the toy's top-1 expert sees 1 / E), in whole sequences of the family's length;
    4. the tokens: the whole number of batches nearest C / (FLOP per token), so the plan trains C.
    """
    fam = read_family(name)
    c = check_compute(compute_flop)
    if batch_scaling not in BATCH_LAWS:
        raise InvalidInput(f"unknown batch scaling law {batch_scaling!r}; accepted: {', '.join(BATCH_LAWS)}")
    (d, layers, offset), _ = _search(fam, compute_flop=c)
    sequences = max(1, friendly_round(batch_tokens_law(c, fam.experts / fam.top_k, batch_scaling) / fam.seq_len))
    batch = sequences * fam.seq_len
    probe = family_workload(fam, d, layers, batch, 1.0, "", width_offset=offset)
    steps = max(1, round(c / (probe.model_flop_per_token * batch)))
    label = (f"{fam.name} family (models/families/{fam.name}.toml) scaled to {c:.3g} FLOP: D = 20 N, "
             f"{batch_scaling} batch law, tokens for the requested compute")
    capped = depth_limit_note(fam, d, layers)
    if capped:
        label += f"; {capped}"
    try:
        return family_workload(fam, d, layers, batch, float(steps * batch), label, requested_compute_flop=c,
                               width_offset=offset)
    except ValidationError as exc:  # pragma: no cover - every size was validated in the search
        raise InvalidInput(validation_message(exc)) from None
