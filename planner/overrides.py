"""What-if without files: `--set FIELD=VALUE` changes one field of the hardware, the execution profile or the failure
model for one plan, exactly as editing a copy of its TOML file would (the same parser validates it).

Paths name a file's keys (docs/reference/):

    gpu.hbm_GB=96                          hardware [gpu]
    levels.InfiniBand.bw_bidir_GBps=200    hardware [[levels]], by name or index (levels.1.lat_us); `*` = every level
    gpus_per_node=4                        hardware, top level
    profile.overlap.tp=0.5                 execution profile [overlap]
    profile.gemm.peak_fraction.H100=0.75   execution profile table entry
    goodput.restart_minutes=2              failure model
    facility.pue=1.3                       the site (facility/default.toml): PUE, largest announced site
    economics.price_per_gpu_hour_USD=2.5   hardware [economics]: price, board and node power

VALUE is read as a TOML value (numbers, true/false, [lists], "strings"); a bare word is a string. The override takes
the place of the file's value and its source becomes "--set".
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from planner.errors import InvalidInput, check_depth

TARGETS = ("hardware", "profile", "goodput", "facility")


@dataclass(frozen=True)
class Override:
    target: str  # hardware | profile | goodput | facility
    keys: tuple[str, ...]  # path inside that file's document
    value: Any
    text: str  # as echoed: "levels.InfiniBand.bw_bidir_GBps=200"


def _value(text: str, where: str) -> Any:
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except RecursionError:
        raise InvalidInput(f"--set {where}: the value is nested too deeply") from None
    except ValueError as exc:
        if not isinstance(exc, tomllib.TOMLDecodeError):  # int() of more than 4,300 digits
            raise InvalidInput(f"--set {where}: the value has more digits than any field accepts") from None
        if text and all(c.isalnum() or c in "-_." for c in text):
            return text  # a bare word: a string (gemm.model=measured)
        raise InvalidInput(f"--set {where}: cannot read the value {text!r} (a number, true/false, [list] or "
                           "\"string\")") from None
    check_depth(value, f"--set {where}", 1)
    return value


def parse_overrides(texts: Sequence[str]) -> list[Override]:
    """`FIELD=VALUE` strings -> Overrides; a malformed one is a one-line InvalidInput naming it."""
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise InvalidInput(f"overrides must be a list of 'FIELD=VALUE' strings, got {type(texts).__name__} "
                           f"{str(texts)[:60]!r}")
    out = []
    for raw in texts:
        if not isinstance(raw, str):
            raise InvalidInput(f"overrides must be 'FIELD=VALUE' strings, got {type(raw).__name__} {raw!r}")
        if "=" not in raw:
            raise InvalidInput(f"--set {raw!r}: expected FIELD=VALUE, e.g. levels.InfiniBand.bw_bidir_GBps=200")
        key, text = (part.strip() for part in raw.split("=", 1))
        parts = tuple(p for p in key.split("."))
        if not key or any(not p for p in parts) or not text:
            raise InvalidInput(f"--set {raw!r}: expected FIELD=VALUE, e.g. levels.InfiniBand.bw_bidir_GBps=200")
        if parts[0] in ("profile", "goodput", "facility"):
            target, keys = parts[0], parts[1:]
            if not keys:
                raise InvalidInput(f"--set {raw!r}: name a field after '{parts[0]}.'")
        else:
            target, keys = "hardware", parts
        out.append(Override(target, keys, _value(text, key), f"{key}={text}"))
    return out


def shortcuts(bw: Sequence[str] = (), latency_us: float | None = None) -> list[str]:
    """The named questions as --set strings: `--bw LEVEL=GBps` (a level's bidirectional bandwidth per GPU) and
    `--latency US` (every network level's one-way latency, in the hardware file and in the profile)."""
    out = []
    for item in bw:
        if "=" not in item:
            raise InvalidInput(f"--bw {item!r}: expected LEVEL=GBps, e.g. --bw InfiniBand=200")
        level, value = (p.strip() for p in item.split("=", 1))
        out.append(f"levels.{level}.bw_bidir_GBps={value}")
    if latency_us is not None:
        out += [f"levels.*.lat_us={latency_us:g}", f"profile.network.latency_us=[{latency_us:g}]"]
    return out


def level_indices(levels: Sequence[Any], o: Override) -> list[int]:
    """The indices of the hardware levels a `levels.NAME|INDEX|*.KEY` override names (InvalidInput: none)."""
    if len(o.keys) != 3:
        raise InvalidInput(f"--set {o.text}: a level field is levels.NAME.KEY (or levels.INDEX.KEY)")
    names = [str(lv.get("name", "")) if isinstance(lv, dict) else "" for lv in levels]
    sel = o.keys[1]
    if sel == "*":
        return list(range(len(levels)))
    if sel.isdigit() and int(sel) < len(levels):
        return [int(sel)]
    if sel.lower() in [n.lower() for n in names]:
        return [[n.lower() for n in names].index(sel.lower())]
    raise InvalidInput(f"--set {o.text}: no network level '{sel}'; this hardware has "
                       f"{', '.join(names)} (or use an index 0..{len(levels) - 1}, or *)")


def fields_of(doc: dict[str, Any], o: Override) -> list[str]:
    """The field paths an override sets, as a file's parser names them in its errors (levels[1].lat_us, gpu.hbm_GB,
    overlap.tp): how an error about a value is traced back to the --set that gave it."""
    if o.keys[0] == "levels" and o.target == "hardware":
        return [f"levels[{k}].{o.keys[2]}" for k in level_indices(doc.get("levels", []), o)]
    return [".".join(o.keys)]


def _set(doc: dict[str, Any], keys: tuple[str, ...], value: Any, text: str, what: str) -> None:
    """doc[keys...] = value, keeping the file's value-with-source form."""
    node: Any = doc
    for k in keys[:-1]:
        nxt = node.get(k) if isinstance(node, dict) else None
        if nxt is None:
            nxt = node.setdefault(k, {}) if isinstance(node, dict) else None
        if not isinstance(nxt, dict):
            raise InvalidInput(f"--set {text}: '{k}' is not a table of the {what}")
        node = nxt
    leaf = keys[-1]
    old = node.get(leaf)
    node[leaf] = {"value": value, "source": "--set"} if (isinstance(old, dict) and "value" in old) or old is None \
        else value


def _copy(node: Any) -> Any:
    """A deep copy of a parsed TOML value: tables and arrays are copied, every other TOML value (str, int, float,
    bool, date/time) is immutable and shared, so this equals copy.deepcopy on a TOML document at a fraction of its
    cost (--sensitivity applies one override set per moved input)."""
    if isinstance(node, dict):
        return {k: _copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy(v) for v in node]
    return node


def apply(doc: dict[str, Any], overrides: Sequence[Override], target: str) -> dict[str, Any]:
    """A copy of a parsed TOML document with the overrides for `target` applied (validation is the parser's)."""
    doc = _copy(doc)
    what = {"hardware": "hardware file", "profile": "execution profile", "goodput": "failure model",
            "facility": "facility file"}[target]
    for o in overrides:
        if o.target != target:
            continue
        if target == "hardware" and o.keys[0] == "levels":
            levels = doc.get("levels", [])
            for k in level_indices(levels, o):
                _set(levels[k], o.keys[2:], o.value, o.text, what)
            continue
        if target == "hardware" and o.keys[0] == "name":
            raise InvalidInput(f"--set {o.text}: the hardware's name is not a what-if; copy the file to rename it")
        _set(doc, o.keys, o.value, o.text, what)
    return doc


__all__ = ["Override", "TARGETS", "apply", "fields_of", "level_indices", "parse_overrides", "shortcuts"]
