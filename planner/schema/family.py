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
    published_params: float = Field(gt=0, description="Total parameters as published (marketed size).")
    published_active_params: float | None = Field(None, gt=0, description="MoE: active parameters as published.")
    source: str = Field(min_length=1, description="Where this member's numbers come from.")


class ModelFamily(BaseModel):
    """A family file: what every member shares, the members, and which MLP-width rule the family follows."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    name: str = Field(description="Family name (the file stem).")
    description: str = Field(min_length=1, description="What the family is.")
    source: str = Field(min_length=1, description="Where the shared sizes and the members come from.")
    note: str = Field("", description="Caveats: which rules are extrapolations.")
    head_dim: int = Field(gt=0, description="Per-head width, the same for every member.")
    kv_heads: int = Field(gt=0, description="Key/value heads, the same for every member.")
    attention_width: float = Field(gt=0, description="heads x head_dim / d_model, the same for every member.")
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
    d_ff_rule: Literal["llama", "expert"] = Field(description="'llama': Meta's SwiGLU width (the nearest member's "
                                                  "ffn_dim_multiplier and multiple_of); 'expert': no dense MLP, "
                                                  "d_ff = the expert width.")
    members: tuple[FamilyMember, ...] = Field(min_length=2, description="Published members (two at least: the "
                                              "depth rule is a line through them).")

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
        return self
