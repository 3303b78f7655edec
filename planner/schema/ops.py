"""A layer as the operations it runs, per token: what the cost model prices (docs/model.md §1).

The cost model never assumes what a block looks like. It asks a workload for its `LayerOps`: the GEMMs of one
layer of one expert (each weight's two dimensions and the parallel degree that splits each), the collectives
(the words each moves per token and the placement group that carries them), the point-to-point transfer at a
layer interface (what crosses a pipeline stage or an expert rank), element-wise work (HBM bytes per token), and the
activations a token keeps for the backward pass. The paper's toy MLP block is one producer (`toy_mlp_ops`); a
transformer layer is another producer of the same types.

A `Dim` is a size and the degree that shards it: `Dim(d_ff, "tp_ff")` is `d_ff / N_TP,ff` on each GPU. Degrees are
named as in planner.parallel.dimensions.

A transformer (`transformer_ops`, docs/model.md §1b) is a `ModelOps`: the layer every pipeline stage is priced with,
the embedding lookup on the first stage and the LM head on the last, and exact parameter counts per layer kind.
Megatron's conventions: tensor parallelism (N_TP,ff, Megatron's tp) splits attention heads, the MLP's hidden width
and the vocabulary; N_TP,model (the paper's second TP axis) splits d_model in every projection. Expert layers reuse
N_TP,ff as their expert tensor-parallel degree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported by the methods that price a table: reading a file needs no numpy
    import numpy as np

    from planner.schema import Workload


@dataclass(frozen=True)
class Dim:
    """A dimension of `size` elements, split evenly over the ranks of degree `split_by` (None: not split)."""

    size: int
    split_by: str | None = None
    max_split: int | None = None
    """Ranks beyond this many hold replicas (GQA's KV heads when N_TP,ff exceeds kv_heads): the shard is
    size / min(degree, max_split)."""

    def per_gpu(self, degrees: Mapping[str, np.ndarray]) -> np.ndarray | float:
        """The dimension's size on one GPU, for every row of `degrees` (degree name -> values)."""
        import numpy as np

        if self.split_by is None:
            return float(self.size)
        split = np.asarray(degrees[self.split_by], dtype=np.float64)
        if self.max_split is not None:
            split = np.minimum(split, float(self.max_split))
        return self.size / split


@dataclass(frozen=True)
class Gemm:
    """One weight matrix of one layer of one expert: `out x inp` (forward Y = W X; App. 8.1.1).

    A microbatch runs it three times: forward (out x inp), activation gradient (inp x out) and weight gradient.
    """

    name: str
    out: Dim
    inp: Dim
    routed: bool = False
    """Runs in each expert on the tokens routed to it (MoE experts, the toy block); False: once per token."""
    recipe_covers: bool = True
    """Whether a low-precision recipe runs this GEMM in FP8 / FP4. False for the MoE router, which Megatron Core
    keeps in its original precision under every FP8 recipe (Megatron-LM docs/discussions/deepseek-v3-gb200-
    optimization: "SDPA/Embedding/LM Head/Router/Loss/Optimizer ... remain at their original high precision")."""
    shared_input: bool = False
    """Its input is the previous GEMM's (the key/value projection reads the query projection's input): a recipe that
    casts a module's input once (Transformer Engine's fused QKV projection, torchao's PrepareFloat8ModuleInput)
    quantizes it for the first GEMM only."""
    linears: int = 1
    """Weight matrices (torch.nn.Linear modules) the GEMM stands for where a framework keeps the projections apart:
    2 for the key and value projections (torchtitan's attention.wk and attention.wv) and for SwiGLU's gate and up
    (feed_forward.w1 and w3), which Megatron-LM and Transformer Engine fuse into one GEMM. A recipe that quantizes per
    module (Recipe.cast_per_linear) casts the shared input once per module and rescales each module's input
    gradient."""

    @property
    def params(self) -> int:
        return self.out.size * self.inp.size


@dataclass(frozen=True)
class AllReduce:
    """An all-reduce of `words` per token over the ranks of placement group `group`, once per pass
    (`passes` = 2: forward and backward; paper Table 1)."""

    name: str
    words: Dim
    group: str
    passes: int = 2
    copies: int = 1
    """Token copies it runs on: top-k for a routed expert's all-reduces, 1 otherwise."""
    routed: bool = False
    """A routed expert's (a folded expert layout reduces it over N_ETP instead of the attention's TP ranks)."""


@dataclass(frozen=True)
class PointToPoint:
    """Words per token sent at every layer interface that crosses a pipeline stage or an expert rank, per pass
    (App. 8.1.2)."""

    name: str
    words: Dim
    passes: int = 2


def _sp_split(degrees: Mapping[str, np.ndarray]) -> np.ndarray | float:
    """How many ways sequence parallelism splits what lies outside the TP regions: N_TP,ff with sp on, else 1."""
    import numpy as np

    if "sp" not in degrees:
        return 1.0
    sp = np.asarray(degrees["sp"], dtype=bool)
    return np.where(sp, np.asarray(degrees["tp_ff"], dtype=np.float64), 1.0)


@dataclass(frozen=True)
class Elementwise:
    """Memory-bound work (norms, activations, residuals): HBM bytes moved per token per layer and pass, charged at HBM
    bandwidth on the critical path (planner.cost.terms.block_matmul_s)."""

    name: str
    bytes_per_token: Dim
    passes: int = 2
    seq_sharded: bool = False
    """Outside the TP regions (norms, residuals, dropout): sequence parallelism splits it over N_TP,ff."""

    def per_gpu(self, degrees: Mapping[str, np.ndarray]) -> np.ndarray:
        import numpy as np

        b = np.asarray(self.bytes_per_token.per_gpu(degrees), dtype=np.float64)
        return b / _sp_split(degrees) if self.seq_sharded else b


SAVED_ROLES = ("input", "gemm_input", "core", "other")


@dataclass(frozen=True)
class Saved:
    """A tensor one layer keeps per token for its backward pass (docs/model.md §7b): `words` elements of
    `element_bytes` each.

    Roles: 'input' is the layer's input, all that full recomputation keeps; 'gemm_input' an input a GEMM saves for
    its weight gradient (FP8 keeps it in 1 byte); 'core' the attention core's own tensors (the softmax statistics;
    unfused: scores, softmax and dropout), which selective recomputation drops; 'other' everything else."""

    name: str
    words: Dim
    role: str = "other"
    element_bytes: float = 2.0
    seq_sharded: bool = False
    """Outside the TP regions: sequence parallelism splits it over N_TP,ff (Korthikanti et al. 2022)."""
    fusible: bool = False
    """An element-wise output (a norm's, the SwiGLU product) that compiled, fused kernels recompute in the backward
    pass from another kept tensor instead of keeping (planner.profile: compiled_fuses)."""
    up_projected: bool = False
    """MLA's per-head q, k or v, which a framework may rebuild from the kept latents in the backward pass instead of
    keeping (planner.profile: mla_recompute_up_proj; DeepSeek-V3 §3.2.3)."""

    def bytes_per_gpu(self, degrees: Mapping[str, np.ndarray], fp8: bool = False) -> np.ndarray:
        import numpy as np

        w = np.asarray(self.words.per_gpu(degrees), dtype=np.float64)
        if self.seq_sharded:
            w = w / _sp_split(degrees)
        return w * (1.0 if fp8 and self.role == "gemm_input" else self.element_bytes)


@dataclass(frozen=True)
class AttentionCore:
    """A FlashAttention-style kernel over whole sequences: scores and values per query head, no s x s tensor in HBM.

    Per token and layer the forward runs 2 s_eff heads (d_qk + d_v) FLOPs, s_eff = s / 2 under the causal mask (the
    kernel skips masked tiles); the backward about 2.5x that (it recomputes the scores). Model FLOPs count s, not
    s / 2 (planner.schema.Workload.attention_flop_per_token)."""

    heads: Dim
    qk_dim: int
    v_dim: int
    seq_len: int
    causal: bool = True
    kv_words: Dim | None = None
    """Key and value words per token that context parallelism's ring passes between ranks."""
    windowed_share: float = 0.0
    """Share of the layers with sliding-window attention (every layer is priced alike, so their saving is spread
    over all of them)."""
    windowed_context: float = 0.0
    """Mean keys per query of a windowed layer (planner.schema.Workload.windowed_context)."""

    def forward_flop_per_token(self, degrees: Mapping[str, np.ndarray]) -> np.ndarray:
        import numpy as np

        s_eff = self.seq_len / 2 if self.causal else float(self.seq_len)
        if self.causal and self.windowed_share > 0.0:
            s_eff = (1.0 - self.windowed_share) * s_eff + self.windowed_share * self.windowed_context
        return 2.0 * s_eff * np.asarray(self.heads.per_gpu(degrees), dtype=np.float64) * (self.qk_dim + self.v_dim)


@dataclass(frozen=True)
class AllToAll:
    """Expert routing: each token sends `copies` (top-k) copies of `words` to the expert ranks and gets them back
    (dispatch and combine), each pass, to a uniformly random expert rank (App. 8.1.2's P_EP frequencies)."""

    name: str
    words: Dim
    copies: int
    passes: int = 2
    transfers: int = 2
    """Transfers per pass: dispatch and combine."""


@dataclass(frozen=True)
class LayerOps:
    """Everything one layer (of one expert) runs per token."""

    gemms: tuple[Gemm, ...]
    allreduces: tuple[AllReduce, ...]
    interface: PointToPoint
    elementwise: tuple[Elementwise, ...] = ()
    saved_words: tuple[Dim, ...] = ()
    """Words per token one layer keeps for its backward pass (each sharded as its Dim says)."""
    attention: AttentionCore | None = None
    alltoalls: tuple[AllToAll, ...] = ()
    saved: tuple[Saved, ...] = ()
    """A transformer's kept tensors with their roles and bytes (the toy block uses `saved_words`)."""
    routed_saved: tuple[Saved, ...] = ()
    """Kept per routed token copy (inside the experts), beside `saved` per token."""
    recompute_allreduces: bool = True
    """Full recomputation re-runs the forward pass's collectives (Megatron's and torchtitan's do)."""

    @property
    def params(self) -> int:
        """Parameters of one layer of one expert."""
        return sum(g.params for g in self.gemms)

    def shard_params(self, degrees: Mapping[str, np.ndarray]) -> np.ndarray:
        """Parameters of one layer of one expert held by one GPU (each GEMM's dimensions split as declared)."""
        import numpy as np

        return sum((np.asarray(g.out.per_gpu(degrees)) * g.inp.per_gpu(degrees) for g in self.gemms),
                   np.zeros(1))

    def saved_words_per_token(self, degrees: Mapping[str, np.ndarray]) -> np.ndarray:
        import numpy as np

        return sum((np.asarray(d.per_gpu(degrees), dtype=np.float64) for d in self.saved_words), np.zeros(1))

    def saved_bytes_per_token(self, degrees: Mapping[str, np.ndarray], roles: tuple[str, ...] = SAVED_ROLES,
                              fp8: bool = False, routed: bool = False, fused: bool = False,
                              up_proj: bool = False) -> np.ndarray:
        """Bytes per token (routed: per routed token copy) of the kept tensors whose role is in `roles` (fused: not
        the fusible ones; up_proj: not MLA's up-projected q, k, v)."""
        import numpy as np

        items = self.routed_saved if routed else self.saved
        return sum((s.bytes_per_gpu(degrees, fp8) for s in items
                    if s.role in roles and not (fused and s.fusible) and not (up_proj and s.up_projected)),
                   np.zeros(1))

    def allreduce_words(self, degrees: Mapping[str, np.ndarray], group: str, routed: bool | None = None
                        ) -> np.ndarray:
        """Words per token all-reduced over `group`'s ranks by one layer, every pass of every all-reduce counted
        (`routed` True / False: only the routed experts' / only the others; None: all)."""
        import numpy as np

        return sum((a.passes * a.copies * np.asarray(a.words.per_gpu(degrees), dtype=np.float64)
                    for a in self.allreduces if a.group == group and (routed is None or a.routed == routed)),
                   np.zeros(1))

    def split_params(self, degrees: Mapping[str, np.ndarray], experts_here) -> tuple[np.ndarray, np.ndarray]:
        """(dense, expert) parameters of one layer on one GPU: the once-per-token GEMMs' shards and the routed
        GEMMs' shards times the experts the GPU holds."""
        import numpy as np

        dense = sum((np.asarray(g.out.per_gpu(degrees)) * g.inp.per_gpu(degrees) for g in self.gemms
                     if not g.routed), np.zeros(1))
        routed = sum((np.asarray(g.out.per_gpu(degrees)) * g.inp.per_gpu(degrees) for g in self.gemms
                      if g.routed), np.zeros(1))
        return dense, routed * experts_here


def toy_mlp_ops(d_model: int, d_ff: int) -> LayerOps:
    """The paper's toy block (§2, App. 8.1.4): two matrices, up (d_ff x d_model) and down (d_model x d_ff),
    with 2D tensor parallelism (§3.1.4): N_TP,ff splits d_ff and N_TP,model splits d_model. The up projection's
    partial output (d_ff / N_TP,ff words per token) is summed over the model group, the down projection's
    (d_model / N_TP,model) over the ff group (Table 1). The block output, d_model words, crosses layer
    interfaces. A token keeps its block input and its hidden activation, each sharded by its TP group
    (docs/model.md §7). Attention and element-wise work are folded into the MLP, as in the paper."""
    dm, dff = Dim(d_model, "tp_model"), Dim(d_ff, "tp_ff")
    return LayerOps(
        gemms=(Gemm("up", out=dff, inp=dm, routed=True), Gemm("down", out=dm, inp=dff, routed=True)),
        allreduces=(AllReduce("up partial output", words=dff, group="tp_model"),
                    AllReduce("down partial output", words=dm, group="tp_ff")),
        interface=PointToPoint("block output", words=Dim(d_model)),
        saved_words=(dm, dff),
    )


# --------------------------------------------------------------------------------------------------
# Real transformers (docs/model.md §1b)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelOps:
    """A transformer as operations: the layer each pipeline stage is priced with, the first and last stages' extra
    work, and exact parameter counts.

    `layer` is the heaviest layer kind (the MoE layer when there are experts): every layer of a stage is priced as
    it, which is exact for any stage holding no leading dense layer (DeepSeek-V3: 3 of 61 layers are dense, and
    their MLP has the MoE layer's active width). Parameters, FLOPs and reports count each kind exactly.
    """

    layer: LayerOps
    dense_layer: LayerOps
    """A leading dense layer (MoE models) or every layer (dense models)."""
    moe_layers: int
    dense_layers: int
    embedding: LayerOps
    """First stage: the lookup (element-wise work) and the embedding matrix (its one GEMM, never run)."""
    head: LayerOps
    """Last stage: the LM head GEMM, its all-reduce over N_TP,model, the loss's element-wise work, the logits kept."""
    tied: bool
    experts: int
    top_k: int

    def params(self, active: bool, embeddings: bool = True) -> float:
        """Every GEMM weight (active: the ones a token meets: top-k of the routed experts)."""

        def layer_params(ops: LayerOps) -> float:
            routed = sum(g.params for g in ops.gemms if g.routed)
            dense = sum(g.params for g in ops.gemms if not g.routed)
            return dense + routed * (self.top_k if active else self.experts)

        total = self.moe_layers * layer_params(self.layer) + self.dense_layers * layer_params(self.dense_layer)
        if embeddings:
            total += self.embedding.params + (0 if self.tied else self.head.params)
        return float(total)


def _mlp(name: str, d_model: int, width: int, ffn: str, routed: bool, copies: int = 1
         ) -> tuple[tuple[Gemm, ...], tuple[AllReduce, ...], tuple[Saved, ...], Elementwise]:
    """An MLP of hidden `width`: GEMMs (gate and up fused for SwiGLU), TP all-reduces, tensors kept per token (after
    its input), and its activation's element-wise bytes."""
    up_rows = 2 * width if ffn == "swiglu" else width
    dm, hid, up = Dim(d_model, "tp_model"), Dim(width, "tp_ff"), Dim(up_rows, "tp_ff")
    gemms = (Gemm(f"{name} up" + (" + gate" if ffn == "swiglu" else ""), out=up, inp=dm, routed=routed,
                  linears=2 if ffn == "swiglu" else 1),
             Gemm(f"{name} down", out=dm, inp=hid, routed=routed))
    ars = (AllReduce(f"{name} up partial output", words=up, group="tp_model", copies=copies, routed=routed),
           AllReduce(f"{name} down partial output", words=dm, group="tp_ff", copies=copies, routed=routed))
    # Kept for backward: the up (and gate) output (the activation's input) and the activation's output (the down
    # GEMM's input).
    saved = (Saved(f"{name} up output", up), Saved(f"{name} hidden", hid, "gemm_input", fusible=True))
    # The activation reads the up (and gate) output and writes the hidden: (up_rows + width) words, 2 bytes each.
    act = Elementwise(f"{name} activation", bytes_per_token=Dim(2 * copies * (up_rows + width), "tp_ff"), passes=3)
    return gemms, ars, saved, act


@lru_cache(maxsize=64)
def transformer_ops(wl: Workload) -> ModelOps:
    """The operations of a real transformer layer, its embedding and its LM head (docs/model.md §1b).

    Tensor parallelism follows Megatron: N_TP,ff splits the query heads (and the KV heads, replicated when N_TP,ff
    exceeds kv_heads), the MLP's hidden width and the vocabulary; N_TP,model splits d_model in every projection
    (the paper's 2D TP; at 1 this is Megatron's 1D TP). The attention core runs on a GPU's heads, replicated over
    the N_TP,model group. Element-wise work is charged at HBM bandwidth, 2 bytes per word, 3 passes (the backward
    moves about twice the forward's bytes). The tensors kept for the backward pass follow Korthikanti et al. 2022
    (per layer 34 s b h bytes for GPT-3's shape with dropout, plus 5 a s^2 b without a fused attention kernel),
    generalised to GQA / MLA, SwiGLU and MoE (docs/model.md §7b)."""
    tr = wl.transformer
    assert tr is not None
    d, s = wl.d_model, wl.seq_len
    dm = Dim(d, "tp_model")
    heads = Dim(tr.heads, "tp_ff")
    gemms: list[Gemm] = []
    ars: list[AllReduce] = []
    # The layer input (the attention norm's input) and the QKV projections' input (the norm's output), both outside
    # the TP region: replicated over N_TP,ff unless sequence parallelism shards them.
    saved: list[Saved] = [Saved("layer input", dm, "input", seq_sharded=True),
                          Saved("attention norm output", dm, "gemm_input", seq_sharded=True, fusible=True)]
    if tr.attention == "mla":
        qk, v = tr.qk_dim, tr.value_dim
        q_heads = Dim(tr.heads * qk, "tp_ff")
        if tr.q_lora_rank:
            gemms += [Gemm("q down", out=Dim(tr.q_lora_rank), inp=dm),
                      Gemm("q up", out=q_heads, inp=Dim(tr.q_lora_rank))]
            ars.append(AllReduce("q down partial output", words=Dim(tr.q_lora_rank), group="tp_model"))
            saved.append(Saved("q latent", Dim(tr.q_lora_rank), "gemm_input"))
        else:
            gemms.append(Gemm("q", out=q_heads, inp=dm))
            ars.append(AllReduce("q partial output", words=q_heads, group="tp_model"))
        kv_lat = Dim(tr.kv_lora_rank + tr.rope_head_dim)
        gemms += [Gemm("kv down", out=kv_lat, inp=dm),
                  Gemm("kv up", out=Dim(tr.heads * (tr.head_dim + v), "tp_ff"), inp=Dim(tr.kv_lora_rank)),
                  Gemm("o", out=dm, inp=Dim(tr.heads * v, "tp_ff"))]
        ars += [AllReduce("kv down partial output", words=kv_lat, group="tp_model"),
                AllReduce("o partial output", words=dm, group="tp_ff")]
        saved += [Saved("kv latent", kv_lat, "gemm_input"), Saved("q", q_heads, up_projected=True),
                  Saved("k", q_heads, up_projected=True), Saved("v", Dim(tr.heads * v, "tp_ff"), up_projected=True),
                  Saved("attention output", Dim(tr.heads * v, "tp_ff"), "gemm_input")]
        rope_words = 2 * tr.heads * tr.rope_head_dim
        kv_exchange = Dim(tr.heads * (qk + v), "tp_ff")
    else:
        qk = v = tr.head_dim
        q = Dim(tr.heads * qk, "tp_ff")
        kv = Dim(2 * tr.kv_heads * qk, "tp_ff", max_split=tr.kv_heads)
        gemms += [Gemm("q", out=q, inp=dm), Gemm("kv", out=kv, inp=dm, linears=2, shared_input=True),
                  Gemm("o", out=dm, inp=q)]
        ars += [AllReduce("q partial output", words=q, group="tp_model"),
                AllReduce("kv partial output", words=kv, group="tp_model"),
                AllReduce("o partial output", words=dm, group="tp_ff")]
        saved += [Saved("q", q), Saved("k and v", kv), Saved("attention output", q, "gemm_input")]
        rope_words = (tr.heads + tr.kv_heads) * qk
        kv_exchange = kv
    if tr.attention_kernel == "flash":
        saved.append(Saved("softmax statistics", heads, "core", element_bytes=4.0))  # fp32, one per head
    else:  # scores and softmax (2 bytes each) and the attention dropout mask (1 byte) per head and key
        saved.append(Saved("scores, softmax, dropout", Dim(tr.heads * s, "tp_ff"), "core", element_bytes=5.0))
    core = AttentionCore(heads=heads, qk_dim=qk, v_dim=v, seq_len=s, kv_words=kv_exchange,
                         windowed_share=wl.windowed_share, windowed_context=wl.windowed_context)
    # Norms read and write d (x2), residual adds read 2d and write d (x2), rotary reads and writes q and k.
    common = [Elementwise("norms", bytes_per_token=Dim(2 * 2 * 2 * d, "tp_model"), passes=3, seq_sharded=True),
              Elementwise("residual adds", bytes_per_token=Dim(2 * 2 * 3 * d, "tp_model"), passes=3,
                          seq_sharded=True),
              Elementwise("rotary", bytes_per_token=Dim(2 * 2 * rope_words, "tp_ff"), passes=3)]
    if tr.attention_kernel == "unfused":  # the s x s tensors written and read back in HBM (estimate)
        common.append(Elementwise("attention scores in HBM", bytes_per_token=Dim(2 * 5 * tr.heads * s, "tp_ff"),
                                  passes=3))
    saved_mlp_in = [Saved("mlp norm input", dm, seq_sharded=True),
                    Saved("mlp norm output", dm, "gemm_input", seq_sharded=True, fusible=True)]
    if tr.dropout:  # a 1-byte mask after the attention block and after the MLP
        saved_mlp_in += [Saved("dropout masks", Dim(2 * d, "tp_model"), element_bytes=1.0, seq_sharded=True)]
        common.append(Elementwise("dropout", bytes_per_token=Dim(2 * (2 * 2 + 1) * d, "tp_model"), passes=3,
                                  seq_sharded=True))
    itf = PointToPoint("layer output", words=Dim(d))

    g, a, sv, act = _mlp("mlp", d, wl.d_ff, tr.ffn, routed=False)
    dense_layer = LayerOps(gemms=(*gemms, *g), allreduces=(*ars, *a), interface=itf,
                           elementwise=(*common, act), saved=(*saved, *saved_mlp_in, *sv), attention=core)
    if wl.experts == 1:
        layer = dense_layer
    else:
        width = tr.expert_d_ff or wl.d_ff
        k = tr.top_k
        moe_g: list[Gemm] = [Gemm("router", out=Dim(wl.experts), inp=dm, recipe_covers=False)]
        moe_a: list[AllReduce] = [AllReduce("router partial logits", words=Dim(wl.experts), group="tp_model")]
        moe_saved: list[Saved] = [*saved, *saved_mlp_in]
        elem: list[Elementwise] = [*common]
        if tr.shared_experts:
            sg, sa, ssv, sact = _mlp("shared expert", d, tr.shared_experts * width, tr.ffn, routed=False)
            moe_g += sg
            moe_a += sa
            moe_saved += ssv
            elem.append(sact)
        rg, ra, rsv, ract = _mlp("expert", d, width, tr.ffn, routed=True, copies=k)
        # Token copies in and out of the experts: a permute and an unpermute of d words per copy.
        elem += [ract, Elementwise("routing permutes", bytes_per_token=Dim(2 * 2 * 2 * k * d, "tp_model"), passes=3)]
        layer = LayerOps(gemms=(*gemms, *moe_g, *rg), allreduces=(*ars, *moe_a, *ra), interface=itf,
                         elementwise=tuple(elem), saved=tuple(moe_saved), attention=core,
                         alltoalls=(AllToAll("expert dispatch + combine", words=Dim(d), copies=k),),
                         routed_saved=(Saved("expert input", dm, "gemm_input"), *rsv))
    vocab = Dim(tr.vocab, "tp_ff")
    embedding = LayerOps(gemms=(Gemm("embedding", out=vocab, inp=dm),), allreduces=(), interface=itf,
                         elementwise=(Elementwise("embedding lookup", bytes_per_token=Dim(2 * 2 * d, "tp_model"),
                                                  passes=3, seq_sharded=True),))
    # The loss reads the logits, writes the softmax and its gradient: fp32, 2 words per logit, each way.
    head = LayerOps(gemms=(Gemm("lm head", out=vocab, inp=dm),),
                    allreduces=(AllReduce("lm head partial logits", words=vocab, group="tp_model"),),
                    interface=itf,
                    elementwise=(Elementwise("cross-entropy", bytes_per_token=Dim(2 * 2 * 2 * tr.vocab, "tp_ff"),
                                             passes=2),),
                    saved=(Saved("final norm output", dm, seq_sharded=True),
                           Saved("logits", Dim(tr.vocab, "tp_ff"), element_bytes=4.0)))
    moe_layers = wl.layers - tr.dense_layers if wl.experts > 1 else 0
    return ModelOps(layer=layer, dense_layer=dense_layer, moe_layers=moe_layers,
                    dense_layers=wl.layers - moe_layers, embedding=embedding, head=head,
                    tied=tr.tied_embeddings, experts=wl.experts, top_k=tr.top_k)
