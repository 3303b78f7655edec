"""Money and power of a plan: facility megawatts, megawatt-hours and dollars from the hardware file's [economics]
table, each network level's switch power and the site's PUE (facility/*.toml). Pure functions of validated inputs;
planner.api calls them for every plan and to turn a power limit (--power-mw) into a GPU limit.

    IT power (W)        = held GPUs x (board_W + sum over levels of switch_W_per_gpu) + nodes x node_overhead_W
    facility power (MW) = IT power x PUE / 1e6
    energy (MWh)        = facility power x days held x 24
    cost (USD)          = price per GPU-hour x held GPUs x days held x 24        (the cluster is rented while held)
    compute cost (USD)  = price per GPU-hour x GPU-hours of compute               (training_days, job GPUs only)

"Held" is what the run occupies and pays for: its GPUs plus the spare GPUs of the racks it takes whole
(GB200/GB300 NVL72), for wall-clock days (training days / goodput when failures are modelled).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.errors import InvalidInput
from planner.overrides import Override
from planner.schema import Facility, Hardware
from planner.sourced import load_sourced, unwrap

HOURS_PER_DAY = 24.0
W_PER_MW = 1e6
FACILITY_KEYS = ("pue", "largest_site_MW")


def _facility_dir() -> Path:
    return Path(str(resources.files("planner.facility")))


def facility_names() -> list[str]:
    return sorted(p.stem for p in _facility_dir().glob("*.toml"))


def parse_facility(doc: dict[str, Any], origin: str, require_source: bool = False) -> Facility:
    """A validated Facility from a parsed facility TOML document (every number sourced in a shipped file)."""
    sources: dict[str, str] = {}
    known = {"name", "description", "largest_site_name", *FACILITY_KEYS}
    unknown = set(doc) - known
    if unknown:
        raise InvalidInput(f"{origin}: unknown key(s) {sorted(unknown)}; accepted: {', '.join(sorted(known))}")
    fields: dict[str, Any] = {k: doc[k] for k in ("name", "description", "largest_site_name") if k in doc}
    for key in FACILITY_KEYS:
        if key not in doc:
            raise InvalidInput(f"{origin}: missing required '{key}'")
        value = unwrap(doc[key], key, sources, require_source, "every number in a shipped facility file")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InvalidInput(f"{origin}: {key}: expected a finite number, got {value!r}")
        fields[key] = float(value)
    fields.setdefault("name", Path(origin).stem)
    try:
        return Facility(**fields, sources=sources)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise InvalidInput(f"{origin}: {loc}: {str(err['msg']).removeprefix('Value error, ')}") from None


@cache
def _load_shipped(name: str) -> Facility:
    from planner.sourced import load_toml

    return parse_facility(load_toml(_facility_dir() / f"{name}.toml", "facility file"), name, require_source=True)


def get_facility(name_or_path: str = "default", overrides: Sequence[Override] = ()) -> Facility:
    """A shipped facility (facility/NAME.toml) or a user's TOML path, with --set facility.KEY=VALUE applied."""
    return load_sourced(name_or_path, facility_names(), _facility_dir(), "facility", "facility file", "facility",
                        parse_facility, _load_shipped, overrides)


