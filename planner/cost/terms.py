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

The workload enters only through its operations (planner.workload.ops): GEMM shapes, all-reduce volumes and groups,
the interface transfer, the activations kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from planner.cost import network as net
from planner.cost.matmul import matmul_time_s
from planner.cost.pipeline import bubble_fraction
from planner.parallel.dimensions import DEGREES, GROUPS
from planner.schema import Hardware, Workload

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
# Tuple quantities: placement-free
# --------------------------------------------------------------------------------------------------


def nanobatch_tokens(wl: Workload, dp, microbatches) -> np.ndarray:
    """b' = b / (E N_DP m): tokens per expert per microbatch per data-parallel rank (Eq. 7, footnote 11)."""
    return wl.batch_tokens / (wl.experts * np.asarray(dp, dtype=np.float64) * microbatches)


def block_matmul_s(hw: Hardware, wl: Workload, cols: Cols, nanobatch) -> tuple[np.ndarray, np.ndarray]:
    """GEMM time of one layer of one expert for one nanobatch on one GPU (App. 8.1.1), from the layer's GEMMs, plus
    its element-wise work.

    Every weight shard runs forward (out x inp), activation gradient (inp x out) and weight gradient. Returns
    (all of them, the forward + activation-gradient ones: the critical path's; weight gradients can be deferred).
    Element-wise work (none in the paper's toy block) moves its bytes at HBM bandwidth, every pass, on the critical
    path.
    """
    g = hw.gpu
    fwd: np.ndarray | float = 0.0
    act: np.ndarray | float = 0.0
    wgrad: np.ndarray | float = 0.0
    for gemm in wl.ops.gemms:
        out, inp = gemm.out.per_gpu(cols), gemm.inp.per_gpu(cols)
        fwd = fwd + matmul_time_s(g, out, inp, nanobatch)
        act = act + matmul_time_s(g, inp, out, nanobatch)
        wgrad = wgrad + matmul_time_s(g, out, inp, nanobatch, weight_grad=True)
    critical = np.asarray(fwd + act, dtype=np.float64)
    for op in wl.ops.elementwise:
        critical = critical + op.passes * np.asarray(op.bytes_per_token.per_gpu(cols)) * nanobatch / g.hbm_Bps
    return critical + wgrad, critical


def params_per_gpu(wl: Workload, cols: Cols) -> np.ndarray:
    """Parameters one GPU holds: its layers' and experts' shards of every GEMM weight."""
    return (wl.layers / _f(cols, "pp")) * (wl.experts / _f(cols, "ep")) * wl.ops.shard_params(cols)


