"""What a plan is unsure of, as data: each estimated or fitted input's spread (from its file, `spread = {...}` next to
the value, or a stated default) and the step-time model's own error (validation/model_error.toml, held-out residuals
only), as documents --confidence samples (planner.confidence, docs/confidence.md).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from planner.schema import Hardware, Spread, UncertainInput, Workload
from planner.schema.goodput import FailureModel

DEFAULT_SPREAD = Spread(low=0.8, high=1.2, shape="uniform",
                        why="no range stated in its file: +-20 %, the step --sensitivity takes for an estimate")
"""An estimate whose file states no spread."""

LOW_PRECISIONS = ("fp8", "fp4")


@dataclass(frozen=True)
class ModelError:
    """The step-time model's measured error: real step time / predicted, one factor per held-out run."""

    group: str
    factors: tuple[float, ...]  # sorted
    why: str

    def factor(self, u: float) -> float:
        """The empirical quantile at `u`: the sorted factors at plotting positions (k - 0.5) / n, linear between,
        the end factors beyond."""
        n = len(self.factors)
        x = u * n - 0.5
        if x <= 0:
            return self.factors[0]
        if x >= n - 1:
            return self.factors[-1]
        k = int(math.floor(x))
        return self.factors[k] + (x - k) * (self.factors[k + 1] - self.factors[k])

    def row(self) -> UncertainInput:
        return UncertainInput(input="step-time model", kind="model error", low=self.factors[0],
                              high=self.factors[-1], shape="empirical", why=self.why)


@cache
def _model_error_doc() -> dict:
    path = resources.files("planner.published_runs") / "model_error.toml"
    return tomllib.loads(path.read_text())


def model_error(profile: str, precision: str) -> ModelError | None:
    """The measured error of `profile`'s step time for a workload of `precision`; None when no held-out residuals
    exist for that profile (only the realistic profile is validated run by run)."""
    doc = _model_error_doc()
    if profile != doc.get("profile"):
        return None
    group = "low_precision" if precision in LOW_PRECISIONS else "bf16"
    g = doc[group]
    factors = tuple(sorted(float(f) for f in g["factors"]))
    why = (f"predicted / reported throughput of the {g['runs']} held-out {'/'.join(g['precisions'])} runs of "
           "validation/runs.toml under the realistic profile (validation/model_error.toml, "
           "benchmarks/model_error.py)")
    return ModelError(group, factors, why)


def spread_of(item: str, hw: Hardware, failures: FailureModel | None) -> Spread | None:
    """The spread a file states for an input named as --set spells it (gpu.l2_GBps, levels.NAME.KEY,
    profile.network.bus_bw_fraction, goodput.restart_minutes)."""
    if item.startswith("profile."):
        return hw.profile.spreads.get(item[len("profile."):])
    if item.startswith("goodput."):
        return None if failures is None else failures.spreads.get(item[len("goodput."):])
    if item.startswith("levels."):
        _, name, key = item.split(".", 2)
        names = [lv.name for lv in hw.levels]
        return hw.spreads.get(f"levels[{names.index(name)}].{key}") if name in names else None
    return hw.spreads.get(item)


def uncertain_inputs(hw: Hardware, failures: FailureModel | None, wl: Workload | None,
                     estimated: Sequence[str]) -> list[UncertainInput]:
    """The plan's uncertain inputs: each estimated or fitted one with its spread (its file's, or DEFAULT_SPREAD),
    measured values whose file states a spread (the failure model's interruption rate), and the model's error."""
    me = model_error(hw.profile.name, wl.precision if wl is not None else "bf16")
    rows = []
    sources = {**{k: v for k, v in hw.sources.items()}, **{f"profile.{k}": v for k, v in hw.profile.sources.items()},
               **({f"goodput.{k}": v for k, v in failures.sources.items()} if failures is not None else {})}
    items = list(estimated)
    if failures is not None:
        items += [f"goodput.{k}" for k in sorted(failures.spreads) if f"goodput.{k}" not in items]
    for item in items:
        src = sources.get(item, "").lower()
        kind = "fitted" if "fitted" in src else "estimate" if item in estimated else "measured"
        spread = spread_of(item, hw, failures) or DEFAULT_SPREAD
        rows.append(UncertainInput(input=item, kind=kind, low=spread.low, high=spread.high, shape=spread.shape,
                                   why=spread.why if kind != "fitted" or me is None else
                                   "fitted on the calibration runs: its error is inside the step-time model's "
                                   "measured error, which is sampled instead",
                                   sampled=kind != "fitted" or me is None))
    if me is not None:
        rows.append(me.row())
    return rows


__all__ = ["DEFAULT_SPREAD", "ModelError", "model_error", "spread_of", "uncertain_inputs"]
