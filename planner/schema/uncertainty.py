"""Documents of what a plan is unsure of: its uncertain inputs (depends_on.uncertain) and the --confidence answer
(planner.confidence runs it; docs/confidence.md). A data file's spread of one value is planner.schema.profile.Spread."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class UncertainInput(BaseModel):
    """One uncertain input of a plan: a range of factors on its value, the shape of its distribution and why."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    input: str = Field(description="The --set field, or 'step-time model' for the model's own measured error.")
    kind: Literal["estimate", "fitted", "measured", "model error"] = Field(
        description="estimate / fitted: its source says so; measured: a measured value whose file states a spread; "
                    "model error: the step time's factor from the held-out validation residuals.")
    low: float = Field(description="Smallest factor on the value (model error: the smallest residual).")
    high: float = Field(description="Largest factor on the value.")
    shape: str = Field(description="uniform, triangular (mode 1), loguniform, or empirical (the residuals' own "
                       "distribution).")
    why: str = Field(description="Where the range comes from.")
    sampled: bool = Field(True, description="Whether --confidence samples it: a fitted value is not, because the "
                          "held-out residuals already measure the fitted model's error (sampling both would count it "
                          "twice).")



class Confidence(BaseModel):
    """--confidence P: the smallest cluster that meets the deadline with probability P under the uncertain inputs
    (planner.confidence, docs/confidence.md)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    probability: float = Field(description="P asked: the share of samples that must meet the deadline.")
    samples: int = Field(description="Samples of the uncertain inputs.")
    seed: int = Field(description="Seed of the sample points (the same seed gives the same answer).")
    method: str = Field(description="How the samples were drawn and propagated.")
    deadline_days: float = Field(description="The deadline the samples are checked against, wall-clock days.")
    gpus: int | None = Field(description="The chosen cluster: the fewest GPUs (among the samples' own minimal "
                             "counts) on which at least P of the samples meet the deadline; null: none does.")
    met: float = Field(description="Share of samples that meet the deadline on `gpus`.")
    days_p10: float | None = Field(description="10th percentile of wall-clock days on `gpus` over the samples.")
    days_p50: float | None = Field(description="Median wall-clock days on `gpus`.")
    days_p90: float | None = Field(description="90th percentile of wall-clock days on `gpus`.")
    gpus_p50: int | None = Field(description="The cluster that meets the deadline with probability 0.5.")
    gpus_p90: int | None = Field(description="The cluster that meets the deadline with probability 0.9.")
    point_gpus: int | None = Field(description="The point estimate's GPUs (every input at its file value).")
    inputs: list[UncertainInput] = Field(description="What was sampled.")
    replans: int = Field(description="Searches run: one per distinct sample (its fewest GPUs), plus fixed-cluster "
                         "searches where re-pricing known layouts could not decide.")
    repriced: int = Field(description="Known layouts re-priced under a sample instead of searched again.")
    leaves_out: list[str] = Field(description="What the probability does not cover.")
