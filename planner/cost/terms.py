"""The step time, written once: paper Eq. 21 and the critical-path floor as sums of tagged terms (docs/model.md §6).

The step time of a layout is the largest of a few *branches*. A branch is a sum of products `coefficient x term`:

* a coefficient is a non-negative *tuple quantity*: it depends on the degree tuple only (the bubble stretch
  1 / (1 - f_b), the 1F1B latency multiplicity m / N_PP, or 1);
* a term is either a tuple quantity (the stage's GEMM time, the critical path's GEMMs) or a *group term*: the
  product of a tuple scale (words moved, latencies on the path) and a *feature* of one placement group's factor
  vectors (the all-reduce time of one word over DP's factors, the latency of one all-reduce over TP,model's
  factors, the joint point-to-point frequencies of PP's and EP's factors).

Because each group term involves one group's placement and tuple constants only, the same definition has three
readings, and the code uses all three:

* float: the features at a layout's own factor vectors -> its step time (`price`; planner.cost.step.evaluate);
* bound: each feature at its least over the group's factor vectors, chosen independently -> a lower bound valid for
  every placement, because every coefficient and scale is non-negative (planner.search.presolve);
* CP-SAT: per (tuple, factor vector) pair the coefficient x term products of each branch, one integer per pair
  (planner.search.cpsat); a branch is then a linear expression in the model's booleans.

The workload enters only through its operations (planner.schema.ops): GEMM shapes, all-reduce volumes and groups,
the interface transfer, the activations kept.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from planner.cost import network as net
from planner.cost.matmul import matmul_time_s, measured_matmul_time_s
from planner.cost.pipeline import bubble_fraction
from planner.errors import InvalidInput
from planner.parallel.dimensions import DEGREES, GROUPS
from planner.profile import PAPER, RECIPE_PASSES, ExecutionProfile, Recipe
from planner.schema import Gpu, Hardware, Workload

Cols = Mapping[str, np.ndarray]
"""Degree tuples as columns: dimension name -> one value per row, plus 'zero_bubble' (bool)."""

Factors = Mapping[str, np.ndarray]
"""Degree name -> its factor on each network level, shape (rows, levels)."""


def _f(cols: Cols, name: str) -> np.ndarray:
    return np.asarray(cols[name], dtype=np.float64)


def gpus_of(cols: Cols) -> np.ndarray:
    """N_GPU of every row: the product of the placed degrees (float: no overflow)."""
    n = _f(cols, DEGREES[0])
    for d in DEGREES[1:]:
        n = n * _f(cols, d)
    return n


# --------------------------------------------------------------------------------------------------
# Megatron's MoE parallel folding and custom end stages: optional columns of given layouts
# (planner.parallel.space.Tuples.EXTRA; the search never sets them, docs/model.md §1c, §5b)
# --------------------------------------------------------------------------------------------------


def is_folded(cols: Cols) -> bool:
    """The rows carry a folded expert layout (expert_ep, etp)."""
    return "etp" in cols


def expert_degrees(cols: Cols) -> tuple[np.ndarray, np.ndarray]:
    """(N_EP, N_ETP) of the expert layers per row: a folded layout's own, else the placed ep and tp_ff."""
    if is_folded(cols):
        return _f(cols, "expert_ep"), _f(cols, "etp")
    return _f(cols, "ep"), _f(cols, "tp_ff")


def expert_dp(cols: Cols) -> np.ndarray:
    """N_EDP, the ranks holding the same expert shards (their gradients are reduced over these). Unfolded: N_DP N_CP
    (expert parallelism is carved from the data-parallel ranks). Folded: Megatron's N_EP N_ETP N_EDP = dp cp tp on
    each pipeline stage, so N_EDP = N_DP N_EP N_CP N_TP,ff N_TP,model / (N_EP,expert N_ETP)."""
    if not is_folded(cols):
        return _f(cols, "dp") * _f(cols, "cp")
    eep, etp = expert_degrees(cols)
    block = _f(cols, "dp") * _f(cols, "ep") * _f(cols, "cp") * _f(cols, "tp_ff") * _f(cols, "tp_model")
    return block / (eep * etp)


def expert_cols(cols: Cols) -> Cols:
    """The degrees the routed experts' shapes read: in a folded layout N_ETP splits what tp_ff splits elsewhere (and
    nothing splits d_model)."""
    if not is_folded(cols):
        return cols
    etp = np.asarray(cols["etp"])
    return {**cols, "tp_ff": etp, "tp_model": np.ones_like(etp)}


def routed_tokens(wl: Workload, cols: Cols, n_dense) -> np.ndarray:
    """Token copies each expert on a GPU runs per microbatch, from the dense layers' tokens per GPU `n_dense`:
    top-k b / (m E N_EDP) (unfolded: top-k n_dense N_EP / E)."""
    mo = wl.model_ops
    assert mo is not None
    if not is_folded(cols):
        return mo.top_k * n_dense * _f(cols, "ep") / wl.experts
    dense_ranks = _f(cols, "dp") * _f(cols, "ep") * _f(cols, "cp")
    return mo.top_k * n_dense * dense_ranks / (wl.experts * expert_dp(cols))


def expert_tokens_here(wl: Workload, cols: Cols) -> np.ndarray:
    """Tokens whose top-k copies one GPU dispatches (and whose expert work it shares) per step: b / (N_EP N_EDP);
    unfolded that is b / (N_DP N_EP N_CP), the dense layers' tokens."""
    if not is_folded(cols):
        return _tokens_here(wl, cols)
    eep, _ = expert_degrees(cols)
    return wl.batch_tokens / (eep * expert_dp(cols))


