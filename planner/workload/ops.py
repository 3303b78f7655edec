"""A layer as the operations it runs, per token: what the cost model prices (docs/model.md §1).

The cost model never assumes what a block looks like. It asks a workload for its `LayerOps`: the GEMMs of one
layer of one expert (each weight's two dimensions and the parallel degree that splits each), the collectives
(the words each moves per token and the placement group that carries them), the point-to-point transfer at a
layer interface (what crosses a pipeline stage or an expert rank), element-wise work (HBM bytes per token), and the
activations a token keeps for the backward pass. The paper's toy MLP block is one producer (`toy_mlp_ops`); a
transformer layer is another producer of the same types.

A `Dim` is a size and the degree that shards it: `Dim(d_ff, "tp_ff")` is `d_ff / N_TP,ff` on each GPU. Degrees are
named as in planner.parallel.dimensions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Dim:
    """A dimension of `size` elements, split evenly over the ranks of degree `split_by` (None: not split)."""

    size: int
    split_by: str | None = None

    def per_gpu(self, degrees: Mapping[str, np.ndarray]) -> np.ndarray | float:
        """The dimension's size on one GPU, for every row of `degrees` (degree name -> values)."""
        if self.split_by is None:
            return float(self.size)
        return self.size / np.asarray(degrees[self.split_by], dtype=np.float64)


@dataclass(frozen=True)
class Gemm:
    """One weight matrix of one layer of one expert: `out x inp` (forward Y = W X; App. 8.1.1).

    A microbatch runs it three times: forward (out x inp), activation gradient (inp x out) and weight gradient.
    """

    name: str
    out: Dim
    inp: Dim

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


@dataclass(frozen=True)
class PointToPoint:
    """Words per token sent at every layer interface that crosses a pipeline stage or an expert rank, per pass
    (App. 8.1.2)."""

    name: str
    words: Dim
    passes: int = 2


@dataclass(frozen=True)
class Elementwise:
    """Memory-bound work (norms, activations, residuals): HBM bytes moved per token per layer and pass, charged at HBM
    bandwidth on the critical path (planner.cost.terms.block_matmul_s)."""

    name: str
    bytes_per_token: Dim
    passes: int = 2


@dataclass(frozen=True)
class LayerOps:
    """Everything one layer (of one expert) runs per token."""

    gemms: tuple[Gemm, ...]
    allreduces: tuple[AllReduce, ...]
    interface: PointToPoint
    elementwise: tuple[Elementwise, ...] = ()
    saved_words: tuple[Dim, ...] = ()
    """Words per token one layer keeps for its backward pass (each sharded as its Dim says)."""

    @property
    def params(self) -> int:
        """Parameters of one layer of one expert."""
        return sum(g.params for g in self.gemms)

    def shard_params(self, degrees: Mapping[str, np.ndarray]) -> np.ndarray:
        """Parameters of one layer of one expert held by one GPU (each GEMM's dimensions split as declared)."""
        return sum((np.asarray(g.out.per_gpu(degrees)) * g.inp.per_gpu(degrees) for g in self.gemms),
                   np.zeros(1))

    def saved_words_per_token(self, degrees: Mapping[str, np.ndarray]) -> np.ndarray:
        return sum((np.asarray(d.per_gpu(degrees), dtype=np.float64) for d in self.saved_words), np.zeros(1))

    def allreduce_words(self, degrees: Mapping[str, np.ndarray], group: str) -> np.ndarray:
        """Words per token all-reduced over `group`'s ranks by one layer, every pass of every all-reduce counted."""
        return sum((a.passes * np.asarray(a.words.per_gpu(degrees), dtype=np.float64)
                    for a in self.allreduces if a.group == group), np.zeros(1))


def toy_mlp_ops(d_model: int, d_ff: int) -> LayerOps:
    """The paper's toy block (§2, App. 8.1.4): two matrices, up (d_ff x d_model) and down (d_model x d_ff),
    with 2D tensor parallelism (§3.1.4): N_TP,ff splits d_ff and N_TP,model splits d_model. The up projection's
    partial output (d_ff / N_TP,ff words per token) is summed over the model group, the down projection's
    (d_model / N_TP,model) over the ff group (Table 1). The block output, d_model words, crosses layer
    interfaces. A token keeps its block input and its hidden activation, each sharded by its TP group
    (docs/model.md §7). Attention and element-wise work are folded into the MLP, as in the paper."""
    dm, dff = Dim(d_model, "tp_model"), Dim(d_ff, "tp_ff")
    return LayerOps(
        gemms=(Gemm("up", out=dff, inp=dm), Gemm("down", out=dm, inp=dff)),
        allreduces=(AllReduce("up partial output", words=dff, group="tp_model"),
                    AllReduce("down partial output", words=dm, group="tp_ff")),
        interface=PointToPoint("block output", words=Dim(d_model)),
        saved_words=(dm, dff),
    )
