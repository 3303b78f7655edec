"""The failure model (failures/*.toml, validated) and the goodput a plan reports: the documents of
planner.goodput, which reads the files and prices failures, checkpoints and restarts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:  # resolved by planner.schema's model_rebuild (a sibling import would run the package first)
    from planner.schema.profile import Spread



class FailureModel(BaseModel):
    """How often a training job is interrupted and what an interruption and a checkpoint cost."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    name: str = Field(description="Failure model name (the file stem, or the user file's).")
    description: str = Field("", description="What the model describes, in words.")
    interruptions_per_gpu_hour: float = Field(ge=0, description="Job interruptions per GPU-hour (unplanned; the "
                                              "job's rate is this times its GPU count).")
    storage_Bps_per_gpu: float = Field(gt=0, description="Checkpoint write and read bandwidth the storage system "
                                       "provides per GPU of the cluster, bytes/s.")
    restart_s: float = Field(ge=0, description="Fixed cost of an interruption, seconds: detection, replacing the "
                             "node, rescheduling and re-initialising the job (reading the checkpoint is added).")
    checkpoint_interval_s: float | None = Field(None, gt=0, description="Compute seconds between checkpoints (None: "
                                                "Daly's optimum for the plan).")
    sources: dict[str, str] = Field(default_factory=dict, description="Field -> where the value comes from.")
    spreads: dict[str, Spread] = Field(default_factory=dict, description="Field -> how far its value may be off "
                                       "(estimated and fitted values whose file states a range; --confidence).")


class Goodput(BaseModel):
    """What failures cost one plan (all times in seconds)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    failure_model: str = Field(description="The failure model's name.")
    gpus: int = Field(description="GPUs of the plan the goodput is for.")
    mtbf_s: float = Field(description="Mean time between job interruptions, 1 / (lambda N); inf when lambda = 0.")
    checkpoint_bytes: float = Field(description="Model state saved per checkpoint (weights and optimizer state).")
    checkpoint_s: float = Field(description="Time to write one checkpoint, delta.")
    interval_s: float = Field(description="Compute time between checkpoints, tau (Daly's optimum or the file's).")
    restart_s: float = Field(description="Cost of one interruption before training resumes: restart + reading "
                             "the checkpoint.")
    goodput: float = Field(description="Compute time / expected wall-clock time, fraction (0-1).")
