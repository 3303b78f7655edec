"""TOML data files whose values carry their sources (hardware_specs/*.toml, profiles/*.toml, failures/*.toml): reading
one sourced value, one file, and a shipped name or a user's path (with --set overrides), the same way for all."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from planner import recent
from planner.errors import MAX_TOML_BYTES, InvalidInput, parse_toml, read_text_file
from planner.overrides import apply, fields_of
from planner.schema.profile import SHAPES, Spread


def parse_spread(raw: Any, path: str) -> Spread:
    if not isinstance(raw, dict):
        raise InvalidInput(f"{path}.spread: expected {{ low = ..., high = ..., shape = \"uniform\", why = \"...\" }}")
    try:
        return Spread(**raw)
    except (ValidationError, TypeError) as exc:
        msg = str(exc.errors()[0]["msg"]) if isinstance(exc, ValidationError) else str(exc)
        raise InvalidInput(f"{path}.spread: {msg.removeprefix('Value error, ')} (shapes: {', '.join(SHAPES)})"
                           ) from None


def spreads_of(doc: Any, prefix: str = "") -> dict[str, Spread]:
    """Every `spread` in a parsed data file, by the path its source is recorded under (gpu.l2_GBps, levels[1].lat_us,
    network.bus_bw_fraction)."""
    out: dict[str, Spread] = {}
    if isinstance(doc, dict):
        if "value" in doc and "spread" in doc:
            out[prefix] = parse_spread(doc["spread"], prefix)
            return out
        for k, v in doc.items():
            out.update(spreads_of(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(doc, list):
        for k, v in enumerate(doc):
            if isinstance(v, dict):
                out.update(spreads_of(v, f"{prefix}[{k}]"))
    return out


def unwrap(raw: Any, path: str, sources: dict[str, str], require_source: bool, rule: str) -> Any:
    """The value of `{ value = ..., source = "...", note = "..." }` (or a plain value in a user file), recording its
    source under `path`. `rule` names what must be sourced, e.g. 'every number in a shipped hardware file'."""
    if isinstance(raw, dict):
        unknown = set(raw) - {"value", "source", "note", "spread"}
        if unknown or "value" not in raw:
            raise InvalidInput(f"{path}: expected {{ value = ..., source = \"...\" }}, got keys {sorted(raw)}")
        if require_source and not str(raw.get("source", "")).strip():
            raise InvalidInput(f"{path}: {rule} needs a source")
        if "spread" in raw:
            parse_spread(raw["spread"], path)
        sources[path] = str(raw.get("source", "user-supplied")) + (f" ({raw['note']})" if raw.get("note") else "")
        return raw["value"]
    if require_source:
        raise InvalidInput(f"{path}: {rule} needs a source")
    sources[path] = "user-supplied"
    return raw


def load_toml(path: str | Path, what: str) -> dict[str, Any]:
    """A TOML file (size-capped, one-line errors), e.g. `what` = 'hardware file'."""
    path = Path(path)
    text = read_text_file(path, what, MAX_TOML_BYTES)
    return parse_toml(text, f"'{path}'")


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long for a path, or with a NUL byte: not a file
        return False


def shipped_name(name_or_path: str, names: list[str], what: str) -> str | None:
    """The shipped file `name_or_path` names (case-insensitive), or None when it is a path to a user file; an unknown
    name is an InvalidInput that suggests the closest shipped ones."""
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        return None
    key = name_or_path.strip().lower()
    if key not in names and _is_file(name_or_path):  # a user file named without .toml, in this directory
        return None
    if key not in names:
        close = difflib.get_close_matches(key, names, n=3, cutoff=0.5) or [n for n in names if key and key in n][:3]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InvalidInput(f"unknown {what} '{name_or_path}'{hint} (known: {', '.join(names)})")
    return key


T = TypeVar("T")


@cache
def _shipped_doc(path: str, what: str) -> dict[str, Any]:
    """A shipped data file, parsed once (callers must not edit it: planner.overrides.apply copies)."""
    return load_toml(path, what)


def file_of(name_or_path: str, names: list[str], folder: Path, what: str) -> tuple[Path, str | None]:
    """(the file, its shipped name or None for a user's path) that `name_or_path` names."""
    name = shipped_name(name_or_path, names, what)
    return (Path(name_or_path) if name is None else folder / f"{name}.toml"), name


def load_sourced(name_or_path: str, names: list[str], folder: Path, what: str, file_what: str, target: str,
                 parse: Callable[[dict[str, Any], str, bool], T], shipped: Callable[[str], T],
                 overrides: Sequence[Any] = ()) -> T:
    """A shipped file by name (`shipped`, cached by the caller) or a user's file by path, parsed by `parse(doc,
    origin, require_source)`; `what` names the kind in an unknown-name error, `file_what` the file in a read error.
    --set `overrides` (planner.overrides) whose target is `target` are applied to the parsed
    document first, so an override is exactly an edited copy of the file."""
    path, name = file_of(name_or_path, names, folder, what)
    if not any(o.target == target for o in overrides):
        return shipped(name) if name is not None else parse(load_toml(path, file_what), str(path), False)
    # apply() edits a deep copy, so a shipped file is read once per process however many re-plans override it
    original = _shipped_doc(str(path), file_what) if name is not None else load_toml(path, file_what)
    key = (str(path), target, tuple(repr((o.keys, o.value)) for o in overrides if o.target == target))
    cached = recent.recall(_OVERRIDDEN, key) if name is not None else None
    if cached is not None:
        return cached
    doc = apply(original, overrides, target)
    origin = f"{name or path} with --set"
    try:
        out = parse(doc, origin, name is not None)
    except InvalidInput as exc:
        raise InvalidInput(blame(str(exc), origin, original, [o for o in overrides if o.target == target])) from None
    if name is not None:
        # A shipped file with the same overrides parses to the same (frozen) object: re-plans in one process that
        # price one moved input several times (--sensitivity, --confidence) parse it once.
        recent.keep(_OVERRIDDEN, key, out, OVERRIDDEN_ENTRIES)
    return out


_OVERRIDDEN: dict[tuple[str, str, tuple[str, ...]], Any] = {}
"""Shipped files parsed with --set overrides, by (file, target, the overrides' keys and values): `load_sourced`."""
OVERRIDDEN_ENTRIES = 256


def blame(message: str, origin: str, doc: dict[str, Any], overrides: Sequence[Any]) -> str:
    """A parser's error about an overridden file, said of the --set that gave the bad value ('--set gpu.hbm_GB=-1: the
    value should be greater than 0') rather than of the file's internal field path ('levels[0].bw_bidir_GBps'); an
    error about a field no override set names the overrides ('h100 with --set levels.NVLink.size=3: gpus_per_node =
    8 does not fit ...')."""
    rest = message.removeprefix(f"{origin}: ")
    for o in reversed(overrides):  # the last override of a field is the one in effect
        for field in fields_of(doc, o):
            tail = rest[len(field):]
            if not rest.startswith(field) or not tail.startswith((":", " ", ".")):
                continue
            if tail.startswith(" ") or ": " not in tail:  # a sentence that names the field itself
                return f"--set {o.text}: {rest}"
            detail = tail.split(": ", 1)[1].removeprefix("Value error, ")
            if detail.startswith("Input should be "):  # pydantic's wording, about the value the user typed
                detail = "the value should be " + detail.removeprefix("Input should be ")
            return f"--set {o.text}: {detail}"
    if message.startswith(f"{origin}: ") and overrides:  # about another field: name the overrides that led there
        return f"{origin} {', '.join(o.text for o in overrides)}: {rest}"
    return message
