"""The model preset document (models/*.toml, validated; planner.workload.scaling reads the files)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from planner.schema import Workload


class ModelPreset(BaseModel):
    """A model preset file: a scenario or a published model, on the toy model (§2) or as a real transformer.

    File format (plain numbers; the file's stem is its name)::

        description = "..."        # what it is
        source = "..."             # where the numbers come from (required in shipped files)
        note = "..."               # optional caveats, e.g. how attention is folded into the MLP block
        kind = "toy-mlp"           # or "transformer" (then the keys of TRANSFORMER_KEYS apply)
        d_model = 12288
        d_ff = 49152
        layers = 96
        experts = 1                # optional, default 1 (dense)
        batch_tokens = 3145728     # global batch in tokens (or batch_sequences = N, in seq_len sequences)
        tokens = 300e9             # optional, default 20 * N_p (Chinchilla)
        seq_len = 2048             # optional
        published_params = 175e9   # optional: the source's parameter count (tests compare within 1 %)
    """

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    name: str = Field(description="Preset name (the file stem).")
    description: str = Field("", description="What the preset is.")
    source: str = Field("", description="Where its numbers come from.")
    note: str = Field("", description="Caveats of the mapping onto the toy model.")
    workload: Workload = Field(description="The validated shape.")
    published_params: float | None = Field(None, description="Total parameters as the source states them.")
    published_active_params: float | None = Field(None, description="Active parameters as the source states them.")
    params_source: str = Field("", description="Where the published parameter counts come from.")
