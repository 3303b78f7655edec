"""The model-family file (`models/families/NAME.toml`, docs/families.md): a published architecture's members and the
sizes they share. planner.workload.families reads it and applies the scaling rules."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class FamilyMember(BaseModel):
    """One published model of a family, as its config gives it."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    name: str = Field(description="The model's published name.")
    d_model: int = Field(gt=0, description="hidden_size.")
    layers: int = Field(gt=0, description="num_hidden_layers.")
    heads: int = Field(gt=0, description="num_attention_heads.")
    kv_heads: int = Field(gt=0, description="num_key_value_heads.")
    d_ff: int = Field(gt=0, description="Dense MLP width (intermediate_size; for an all-MoE family the expert width).")
    expert_d_ff: int = Field(0, ge=0, description="MoE: expert width (moe_intermediate_size); 0 for dense.")
    ffn_dim_multiplier: float | None = Field(None, gt=0, description="d_ff_rule 'llama': Meta's ffn_dim_multiplier.")
    multiple_of: int | None = Field(None, gt=0, description="d_ff_rule 'llama': Meta's multiple_of.")
    experts: int | None = Field(None, gt=0, description="Routed experts, where this member differs from the family's "
                                "fixed choice (None: as the family). A member that differs only informs the depth "
                                "rule; the rules reproduce the members that share every fixed choice.")
    top_k: int | None = Field(None, gt=0, description="Routed experts per token, where it differs (None: as the "
                              "family).")
    shared_experts: int | None = Field(None, ge=0, description="Shared experts, where they differ (None: as the "
                                       "family).")
    dense_layers: int | None = Field(None, ge=0, description="Leading dense layers, where they differ (None: as the "
                                     "family).")
    q_lora_rank: int | None = Field(None, ge=0, description="MLA query latent width, where it differs (0: no query "
                                    "compression; None: as the family).")
    vocab: int | None = Field(None, gt=0, description="Vocabulary, where it differs (None: as the family).")
    published_params: float = Field(gt=0, description="Total parameters as published (marketed size).")
    published_active_params: float | None = Field(None, gt=0, description="MoE: active parameters as published.")
    source: str = Field(min_length=1, description="Where this member's numbers come from.")

    @property
    def shares_fixed_choices(self) -> bool:
        """The member has every fixed choice of its family (so the rules reproduce its shape)."""
        return all(getattr(self, key) is None for key in MEMBER_DIFFERENCES)


MEMBER_DIFFERENCES: tuple[str, ...] = ("experts", "top_k", "shared_experts", "dense_layers", "q_lora_rank", "vocab")
"""The FamilyMember fields that say how a member's design differs from its family's fixed choices."""


