"""Hardware library: TOML files in `hardware_specs/`, validated on load.

File format (units live in the keys and are converted once, here)::

    name = "h100"
    description = "..."
    gpus_per_node = 8

    [gpu]
    name = "H100 SXM5"
    sms = { value = 132, source = "...", note = "..." }
    ...

    [[levels]]
    name = "NVLink"
    size = { value = 8, source = "..." }          # omitted on the unbounded top level
    unit = { value = 4, source = "..." }          # optional, lowest level: GPUs a job takes whole (a tray)
    usable = { value = 64, source = "..." }       # optional, lowest level: most GPUs a job uses per group
    bw_bidir_GBps = { value = 900, source = "..." }
    lat_us = { value = 1.125, source = "..." }
    switch_W_per_gpu = { value = 134, source = "..." }  # optional: this level's switch power per GPU (default 0)

    [economics]                                   # optional: price and power (planner.economics)
    price_per_gpu_hour_USD = { value = 2.95, source = "... (dated)" }
    board_W = { value = 700, source = "..." }     # GPU board power
    node_overhead_W = { value = 4600, source = "..." }  # per node of gpus_per_node GPUs, beyond the boards

Every number in a shipped file is an inline table with `value` and `source` (and optionally `note`).
User files may give plain numbers; they are recorded as "user-supplied".
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.errors import InvalidInput
from planner.hardware_keys import ECONOMICS_KEYS, GPU_KEYS, INT_FIELDS, LEVEL_KEYS
from planner.overrides import Override
from planner.profile import ExecutionProfile, get_profile
from planner.schema import Economics, Gpu, Hardware, NetworkLevel
from planner.sourced import load_sourced, load_toml, spreads_of, unwrap

MAX_INT_FIELD = 2**40
"""Largest whole-number field (SM count, group size, ...) accepted; larger ones overflow the int64 search arrays."""
MAX_LEVELS = 8
"""Most network levels in a hardware file (docs/reliability.md, "Bounded work"): 8 levels plan 1e28 FLOP in about 5 s;
20 took 77 s and 4.3 GB before this bound."""
MAX_SI_VALUE = 1e30
"""Largest hardware number other than a bandwidth accepted, in SI units after conversion (bytes, Hz, seconds): far
above any real GPU (1e30 bytes of HBM), far below where float64 products in the cost model overflow."""


def _spec_dir() -> Path:
    return Path(str(resources.files("planner.hardware_specs")))


def _unwrap(raw: Any, path: str, sources: dict[str, str], require_source: bool) -> Any:
    return unwrap(raw, path, sources, require_source, "every number in a shipped hardware file")


def is_economic(key: str) -> bool:
    """Whether a hardware file key prices money or power ([economics], a level's switch_W_per_gpu): it changes a
    plan's dollars and megawatts, never its layout (unless --power-mw bounds the cluster)."""
    return key.startswith("economics.") or key.endswith(".switch_W_per_gpu")


def estimated_fields(hw: Hardware, economic: bool = False) -> list[str]:
    """The hardware numbers whose source or note calls them an estimate, as file keys (e.g. gpu.l2_GBps): those the
    layout rests on, or with `economic` those behind price and power (is_economic)."""
    return sorted(k for k, src in hw.sources.items() if "estimate" in src.lower() and is_economic(k) == economic)


def _convert(section: dict[str, Any], keys: dict[str, tuple[str, float | None]], where: str, sources: dict[str, str],
             require_source: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in section.items():
        if key == "name":
            out["name"] = raw
            continue
        if key not in keys:
            close = difflib.get_close_matches(key, list(keys), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f"; accepted keys: {', '.join(keys)}"
            raise InvalidInput(f"{where}: unknown key '{key}'{hint}")
        field, scale = keys[key]
        value = _unwrap(raw, f"{where}.{key}", sources, require_source)
        if scale is None:
            if not isinstance(value, bool):
                raise InvalidInput(f"{where}.{key}: expected true or false, got {value!r}")
            out[field] = value
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInput(f"{where}.{key}: expected a number, got {value!r}")
        if math.isnan(value):
            raise InvalidInput(f"{where}.{key}: NaN is not a valid value")
        if math.isinf(value) and not key.endswith("_GBps"):
            raise InvalidInput(f"{where}.{key}: expected a finite number, got {value!r} (only bandwidths may be inf)")
        if field in INT_FIELDS and abs(value) > MAX_INT_FIELD:
            raise InvalidInput(f"{where}.{key}: {value!r} is too large (at most {MAX_INT_FIELD})")
        if field in INT_FIELDS:
            if value != int(value):
                raise InvalidInput(f"{where}.{key}: expected a whole number, got {value!r}")
            out[field] = int(value)
        else:
            si = float(value) * scale
            # checked in SI units, after the conversion: 1e308 GB is not finite bytes (docs/reliability.md)
            if not key.endswith("_GBps") and not (math.isfinite(si) and abs(si) <= MAX_SI_VALUE):
                raise InvalidInput(f"{where}.{key}: {value!r} is {si:.3g} in SI units; at most {MAX_SI_VALUE:g} is "
                                   "accepted")
            out[field] = si
    return out


def parse_hardware(doc: dict[str, Any], origin: str, require_source: bool = False) -> Hardware:
    """Build a validated Hardware from a parsed TOML document."""
    sources: dict[str, str] = {}
    unknown = set(doc) - {"name", "description", "gpu", "levels", "gpus_per_node", "economics"}
    if unknown:
        raise InvalidInput(f"{origin}: unknown top-level key(s) {sorted(unknown)}; expected name, description, "
                           "gpus_per_node, [gpu], [[levels]], [economics]")
    for key in ("name", "gpu", "levels"):
        if key not in doc:
            raise InvalidInput(f"{origin}: missing required '{key}'")
    if not isinstance(doc["gpu"], dict) or not isinstance(doc["levels"], list):
        raise InvalidInput(f"{origin}: [gpu] must be a table and [[levels]] an array of tables")
    if len(doc["levels"]) > MAX_LEVELS:
        raise InvalidInput(f"{origin}: {len(doc['levels'])} network levels; at most {MAX_LEVELS} are accepted (each "
                           "level multiplies the placements the search prices; real systems have 2 to 4)")
    try:  # name the file in every field error
        gpu_fields = _convert(doc["gpu"], GPU_KEYS, "gpu", sources, require_source)
        levels = []
        for k, lvl in enumerate(doc["levels"]):
            if not isinstance(lvl, dict):
                raise InvalidInput(f"levels[{k}] must be a table")
            levels.append(_convert(lvl, LEVEL_KEYS, f"levels[{k}]", sources, require_source))
        econ_doc = doc.get("economics")
        if econ_doc is not None and not isinstance(econ_doc, dict):
            raise InvalidInput("[economics] must be a table")
        econ_fields = None if econ_doc is None else _convert(econ_doc, ECONOMICS_KEYS, "economics", sources,
                                                             require_source)
    except InvalidInput as exc:
        raise InvalidInput(f"{origin}: {exc}") from None

    def build(make, where: str, keys: dict[str, tuple[str, float | None]]):
        """Validate one part; name a bad field by its TOML key (l2_MiB, not l2_bytes) and its table."""
        try:
            return make()
        except ValidationError as exc:
            err = exc.errors()[0]
            toml_key = {field: key for key, (field, _) in keys.items()}
            loc = ".".join(toml_key.get(str(p), str(p)) for p in err["loc"])
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise InvalidInput(f"{origin}: {where}{loc or 'hardware'}: {msg}") from None

    gpu = build(lambda: Gpu(**gpu_fields), "gpu.", GPU_KEYS)
    if not math.isfinite(gpu.peak_flops) or gpu.peak_flops > 1e21:
        raise InvalidInput(f"{origin}: gpu: a peak of {gpu.peak_flops:.3g} FLOP/s (sms x threads_per_sm x "
                           "flop_per_clock_per_thread x max_clock) is not a GPU; at most 1e21 FLOP/s is accepted")
    built = tuple(build(lambda lv=lv: NetworkLevel(**lv), f"levels[{k}].", LEVEL_KEYS) for k, lv in enumerate(levels))
    econ = None if econ_fields is None else build(lambda: Economics(**econ_fields), "economics.", ECONOMICS_KEYS)
    hw = build(lambda: Hardware(name=doc["name"], description=doc.get("description", ""),
                                gpus_per_node=doc.get("gpus_per_node", 8), gpu=gpu, levels=built, sources=sources,
                                economics=econ, spreads=spreads_of(doc)),
               "", {})
    # Nodes are counted as GPUs / gpus_per_node; a node must tile the lowest bounded network group or be tiled by
    # it (8 per DGX node = 8 per NVLink group; 4 per GB200 tray inside a 72-GPU NVLink domain).
    lowest = next((lvl for lvl in hw.levels if lvl.size is not None), None)
    n = hw.gpus_per_node
    if lowest is not None and lowest.size % n and n % lowest.size:
        raise InvalidInput(f"{origin}: gpus_per_node = {n} does not fit the lowest network level "
                           f"({lowest.name}, groups of {lowest.size} GPUs): one must divide the other")
    return hw


def load_hardware_file(path: str | Path, require_source: bool = False) -> Hardware:
    return parse_hardware(load_toml(path, "hardware file"), str(path), require_source=require_source)


def hardware_names() -> list[str]:
    return sorted(p.stem for p in _spec_dir().glob("*.toml"))


@cache
def _load_shipped(name: str) -> Hardware:
    return load_hardware_file(_spec_dir() / f"{name}.toml", require_source=True)


def get_hardware(name_or_path: str, overrides: Sequence[Override] = ()) -> Hardware:
    """A shipped hardware name (e.g. 'h100') or a path to a user TOML file; `overrides` (planner.overrides, --set)
    change fields of its document before it is validated, as an edited copy would."""
    text = str(name_or_path).strip()
    if ("," in text or text == "all") and not text.endswith(".toml") and "/" not in text:
        raise InvalidInput(f"'{text}' names several accelerators where one is needed; `plan --gpu {text}` (or "
                           "planner.compare.compare) plans each and ranks them")
    return load_sourced(name_or_path, hardware_names(), _spec_dir(), "GPU/hardware", "hardware file", "hardware",
                        parse_hardware, _load_shipped, overrides)


def with_profile(hw: Hardware, profile: str | ExecutionProfile) -> Hardware:
    """The same system priced under another execution profile (a shipped name, a TOML path or a profile)."""
    prof = get_profile(profile) if isinstance(profile, str) else profile
    return hw if hw.profile == prof else hw.model_copy(update={"profile": prof})