def fold_factors(cols: Cols, fac: Factors) -> dict[str, np.ndarray]:
    """Factor vectors of a folded expert layout: Megatron orders the expert ranks etp innermost, then ep, then edp,
    over the same dp x cp x tp ranks of each pipeline stage (pp outermost in both orders), so each fills the levels
    bottom-up as far as the attention layout's dp, cp, tp_ff, tp_model (and ep) factors leave room. A remainder that
    does not divide a level (check_layout refuses such layouts) lands on the top level."""
    room = np.ones_like(np.asarray(fac["dp"], dtype=np.int64))
    for d in ("dp", "cp", "tp_ff", "tp_model", "ep"):
        room = room * np.asarray(fac[d], dtype=np.int64)
    eep = np.asarray(cols["expert_ep"], dtype=np.int64)
    etp = np.asarray(cols["etp"], dtype=np.int64)
    edp = np.maximum(room.prod(axis=1) // np.maximum(eep * etp, 1), 1)
    out = {}
    for name, value in (("etp", etp), ("expert_ep", eep), ("edp", edp)):
        left = value.copy()
        f = np.ones_like(room)
        for h in range(room.shape[1]):
            g = np.gcd(left, room[:, h])
            f[:, h] = g
            left = left // g
            room[:, h] = room[:, h] // g
        f[:, -1] *= left
        out[name] = f
    return out


def custom_stages(cols: Cols) -> bool:
    """The rows carry custom end-stage layer counts (first_layers, last_layers; -1: automatic)."""
    return "first_layers" in cols


def custom_stage_layers(wl: Workload, cols: Cols) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, c, last): layers on the first virtual stage, on each other virtual stage, on the last. A count left
    automatic (-1) is c; the other N_PP i - (given counts) virtual stages split the rest evenly (Megatron's
    --decoder-first/last-pipeline-num-layers rule; check_layout refuses an uneven rest)."""
    v = np.asarray(cols["pp"], dtype=np.int64) * np.asarray(cols["interleave"], dtype=np.int64)
    first = np.asarray(cols["first_layers"], dtype=np.int64)
    last = np.asarray(cols["last_layers"], dtype=np.int64)
    given = (first >= 0).astype(np.int64) + (last >= 0).astype(np.int64)
    rest = wl.layers - np.maximum(first, 0) - np.maximum(last, 0)
    left = v - given
    c = np.where(left > 0, rest // np.maximum(left, 1), 0)
    return np.where(first >= 0, first, c), c, np.where(last >= 0, last, c)


# --------------------------------------------------------------------------------------------------
# Tuple quantities: placement-free
# --------------------------------------------------------------------------------------------------


def nanobatch_tokens(wl: Workload, dp, microbatches, ep=1, cp=1) -> np.ndarray:
    """Toy: b' = b / (E N_DP m), tokens per expert per microbatch per data-parallel rank (Eq. 7, footnote 11).
    Transformer: b / (N_DP N_EP N_CP m), the tokens one GPU's dense layers see per microbatch: the expert ranks are
    data-parallel ranks for the dense layers (Megatron's rule, docs/model.md §1b) and N_CP ranks split each
    sequence."""
    if wl.transformer is not None:
        return wl.batch_tokens / (np.asarray(dp, dtype=np.float64) * np.asarray(ep, dtype=np.float64)
                                  * np.asarray(cp, dtype=np.float64) * microbatches)
    return wl.batch_tokens / (wl.experts * np.asarray(dp, dtype=np.float64) * microbatches)


ATTENTION_BWD_FLOP_RATIO = 2.5
"""Backward FLOPs / forward FLOPs of a FlashAttention kernel: five GEMM-like products against two (it recomputes the
scores)."""


@functools.lru_cache(maxsize=16)
def _low_gpu(gpu: Gpu, precision: str) -> Gpu:
    low = gpu.at_precision(precision)
    if low is None:
        field = f"gpu.{precision}_flop_per_clock_per_thread"
        raise InvalidInput(f"{gpu.name} has no {precision.upper()} tensor cores in its hardware file ({field}); use "
                           "precision bf16")
    return low


@dataclass(frozen=True)
class Rates:
    """How fast one GPU runs each kind of operation under the hardware's execution profile (planner.profile):
    GEMMs (16-bit, or a layer's GEMMs at the FP8 / FP4 rate under a low-precision recipe), the attention kernel and
    element-wise work.

    `precision` is the layers' GEMM precision; `recipe` the profile's pricing of its recipe (None: the low-precision
    rate with nothing else, the paper profile's idealisation, or 16-bit)."""

    hw: Hardware
    precision: str = "bf16"
    recipe: Recipe | None = None
    unfused: bool = False
    recipe_name: str = ""

    @property
    def low(self) -> bool:
        return self.precision != "bf16"

    @property
    def gpu(self) -> Gpu:
        return _low_gpu(self.hw.gpu, self.precision) if self.low else self.hw.gpu

    def low_pass(self, pass_: str) -> bool:
        """Whether a layer GEMM's pass ('fprop', 'dgrad', 'wgrad') runs in low precision."""
        return self.low and (self.recipe is None or pass_ in self.recipe.passes)

    def gemm(self, d1, d2, b, weight_grad: bool = False, layer: bool = True, pass_: str | None = None,
             grouped: bool = False) -> np.ndarray:
        """One GEMM (arguments as matmul_time_s); `layer` False: an end's GEMM (the LM head), always 16-bit.
        `pass_` names the pass (default: 'wgrad' for a weight gradient, else 'fprop'); `grouped`: a routed
        expert's GEMM, run as a grouped GEMM (the recipe's grouped_gemm_efficiency applies)."""
        prof = self.hw.profile
        pass_ = pass_ or ("wgrad" if weight_grad else "fprop")
        low = layer and self.low_pass(pass_)
        g = self.gpu if low else self.hw.gpu
        if prof.gemm_model == "roofline":
            return matmul_time_s(g, d1, d2, b, weight_grad=weight_grad)
        launch = g.matmul_latency_s if prof.gemm_launch_s is None else prof.gemm_launch_s
        fraction = gemm_peak_fraction(self.hw, self.precision if low else "bf16")
        if low and self.recipe is not None:
            fraction *= self.recipe.gemm_efficiency
            if grouped:
                fraction *= self.recipe.grouped_gemm_efficiency[RECIPE_PASSES.index(pass_)]
        return measured_matmul_time_s(g, d1, d2, b, weight_grad, fraction, prof.gemm_tile, launch, self.hbm_Bps)

    def gemm_pass(self, d1, d2, b, pass_: str, layer: bool = True, grouped: bool = False) -> np.ndarray:
        """One pass of a GEMM ('fprop', 'dgrad', 'wgrad'; arguments as `gemm`). A layer's mixes in the recipe's
        16-bit layers: (1 - f) at the low-precision rate and f at the 16-bit rate, f the share of layers the recipe
        keeps in 16-bit (every layer is priced alike, so the kept layers' time is spread over all of them)."""
        wg = pass_ == "wgrad"
        t = self.gemm(d1, d2, b, weight_grad=wg, layer=layer, pass_=pass_, grouped=grouped)
        kept = self.recipe.kept_layer_fraction if (layer and self.low and self.recipe is not None) else 0.0
        if kept > 0.0:
            t = (1.0 - kept) * t + kept * self.gemm(d1, d2, b, weight_grad=wg, layer=False)
        return t

    def quantize_s(self, elements) -> np.ndarray:
        """Seconds to quantize `elements` of a 16-bit GEMM input under the recipe (0 without one), at element-wise
        HBM bandwidth; the recipe's 16-bit layers quantize nothing."""
        if not self.low or self.recipe is None or self.recipe.quantize_bytes_per_element == 0.0:
            return np.zeros(1)
        return self._recipe_pass_s(self.recipe.quantize_bytes_per_element, elements)

    def casts_of_shared_input(self, linears: int, shared: bool = False) -> int:
        """How many times a recipe that casts per module (`cast_per_linear`) casts the input of a GEMM of `linears`
        modules, `shared` when an earlier GEMM of the layer reads the same input (`Gemm.shared_input`: K and V after
        Q): once per module eager; compiled, once for all the modules that read it, since their casts are identical
        ops on one tensor and the min-cut partitioner runs a common-subexpression pass over the joint graph
        (torch/_functorch/partitioners.py min_cut_rematerialization_partition, `fx_graph_cse` under functorch
        config.cse, on by default), forward and backward alike."""
        if not self.hw.profile.compiled:
            return linears
        return 0 if shared else 1

    def _recipe_pass_s(self, bytes_per_element, elements) -> np.ndarray:
        """Seconds of one element-wise pass of the recipe's moving `bytes_per_element` per element of `elements` at
        element-wise HBM bandwidth, in the share of the layers the recipe runs in low precision."""
        assert self.recipe is not None
        share = 1.0 - self.recipe.kept_layer_fraction
        return np.asarray(share * bytes_per_element * elements / self.hbm_Bps, dtype=np.float64)

    def tp_gather(self, cols: Cols) -> np.ndarray:
        """Per row, the ranks a sequence-parallel GEMM input is gathered from in FP8 (N_TP,ff with sequence
        parallelism on under a profile that gathers in low precision, `tp_gather_low_precision`), else 1."""
        prof = self.hw.profile
        if not (self.low and prof.tp_gather_low_precision and self.recipe is not None
                and not self.recipe.cast_per_linear and "sp" in cols):
            return np.ones(1)
        return np.where(np.asarray(cols["sp"], dtype=bool), _f(cols, "tp_ff"), 1.0)

    def gathered_quantize_s(self, elements, ranks) -> np.ndarray:
        """Seconds to quantize `elements` of a 16-bit GEMM input gathered in FP8 from `ranks` sequence shards: the
        recipe's cast on the rank's shard (its bytes less the column-wise copy's write, 1 B) and, on the gathered
        tensor, the weight gradient's transposed FP8 copy (read 1 B, write 1 B). `ranks` 1: `quantize_s`."""
        if not self.low or self.recipe is None or self.recipe.quantize_bytes_per_element == 0.0:
            return np.zeros(1)
        q = self.recipe.quantize_bytes_per_element
        return self._recipe_pass_s(np.where(ranks > 1, (q - 1.0) / ranks + 2.0, q), elements)

    def rescale_s(self, elements) -> np.ndarray:
        """Seconds to scale `elements` of a backward GEMM's 16-bit output after the GEMM (0 for a recipe whose GEMMs
        apply the scales themselves), at element-wise HBM bandwidth; the recipe's 16-bit layers rescale nothing."""
        if not self.low or self.recipe is None or self.recipe.rescale_bytes_per_element == 0.0:
            return np.zeros(1)
        return self._recipe_pass_s(self.recipe.rescale_bytes_per_element, elements)

    def attention(self, flop) -> tuple[np.ndarray, np.ndarray]:
        """(forward, backward) seconds of the attention kernel for `flop` forward FLOPs (16-bit)."""
        g, prof = self.hw.gpu, self.hw.profile
        fwd_rate = prof.attention_unfused_fraction if self.unfused else prof.attention_fwd_fraction
        bwd_rate = prof.attention_unfused_fraction if self.unfused else prof.attention_bwd_fraction
        fwd = flop / (g.peak_flops * fwd_rate) + g.matmul_latency_s
        bwd = ATTENTION_BWD_FLOP_RATIO * flop / (g.peak_flops * bwd_rate) + g.matmul_latency_s
        return np.asarray(fwd, dtype=np.float64), np.asarray(bwd, dtype=np.float64)

    @property
    def hbm_Bps(self) -> float:
        """HBM bandwidth element-wise kernels achieve."""
        return self.hw.gpu.hbm_Bps * self.hw.profile.elementwise_hbm_fraction

    @property
    def elementwise_share(self) -> float:
        """Share of the operation list's element-wise bytes that still move: compiled kernels fuse the rest."""
        prof = self.hw.profile
        return prof.compiled_elementwise_fraction if prof.compiled else 1.0


def gemm_peak_fraction(hw: Hardware, precision: str = "bf16") -> float:
    """The share of its precision's peak a large GEMM reaches on one GPU, before tile, wave and launch losses: the
    sustained clock under the roofline (App. 8.1.1), the profile's measured large-GEMM fraction times its sustained
    factor under 'measured'. The toy model's MFU ceiling: its GEMMs are all its work."""
    prof = hw.profile
    if prof.gemm_model == "roofline":
        return hw.gpu.sustained_clock_factor
    return prof.gemm_fraction(hw.gpu.name, precision) * prof.sustained_factor(hw.gpu.name)


def rates(hw: Hardware, wl: Workload) -> Rates:
    tr = wl.transformer
    low = tr is not None and wl.precision != "bf16"
    return Rates(hw, precision=wl.precision if low else "bf16",
                 recipe=hw.profile.recipe(wl.recipe_name) if low else None, recipe_name=wl.recipe_name or "",
                 unfused=tr is not None and tr.attention_kernel == "unfused")


def block_matmul_s(hw: Hardware, wl: Workload, cols: Cols, nanobatch) -> tuple[np.ndarray, np.ndarray]:
    """GEMM time of one layer of one expert for one nanobatch on one GPU (App. 8.1.1), from the layer's GEMMs, plus
    its element-wise work.

    Every weight shard runs forward (out x inp), activation gradient (inp x out) and weight gradient. Returns
    (all of them, the forward + activation-gradient ones: the critical path's; weight gradients can be deferred).
    Element-wise work (none in the paper's toy block) moves its bytes at HBM bandwidth, every pass, on the critical
    path.
    """
    t = _ops_s(Rates(hw), wl.ops, cols, nanobatch, nanobatch, None)
    return t["all"], t["critical"]


def _ops_s(r: Rates, ops, cols: Cols, n_dense, n_routed, experts_here, run_gemms: bool = True, layer: bool = True
           ) -> dict[str, np.ndarray]:
    """Seconds of one layer's operations for one microbatch on one GPU: GEMMs once per token on `n_dense` tokens,
    routed GEMMs on `n_routed` tokens in each of `experts_here` experts (None: every GEMM on `n_dense`, the toy block
    per expert), the attention kernel, and element-wise bytes at HBM bandwidth.

    Keys: 'all' (every pass), 'critical' (without the deferrable weight gradients), 'fwd' (the forward pass alone:
    what full recomputation runs again), 'core_fwd' (the attention kernel's forward: what selective recomputation
    runs again) and 'attention' (the kernel, both passes: what context parallelism's exchange hides under).
    `layer` False: an end (embedding, LM head), whose GEMMs stay 16-bit under FP8."""
    ops_s = op_seconds(r, ops, cols, n_dense, n_routed, experts_here, run_gemms, layer, split=True)
    fwd: np.ndarray | float = 0.0
    act: np.ndarray | float = 0.0
    wgrad: np.ndarray | float = 0.0
    for _, kind, t in ops_s:
        if kind == "gemm":
            fwd, act, wgrad = fwd + t[0], act + t[1], wgrad + t[2]
    critical = np.asarray(fwd + act, dtype=np.float64)
    forward = np.asarray(fwd, dtype=np.float64) + np.zeros_like(critical)
    core_fwd = np.zeros_like(critical)
    attention = np.zeros_like(critical)
    for _, kind, t in ops_s:  # after every GEMM: the sums keep the order the golden plans were priced in
        if kind == "attention":
            critical = critical + t[0] + t[1]
            forward = forward + t[0]
            core_fwd = core_fwd + t[0]
            attention = attention + t[0] + t[1]
        elif kind == "elementwise":
            critical = critical + t[0]
            forward = forward + t[1]
    return {"all": critical + wgrad, "critical": critical, "fwd": forward, "core_fwd": core_fwd,
            "attention": attention}


def op_seconds(r: Rates, ops, cols: Cols, n_dense, n_routed, experts_here, run_gemms: bool = True,
               layer: bool = True, split: bool = False) -> list[tuple[str, str, np.ndarray]]:
    """Each operation of one layer (or end) for one microbatch on one GPU, all passes: (name, kind, seconds), kind
    'gemm', 'attention' or 'elementwise'; sums to `_ops_s`'s 'all' (the report's op-level breakdown). `split`: the
    seconds as a stack of their parts instead: a GEMM's (forward, activation gradient, weight gradient), the
    attention kernel's (forward, backward), an element-wise op's (all passes, the forward pass)."""
    out: list[tuple[str, str, np.ndarray]] = []
    quant: list[np.ndarray] = []
    for gemm in (ops.gemms if run_gemms else ()):
        routed = experts_here is not None and gemm.routed
        shard = expert_cols(cols) if routed else cols  # a folded layout splits the experts by N_ETP
        o, i = gemm.out.per_gpu(shard), gemm.inp.per_gpu(shard)
        n = n_routed if routed else n_dense
        # A GEMM the recipe leaves out (the router) runs in 16 bits and quantizes nothing; without a recipe (the
        # paper profile's idealisation) every layer GEMM runs at the low-precision rate.
        low = layer and (gemm.recipe_covers or r.recipe is None)
        parts = np.stack(np.broadcast_arrays(r.gemm_pass(o, i, n, "fprop", low, routed),
                                             r.gemm_pass(i, o, n, "dgrad", low, routed),
                                             r.gemm_pass(o, i, n, "wgrad", low, routed)))
        # the busiest expert rank runs `moe_imbalance` times the mean routed load
        copies = experts_here * r.hw.profile.moe_imbalance if routed else 1.0
        if routed:
            parts = parts * copies
        out.append((gemm.name, "gemm", parts if split else parts.sum(axis=0)))
        if low and r.low and r.recipe is not None:
            # The recipe quantizes the GEMM's input X (n x inp, read by fprop and wgrad) in the forward pass and
            # the output gradient dY (n x out, read by dgrad and wgrad) in the backward pass. A recipe that casts
            # per module casts X once for each of the GEMM's modules (their dY are disjoint slices: one cast in
            # all); one that casts a module's input once casts an input two GEMMs share (Q and KV) once, and under
            # FP8 TP gathers a column-parallel GEMM's input and a row-parallel GEMM's output gradient on the
            # sequence shard (`gathered_quantize_s`). A recipe that rescales its backward GEMMs' outputs passes
            # over each module's input gradient (n x inp) and the weight gradient (out x inp) once more.
            x = np.asarray(i, dtype=np.float64) * n
            y = np.asarray(o, dtype=np.float64) * n
            lin = gemm.linears if r.recipe.cast_per_linear else 1
            if r.recipe.cast_per_linear:
                # compiled, the modules' casts of their one input are the same ops on the same tensor, which the
                # partitioner's common-subexpression pass merges into one (`Rates.casts_of_shared_input`)
                fwd_q = r.quantize_s(x * r.casts_of_shared_input(lin, gemm.shared_input))
                bwd_q = r.quantize_s(y)
            else:
                g = r.tp_gather(cols) if not routed else np.ones(1)
                column = gemm.out.split_by == "tp_ff" and gemm.inp.split_by != "tp_ff"
                row = gemm.inp.split_by == "tp_ff"
                fwd_q = (np.zeros(1) if gemm.shared_input else
                         r.gathered_quantize_s(x, g) if column else r.quantize_s(x))
                bwd_q = r.gathered_quantize_s(y, g) if row else r.quantize_s(y)
            fwd_q = fwd_q * copies
            bwd_q = (bwd_q + r.rescale_s(x * lin + np.asarray(o, dtype=np.float64) * i)) * copies
            quant.append(np.stack(np.broadcast_arrays(fwd_q + bwd_q, fwd_q)))
    if quant:
        q = functools.reduce(operator.add, quant)
        name = f"quantize ({r.recipe_name or r.precision})"
        out.append((name, "elementwise", q if split else q[0]))
    if ops.attention is not None:
        a = np.stack(np.broadcast_arrays(*r.attention(ops.attention.forward_flop_per_token(cols) * n_dense)))
        out.append(("attention kernel", "attention", a if split else a.sum(axis=0)))
        merge = _ring_merge_s(r, ops.attention, cols, n_dense)
        if merge is not None:
            out.append(("ring attention merge", "elementwise", merge if split else merge[0]))
    for op in ops.elementwise:
        once = np.asarray(op.per_gpu(cols), dtype=np.float64) * n_dense * r.elementwise_share / r.hbm_Bps
        both = np.stack(np.broadcast_arrays(op.passes * once, once))
        out.append((op.name, "elementwise", both if split else both[0]))
    return out


EP_STAGES = 4
"""Megatron's expert-parallel overlap (core/models/common/model_chunk_schedule_plan.py, TransformerLayerSchedulePlan
.run) pairs one microbatch's forward through a layer with another's backward and runs each all-to-all of one
against a sub-module of the other: the backward combine under the forward attention ('pre-dispatch computation':
attention, norm, router, permutation), the forward dispatch under the MLP's activation gradient, the backward
dispatch under the MLP's weight gradient and forward, the forward combine under the attention's activation
gradient. The attention's weight gradient runs after the pair, under no all-to-all."""


def ep_unpaired_share(cols: Cols) -> np.ndarray:
    """The share of the busiest device's layer passes that Megatron's expert-parallel overlap runs unpaired, their
    all-to-all exposed in full: without pipelining the first microbatch's forward and the last one's backward
    (pipeline_parallel/combined_1f1b.py, combined_1f1b_schedule_for_no_pipelining); with it the warm-up forwards and
    as many cool-down backwards: under interleaving (N_PP - 1) 2 + (i - 1) N_PP + 1 of the m i chunk passes on the
    first rank, the extra one the overlap schedules (pipeline_parallel/schedules.py, get_pp_rank_microbatches; the
    microbatch group per virtual stage at its default N_PP), without it N_PP."""
    pp, i, m = _f(cols, "pp"), _f(cols, "interleave"), _f(cols, "microbatches")
    warm = np.where(pp == 1, 1.0, np.where(i > 1, (pp - 1.0) * 2.0 + (i - 1.0) * pp + 1.0, pp))
    return np.minimum(1.0, warm / (m * i))


def _mlp_side(name: str) -> float:
    """The share of an operation the schedule runs in the MLP node (the experts, routed and shared, and their
    activation); the token permutation is split between the pre-dispatch node (permute) and the combine's
    (unpermute), half each; everything else is the pre-dispatch computation."""
    if name == "routing permutes":
        return 0.5
    return 1.0 if "expert" in name else 0.0


def ep_stage_times(r: Rates, ops, cols: Cols, n_dense, n_routed, experts_here) -> tuple[np.ndarray, ...]:
    """Seconds of one MoE layer's compute for one microbatch under each of the EP_STAGES all-to-alls (`EP_STAGES`'
    order): the attention side's forward, the MLP's activation gradient, the MLP's weight gradient and forward, the
    attention side's activation gradient. The recipe's quantization is split between the sides in proportion to
    their GEMM time."""
    side_f = side_b = mlp_f = mlp_d = mlp_w = 0.0
    gemm_side = gemm_all = 0.0
    quant: list[np.ndarray] = []
    for name, kind, t in op_seconds(r, ops, cols, n_dense, n_routed, experts_here, split=True):
        if kind == "gemm":
            w = _mlp_side(name)
            mlp_f, mlp_d, mlp_w = mlp_f + w * t[0], mlp_d + w * t[1], mlp_w + w * t[2]
            side_f, side_b = side_f + (1.0 - w) * t[0], side_b + (1.0 - w) * t[1]
            gemm_side = gemm_side + w * (t[0] + t[1] + t[2])
            gemm_all = gemm_all + t[0] + t[1] + t[2]
        elif kind == "attention":
            side_f, side_b = side_f + t[0], side_b + t[1]
        elif name.startswith("quantize"):
            quant.append(t)
        else:  # element-wise: (all passes, forward)
            w = _mlp_side(name)
            mlp_f, mlp_d = mlp_f + w * t[1], mlp_d + w * (t[0] - t[1])
            side_f, side_b = side_f + (1.0 - w) * t[1], side_b + (1.0 - w) * (t[0] - t[1])
    share = np.asarray(gemm_side, dtype=np.float64) / np.maximum(gemm_all, 1e-300)
    for t in quant:
        mlp_f, mlp_d = mlp_f + share * t[1], mlp_d + share * (t[0] - t[1])
        side_f, side_b = side_f + (1.0 - share) * t[1], side_b + (1.0 - share) * (t[0] - t[1])
    out = (side_f, mlp_d, mlp_w + mlp_f, side_b)
    shape = np.broadcast(*[np.asarray(x) for x in out]).shape
    return tuple(np.broadcast_to(np.asarray(x, dtype=np.float64), shape).copy() for x in out)


def _ring_merge_s(r: Rates, core, cols: Cols, n_dense) -> np.ndarray | None:
    """Element-wise work of ring attention outside the kernels, as (all passes, forward pass) seconds for one
    microbatch, or None when the profile prices none or no row has N_CP > 1: each of the N_CP ring steps moves
    `cp_merge_fwd_bytes` (forward) and `cp_merge_bwd_bytes` (backward) HBM bytes per element of the rank's attention
    output (its n_dense tokens x heads x v_dim), at the element-wise bandwidth like every element-wise row."""
    prof = r.hw.profile
    if prof.cp_merge_fwd_bytes <= 0.0 and prof.cp_merge_bwd_bytes <= 0.0:
        return None
    cp = _f(cols, "cp")
    if not np.any(cp > 1):
        return None
    steps = np.where(cp > 1, cp, 0.0)
    elems = np.asarray(core.heads.per_gpu(cols), dtype=np.float64) * core.v_dim * n_dense
    once = steps * elems * r.elementwise_share / r.hbm_Bps
    fwd = prof.cp_merge_fwd_bytes * once
    return np.stack(np.broadcast_arrays(fwd + prof.cp_merge_bwd_bytes * once, fwd))


def recompute_extra(layer: Mapping[str, np.ndarray], recompute) -> np.ndarray:
    """Per-microbatch seconds recomputation adds to one layer: the attention kernel's forward (selective) or the
    whole forward pass (full)."""
    r = np.asarray(recompute, dtype=np.int64)
    return np.where(r == 2, layer["fwd"], np.where(r == 1, layer["core_fwd"], 0.0))


def op_breakdown(hw: Hardware, wl: Workload, cols: Cols) -> list[tuple[str, str, str, np.ndarray]]:
    """Seconds per optimizer step of each operation on the busiest device: (name, kind, where, seconds). Layer ops
    count every microbatch on the device's layers (and experts); the embedding and LM head their own stage's;
    recomputation is its own row."""
    m = _f(cols, "microbatches")
    dp, ep = _f(cols, "dp"), _f(cols, "ep")
    layers = device_layers(wl, cols)
    rows: list[tuple[str, str, str, np.ndarray]] = []
    if wl.transformer is None:
        bn = nanobatch_tokens(wl, dp, m)
        for name, kind, t in op_seconds(Rates(hw), wl.ops, cols, bn, bn, None):
            rows.append((name, kind, "every layer, every expert here", m * layers * (wl.experts / ep) * t))
        return rows
    mo = wl.model_ops
    assert mo is not None
    n_d = nanobatch_tokens(wl, dp, m, ep, _f(cols, "cp"))
    n_r = routed_tokens(wl, cols, n_d)
    here = wl.experts / expert_degrees(cols)[0]
    r = rates(hw, wl)
    for name, kind, t in op_seconds(r, mo.layer, cols, n_d, n_r, here):
        rows.append((name, kind, "every layer", m * layers * t))
    extra = recompute_extra(_ops_s(r, mo.layer, cols, n_d, n_r, here), cols["recompute"])
    if np.any(extra > 0):
        rows.append(("recomputation", "recompute", "every layer", m * layers * extra))
    if hw.profile.layer_overhead_s > 0:
        rows.append(("per-layer overhead", "overhead", "every layer",
                     m * layers * hw.profile.layer_overhead_s * np.ones_like(m)))
    for name, kind, t in op_seconds(r, mo.embedding, cols, n_d, n_r, 1.0, run_gemms=False, layer=False):
        rows.append((name, kind, "first stage", m * t))
    for name, kind, t in op_seconds(r, mo.head, cols, n_d, n_r, 1.0, layer=False):
        rows.append((name, kind, "last stage", m * t))
    return rows


LAYER_KEYS = ("block_s", "block_critical_s", "block_fwd_s", "block_core_fwd_s", "block_attention_s")


EP_STAGE_KEYS = tuple(f"ep_stage{k + 1}_s" for k in range(EP_STAGES))
"""`shape_times`' keys: one MoE layer's compute per stage for one microbatch."""
EP_STAGE_TOTALS = tuple(f"ep_stage{k + 1}_total_s" for k in range(EP_STAGES))
"""`tuple_quantities`' keys: each stage's compute on the busiest device for the whole step (the branches read these)."""


def has_ep_stages(wl: Workload) -> bool:
    """Whether the workload's layers have an expert all-to-all (a transformer with routed experts)."""
    return wl.transformer is not None and wl.model_ops is not None and bool(wl.model_ops.layer.alltoalls)


HOST_FLOOR_UNPRICED = ("the CPU time to launch the MoE layers' kernels (a host-bound floor): a plan assumes CUDA "
                       "graphs or a fast enough host (profile.moe.host_layer_us = 0; `validate` prices published runs "
                       "without CUDA graphs with profile.moe.eager_host_layer_us)")
"""What an MoE transformer's plan leaves out when the profile prices no host-bound floor (its depends_on says it;
an emitted launch configuration repeats it)."""


def has_host_floor(wl: Workload, profile: ExecutionProfile) -> bool:
    """The profile prices a host-bound floor on this workload's MoE layers (docs/model.md §1c)."""
    return wl.transformer is not None and wl.experts > 1 and profile.host_moe_layer_s > 0


def shape_keys(wl: Workload) -> tuple[str, ...]:
    """The keys `shape_times` returns for this workload."""
    if wl.transformer is None:
        return ("block_s", "block_critical_s")
    keys = (*LAYER_KEYS, "embed_s", "embed_critical_s", "head_s", "head_critical_s")
    return (*keys, *EP_STAGE_KEYS) if has_ep_stages(wl) else keys


def shape_times(hw: Hardware, wl: Workload, cols: Cols, toy_nanobatch=None) -> dict[str, np.ndarray]:
    """Per-microbatch seconds on one GPU that depend on the shape only (N_TP,ff, N_TP,model, N_DP m and, for a
    transformer, N_EP, N_CP and sequence parallelism): the toy block per expert ('block_s', 'block_critical_s'; at
    `toy_nanobatch` if given); for a transformer one layer (LAYER_KEYS: all passes, critical path, forward, attention
    forward, attention), the embedding lookup and the LM head (each all passes and critical path)."""
    u = np.asarray(cols["dp"], dtype=np.float64) * np.asarray(cols["microbatches"], dtype=np.float64)
    if wl.transformer is None:
        bn = wl.batch_tokens / (wl.experts * u) if toy_nanobatch is None else toy_nanobatch
        blk, crit = block_matmul_s(hw, wl, cols, bn)
        over = hw.profile.layer_overhead_s
        return {"block_s": blk + over, "block_critical_s": crit + over}
    mo = wl.model_ops
    assert mo is not None
    ep = np.asarray(cols["ep"], dtype=np.float64)
    n_d = nanobatch_tokens(wl, u, 1, ep, np.asarray(cols["cp"], dtype=np.float64))
    n_r = routed_tokens(wl, cols, n_d)
    r = rates(hw, wl)
    layer = _ops_s(r, mo.layer, cols, n_d, n_r, wl.experts / expert_degrees(cols)[0])
    # The profile's fixed per-layer time (launches, small kernels): a third of it in the forward pass.
    over = hw.profile.layer_overhead_s
    out = {"block_s": layer["all"] + over, "block_critical_s": layer["critical"] + over,
           "block_fwd_s": layer["fwd"] + over / 3.0,
           "block_core_fwd_s": layer["core_fwd"], "block_attention_s": layer["attention"]}
    embed = _ops_s(r, mo.embedding, cols, n_d, n_r, 1.0, run_gemms=False, layer=False)
    head = _ops_s(r, mo.head, cols, n_d, n_r, 1.0, layer=False)
    out["embed_s"], out["embed_critical_s"] = embed["all"], embed["critical"]
    out["head_s"], out["head_critical_s"] = head["all"], head["critical"]
    if has_ep_stages(wl):  # read only by the stage-wise EP overlap's branches: zeros (not computed) without them
        stages = (ep_stage_times(r, mo.layer, cols, n_d, n_r, wl.experts / expert_degrees(cols)[0])
                  if hw.profile.overlap_ep_stages else (0.0,) * EP_STAGES)
        for key, t in zip(EP_STAGE_KEYS, stages, strict=True):
            out[key] = t + np.zeros_like(layer["all"])
    return out


def stage_layers(wl: Workload, pp, interleave) -> tuple[np.ndarray, np.ndarray]:
    """(c, r): layers per virtual stage and how many fewer the first and last virtual stages hold together.

    Toy: N_PP i | L, so c = L / (N_PP i) and r = 0. Transformer: c = ceil(L / (N_PP i)) and the first and last
    virtual stages may each hold up to c - 1 fewer layers (Llama 3 405B: 126 layers on 16 stages of 8, the ends
    7), which leaves room for the embedding and the LM head."""
    v = np.asarray(pp, dtype=np.int64) * np.asarray(interleave, dtype=np.int64)
    c = -(-wl.layers // v)
    return c, v * c - wl.layers


def end_split(wl: Workload, cols: Cols, layer_s, embed_s, head_s) -> tuple[np.ndarray, np.ndarray]:
    """(r_f, time of the busier end device): how many fewer layers the first virtual stage holds (the last holds
    r - r_f fewer), chosen to balance the first device (plus the embedding) against the last (plus the LM head); each
    end keeps at least one layer per virtual stage."""
    pp = np.asarray(cols["pp"], dtype=np.int64)
    i = np.asarray(cols["interleave"], dtype=np.int64)
    c, r = stage_layers(wl, pp, i)
    full = (i * c).astype(np.float64) * layer_s
    lo = np.maximum(0, r - (c - 1))
    hi = np.minimum(r, c - 1)
    ideal = (r * layer_s + embed_s - head_s) / (2.0 * np.maximum(layer_s, 1e-300))
    best = np.full(len(pp), np.inf)
    best_rf = np.zeros(len(pp))
    for cand in (np.floor(ideal), np.ceil(ideal)):
        rf = np.clip(cand, lo, np.maximum(lo, hi))
        ends = np.maximum(full - rf * layer_s + embed_s, full - (r - rf) * layer_s + head_s)
        best_rf = np.where(ends < best, rf, best_rf)
        best = np.minimum(best, ends)
    return best_rf.astype(np.int64), best


def device_time_s(wl: Workload, cols: Cols, layer_s, embed_s, head_s) -> np.ndarray:
    """Per-microbatch time of the busiest pipeline device of a transformer.

    Middle devices hold i c layers; the first holds r_f fewer plus the embedding, the last r_l fewer plus the LM
    head, with r_f + r_l = r split to balance the two (`end_split`)."""
    pp = np.asarray(cols["pp"], dtype=np.int64)
    i = np.asarray(cols["interleave"], dtype=np.int64)
    if custom_stages(cols):  # the first device holds the first virtual stage and i - 1 others; the last likewise
        first, c, last = custom_stage_layers(wl, cols)
        full = (i * c).astype(np.float64) * layer_s
        others = ((i - 1) * c).astype(np.float64)
        best = np.maximum((others + first) * layer_s + embed_s, (others + last) * layer_s + head_s)
    else:
        c, _ = stage_layers(wl, pp, i)
        full = (i * c).astype(np.float64) * layer_s
        _, best = end_split(wl, cols, layer_s, embed_s, head_s)
    middle = np.where(pp >= 3, full, 0.0)
    single = wl.layers * layer_s + embed_s + head_s
    return np.where(pp == 1, single, np.maximum(middle, best))


def sharding_degrees(cols) -> tuple[np.ndarray, np.ndarray]:
    """(dense, expert) data-parallel ranks a weight's optimizer state (and, under ZeRO-2/3, gradients and weights) is
    sharded over: N_DP N_EP N_CP for dense weights, N_DP N_CP for expert weights (Megatron's distributed optimizer
    over each weight's data-parallel group, context-parallel ranks included)."""
    f = {k: np.asarray(cols[k], dtype=np.float64) for k in ("dp", "ep", "cp")}
    if "etp" in cols:  # a folded expert layout: expert weights over N_EDP (planner.cost.terms.expert_dp)
        tp = np.asarray(cols["tp_ff"], dtype=np.float64) * np.asarray(cols["tp_model"], dtype=np.float64)
        folded = np.asarray(cols["expert_ep"], dtype=np.float64) * np.asarray(cols["etp"], dtype=np.float64)
        return f["dp"] * f["ep"] * f["cp"], f["dp"] * f["ep"] * f["cp"] * tp / folded
    return f["dp"] * f["ep"] * f["cp"], f["dp"] * f["cp"]


def device_layers(wl: Workload, cols: Cols) -> np.ndarray:
    """Layers on the busiest device (the terms' per-GPU traffic and memory count these, an upper bound for the
    ends): toy L / N_PP, transformer i c."""
    if wl.transformer is None:
        return wl.layers / _f(cols, "pp")
    i = np.asarray(cols["interleave"], dtype=np.int64)
    if custom_stages(cols):  # custom ends: the busiest of the first, a middle and the last device
        first, c, last = custom_stage_layers(wl, cols)
        middle = np.where(np.asarray(cols["pp"]) >= 3, i * c, 0)
        ends = (i - 1) * c + np.maximum(first, last)
        return np.where(np.asarray(cols["pp"]) == 1, wl.layers, np.maximum(middle, ends)).astype(np.float64)
    c, _ = stage_layers(wl, cols["pp"], cols["interleave"])
    return (i * c).astype(np.float64)


def params_per_gpu(wl: Workload, cols: Cols) -> np.ndarray:
    """Parameters one GPU holds: its layers' and experts' shards of every GEMM weight (transformer: the busiest
    device's layers plus the larger of the embedding and LM-head shards; both on a single stage unless tied)."""
    dense, expert = split_params_per_gpu(wl, cols)
    return dense + expert


def split_params_per_gpu(wl: Workload, cols: Cols) -> tuple[np.ndarray, np.ndarray]:
    """(dense, expert) parameters on one GPU. Toy: all expert parameters (its block is routed). Dense weights'
    gradients are reduced over N_DP N_EP ranks, expert weights' over N_DP (Megatron's expert data parallelism)."""
    if wl.transformer is None:
        return np.zeros(1), (wl.layers / _f(cols, "pp")) * (wl.experts / _f(cols, "ep")) * wl.ops.shard_params(cols)
    mo = wl.model_ops
    assert mo is not None
    layers = device_layers(wl, cols)
    dense, expert = mo.layer.split_params(cols, wl.experts / _f(cols, "ep"))
    if is_folded(cols):  # the experts' shards: N_ETP splits them, N_EP (of the expert layers) spreads them
        _, expert = mo.layer.split_params(expert_cols(cols), wl.experts / expert_degrees(cols)[0])
    emb = mo.embedding.shard_params(cols)
    head = mo.head.shard_params(cols)
    pp = _f(cols, "pp")
    # One device: embedding and head (once if tied). Several: the larger end (a tied matrix has a copy on each end).
    ends = np.where(pp == 1, emb + (0.0 if mo.tied else head), np.maximum(emb, head))
    return layers * dense + ends, layers * expert


def tuple_quantities(hw: Hardware, wl: Workload, cols: Cols, shape: Mapping[str, np.ndarray] | None = None
                     ) -> dict[str, np.ndarray]:
    """Every placement-free quantity the branches use, per row. `shape` may be passed when the caller has
    tabulated `shape_times` for the rows' shapes (it must equal what that returns)."""
    dp, pp, ep, m = _f(cols, "dp"), _f(cols, "pp"), _f(cols, "ep"), _f(cols, "microbatches")
    zb = np.asarray(cols["zero_bubble"], dtype=bool)
    bn = nanobatch_tokens(wl, dp, m, ep, _f(cols, "cp"))
    if shape is None:
        shape = shape_times(hw, wl, cols, bn if wl.transformer is None else None)
    block_s, block_critical_s = shape["block_s"], shape["block_critical_s"]
    f_b = bubble_fraction(pp, cols["interleave"], m, zb, hw.profile.pipeline_microbatch_group)
    if wl.transformer is None:
        experts_here = wl.experts / ep
        # GEMMs: every microbatch, every layer of this stage, every expert on this GPU (App. 8.1.1).
        matmul_s = m * (wl.layers / pp) * experts_here * block_s
        # One microbatch forward + backward through all L layers (the floor's GEMMs, docs/model.md §6).
        critical_mm_s = wl.layers * experts_here * block_critical_s
    else:
        # The busiest pipeline device sets the pace; one microbatch's path crosses every layer and both ends.
        # Recomputation re-runs part of each layer's forward pass inside its backward pass: on the critical path.
        extra = recompute_extra({"fwd": shape["block_fwd_s"], "core_fwd": shape["block_core_fwd_s"]},
                                cols["recompute"])
        matmul_s = m * device_time_s(wl, cols, block_s + extra, shape["embed_s"], shape["head_s"])
        critical_mm_s = (wl.layers * (block_critical_s + extra) + shape["embed_critical_s"]
                         + shape["head_critical_s"])
    transformer = {}
    if wl.transformer is not None:
        # Context parallelism's key/value exchange hides under the attention kernels only: the rest of the work is
        # exposed to it (docs/model.md §4b).
        hide = m * device_layers(wl, cols) * shape["block_attention_s"]
        transformer["exposed_s"] = np.maximum(matmul_s - hide, 0.0)
        if has_ep_stages(wl):
            # Expert-parallel overlap by stages (EP_STAGES): each stage's compute on the busiest device (every layer
            # priced as an MoE layer, as the all-to-all's words are), the rest (the attention's weight gradient,
            # recomputation, per-layer overhead, the ends), and each all-to-all's coefficient (a quarter, stretched).
            stages = [m * device_layers(wl, cols) * shape[k] for k in EP_STAGE_KEYS]
            for k, v in zip(EP_STAGE_TOTALS, stages, strict=True):
                transformer[k] = v
            transformer["ep_rest_s"] = np.maximum(matmul_s - sum(stages, np.zeros_like(matmul_s)), 0.0)
        if has_host_floor(wl, hw.profile):
            # Host-bound floor: the CPU issues every MoE layer's kernels of every microbatch on the busiest device
            # (every layer priced as an MoE layer, as above); the stage takes at least that long.
            transformer["host_s"] = m * device_layers(wl, cols) * hw.profile.host_moe_layer_s
    unpaired = ep_unpaired_share(cols)
    return {
        **transformer,
        **{k: shape[k] for k in shape_keys(wl)},
        "one": np.ones_like(dp),
        "nanobatch": bn,
        "matmul_s": matmul_s,
        "critical_mm_s": critical_mm_s,
        "bubble_fraction": f_b,
        "stretch": 1.0 / (1.0 - f_b),
        # Stage-wise EP overlap (`branches`): the hidden share of the all-to-all, a quarter under each stage.
        "ep_stage_share": hw.profile.overlap_ep / (EP_STAGES * (1.0 - f_b)),
        "ep_unpaired_stretch": unpaired / (1.0 - f_b),
        "ep_unpaired_share": hw.profile.overlap_ep * unpaired / (EP_STAGES * (1.0 - f_b)),
        # Under 1F1B each GPU waits out its share (1/N_PP of the layers) of every microbatch's serial latency;
        # under ZB-H2 those latencies hide behind other microbatches' work (App. 8.1.5); the floor still sees them.
        "lat_share": latency_share(hw, zb, m / pp),
        "m_over_pp": m / pp,
        "optimizer_s": optimizer_s(hw, wl, cols),
    }


def latency_share(hw: Hardware, zero_bubble, m_over_pp) -> np.ndarray:
    """The multiplicity of the latency path in a GPU's step: m / N_PP, or 0 under ZB-H2 when the profile lets it
    hide the latencies."""
    hide = np.asarray(zero_bubble, dtype=bool) & hw.profile.zero_bubble_hides_latency
    return np.where(hide, 0.0, m_over_pp)


def optimizer_s(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """The optimizer step on the busiest device: its parameters' share of the optimizer state (sharded over each
    weight's data-parallel ranks) times the profile's bytes per parameter, at element-wise HBM bandwidth."""
    per = hw.profile.optimizer_bytes_per_param
    recipe = rates(hw, wl).recipe
    cast = 0.0 if recipe is None else recipe.weight_cast_bytes_per_param * (1.0 - recipe.kept_layer_fraction)
    if per == 0.0 and cast == 0.0:
        return np.zeros(len(np.asarray(cols["dp"])))
    dense, expert = split_params_per_gpu(wl, cols)
    if wl.transformer is None:
        updated = (dense + expert) / _f(cols, "dp")
    else:
        n_dense, n_expert = sharding_degrees(cols)
        updated = dense / n_dense + expert / n_expert
    # The recipe's low-precision weight copies are refreshed once per step from the updated shard (the weights of
    # the layers' GEMMs only: the embedding and LM head stay 16-bit; counted on every parameter, a small excess).
    return np.asarray((updated * per + updated * cast) / (hw.gpu.hbm_Bps * hw.profile.elementwise_hbm_fraction),
                      dtype=np.float64)


# --------------------------------------------------------------------------------------------------
# Group terms: a tuple scale times a feature of one placement group's factor vectors
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupTerm:
    name: str
    group: str
    """Placement group (planner.parallel.dimensions.GROUPS) whose factor vectors the feature reads."""
    kind: str
    """'bw' (bandwidth time) or 'path' (serial latency of one microbatch, both passes)."""
    scale: Callable[[Hardware, Workload, Cols], np.ndarray]
    feature: Callable[[Hardware, Workload, Cols, Factors], np.ndarray]
    keys: tuple[str, ...] = ()
    """Tuple columns the feature reads besides the group's degrees."""


def _bw(hw: Hardware) -> np.ndarray:
    """Per-GPU one-direction bandwidth of each level, as the profile's collectives achieve it."""
    frac = hw.profile.per_level(hw.profile.collective_bw_fraction, len(hw.levels))
    return np.array([lvl.bw_unidir_Bps * f for lvl, f in zip(hw.levels, frac)], dtype=np.float64)


def level_latencies(hw: Hardware) -> np.ndarray:
    """One-way latency of each level: the profile's, or the hardware file's."""
    prof = hw.profile
    if prof.collective_latency_s is None:
        return np.array([lvl.lat_s for lvl in hw.levels], dtype=np.float64)
    return np.array(prof.per_level(prof.collective_latency_s, len(hw.levels)), dtype=np.float64)



def _allreduce_per_word(degree: str):
    def feature(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
        # Eq. 2, hierarchical (docs/model.md §3.2): linear in the words, so one word's time is the feature.
        f = fac[degree]
        return net.allreduce_time_s(np.ones(len(f)), f, _bw(hw), hw.gpu.word_bytes)
    return feature


def _flat_ring_per_word(degree: str):
    """One word's all-reduce as a single flat ring over the whole group: 2 (N - 1) / N words per GPU at the
    slowest spanned level's bandwidth (the execution profile's `zero_flat`)."""
    def feature(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
        f = np.asarray(fac[degree], dtype=np.float64)
        n = f.prod(axis=1)
        bw0 = np.concatenate([[np.inf], _bw(hw)])
        return 2.0 * (n - 1.0) / n * hw.gpu.word_bytes / bw0[net.top_level(f)]
    return feature


def _allreduce_latency(degree: str):
    def feature(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
        return net.allreduce_latency_s(fac[degree], level_latencies(hw))
    return feature


def _ring_latency(degree: str):
    """Latency of one ring collective (all-gather or reduce-scatter) over the group, as NCCL's cost model counts it
    (src/graph/tuning.cc): N - 1 steps, each at the profile's ring step latency of the level it crosses. A ring laid
    out level by level takes prod_{k>=h} f_k - prod_{k>h} f_k of its steps on level h (the nodes' ring: N_nodes - 1
    steps over the network, the rest inside the nodes)."""
    def feature(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
        f = np.asarray(fac[degree], dtype=np.float64)
        at_or_above = np.cumprod(f[:, ::-1], axis=1)[:, ::-1]  # prod_{k>=h} f_k
        above = np.concatenate([at_or_above[:, 1:], np.ones((len(f), 1))], axis=1)
        step = np.array(hw.profile.per_level(hw.profile.ring_step_latency_s, len(hw.levels)), dtype=np.float64)
        return ((at_or_above - above) * step[None, :]).sum(axis=1)
    return feature


def zero3_collectives(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """ZeRO-3 / FSDP collectives per step on the busiest device whose latency is exposed: per gather unit and
    microbatch an all-gather for the forward pass, one for the backward pass and a reduce-scatter of the gradients
    (the profile's `zero3_unit`, which the memory model reads too: one per layer for FSDP's per-block wrapping, one
    per weight matrix for DeepSpeed's per-parameter gathers), times the share of ZeRO traffic the profile leaves
    exposed."""
    if wl.transformer is None:
        return np.zeros(len(np.asarray(cols["dp"])))
    per_layer = 1.0 if hw.profile.zero3_unit == "layer" else float(len(wl.ops.gemms))
    z3 = np.asarray(cols["zero"]) >= 3
    count = 3.0 * per_layer * device_layers(wl, cols) * _f(cols, "microbatches")
    return np.where(z3, count * (1.0 - hw.profile.overlap_zero), 0.0)


def _dp_words(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """DP all-reduces this GPU's shard of the gradients once per step (§3.1.3); a folded layout's expert gradients
    go over their own data-parallel group instead (`_edp_words`)."""
    if is_folded(cols):
        return split_params_per_gpu(wl, cols)[0]
    return params_per_gpu(wl, cols)


def _edp_words(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """Folded layout: the expert weights' gradients are reduced over the N_EDP ranks holding the same shards."""
    return split_params_per_gpu(wl, cols)[1]


def zero_phase(cols: Cols) -> np.ndarray:
    """All-reduce equivalents of gradient and parameter traffic left after the last microbatch: ZeRO-1 and -2 one
    (reduce-scatter the gradients, all-gather the updated weights: Megatron's distributed optimizer), ZeRO-3 one half
    (the last reduce-scatter; the weights are gathered again by the next step's forward pass)."""
    return np.where(np.asarray(cols["zero"]) >= 3, 0.5, 1.0)


def zero_overlapped(cols: Cols) -> np.ndarray:
    """All-reduce equivalents of the same traffic during the microbatches, overlapped with compute: ZeRO-2
    reduce-scatters each earlier microbatch's gradients ((m - 1) / 2), ZeRO-3 also all-gathers the weights for every
    microbatch's forward and backward pass (m more). A reduce-scatter or an all-gather is half an all-reduce."""
    z = np.asarray(cols["zero"])
    m = _f(cols, "microbatches")
    return np.where(z >= 2, (m - 1.0) / 2.0, 0.0) + np.where(z >= 3, m, 0.0)


def _times(words: Callable[[Hardware, Workload, Cols], np.ndarray], share: Callable[[Cols], np.ndarray]):
    """A scale: `words` times a ZeRO share of them (`zero_phase` or `zero_overlapped`)."""
    def scale(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
        return words(hw, wl, cols) * share(cols)
    return scale


def _dp_dense_over_ep_words(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """Transformer MoE: dense weights' gradients are also reduced across the expert ranks (the dense layers'
    data-parallel group is N_DP N_EP); hierarchically, after the reduce-scatter over N_DP, 1 / N_DP of them."""
    dense, _ = split_params_per_gpu(wl, cols)
    return dense / _f(cols, "dp")


def _dp_over_cp_words(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """Context-parallel ranks hold the same weights: their gradients are reduced across N_CP too, after the
    reduce-scatters over N_DP (and N_EP for dense weights)."""
    dense, expert = split_params_per_gpu(wl, cols)
    if is_folded(cols):
        return dense / (_f(cols, "dp") * _f(cols, "ep"))
    return dense / (_f(cols, "dp") * _f(cols, "ep")) + expert / _f(cols, "dp")


def recompute_comm_factor(cols: Cols) -> np.ndarray:
    """Full recomputation re-runs each layer's forward collectives: 3 passes where there were 2."""
    return np.where(np.asarray(cols["recompute"]) >= 2, 1.5, 1.0)


def _one(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    return np.ones(len(np.asarray(cols["dp"])))


def _tokens_here(wl: Workload, cols: Cols) -> np.ndarray:
    """Tokens one GPU's dense layers process per step: b / (N_DP N_EP N_CP)."""
    if wl.transformer is None:
        return wl.batch_tokens / (_f(cols, "dp") * _f(cols, "ep"))
    return wl.batch_tokens / (_f(cols, "dp") * _f(cols, "ep") * _f(cols, "cp"))


def _ar_words(group: str):
    def scale(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
        # Per token per layer, the layer's all-reduces over this group (Table 1); a GPU serves L / N_PP layers and
        # b / (N_DP N_EP) tokens per step (transformer: the busiest device's layers, plus the LM head's).
        # A folded layout's routed experts reduce over N_ETP instead (`_etp_words`).
        words = device_layers(wl, cols) * wl.ops.allreduce_words(cols, group, routed=False if is_folded(cols)
                                                                 else None)
        if wl.transformer is not None:
            words = words * recompute_comm_factor(cols)
            if group == "tp_ff":
                # Sequence parallelism's all-reduce is a reduce-scatter and an all-gather; gathered in FP8
                # (`Rates.tp_gather`) the all-gather moves half the bytes.
                words = words * np.where(rates(hw, wl).tp_gather(cols) > 1.0, 0.75, 1.0)
            words = words + wl.model_ops.head.allreduce_words(cols, group)  # type: ignore[union-attr]
        return _tokens_here(wl, cols) * words
    return scale


def _ar_path(group: str):
    def scale(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
        # One microbatch meets each of the group's all-reduces once per layer and pass, serially (§4.3).
        hops = wl.layers * sum(a.passes for a in wl.ops.allreduces
                               if a.group == group and not (a.routed and is_folded(cols)))
        mo = wl.model_ops
        if mo is None:
            return np.full(len(np.asarray(cols["dp"])), float(hops))
        return hops * recompute_comm_factor(cols) + sum(a.passes for a in mo.head.allreduces if a.group == group)
    return scale


def _p2p_words(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    # Every crossing interface carries the layer output of every token, each pass; the traffic of the whole step
    # spreads evenly over all GPUs (App. 8.1.2).
    itf = wl.ops.interface
    return itf.passes * wl.batch_tokens * max(wl.layers - 1, 0) * itf.words.size / gpus_of(cols)


def _p2p_per_word(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
    """max over levels of P_P2P(h) word bytes / bw_h: the levels' transfers overlap (App. 8.1.2, Eqs. 19-20).
    A transformer's expert routing is its own all-to-all (`_a2a_per_word`): only pipeline boundaries here."""
    ep = fac["ep"] if wl.transformer is None else np.ones_like(fac["ep"])
    p_joint = net.p2p_frequencies(net.pp_frequencies(fac["pp"], cols["interleave"], wl.layers),
                                  net.ep_frequencies(ep))[:, 1:]
    return (p_joint * hw.gpu.word_bytes / _bw(hw)[None, :]).max(axis=1)


def _p2p_passes(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    return np.full(len(np.asarray(cols["dp"])), float(wl.ops.interface.passes))


def _p2p_latency(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
    ep = fac["ep"] if wl.transformer is None else np.ones_like(fac["ep"])
    return net.p2p_latency_per_pass_s(fac["pp"], cols["interleave"], ep, wl.layers, level_latencies(hw))


def _a2a_words(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """Words one GPU sends per step in expert dispatch and combine: every token's top-k copies of d_model words,
    both transfers, both passes, on each MoE layer of the busiest device."""
    words = sum((a.passes * a.transfers * a.copies * a.words.size for a in wl.ops.alltoalls), 0.0)
    # The busiest rank sends and receives `moe_imbalance` times the mean (docs/model.md §1c).
    return (expert_tokens_here(wl, cols) * device_layers(wl, cols) * words * recompute_comm_factor(cols)
            * hw.profile.moe_imbalance)


def _etp_words(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """Folded layout: the routed experts' partial outputs, all-reduced over N_ETP ranks (every pass, every copy), on
    the busiest rank's share of the routed tokens."""
    ec = expert_cols(cols)
    per_token = sum((wl.ops.allreduce_words(ec, g, routed=True) for g in ("tp_ff", "tp_model")), np.zeros(1))
    return (expert_tokens_here(wl, cols) * device_layers(wl, cols) * per_token * recompute_comm_factor(cols)
            * hw.profile.moe_imbalance)


def _etp_hops(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    hops = wl.layers * sum(a.passes for a in wl.ops.allreduces if a.routed)
    return hops * recompute_comm_factor(cols)


def dispatch_dedup(ep_factors: np.ndarray, top_k: int) -> np.ndarray:
    """Per level h = 1..H, the distinct-destination share of the top-k copies that cross it: a deduplicating
    dispatcher (DeepEP, HybridEP) sends a token once to each level-(h-1) domain (a GPU on the first level, a node
    above) that holds at least one of its experts. Under uniform routing a copy lands in one given domain of the
    (N_EP(h) - 1) remote ones with probability q = 1 / prod_{k>=h} N_EP(k), so the token reaches
    (N_EP(h) - 1)(1 - (1 - q)^k) of them against k (N_EP(h) - 1) q copies without deduplication: the share is
    (1 - (1 - q)^k) / (k q)."""
    f = np.asarray(ep_factors, dtype=np.float64)
    q = 1.0 / np.cumprod(f[:, ::-1], axis=1)[:, ::-1]
    return (1.0 - (1.0 - q) ** top_k) / (top_k * q)


def _a2a_per_word(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
    """max over levels of P_EP(h) word bytes / bw_h: a copy leaves level h for a uniformly random expert rank with
    probability P_EP(h) (Eq. 20); the levels' transfers overlap. A deduplicating dispatcher
    (profile.moe_dispatch_dedup) sends only the distinct destinations' share (`dispatch_dedup`)."""
    ep_fac = fac["expert_ep"] if "expert_ep" in fac else fac["ep"]
    p = net.ep_frequencies(ep_fac)[:, 1:]
    mo = wl.model_ops
    if hw.profile.moe_dispatch_dedup and mo is not None and mo.top_k > 1:
        p = p * dispatch_dedup(ep_fac, mo.top_k)
    return (p * hw.gpu.word_bytes / _bw(hw)[None, :]).max(axis=1)


def _a2a_hops(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    mo = wl.model_ops
    assert mo is not None
    hops = mo.moe_layers * sum(a.passes * a.transfers for a in wl.ops.alltoalls)
    return hops * recompute_comm_factor(cols)


CP_PASSES = 3.0
"""Ring attention's key/value traffic per layer at the defaults: the forward pass sends the keys and values around the
ring once, the backward pass sends them again with their gradients (twice the words)."""


def cp_hops(hw: Hardware, cols: Cols) -> np.ndarray:
    """Chunk transfers one rank makes per layer and step in ring attention, in units of its own chunk's key/value
    words (docs/model.md §7b, "Context parallelism"): the keys and values N_CP - 1 times in the forward pass, again in
    the backward pass and once more when recomputation re-runs the attention forward, and their gradients N_CP - 1
    times (N_CP when they travel back to their owner, `cp_grad_returns`) at `cp_grad_bytes` per element. At the
    defaults (16-bit gradients, N_CP - 1 hops) that is (N_CP - 1)(CP_PASSES + recompute)."""
    prof = hw.profile
    cp = _f(cols, "cp")
    kv_passes = CP_PASSES - 1.0 + np.where(np.asarray(cols["recompute"]) >= 1, 1.0, 0.0)
    grad = (prof.cp_grad_bytes if prof.cp_grad_bytes is not None else hw.gpu.word_bytes) / hw.gpu.word_bytes
    grad_hops = np.where(cp > 1, cp, 0.0) if prof.cp_grad_returns else cp - 1.0
    return (cp - 1.0) * kv_passes + grad * grad_hops


def cp_kv_words(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """Key and value words per token one rank's ring passes on: the workload's KV heads' (GQA's, MLA's up-projected
    keys and values), or every query head's when the framework repeats the KV heads before the exchange
    (`cp_kv_expanded`)."""
    core = wl.ops.attention
    assert core is not None and core.kv_words is not None
    if hw.profile.cp_kv_expanded:
        return np.asarray(core.heads.per_gpu(cols), dtype=np.float64) * (core.qk_dim + core.v_dim)
    return np.asarray(core.kv_words.per_gpu(cols), dtype=np.float64)


def _cp_words(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """Words one GPU sends per step in ring attention: `cp_hops` times its own chunk's key/value words, on every
    layer of the busiest device."""
    return cp_hops(hw, cols) * cp_kv_words(hw, wl, cols) * _tokens_here(wl, cols) * device_layers(wl, cols)


def _ring_per_word(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
    """A ring's throughput is its slowest hop's: one word's time at the highest level N_CP spans."""
    bw0 = np.concatenate([[np.inf], _bw(hw)])
    return hw.gpu.word_bytes / bw0[net.top_level(fac["cp"])]


def _cp_hops(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """One ring hand-off per layer and pass that no attention work covers (the first block's)."""
    return np.where(_f(cols, "cp") > 1, 2.0 * wl.layers, 0.0) * recompute_comm_factor(cols)


def _cp_latency(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
    lat0 = np.concatenate([[0.0], level_latencies(hw)])
    return lat0[net.top_level(fac["cp"])]


def _a2a_latency(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
    """One-way latency at the highest level N_EP spans (a microbatch waits for its slowest copy)."""
    lat0 = np.concatenate([[0.0], level_latencies(hw)])
    return lat0[net.top_level(fac["expert_ep"] if "expert_ep" in fac else fac["ep"])]


def group_terms(wl: Workload, profile: ExecutionProfile = PAPER, folded: bool = False) -> tuple[GroupTerm, ...]:
    """Every placement-dependent term of the step, for this workload's operations.

    Kinds: 'dp_bw' and 'dp_lat' (the data-parallel phase), 'bw' (bandwidth overlapped with GEMMs), 'zero_bw'
    (ZeRO-2/3 traffic during the microbatches, overlapped likewise), 'cp_bw' (ring attention's exchange, hidden under
    the attention kernels only), 'path' (serial latency of one microbatch); and, from the execution profile,
    'exposed' (the share of a 'bw' or 'zero_bw' term that does not hide under compute: a copy of the term scaled by
    1 - overlap) and 'dp_exposed' (the share of the DP phase left exposed when it overlaps the backward pass).
    `folded`: the rows are folded expert layouts (given layouts only: their features read the 'expert_ep', 'etp'
    and 'edp' factor vectors of `fold_factors`)."""
    tr = wl.transformer is not None
    moe = tr and wl.experts > 1
    folded = folded and moe
    if not tr:  # the paper's toy model: ZeRO-1, its gradients all-reduced after the last microbatch
        terms = [GroupTerm("dp_bw", "dp", "dp_bw", _dp_words, _allreduce_per_word("dp")),
                 GroupTerm("dp_lat", "dp", "dp_lat", _one, _allreduce_latency("dp"))]
    else:
        # Gradient (and ZeRO-3 parameter) traffic over each data-parallel group: DP, then hierarchically the expert
        # ranks (dense weights of MoE models) and the context-parallel ranks; the ZeRO stage splits it between the
        # phase after the last microbatch and the microbatches themselves.
        sync = [("dp", "dp", _dp_words, "dp")]
        if moe:
            sync.append(("dp_ep", "pp_ep", _dp_dense_over_ep_words, "ep"))
        sync.append(("dp_cp", "cp", _dp_over_cp_words, "cp"))
        if folded:
            sync.append(("dp_expert", "dp", _edp_words, "edp"))
        terms = []
        for name, group, words, degree in sync:
            terms += [GroupTerm(f"{name}_bw", group, "dp_bw", _times(words, zero_phase), _allreduce_per_word(degree)),
                      GroupTerm(f"{name}_lat", group, "dp_lat", _one, _allreduce_latency(degree))]
        zero_feature = _flat_ring_per_word if profile.zero_flat else _allreduce_per_word
        terms += [GroupTerm(f"zero_{name}_bw", group, "zero_bw", _times(words, zero_overlapped),
                            zero_feature(degree)) for name, group, words, degree in sync]
        if any(v > 0 for v in profile.ring_step_latency_s):
            # ZeRO-3's per-microbatch gathers over the data-parallel group: their ring latency, exposed
            terms.append(GroupTerm("zero_dp_lat", "dp", "exposed", zero3_collectives, _ring_latency("dp")))
        terms.append(GroupTerm("cp_bw", "cp", "cp_bw", _cp_words, _ring_per_word))
        terms.append(GroupTerm("cp_path", "cp", "path", _cp_hops, _cp_latency))
    groups = [a.group for a in wl.ops.allreduces]
    if wl.transformer is not None:
        groups += [a.group for a in wl.model_ops.head.allreduces]  # type: ignore[union-attr]
    for group in dict.fromkeys(groups):
        (degree,) = GROUPS[group]
        terms.append(GroupTerm(f"{group}_bw", group, "bw", _ar_words(group), _allreduce_per_word(degree)))
        terms.append(GroupTerm(f"{group}_path", group, "path", _ar_path(group), _allreduce_latency(degree)))
    terms.append(GroupTerm("p2p_bw", "pp_ep", "bw", _p2p_words, _p2p_per_word, keys=("interleave",)))
    terms.append(GroupTerm("p2p_path", "pp_ep", "path", _p2p_passes, _p2p_latency, keys=("interleave",)))
    if moe:
        terms.append(GroupTerm("a2a_bw", "pp_ep", "bw", _a2a_words, _a2a_per_word))
        terms.append(GroupTerm("a2a_path", "pp_ep", "path", _a2a_hops, _a2a_latency))
    if folded:
        terms.append(GroupTerm("etp_bw", "tp_ff", "bw", _etp_words, _allreduce_per_word("etp")))
        terms.append(GroupTerm("etp_path", "tp_ff", "path", _etp_hops, _allreduce_latency("etp")))
    return tuple(terms) + _exposed_terms(terms, profile)


def overlap_of(term: GroupTerm, profile: ExecutionProfile) -> float:
    """The share of a bandwidth term the profile hides under compute."""
    if term.kind == "zero_bw":
        return profile.overlap_zero
    if term.name == "p2p_bw":
        return profile.overlap_pp
    if term.name == "a2a_bw":
        return profile.overlap_ep
    return profile.overlap_tp  # the layers' all-reduces: tensor parallelism's groups


def _scaled(scale: Callable[[Hardware, Workload, Cols], np.ndarray], weight: float):
    def scaled(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
        return weight * scale(hw, wl, cols)
    return scaled


def _exposed_terms(terms: list[GroupTerm], profile: ExecutionProfile) -> tuple[GroupTerm, ...]:
    """Copies of the bandwidth terms scaled by the share the profile leaves exposed ('exposed'), and of the DP
    phase's bandwidth by `dp_exposed` ('dp_exposed'). None under the paper's profile."""
    out = []
    for t in terms:
        if t.kind == "cp_bw" and profile.overlap_cp < 1.0:
            out.append(GroupTerm(f"{t.name}_exposed", t.group, "exposed", _scaled(t.scale, 1.0 - profile.overlap_cp),
                                 t.feature, t.keys))
        elif t.kind in ("bw", "zero_bw") and overlap_of(t, profile) < 1.0:
            hidden = overlap_of(t, profile)
            out.append(GroupTerm(f"{t.name}_exposed", t.group, "exposed", _scaled(t.scale, 1.0 - hidden), t.feature,
                                 t.keys))
        elif t.kind == "dp_bw" and profile.dp_exposed > 0.0:
            out.append(GroupTerm(f"{t.name}_exposed", t.group, "dp_exposed", _scaled(t.scale, profile.dp_exposed),
                                 t.feature, t.keys))
    return tuple(out)


# --------------------------------------------------------------------------------------------------
# Branches: Eq. 21 and the floor
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Branch:
    name: str
    parts: tuple[tuple[str, str], ...]
    """(coefficient, term) pairs: a tuple quantity times a tuple quantity or a group term."""
    eq21: bool = True
    """Part of Eq. 21 (False: the critical-path floor)."""


def branches(wl: Workload, dp_overlap: bool, profile: ExecutionProfile = PAPER, folded: bool = False
             ) -> tuple[Branch, ...]:
    """The linear forms whose maximum is the step time (docs/model.md §6).

    Eq. 21 = t_lat + t_DP,n + max(t_DP,y, max(t_matmul, t_TP + t_P2P) / (1 - f_b)) with t_lat = DP latency +
    (1F1B) m / N_PP x the latency path, written as one branch per argument of the maxima; the floor = DP + the
    critical path. Without DP overlap the DP bandwidth is in every branch; with it, it is one branch of its own.
    The execution profile adds the exposed share of each transfer to the compute it cannot hide under (every
    branch but the network's, which already counts the whole transfer), the exposed share of an overlapped DP phase
    and the optimizer step to every branch.
    """
    terms = group_terms(wl, profile, folded)
    paths = tuple(t.name for t in terms if t.kind == "path")
    bws = tuple(t.name for t in terms if t.kind in ("bw", "zero_bw"))
    cps = tuple(t.name for t in terms if t.kind == "cp_bw")
    exposed = tuple(("stretch", t.name) for t in terms if t.kind == "exposed")
    dp_lat = tuple(("one", t.name) for t in terms if t.kind == "dp_lat")
    dp_bw = tuple(("one", t.name) for t in terms if t.kind == "dp_bw")
    fixed = (("one", "optimizer_s"),) if profile.optimizer_bytes_per_param > 0 else ()
    dp = fixed + (dp_lat + tuple(("one", t.name) for t in terms if t.kind == "dp_exposed") if dp_overlap
                  else dp_lat + dp_bw)
    waits = tuple(("lat_share", p) for p in paths)
    out = [
        Branch("gemm", dp + waits + (("stretch", "matmul_s"),) + exposed),
        Branch("network", dp + waits + tuple(("stretch", b) for b in bws)),
    ]
    if cps:  # ring attention: max(attention, exchange) + the rest, i.e. the rest plus the exchange is a branch
        out.append(Branch("context", dp + waits + (("stretch", "exposed_s"),) + tuple(("stretch", c) for c in cps)
                          + exposed))
    if profile.overlap_ep_stages and has_ep_stages(wl) and any(t.name == "a2a_bw" for t in terms):
        # Stage-wise EP overlap: the hidden share of the all-to-all (overlap_ep; the rest is exposed like any other
        # transfer's) hides as the sum over stages of max(stage compute, a quarter of it), written as one branch per
        # subset S of the stages (S compute-bound, the others all-to-all-bound).
        # The unpaired passes (`ep_unpaired_share`, u) expose their all-to-all in full: a compute-bound stage costs
        # c + u a, an all-to-all-bound one u c + a (a: its quarter of the all-to-all, c: its compute).
        for mask in range(2 ** EP_STAGES):
            parts: tuple[tuple[str, str], ...] = ()
            for k in range(EP_STAGES):
                parts += ((("stretch", EP_STAGE_TOTALS[k]), ("ep_unpaired_share", "a2a_bw")) if mask >> k & 1 else
                          (("ep_unpaired_stretch", EP_STAGE_TOTALS[k]), ("ep_stage_share", "a2a_bw")))
            out.append(Branch(f"ep_stages_{mask}", dp + waits + (("stretch", "ep_rest_s"),) + parts + exposed))
    if has_host_floor(wl, profile):
        # Host-bound floor: max(GPU time, host time) per stage, the host's time stretched by the bubble like the
        # GEMMs' (the launches of one microbatch's layers cannot start before the previous ones are issued).
        out.append(Branch("host", dp + waits + (("stretch", "host_s"),)))
    if dp_overlap:
        out.append(Branch("dp", fixed + dp_lat + waits + dp_bw))
    out.append(Branch("floor", dp + (("one", "critical_mm_s"),) + tuple(("one", p) for p in paths), eq21=False))
    return tuple(out)


def network_form(wl: Workload, profile: ExecutionProfile = PAPER, folded: bool = False) -> Branch:
    """The paper's tie-break: all network time, hidden or not (bandwidth of every group, DP latency, and m / N_PP
    times the latency path)."""
    terms = group_terms(wl, profile, folded)
    return Branch("network_all", tuple(("one", t.name) for t in terms
                                       if t.kind in ("bw", "zero_bw", "cp_bw", "dp_bw", "dp_lat"))
                  + tuple(("m_over_pp", t.name) for t in terms if t.kind == "path"))


def combine(form: Branch, values: Mapping[str, np.ndarray]) -> np.ndarray:
    """Evaluate one branch from coefficient and term values (float reading)."""
    total: np.ndarray | float = 0.0
    for coef, term in form.parts:
        total = total + values[coef] * values[term]
    return np.asarray(total, dtype=np.float64)


# --------------------------------------------------------------------------------------------------
# The float reading: a layout's price
# --------------------------------------------------------------------------------------------------


def price(hw: Hardware, wl: Workload, cols: Cols, factors: Factors, dp_overlap: bool = False,
          quantities: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Step time and its breakdown for every row (a degree tuple and its factor vectors)."""
    q = dict(quantities) if quantities is not None else tuple_quantities(hw, wl, cols)
    folded = is_folded(cols)
    if folded:
        factors = {**factors, **fold_factors(cols, factors)}
    terms = group_terms(wl, hw.profile, folded)
    values = dict(q)
    for t in terms:
        values[t.name] = t.scale(hw, wl, cols) * t.feature(hw, wl, cols, factors)
    forms = branches(wl, dp_overlap, hw.profile, folded)
    by_branch = {b.name: combine(b, values) for b in forms}
    eq21 = np.max([by_branch[b.name] for b in forms if b.eq21], axis=0)
    floor = np.max([by_branch[b.name] for b in forms if not b.eq21], axis=0)

    def total(kind: str, groups: tuple[str, ...] | None = None, exclude: tuple[str, ...] = ()) -> np.ndarray:
        return sum((values[t.name] for t in terms if t.kind == kind and (groups is None or t.group in groups)
                    and t.group not in exclude), np.zeros(1))

    lat_path = total("path")
    tp_s = total("bw", exclude=("dp", "pp_ep", "cp"))
    pp_ep_s = total("bw", groups=("pp_ep",))
    zero_s = total("zero_bw")
    cp_s = total("cp_bw")
    latency_dp = total("dp_lat")
    exposed = total("exposed")
    busy = np.maximum(q["matmul_s"] + exposed, tp_s + pp_ep_s + zero_s)
    if "exposed_s" in q:
        busy = np.maximum(busy, q["exposed_s"] + cp_s + exposed)
    return {
        "matmul_s": q["matmul_s"], "tp_s": tp_s, "pp_ep_s": pp_ep_s, "dp_s": total("dp_bw"), "zero_s": zero_s,
        "cp_s": cp_s, "exposed_comm_s": exposed, "optimizer_s": q["optimizer_s"],
        "latency_s": latency_dp + q["lat_share"] * lat_path, "latency_dp_s": latency_dp,
        "bubble_fraction": q["bubble_fraction"], "bubble_s": busy * q["stretch"] - busy,
        "critical_path_s": q["critical_mm_s"] + lat_path, "eq21_s": eq21, "floor_s": floor,
        "step_s": np.maximum(eq21, floor), "network_s": combine(network_form(wl, hw.profile, folded), values),
        "nanobatch": q["nanobatch"],
        **{f"branch_{k}": v for k, v in by_branch.items()},
    }