class ModelFamily(BaseModel):
    """A family file: what every member shares, the members, and which MLP-width rule the family follows."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    name: str = Field(description="Family name (the file stem).")
    description: str = Field(min_length=1, description="What the family is.")
    source: str = Field(min_length=1, description="Where the shared sizes and the members come from.")
    note: str = Field("", description="Caveats: which rules are extrapolations.")
    head_dim: int = Field(gt=0, description="Per-head width, the same for every member.")
    kv_heads: int | None = Field(None, gt=0, description="GQA: key/value heads, the same for every member. MLA: "
                                 "absent (K and V are re-expanded per query head from the latent; the workload's "
                                 "kv_heads = heads, as the configs' num_key_value_heads).")
    heads_multiple: int | None = Field(None, gt=0, description="The query heads are a whole multiple of this "
                                       "(default kv_heads, as GQA groups need; MLA: the family's choice).")
    attention_width: float = Field(gt=0, description="heads x head_dim / d_model, the same for every member that "
                                   "shares the fixed choices.")
    attention: Literal["gqa", "mla"] = Field("gqa", description="'gqa' (MHA / GQA / MQA) or 'mla' (DeepSeek's "
                                             "multi-head latent attention, with the four ranks below).")
    q_lora_rank: int = Field(0, ge=0, description="MLA: query latent width (0: no query compression).")
    kv_lora_rank: int = Field(0, ge=0, description="MLA: key/value latent width.")
    rope_head_dim: int = Field(0, ge=0, description="MLA: decoupled rotary query/key width per head.")
    v_head_dim: int = Field(0, ge=0, description="MLA: value width per head (0: head_dim).")
    vocab: int = Field(gt=0, description="Vocabulary size.")
    tied_embeddings: bool = Field(False, description="Input embedding and LM head share one matrix.")
    ffn: Literal["swiglu", "gelu", "relu2"] = Field("swiglu", description="MLP kind.")
    seq_len: int = Field(gt=0, description="Pre-training sequence length.")
    experts: int = Field(1, gt=0, description="Routed experts per MoE layer (1: dense).")
    top_k: int = Field(1, gt=0, description="Routed experts per token.")
    shared_experts: int = Field(0, ge=0, description="Always-active experts per MoE layer.")
    dense_layers: int = Field(0, ge=0, description="Leading layers with a dense MLP.")
    expert_d_ff_ratio: float = Field(0.0, ge=0, description="MoE: expert width / d_model.")
    expert_d_ff_multiple: int = Field(128, gt=0, description="MoE: the expert width is a multiple of this.")
    d_ff_ratio: float = Field(0.0, ge=0, description="d_ff_rule 'ratio': dense MLP width / d_model.")
    d_ff_multiple: int = Field(128, gt=0, description="d_ff_rule 'ratio': the dense MLP width is a multiple of this.")
    d_ff_rule: Literal["llama", "expert", "ratio"] = Field(
        description="'llama': Meta's SwiGLU width (the nearest member's ffn_dim_multiplier and multiple_of); "
        "'expert': no dense MLP, d_ff = the expert width; 'ratio': the dense layers' width is d_ff_ratio x d_model "
        "to a multiple of d_ff_multiple.")
    depth_rule: Literal["piecewise", "fit"] = Field(
        "piecewise", description="'piecewise': the line through every member's (log d_model, log layers), "
        "extrapolated with the nearest segment's slope; 'fit': the least-squares log-log slope over all members, "
        "the line through the last (widest) member, whose design the family takes.")
    members: tuple[FamilyMember, ...] = Field(min_length=2, description="Published members (two at least: the "
                                              "depth rule is a line through them), by increasing d_model.")

    @model_validator(mode="after")
    def _check(self) -> ModelFamily:
        widths = [m.d_model for m in self.members]
        if widths != sorted(set(widths)):
            raise ValueError("members must be listed by increasing d_model, each width once")
        if self.d_ff_rule == "llama" and any(m.ffn_dim_multiplier is None or m.multiple_of is None
                                             for m in self.members):
            raise ValueError("d_ff_rule 'llama' needs ffn_dim_multiplier and multiple_of on every member")
        if self.experts > 1 and self.expert_d_ff_ratio <= 0:
            raise ValueError("an MoE family needs expert_d_ff_ratio > 0")
        if self.d_ff_rule == "expert" and self.experts == 1:
            raise ValueError("d_ff_rule 'expert' is for MoE families (experts > 1)")
        if self.d_ff_rule == "ratio" and self.d_ff_ratio <= 0:
            raise ValueError("d_ff_rule 'ratio' needs d_ff_ratio > 0")
        if self.attention == "gqa":
            if self.kv_heads is None:
                raise ValueError("a GQA family needs kv_heads")
            if self.q_lora_rank or self.kv_lora_rank or self.rope_head_dim or self.v_head_dim:
                raise ValueError("q_lora_rank, kv_lora_rank, rope_head_dim and v_head_dim are for attention 'mla'")
        else:
            if self.kv_heads is not None:
                raise ValueError("an MLA family has no kv_heads (the workload's kv_heads = heads): remove it")
            if self.kv_lora_rank == 0 or self.heads_multiple is None:
                raise ValueError("an MLA family needs kv_lora_rank > 0 and heads_multiple")
        if self.depth_rule == "fit" and not self.members[-1].shares_fixed_choices:
            raise ValueError(f"depth_rule 'fit' draws its line through the last member, so "
                             f"{self.members[-1].name} must share every fixed choice (set none of "
                             f"{', '.join(MEMBER_DIFFERENCES)})")
        return self

    @property
    def group_heads(self) -> int:
        """The query heads are a whole multiple of this: heads_multiple, or the KV heads (GQA groups)."""
        multiple = self.heads_multiple or self.kv_heads
        assert multiple is not None  # checked on load
        return multiple
