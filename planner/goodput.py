"""Goodput: failures, checkpoints and restarts turn a plan's compute time into wall-clock time.

A synchronous training job stops whenever any of its GPUs (or their hosts and links) fails, and resumes from its last
checkpoint. The failure model is data beside the hardware (`failures/*.toml`, shipped as package
`planner.failures`), every value with its source:

* interruptions per GPU-hour, lambda: the job is interrupted at rate lambda N on N GPUs, so its mean time between
  interruptions is M = 1 / (lambda N);
* the checkpoint is the plan's model state, S = N_p x (weight + optimizer bytes per parameter) (planner.schema),
  written and read at the storage bandwidth the cluster brings per GPU, so it takes delta = S / (N x B_gpu);
* a restart costs R = the fixed restart time (detection, rescheduling, initialisation) + reading the checkpoint back;
* checkpoints every tau seconds of compute, tau by Daly's higher-order optimum (Young's sqrt(2 delta M) corrected;
  Daly 2006) unless the file fixes it.

With exponentially distributed interruptions, Daly's expected wall time for T_s seconds of compute is
T_w = M e^(R/M) (e^((tau + delta)/M) - 1) T_s / tau (failures during restarts included), so the goodput
g = T_s / T_w depends on the cluster size and the model, not on the layout. The planner asks compute time <= deadline
x g(N) of every candidate N (docs/model.md §9). On by default in the realistic execution profile, off in the paper's.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.errors import InvalidInput, is_number
from planner.overrides import Override
from planner.schema import OPTIMIZER_BYTES_PER_PARAM, WEIGHT_BYTES_PER_PARAM
from planner.schema.goodput import FailureModel, Goodput
from planner.sourced import load_sourced, load_toml, spreads_of, unwrap

HOUR_S = 3600.0
MINUTE_S = 60.0


KEYS: dict[str, tuple[str, float]] = {
    "interruptions_per_gpu_hour": ("interruptions_per_gpu_hour", 1.0),
    "storage_GBps_per_gpu": ("storage_Bps_per_gpu", 1e9),
    "restart_minutes": ("restart_s", MINUTE_S),
    "checkpoint_interval_minutes": ("checkpoint_interval_s", MINUTE_S),
}
"""TOML key -> (field, multiplier to SI)."""


def parse_failure_model(doc: dict[str, Any], origin: str, require_source: bool = False) -> FailureModel:
    sources: dict[str, str] = {}
    fields: dict[str, Any] = {}
    if "name" not in doc:
        raise InvalidInput(f"{origin}: missing required 'name'")
    for key, raw in doc.items():
        if key in ("name", "description"):
            fields[key] = raw
            continue
        if key not in KEYS:
            close = difflib.get_close_matches(key, list(KEYS), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f"; accepted keys: {', '.join(KEYS)}"
            raise InvalidInput(f"{origin}: unknown key '{key}'{hint}")
        value = unwrap(raw, key, sources, require_source, "every value in a shipped failure model")
        if not is_number(value) or not math.isfinite(value):
            raise InvalidInput(f"{origin}: {key}: expected a finite number, got {value!r}")
        field, scale = KEYS[key]
        fields[field] = float(value) * scale
    try:
        return FailureModel(**fields, sources=sources, spreads=spreads_of(doc))
    except ValidationError as exc:
        err = exc.errors()[0]
        names = {field: key for key, (field, _) in KEYS.items()}
        loc = ".".join(names.get(str(p), str(p)) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise InvalidInput(f"{origin}: {loc}: {msg}") from None


def failures_dir() -> Path:
    return Path(str(resources.files("planner.failures")))


def failure_model_names() -> list[str]:
    return sorted(p.stem for p in failures_dir().glob("*.toml"))


def load_failure_file(path: str | Path, require_source: bool = False) -> FailureModel:
    return parse_failure_model(load_toml(path, "failure model file"), str(path), require_source=require_source)


@cache
def _shipped(name: str) -> FailureModel:
    return load_failure_file(failures_dir() / f"{name}.toml", require_source=True)


def get_failure_model(name_or_path: str = "default", overrides: Sequence[Override] = ()) -> FailureModel:
    """A shipped failure model ('default') or a path to a user TOML file, with `overrides` (--set goodput.*)."""
    return load_sourced(name_or_path, failure_model_names(), failures_dir(), "failure model", "failure model file",
                        "goodput", parse_failure_model, _shipped, overrides)


# --------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------


def checkpoint_bytes(params: float) -> float:
    """What a checkpoint holds: 16-bit weights and the fp32 optimizer state (master copy, Adam m and v) of every
    parameter, once (gradients are not saved)."""
    return params * (WEIGHT_BYTES_PER_PARAM + OPTIMIZER_BYTES_PER_PARAM)


def daly_interval_s(delta_s: float, mtbf_s: float) -> float:
    """Daly's (2006) higher-order optimum compute time between checkpoints: sqrt(2 delta M) (1 + sqrt(delta / 2M) / 3
    + delta / 18M) - delta for delta < 2M, else M."""
    if delta_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = delta_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * delta_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta_s


def _daly(model: FailureModel, n: float, size: float) -> tuple[float, float, float, float, float]:
    """(goodput, MTBF, checkpoint write time delta, interval tau, restart R) on `n` GPUs for a checkpoint of `size`
    bytes: Daly's expected time (module docstring), in plain floats (the search evaluates it thousands of times)."""
    delta = size / (n * model.storage_Bps_per_gpu)
    restart = model.restart_s + delta
    rate = model.interruptions_per_gpu_hour * n / HOUR_S
    if rate <= 0.0:  # no interruptions: checkpoints only if the file asks for them
        tau0 = model.checkpoint_interval_s
        return (1.0 if tau0 is None else tau0 / (tau0 + delta)), math.inf, delta, tau0 or math.inf, restart
    mtbf = 1.0 / rate
    tau = model.checkpoint_interval_s or daly_interval_s(delta, mtbf)
    exponent = (restart + tau + delta) / mtbf if mtbf > 0 else math.inf
    if exponent > 700.0 or tau <= 0:  # e^700 ~ 1e304: no progress to float precision
        g = 0.0
    else:
        g = tau / (mtbf * math.exp(restart / mtbf) * math.expm1((tau + delta) / mtbf))
    return min(1.0, g), mtbf, delta, tau, restart