def tuple_quantities(hw: Hardware, wl: Workload, cols: Cols, block_s: np.ndarray | None = None,
                     block_critical_s: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Every placement-free quantity the branches use, per row. `block_s` / `block_critical_s` may be passed
    when the caller has tabulated `block_matmul_s` for the rows' shapes (they must equal what it returns)."""
    dp, pp, ep, m = _f(cols, "dp"), _f(cols, "pp"), _f(cols, "ep"), _f(cols, "microbatches")
    zb = np.asarray(cols["zero_bubble"], dtype=bool)
    bn = nanobatch_tokens(wl, dp, m)
    if block_s is None or block_critical_s is None:
        block_s, block_critical_s = block_matmul_s(hw, wl, cols, bn)
    experts_here = wl.experts / ep
    f_b = bubble_fraction(pp, cols["interleave"], m, zb)
    return {
        "one": np.ones_like(dp),
        "nanobatch": bn,
        "block_s": block_s,
        "block_critical_s": block_critical_s,
        # GEMMs: every microbatch, every layer of this stage, every expert on this GPU (App. 8.1.1).
        "matmul_s": m * (wl.layers / pp) * experts_here * block_s,
        # One microbatch forward + backward through all L layers (the floor's GEMMs, docs/model.md §6).
        "critical_mm_s": wl.layers * experts_here * block_critical_s,
        "bubble_fraction": f_b,
        "stretch": 1.0 / (1.0 - f_b),
        # Under 1F1B each GPU waits out its share (1/N_PP of the layers) of every microbatch's serial latency;
        # under ZB-H2 those latencies hide behind other microbatches' work (App. 8.1.5); the floor still sees them.
        "lat_share": np.where(zb, 0.0, m / pp),
        "m_over_pp": m / pp,
    }


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
    return np.array([lvl.bw_unidir_Bps for lvl in hw.levels], dtype=np.float64)


def _lat(hw: Hardware) -> np.ndarray:
    return np.array([lvl.lat_s for lvl in hw.levels], dtype=np.float64)


def _allreduce_per_word(degree: str):
    def feature(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
        # Eq. 2, hierarchical (docs/model.md §3.2): linear in the words, so one word's time is the feature.
        f = fac[degree]
        return net.allreduce_time_s(np.ones(len(f)), f, _bw(hw), hw.gpu.word_bytes)
    return feature


def _allreduce_latency(degree: str):
    def feature(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
        return net.allreduce_latency_s(fac[degree], _lat(hw))
    return feature


def _dp_words(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    """DP all-reduces this GPU's shard of the gradients once per step (§3.1.3)."""
    return params_per_gpu(wl, cols)


def _one(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    return np.ones(len(np.asarray(cols["dp"])))


def _ar_words(group: str):
    def scale(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
        # Per token per layer, the layer's all-reduces over this group (Table 1); a GPU serves L / N_PP layers and
        # b / (N_DP N_EP) tokens per step.
        tokens_here = wl.batch_tokens / (_f(cols, "dp") * _f(cols, "ep"))
        return (wl.layers / _f(cols, "pp")) * tokens_here * wl.ops.allreduce_words(cols, group)
    return scale


def _ar_path(group: str):
    def scale(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
        # One microbatch meets each of the group's all-reduces once per layer and pass, serially (§4.3).
        hops = sum(a.passes for a in wl.ops.allreduces if a.group == group)
        return np.full(len(np.asarray(cols["dp"])), float(wl.layers * hops))
    return scale


def _p2p_words(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    # Every crossing interface carries the layer output of every token, each pass; the traffic of the whole step
    # spreads evenly over all GPUs (App. 8.1.2).
    itf = wl.ops.interface
    return itf.passes * wl.batch_tokens * max(wl.layers - 1, 0) * itf.words.size / gpus_of(cols)


def _p2p_per_word(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
    """max over levels of P_P2P(h) word bytes / bw_h: the levels' transfers overlap (App. 8.1.2, Eqs. 19-20)."""
    p_joint = net.p2p_frequencies(net.pp_frequencies(fac["pp"], cols["interleave"], wl.layers),
                                  net.ep_frequencies(fac["ep"]))[:, 1:]
    return (p_joint * hw.gpu.word_bytes / _bw(hw)[None, :]).max(axis=1)


def _p2p_passes(hw: Hardware, wl: Workload, cols: Cols) -> np.ndarray:
    return np.full(len(np.asarray(cols["dp"])), float(wl.ops.interface.passes))


def _p2p_latency(hw: Hardware, wl: Workload, cols: Cols, fac: Factors) -> np.ndarray:
    return net.p2p_latency_per_pass_s(fac["pp"], cols["interleave"], fac["ep"], wl.layers, _lat(hw))




def group_terms(wl: Workload) -> tuple[GroupTerm, ...]:
    """Every placement-dependent term of the step, for this workload's operations."""
    terms = [
        GroupTerm("dp_bw", "dp", "bw", _dp_words, _allreduce_per_word("dp")),
        GroupTerm("dp_lat", "dp", "dp_lat", _one, _allreduce_latency("dp")),
    ]
    for group in dict.fromkeys(a.group for a in wl.ops.allreduces):
        (degree,) = GROUPS[group]
        terms.append(GroupTerm(f"{group}_bw", group, "bw", _ar_words(group), _allreduce_per_word(degree)))
        terms.append(GroupTerm(f"{group}_path", group, "path", _ar_path(group), _allreduce_latency(degree)))
    terms.append(GroupTerm("p2p_bw", "pp_ep", "bw", _p2p_words, _p2p_per_word, keys=("interleave",)))
    terms.append(GroupTerm("p2p_path", "pp_ep", "path", _p2p_passes, _p2p_latency, keys=("interleave",)))
    return tuple(terms)


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


def branches(wl: Workload, dp_overlap: bool) -> tuple[Branch, ...]:
    """The linear forms whose maximum is the step time (docs/model.md §6).

    Eq. 21 = t_lat + t_DP,n + max(t_DP,y, max(t_matmul, t_TP + t_P2P) / (1 - f_b)) with t_lat = DP latency +
    (1F1B) m / N_PP x the latency path, written as one branch per argument of the maxima; the floor = DP + the
    critical path. Without DP overlap the DP bandwidth is in every branch; with it, it is one branch of its own.
    """
    terms = group_terms(wl)
    paths = tuple(t.name for t in terms if t.kind == "path")
    bws = tuple(t.name for t in terms if t.kind == "bw" and t.group != "dp")
    dp = (("one", "dp_lat"),) if dp_overlap else (("one", "dp_lat"), ("one", "dp_bw"))
    waits = tuple(("lat_share", p) for p in paths)
    out = [
        Branch("gemm", dp + waits + (("stretch", "matmul_s"),)),
        Branch("network", dp + waits + tuple(("stretch", b) for b in bws)),
    ]
    if dp_overlap:
        out.append(Branch("dp", dp + waits + (("one", "dp_bw"),)))
    out.append(Branch("floor", dp + (("one", "critical_mm_s"),) + tuple(("one", p) for p in paths), eq21=False))
    return tuple(out)


def network_form(wl: Workload) -> Branch:
    """The paper's tie-break: all network time, hidden or not (bandwidth of every group, DP latency, and m / N_PP
    times the latency path)."""
    terms = group_terms(wl)
    return Branch("network_all", tuple(("one", t.name) for t in terms if t.kind in ("bw", "dp_lat"))
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
    terms = group_terms(wl)
    values = dict(q)
    for t in terms:
        values[t.name] = t.scale(hw, wl, cols) * t.feature(hw, wl, cols, factors)
    forms = branches(wl, dp_overlap)
    by_branch = {b.name: combine(b, values) for b in forms}
    eq21 = np.max([by_branch[b.name] for b in forms if b.eq21], axis=0)
    floor = np.max([by_branch[b.name] for b in forms if not b.eq21], axis=0)
    lat_path = sum((values[t.name] for t in terms if t.kind == "path"), np.zeros(1))
    tp_s = sum((values[t.name] for t in terms if t.kind == "bw" and t.group not in ("dp", "pp_ep")), np.zeros(1))
    busy = np.maximum(q["matmul_s"], tp_s + values["p2p_bw"])
    return {
        "matmul_s": q["matmul_s"], "tp_s": tp_s, "pp_ep_s": values["p2p_bw"], "dp_s": values["dp_bw"],
        "latency_s": values["dp_lat"] + q["lat_share"] * lat_path, "latency_dp_s": values["dp_lat"],
        "bubble_fraction": q["bubble_fraction"], "bubble_s": busy * q["stretch"] - busy,
        "critical_path_s": q["critical_mm_s"] + lat_path, "eq21_s": eq21, "floor_s": floor,
        "step_s": np.maximum(eq21, floor), "network_s": combine(network_form(wl), values),
        "nanobatch": q["nanobatch"],
        **{f"branch_{k}": v for k, v in by_branch.items()},
    }
