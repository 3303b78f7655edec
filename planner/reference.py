"""Reference pages for the input file formats, generated from the key tables and the pydantic models.

Each format is read off the code that parses it: the TOML key -> field tables (`planner.hardware_keys.GPU_KEYS` and
`LEVEL_KEYS`, `planner.workload.scaling.PRESET_KEYS`, `planner.profile.FIELDS` and `TABLES`,
`planner.goodput.KEYS`) give the keys and their unit conversions, and the models' `Field(description=...)`,
defaults and bounds give the rest. A field the tables do not map, or a key with no description anywhere, raises
here, so a new field cannot reach a release undocumented: `planner reference --check` (and the test suite)
compare these pages with the checked-in docs/reference/*.md, and `planner reference --write` regenerates them.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "docs" / "reference"
"""Where the pages live in the repository (docs/reference/)."""

UNITS: dict[str, tuple[str, float]] = {
    "MHz": ("MHz", 1e6),
    "GBps": ("GB/s (10^9 bytes/s)", 1e9),
    "GB": ("GB (10^9 bytes)", 1e9),
    "MiB": ("MiB (2^20 bytes)", 2.0**20),
    "KiB": ("KiB (2^10 bytes)", 2.0**10),
    "us": ("µs", 1e-6),
    "minutes": ("minutes", 60.0),
    "W": ("W", 1.0),
    "USD": ("USD", 1.0),
}
"""Unit words that may end a TOML key (or precede `_per_gpu`), as written, with their size in SI units. A key's
declared multiplier must equal its unit's, which `_unit` checks."""


@dataclass(frozen=True)
class KeyDoc:
    """One row of a reference table: a TOML key and what it becomes."""

    key: str
    unit: str
    field: str
    default: str
    constraint: str
    description: str


# --------------------------------------------------------------------------------------------------
# Reading the models
# --------------------------------------------------------------------------------------------------


def _unit(key: str, scale: float | None, finfo: FieldInfo | None) -> str:
    """The unit a key is written in, from the unit word in its name; checked against its multiplier to SI."""
    words = key.split(".")[-1].split("_")
    found = [w for w in words if w in UNITS]
    if scale is None:
        if found:
            raise ValueError(f"{key}: a unit word but no multiplier")
        return "true or false"
    if found:
        label, size = UNITS[found[-1]]
        if not math.isclose(size, scale, rel_tol=1e-12):
            raise ValueError(f"{key}: the key says {found[-1]} (x{size:g}) but it is converted with x{scale:g}")
        if finfo is not None and _type_text(finfo.annotation).startswith("list"):
            label = f"list of {label}, one per network level"
        if "per_gpu_hour" in key:
            return label + " per GPU-hour"
        return label + (" per GPU" if "per_gpu" in key.split(".")[-1] else "")
    if scale != 1:
        raise ValueError(f"{key}: converted with x{scale:g} but its name carries no unit")
    if "per_gpu_hour" in key:
        return "per GPU-hour"
    return _type_text(finfo.annotation) if finfo is not None else "number"