def it_power_W(hw: Hardware, held_gpus: int) -> float | None:
    """IT power of `held_gpus` GPUs of `hw`, watts: boards and every level's switches per GPU, plus the overhead of
    the nodes they fill (ceil(held / gpus_per_node)). None when the hardware file gives no board power."""
    econ = hw.economics
    if econ is None or econ.board_W is None:
        return None
    per_gpu = econ.board_W + sum(lvl.switch_W_per_gpu for lvl in hw.levels)
    nodes = -(-held_gpus // hw.gpus_per_node)
    return held_gpus * per_gpu + nodes * econ.node_overhead_W


def facility_power_MW(hw: Hardware, facility: Facility, held_gpus: int) -> float | None:
    """Facility power of `held_gpus` GPUs, MW: IT power x PUE."""
    it = it_power_W(hw, held_gpus)
    return None if it is None else it * facility.pue / W_PER_MW


def max_gpus_within_power(hw: Hardware, facility: Facility, power_MW: float) -> int | None:
    """The most GPUs whose facility power is at most `power_MW` (power grows with every GPU, so a power limit is a GPU
    limit); None when the hardware file gives no board power. 0 when not even one GPU fits."""
    if facility_power_MW(hw, facility, 1) is None:
        return None
    lo, hi = 0, 1
    while (facility_power_MW(hw, facility, hi) or 0.0) <= power_MW:
        lo, hi = hi, hi * 2
        if hi > 2**62:
            return lo
    while hi - lo > 1:  # invariant: lo fits, hi does not
        mid = (lo + hi) // 2
        if (facility_power_MW(hw, facility, mid) or 0.0) <= power_MW:
            lo = mid
        else:
            hi = mid
    return lo


def price_of(hw: Hardware, price_per_gpu_hour: float | None) -> tuple[float | None, str | None]:
    """(USD per GPU-hour, where it comes from): the user's price, else the hardware file's, else (None, None)."""
    if price_per_gpu_hour is not None:
        return float(price_per_gpu_hour), "--price-per-gpu-hour"
    econ = hw.economics
    if econ is None or econ.price_per_gpu_hour_usd is None:
        return None, None
    return econ.price_per_gpu_hour_usd, hw.sources.get("economics.price_per_gpu_hour_USD", "hardware file")


def plan_economics(hw: Hardware, facility: Facility, gpus: int, held_gpus: int, training_days: float,
                   held_days: float, price_per_gpu_hour: float | None) -> dict[str, Any]:
    """The Plan's money and power fields (planner.schema.Plan: held_gpus ... warnings) for a run of `gpus` GPUs that
    holds `held_gpus` for `held_days` and computes for `training_days`."""
    price, source = price_of(hw, price_per_gpu_hour)
    out: dict[str, Any] = {"held_gpus": held_gpus, "held_days": held_days, "price_per_gpu_hour": price,
                           "price_source": source}
    if price is not None:
        out["cost_usd"] = price * held_gpus * held_days * HOURS_PER_DAY
        out["compute_cost_usd"] = price * gpus * training_days * HOURS_PER_DAY
        if not (math.isfinite(out["cost_usd"]) and math.isfinite(out["compute_cost_usd"])):
            raise InvalidInput(f"a price of {price:g} USD per GPU-hour makes the cost of {held_gpus} GPUs for "
                               f"{held_days:.3g} days overflow; give a price a float can multiply")
    it = it_power_W(hw, held_gpus)
    if it is not None:
        fac = it * facility.pue / W_PER_MW
        out.update(it_power_MW=it / W_PER_MW, pue=facility.pue, facility_power_MW=fac,
                   energy_MWh=fac * held_days * HOURS_PER_DAY)
    out["warnings"] = plausibility_warnings(hw, facility, out.get("facility_power_MW"))
    return out


def plausibility_warnings(hw: Hardware, facility: Facility, power_MW: float | None) -> list[str]:
    """A warning when the plan needs more facility power than the largest site announced (facility.largest_site_MW,
    sourced): the cost model has no such bound, so the search may call such a cluster optimal."""
    if power_MW is None or power_MW <= facility.largest_site_MW:
        return []
    ratio = power_MW / facility.largest_site_MW
    return [f"beyond any announced build: {fmt_MW(power_MW)} of facility power is {fmt_g3(ratio)}x the largest "
            f"training site announced, {fmt_MW(facility.largest_site_MW)} ({facility.largest_site_name}; "
            f"--set facility.largest_site_MW=MW moves the bound); the layout is optimal under the cost model only"]


def fmt_g3(x: float) -> str:
    """Three significant figures as people read them: 12.3, 1,230, 651,000; from a million on powers of ten without
    Python's '+0': 3.25e6 (never '3.25e+06')."""
    if not math.isfinite(x) or x == 0:
        return f"{x:g}"
    if abs(x) >= 1e6:
        mantissa, exponent = f"{x:.2e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    r = round(x, 2 - math.floor(math.log10(abs(x))))
    return f"{r:,.0f}" if abs(r) >= 1e3 else f"{r:.3g}"


def fmt_pct(x: float | None) -> str:
    """A fraction as a percentage, one rule for every one printed: one decimal below 100 % (0.452 -> '45.2%', 0.46 ->
    '46.0%'), whole percents from 100 % on (1.0 -> '100%', 2.5 -> '250%'), and two significant figures below 0.05 %
    rather than a misleading '0.0%' (0.00047 -> '0.047%'; exactly 0 is '0.0%'); None -> '—'."""
    if x is None:
        return "—"
    p = x * 100
    if not math.isfinite(p):
        return f"{p:g}%"
    if 0 < abs(p) < 0.05:
        return f"{p:.2g}%"
    return f"{p:,.0f}%" if abs(round(p, 1)) >= 100 else f"{p:.1f}%"


def fmt_MW(mw: float) -> str:
    """1234.5 -> '1.23 GW', 12.3 -> '12.3 MW', 3.25e9 -> '3.25e6 GW'."""
    return f"{fmt_g3(mw / 1e3)} GW" if mw >= 1e3 else f"{fmt_g3(mw)} MW"


__all__ = ["facility_names", "facility_power_MW", "get_facility", "it_power_W", "max_gpus_within_power",
           "fmt_MW", "fmt_g3", "fmt_pct", "parse_facility", "plan_economics", "plausibility_warnings", "price_of"]