def wall_clock_days(training_days: float, goodput: float | None) -> float:
    """The days a cluster is held to train `training_days` of compute at `goodput` (the useful share of wall-clock
    time; None: no failure model, the same days); infinite at zero goodput. A plan's wall_clock_days."""
    return training_days if goodput is None else (training_days / goodput if goodput > 0 else math.inf)


def goodput_at(model: FailureModel, gpus: float, params: float) -> Goodput:
    """Daly's expected goodput of a job on `gpus` GPUs training a model of `params` parameters, with its terms."""
    size = checkpoint_bytes(params)
    g, mtbf, delta, tau, restart = _daly(model, float(gpus), size)
    return Goodput(failure_model=model.name, gpus=int(gpus), mtbf_s=mtbf, checkpoint_bytes=size, checkpoint_s=delta,
                   interval_s=tau, restart_s=restart, goodput=g)


class GoodputCurve:
    """g(N) of one failure model and checkpoint size, for the search: called with a scalar or an array of counts
    (Daly's formula per count, as plain floats), or `scan` for a whole grid at once (numpy)."""

    def __init__(self, model: FailureModel, size: float):
        self.model, self.size = model, size

    def __call__(self, n):
        import numpy as np

        arr = np.atleast_1d(np.asarray(n, dtype=np.float64))
        out = np.array([_daly(self.model, float(x), self.size)[0] for x in arr])
        return out if np.ndim(n) else float(out[0])

    def scan(self, n):
        """g on an array of counts in numpy: the same formula as _daly, possibly an ulp off it (numpy's exp), so
        only for scans whose ends are widened (useful_gpu_range), never for a deadline."""
        import numpy as np

        m = self.model
        n = np.asarray(n, dtype=np.float64)
        delta = self.size / (n * m.storage_Bps_per_gpu)
        restart = m.restart_s + delta
        rate = m.interruptions_per_gpu_hour * n / HOUR_S
        if m.interruptions_per_gpu_hour <= 0.0:
            tau0 = m.checkpoint_interval_s
            return np.ones_like(n) if tau0 is None else tau0 / (tau0 + delta)
        mtbf = 1.0 / rate
        if m.checkpoint_interval_s is not None:
            tau = np.full_like(n, m.checkpoint_interval_s)
        else:
            x = delta / (2.0 * mtbf)
            tau = np.where(delta >= 2.0 * mtbf, mtbf,
                           np.sqrt(2.0 * delta * mtbf) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - delta)
        exponent = (restart + tau + delta) / mtbf
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            g = tau / (mtbf * np.exp(restart / mtbf) * np.expm1((tau + delta) / mtbf))
        g = np.where((exponent > 700.0) | (tau <= 0), 0.0, g)
        return np.minimum(1.0, g)


def goodput_fraction(model: FailureModel, params: float) -> GoodputCurve:
    """g(N) as a function of the GPU count, for the search (scalar or numpy array in, same out)."""
    return GoodputCurve(model, checkpoint_bytes(params))


def useful_gpu_range(g, need_gpu_seconds: float, deadline_s: float, n_max: float) -> tuple[float, float] | None:
    """The GPU counts N with N x g(N) x deadline >= `need_gpu_seconds` (the least GPU-seconds of compute any layout
    needs), as (lowest, highest), or None when there is none up to `n_max`. N g(N) rises then falls (g decays
    exponentially with N); it is scanned on a 1 % geometric grid and the ends widened by one grid step, so no
    count that could meet the deadline is left out."""
    if n_max < 1:
        return None
    import numpy as np

    at = _scan_grid(float(n_max))
    values = g.scan(at) if isinstance(g, GoodputCurve) else np.array([g(float(n)) for n in at], dtype=np.float64)
    ok = np.nonzero(at * values * deadline_s >= need_gpu_seconds)[0]
    if len(ok) == 0:
        return None
    lo = float(at[max(0, int(ok[0]) - 1)])
    hi = float(at[min(len(at) - 1, int(ok[-1]) + 1)])
    return lo, hi


@lru_cache(maxsize=8)
def _scan_grid(n_max: float):
    """`useful_gpu_range`'s grid up to `n_max` (1, then each point 1 % or one GPU above the last, capped at n_max), as
    a read-only array: built once per n_max in a process (re-plans of one request share it)."""
    import numpy as np

    grid = [1.0]
    while grid[-1] < n_max:
        grid.append(min(n_max, max(grid[-1] + 1.0, grid[-1] * 1.01)))
    at = np.array(grid)
    at.setflags(write=False)
    return at


__all__ = [
    "FailureModel", "Goodput", "GoodputCurve", "KEYS", "checkpoint_bytes", "daly_interval_s", "failure_model_names",
    "get_failure_model", "goodput_at", "goodput_fraction", "load_failure_file", "parse_failure_model",
    "useful_gpu_range",
]