def _type_text(annotation: Any) -> str:
    """A field's type in file terms: number, whole number, true or false, one of '...', a list or a table."""
    origin = get_origin(annotation)
    if origin is typing.Annotated:  # a constrained element type (Fraction, TileSide): its base type
        return _type_text(get_args(annotation)[0])
    args = [a for a in get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        return _type_text(args[0]) if len(args) == 1 else " or ".join(_type_text(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(f"'{a}'" for a in get_args(annotation))
    if origin is tuple:
        inner = get_args(annotation)
        if len(inner) == 2 and inner[1] is Ellipsis:
            return f"list of {_type_text(inner[0])}s"
        return "[" + ", ".join(_type_text(a) for a in inner) + "]"
    if origin is dict:
        return f"table of {_type_text(get_args(annotation)[1])}s"
    return {bool: "true or false", int: "whole number", float: "number", str: "text"}.get(annotation, str(annotation))


def _constraint(finfo: FieldInfo) -> str:
    parts = []
    for m in finfo.metadata:
        if isinstance(m, annotated_types.Gt):
            parts.append(f"> {m.gt}")
        elif isinstance(m, annotated_types.Ge):
            parts.append(f">= {m.ge}")
        elif isinstance(m, annotated_types.Lt):
            parts.append(f"< {m.lt}")
        elif isinstance(m, annotated_types.Le):
            parts.append(f"<= {m.le}")
        elif isinstance(m, annotated_types.MinLen):
            parts.append(f"at least {m.min_length} entr{'y' if m.min_length == 1 else 'ies'}")
    return ", ".join(parts)


def _value_text(value: Any, scale: float | None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_value_text(v, scale) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{k} = {_value_text(v, scale)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, (int, float)):
        return f"{value / (scale or 1):g}"
    return str(value)


def _default(finfo: FieldInfo, scale: float | None) -> str:
    if finfo.is_required():
        return "required"
    if finfo.default_factory is not None:
        return f"optional, default {_value_text(finfo.default_factory(), scale)}"  # type: ignore[call-arg]
    if finfo.default is None:
        return "optional, default none"
    if finfo.default is PydanticUndefined:  # pragma: no cover - is_required covers it
        return "required"
    return f"optional, default {_value_text(finfo.default, scale)}"


def _row(key: str, model: type[BaseModel], field: str, scale: float | None, *, unit: str | None = None,
         default: str | None = None, meaning: str | None = None) -> KeyDoc:
    """`meaning` stands in for a field without a description of its own (a name or a free-text line)."""
    finfo = model.model_fields[field]
    description = finfo.description or meaning
    if not description:
        raise ValueError(f"{model.__name__}.{field} (file key '{key}') has no description")
    return KeyDoc(key, unit if unit is not None else _unit(key, scale, finfo), f"{model.__name__}.{field}",
                  default if default is not None else _default(finfo, scale), _constraint(finfo), description)


def _mapped(keys: Mapping[str, tuple[str, float | None]], model: type[BaseModel], unmapped: set[str]) -> list[KeyDoc]:
    """One row per key of a key table; every field of `model` outside `unmapped` must have a key."""
    rows = [_row(key, model, field, scale) for key, (field, scale) in keys.items()]
    missing = set(model.model_fields) - {f for f, _ in keys.values()} - unmapped
    if missing:
        raise ValueError(f"{model.__name__} field(s) {sorted(missing)} have no file key")
    return rows


def _table(rows: Sequence[KeyDoc]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ") or "—"

    head = "| key | unit in the file | field (SI units) | required / default | bounds | meaning |\n"
    head += "|---|---|---|---|---|---|\n"
    return head + "".join(f"| `{r.key}` | {cell(r.unit)} | `{r.field}` | {cell(r.default)} | {cell(r.constraint)} | "
                          f"{cell(r.description)} |\n" for r in rows)


def _derived(model: type[BaseModel]) -> str:
    """The documented properties of a model: quantities computed from the fields, never stored."""
    lines = []
    for name in sorted(vars(model)):
        attr = vars(model)[name]
        if isinstance(attr, property) and attr.__doc__ and not name.startswith("_"):
            lines.append(f"- `{model.__name__}.{name}`: {' '.join(attr.__doc__.split())}\n")
    return "".join(lines)


_HEADER = ("<!-- Generated by `planner reference --write` from {sources}. Do not edit by hand: change the code and "
           "regenerate; tests/test_reference.py fails when this page and the code disagree. -->\n\n")

_SOURCED = ("Every value may be written plainly (`{key} = {value}`) or as an inline table with its provenance, "
            "`{key} = {{ value = {value}, source = \"...\", note = \"...\" }}`; {shipped}. A plain value in a user "
            "file is recorded as \"user-supplied\". An estimate may also say how far it may be off: "
            "`spread = {{ low = 0.8, high = 1.2, shape = \"uniform\", why = \"...\" }}` in the same table, factors "
            "on the value (low <= 1 <= high; shape uniform, triangular with its mode at the value, or loguniform) "
            "that `plan --confidence` samples (docs/confidence.md).\n")


# --------------------------------------------------------------------------------------------------
# The pages
# --------------------------------------------------------------------------------------------------

HARDWARE_EXAMPLE = """\
name = "h100-ib800"
description = "DGX H100 with one 800 Gb/s InfiniBand port per GPU (the shipped h100 has 400 Gb/s)"
gpus_per_node = 8

[gpu]
name = "H100 SXM5"
sms = 132
threads_per_sm = 128
flop_per_clock_per_thread = 32
fp8_flop_per_clock_per_thread = 64
max_clock_MHz = 1830
sustained_clock_factor = { value = 0.70, source = "estimate: clock under long GEMM runs" }
hbm_GBps = 3352
l2_GBps = 6441
l2_MiB = 50
register_file_per_block_KiB = 64
l1_per_sm_KiB = 256
hbm_GB = 80
matmul_latency_us = 4.5
dsmem = true

[[levels]]
name = "NVLink"
size = 8
bw_bidir_GBps = 900
lat_us = 1.125

[[levels]]
name = "InfiniBand"
bw_bidir_GBps = { value = 200, source = "800 Gb/s per GPU = 100 GB/s each way" }
lat_us = 1.125
"""
"""A complete user hardware file (a test loads it), shown on the hardware page."""


def hardware_page() -> str:
    from planner.hardware import MAX_INT_FIELD
    from planner.hardware_keys import ECONOMICS_KEYS, GPU_KEYS, INT_FIELDS, LEVEL_KEYS
    from planner.schema import Economics, Gpu, Hardware, NetworkLevel

    top = [_row("name", Hardware, "name", 1, unit="text"),
           _row("description", Hardware, "description", 1, unit="text"),
           _row("gpus_per_node", Hardware, "gpus_per_node", 1)]
    gpu = [_row("name", Gpu, "name", 1, unit="text"), *_mapped(GPU_KEYS, Gpu, {"name"})]
    levels = [_row("name", NetworkLevel, "name", 1, unit="text"), *_mapped(LEVEL_KEYS, NetworkLevel, {"name"})]
    economics = _mapped(ECONOMICS_KEYS, Economics, set())
    missing = set(Hardware.model_fields) - {"name", "description", "gpus_per_node", "gpu", "levels", "economics",
                                            "sources", "profile", "spreads"}  # the last three are set by the reader
    if missing:
        raise ValueError(f"Hardware field(s) {sorted(missing)} have no file key")
    whole = ", ".join(f"`{k}`" for k, (f, _) in {**GPU_KEYS, **LEVEL_KEYS}.items() if f in INT_FIELDS)
    return (
        _HEADER.format(sources="planner/hardware_keys.py (GPU_KEYS, LEVEL_KEYS) and planner/schema/__init__.py (Gpu, "
                       "NetworkLevel, Hardware)")
        + "# Hardware file format\n\n"
        + "A hardware file describes one system: a GPU type and its network, bottom (fastest) level first. The "
        "shipped ones are in `hardware_specs/` (`planner hardware list`); any command that takes `--gpu NAME` also "
        "takes `--gpu FILE.toml`, and `planner hardware show FILE.toml` prints what the planner read from it.\n\n"
        + "Units live in the key names (`hbm_GBps`, `lat_us`) and are converted once, on load, to the SI field on "
        "the right (bytes, bytes/s, seconds, Hz). Unknown keys are rejected with the closest known key.\n\n"
        + _SOURCED.format(key="sms", value=132, shipped="every number in a shipped file must carry a `source`, and "
                          "a value whose source or note says \"estimate\" is reported as an estimate under every "
                          "plan that uses it")
        + "\n## Top level\n\n" + _table(top)
        + "\n## `[gpu]`\n\n" + _table(gpu)
        + "\n## `[[levels]]` (one table per network level, bottom-up)\n\n" + _table(levels)
        + "\n## `[economics]` (optional: price and power, planner/economics.py)\n\n"
        + "Without it a plan has no default price (`--price-per-gpu-hour` gives one) and no power figures (and "
        "`--power-mw` is refused). Facility power = (GPUs held x (`board_W` + every level's `switch_W_per_gpu`) + "
        "nodes x `node_overhead_W`) x the PUE of `facility/default.toml` (`--set facility.pue=X`).\n\n"
        + _table(economics)
        + "\n## Rules\n\n"
        + f"- Whole numbers: {whole} (at most {MAX_INT_FIELD:,}). Only bandwidths (`*_GBps`) may be `inf`; nothing "
        "may be NaN.\n"
        "- `size` is cumulative (GPUs per group at that level, e.g. 8 per node, then 72 per NVLink domain): sizes "
        "increase bottom-up and each is a multiple of the one below. Only the top level may omit `size` "
        "(unbounded).\n"
        "- `unit` and `usable` (optional, lowest level only, which must be bounded): a job may use a group in part, "
        "the same number c of GPUs in every group it touches, c a multiple of `unit` (or the whole job when it is "
        "smaller than one unit) and at most `usable`; c is the largest such count that divides the cluster and lets "
        "the levels above fill (fewest groups bought). `usable` must be a multiple of `unit` and at most `size`; "
        "either defaults from the other (`unit` 1, `usable` = `size`). GB200 NVL72: `unit = 4` (a compute tray), "
        "`usable = 64` (16 of 18 trays), so 512 GPUs = 8 racks x 64 with 8 x 8 = 64 spare GPUs. Without them a level "
        "is filled exactly. Plans report the racks bought (`racks`), GPUs used per rack and spares.\n"
        "- `gpus_per_node` and the lowest bounded level's `size` must divide one another.\n"
        "- Bandwidths are per GPU and bidirectional (both directions added); the cost model uses half of each per "
        "direction.\n"
        + "\n## Derived quantities (computed on access, never stored)\n\n" + _derived(Gpu) + _derived(NetworkLevel)
        + _derived(Hardware)
        + "\n## Example\n\n```toml\n" + HARDWARE_EXAMPLE + "```\n"
    )


_PRESET_ONLY: dict[str, tuple[str, str, str]] = {
    "kind": ("one of 'toy-mlp', 'transformer'", "optional, default 'toy-mlp'",
             "'toy-mlp': the paper's toy model (§2: L blocks of E experts, two d_ff x d_model matrices each, attention "
             "folded in); 'transformer': a real transformer (docs/model.md §1b), where the transformer keys below "
             "apply."),
    "batch_sequences": ("sequences", "one of batch_tokens, batch_sequences",
                        "Global batch in sequences of seq_len tokens; batch_tokens = batch_sequences x seq_len."),
}
"""Preset keys that are not a model field: (unit, required / default, meaning)."""

_PRESET_DEFAULTS: dict[str, str] = {
    "batch_tokens": "one of batch_tokens, batch_sequences",
    "tokens": "optional, default 20 x N_p (Chinchilla)",
    "seq_len": "optional, default 2048",
    "heads": "required for a transformer",
    "vocab": "required for a transformer",
    "kv_heads": "optional, default heads (multi-head attention)",
    "head_dim": "optional, default d_model / heads",
}
"""Where a file's default differs from the model field's (the reader fills it in before validation)."""

_PRESET_UNITS: dict[str, str] = {"batch_tokens": "tokens", "tokens": "tokens", "seq_len": "tokens",
                                 "published_params": "parameters", "published_active_params": "parameters"}

MODEL_EXAMPLE = """\
description = "A 7B-class dense transformer"
source = "user-supplied"
kind = "transformer"
d_model = 4096
d_ff = 14336
layers = 32
heads = 32
kv_heads = 8
ffn = "swiglu"
vocab = 128256
seq_len = 8192
batch_sequences = 512
tokens = 2e12
"""
"""A complete user preset (a test loads it), shown on the model page."""


def model_page() -> str:
    from planner.schema import TransformerShape, Workload
    from planner.workload.scaling import _REQUIRED_PRESET_KEYS, PRESET_KEYS, TRANSFORMER_KEYS, ModelPreset

    def row(key: str) -> KeyDoc:
        if key in _PRESET_ONLY:
            unit, default, meaning = _PRESET_ONLY[key]
            return KeyDoc(key, unit, "(file only)", default, "", meaning)
        model: type[BaseModel] = (TransformerShape if key in TRANSFORMER_KEYS
                                  else ModelPreset if key in ModelPreset.model_fields else Workload)
        return _row(key, model, key, 1, unit=_PRESET_UNITS.get(key),
                    default="required" if key in _REQUIRED_PRESET_KEYS else _PRESET_DEFAULTS.get(key))

    rows = {k: row(k) for k in PRESET_KEYS}
    common = [rows[k] for k in PRESET_KEYS if k not in TRANSFORMER_KEYS]
    transformer = [rows[k] for k in TRANSFORMER_KEYS]
    not_keys = sorted(set(TransformerShape.model_fields) - set(TRANSFORMER_KEYS))
    return (
        _HEADER.format(sources="planner/workload/scaling.py (PRESET_KEYS, TRANSFORMER_KEYS), planner/schema/preset.py "
                       "(ModelPreset) and planner/schema/__init__.py (Workload, TransformerShape)")
        + "# Model preset format\n\n"
        + "A model preset fixes the shape that `--model NAME|FILE.toml` plans (instead of inferring one from "
        "`--compute` and the scaling laws). The shipped presets are in `models/`; the file's stem is its name. "
        "Values are plain TOML (no `{ value, source }` tables): the file's own `source` says where they come "
        "from, and a shipped preset must have a non-empty `description` and `source`. Unknown keys are rejected "
        "with the closest known key.\n\n"
        + "Sizes are whole numbers (integral floats such as `4.194304e6` are accepted) up to 2^40; the batch is "
        "counted in tokens. N_p is the model's parameter count: every GEMM weight (docs/model.md §1, §1b).\n\n"
        + "## Keys of every preset\n\n" + _table(common)
        + "\n## Transformer keys (`kind = \"transformer\"` only)\n\n" + _table(transformer)
        + "\n## Rules\n\n"
        "- Give exactly one of `batch_tokens` and `batch_sequences`. On the toy model the batch must be a multiple "
        "of `experts` (top-1 balanced routing); on a transformer a whole number of `seq_len` sequences.\n"
        "- `kv_heads` divides `heads`; `top_k` <= `experts`; `dense_layers` < `layers`; `top_k`, "
        "`shared_experts` and `dense_layers` need `experts` > 1.\n"
        "- `attention = \"mla\"` needs `kv_lora_rank` > 0; `q_lora_rank`, `kv_lora_rank`, `rope_head_dim` and "
        "`v_head_dim` are for MLA only.\n"
        + (f"- Not preset keys: {', '.join(f'`{k}`' for k in not_keys)} (set by validation/runs.toml for "
           "published runs) and `precision` (the `--precision` flag).\n" if not_keys else "")
        + "\n## Example\n\n```toml\n" + MODEL_EXAMPLE + "```\n"
    )


def profile_page() -> str:
    from planner.profile import FIELDS, TABLES, ExecutionProfile, Recipe

    rows = [_row("name", ExecutionProfile, "name", 1, unit="text", meaning="The profile's name, as plans report it."),
            _row("description", ExecutionProfile, "description", 1, unit="text", meaning="What the profile is.")]
    for key, field in FIELDS.items():
        scale = 1e-6 if key.endswith("_us") else 1e9 if key.endswith("_GB") else 2.0**20 if key.endswith("_MiB") \
            else 1.0
        rows.append(_row(key, ExecutionProfile, field, scale))
    for key, field in TABLES.items():
        unit = "table: GPU = MiB" if key.endswith("_MiB") else "table: GPU family = fraction"
        rows.append(_row(f"[{key}]", ExecutionProfile, field, 1, unit=unit))
    missing = set(ExecutionProfile.model_fields) - {*FIELDS.values(), *TABLES.values()} - {
        "name", "description", "frameworks", "sources", "recipes", "spreads"}
    recipe_rows = [_row(f"recipe.NAME.{field}", Recipe, field, 1) for field in Recipe.model_fields]
    if missing:
        raise ValueError(f"ExecutionProfile field(s) {sorted(missing)} have no file key")
    sections = sorted({k.split(".")[0] for k in (*FIELDS, *TABLES)})
    return (
        _HEADER.format(sources="planner/profile.py (FIELDS, TABLES) and planner/schema/profile.py (ExecutionProfile)")
        + "# Execution profile format\n\n"
        + "An execution profile says how training runs on the hardware: GEMM and attention efficiency, which "
        "communication hides under compute, what the collectives achieve, what else the GPU does. The shipped ones "
        "are `profiles/paper.toml` (the paper's idealised model, the default) and `profiles/realistic.toml` "
        "(validated against published runs, docs/validation.md); `--profile FILE.toml` takes your own.\n\n"
        + f"Keys are grouped in the sections {', '.join(f'`[{s}]`' for s in sections)}; the key column gives "
        "`section.key`. Keys ending in `_us` are in **microseconds** and are stored in seconds (`_s` fields); keys "
        "ending in `_GB` (10^9 bytes) and `_MiB` (2^20 bytes) are stored in bytes (`_bytes` fields). A "
        "field left out keeps the default shown, which is the paper's model.\n\n"
        + _SOURCED.format(key="tp", value=0.0, shipped="every value in a shipped profile must carry a `source`")
        + "\n## Keys\n\n" + _table(rows)
        + "\n## Per-framework overrides\n\n"
        "`[framework.NAME]` holds any of the sections above with the values that differ when that training "
        "framework runs (e.g. `[framework.deepspeed.overlap]`); the planner applies them to runs of that framework "
        "(`ExecutionProfile.for_framework`).\n"
        "\n## Low-precision recipes\n\n"
        "`[recipe.NAME]` prices one low-precision recipe (NAME: `delayed`, `current`, `blockwise`, `mxfp8`, "
        "`nvfp4`; docs/model.md, 'Low precision'). A recipe the profile does not list runs its GEMMs at the "
        "low-precision rate with nothing else.\n\n" + _table(recipe_rows)
        + "\n## Per-level lists\n\n"
        "`network.bus_bw_fraction`, `network.latency_us` and `network.ring_step_latency_us` give one value per "
        "network level, bottom-up; the last value repeats for the levels above, so `[1.0]` (or a single number, "
        "`1.0`) means every level.\n\n"
        "Times per kernel, layer or collective (`gemm.launch_us`, `elementwise.layer_overhead_us`, "
        "`network.latency_us`, `network.ring_step_latency_us`, `moe.host_layer_us`, `moe.eager_host_layer_us`) are "
        "at most 1 s (1,000,000 µs), as the hardware files' level latencies; no number in a profile may be "
        "infinite or NaN.\n"
    )


def failure_page() -> str:
    from planner.goodput import KEYS, FailureModel

    rows = [_row("name", FailureModel, "name", 1, unit="text", meaning="The model's name, as plans report it."),
            _row("description", FailureModel, "description", 1, unit="text", meaning="What the model is."),
            *_mapped(KEYS, FailureModel, {"name", "description", "sources", "spreads"})]
    return (
        _HEADER.format(sources="planner/goodput.py (KEYS) and planner/schema/goodput.py (FailureModel)")
        + "# Failure model format\n\n"
        + "A failure model says how often a training job is interrupted and what an interruption and a checkpoint "
        "cost; the planner turns it into goodput (compute time / wall-clock time, planner/goodput.py). The shipped "
        "one is `failures/default.toml`.\n\n"
        + _SOURCED.format(key="restart_minutes", value=10, shipped="every value in a shipped file must carry a "
                          "`source`")
        + "\n## Keys\n\n" + _table(rows)
    )


PAGES: dict[str, Callable[[], str]] = {
    "hardware-format.md": hardware_page,
    "model-format.md": model_page,
    "profile-format.md": profile_page,
    "failure-format.md": failure_page,
}
"""File name under docs/reference/ -> its generator. A new file format is one line here."""


def pages() -> dict[str, str]:
    """Every reference page, generated now."""
    return {name: make() for name, make in PAGES.items()}


def stale_pages(directory: Path = REFERENCE_DIR) -> list[str]:
    """The pages whose checked-in text differs from the generated one (missing ones included)."""
    out = []
    for name, text in pages().items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            out.append(name)
    return out
