"""Execution profiles: how a training framework runs on the hardware, as data beside the hardware files.

A hardware file says what the system *is* (FLOP/s, bandwidths, sizes); an execution profile says how training
*runs* on it: how fast GEMMs and attention kernels go against peak, how much of each kind of communication hides
under compute, what bus bandwidth and per-collective latency NCCL achieves on each network level, what the
element-wise kernels and the optimizer step cost. Two ship in `profiles/`:

* `paper`: the paper's idealised model (App. 8.1.1-8.1.2): GEMMs by the roofline of the memory hierarchy at the
  sustained clock, every TP, PP and EP transfer hidden under the GEMMs, collectives at the link rate with the
  hardware file's latency, nothing else on the GPU. The reproduction profile and the default.
* `realistic`: what published runs show (docs/validation.md): cuBLAS's measured share of peak with tile and wave
  quantization, TP traffic exposed (stock Megatron), NCCL's bus bandwidth and tens of microseconds per collective,
  element-wise work and optimizer step priced.

File format: every number is `{ value = ..., source = "..." }` (optionally `note`), as in the hardware files; a
user file may give plain values. Sections and keys are those of `FIELDS` below. The document itself,
`ExecutionProfile`, lives with the other documents (planner.schema.profile); this module reads the files into it.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.errors import InvalidInput, is_number
from planner.overrides import Override
from planner.schema.profile import (  # the document, re-exported: planner.profile.ExecutionProfile keeps working
    PAPER,
    RECIPE_PASSES,
    ExecutionProfile,
    Fraction,
    GemmPass,
    Recipe,
    Seconds,
    TileSide,
    entry_for,
)
from planner.sourced import load_sourced, load_toml, spreads_of, unwrap

__all__ = ["FIELDS", "PAPER", "RECIPE_KEYS", "RECIPE_PASSES", "TABLES", "ExecutionProfile", "Fraction", "GemmPass",
           "Recipe", "Seconds", "TileSide", "entry_for", "get_profile", "load_profile_file", "parse_profile",
           "profile_dir", "profile_names"]

FIELDS: dict[str, str] = {
    "gemm.model": "gemm_model",
    "gemm.tile": "gemm_tile",
    "gemm.launch_us": "gemm_launch_s",
    "attention.flash_fwd_fraction": "attention_fwd_fraction",
    "attention.flash_bwd_fraction": "attention_bwd_fraction",
    "attention.unfused_fraction": "attention_unfused_fraction",
    "elementwise.hbm_fraction": "elementwise_hbm_fraction",
    "elementwise.layer_overhead_us": "layer_overhead_s",
    "elementwise.compiled_fraction": "compiled_elementwise_fraction",
    "network.bus_bw_fraction": "collective_bw_fraction",
    "network.latency_us": "collective_latency_s",
    "overlap.tp": "overlap_tp",
    "overlap.pp": "overlap_pp",
    "overlap.tp_comm_overlap": "overlap_tp_comm",
    "overlap.cp": "overlap_cp",
    "network.tp_gather_low_precision": "tp_gather_low_precision",
    "context.kv_expanded": "cp_kv_expanded",
    "context.grad_bytes": "cp_grad_bytes",
    "context.grad_returns": "cp_grad_returns",
    "context.merge_fwd_bytes": "cp_merge_fwd_bytes",
    "context.merge_bwd_bytes": "cp_merge_bwd_bytes",
    "overlap.ep": "overlap_ep",
    "overlap.ep_comm_overlap": "overlap_ep_comm",
    "overlap.ep_stages": "overlap_ep_stages",
    "overlap.ep_comm_stages": "overlap_ep_comm_stages",
    "moe.host_layer_us": "host_moe_layer_s",
    "moe.eager_host_layer_us": "host_eager_moe_layer_s",
    "overlap.zero": "overlap_zero",
    "moe.imbalance": "moe_imbalance",
    "moe.dispatch_dedup": "moe_dispatch_dedup",
    "memory.driver_reserved_GB": "memory_driver_reserved_bytes",
    "overlap.dp": "dp_overlap",
    "overlap.dp_exposed": "dp_exposed",
    "overlap.zero_bubble_hides_latency": "zero_bubble_hides_latency",
    "optimizer.bytes_per_param": "optimizer_bytes_per_param",
    "overlap.zero_flat": "zero_flat",
    "network.ring_step_latency_us": "ring_step_latency_s",
    "gemm.sustained_factor": "gemm_sustained_factor",
    "goodput.enabled": "goodput",
    "memory.reserve_GB": "memory_reserve_bytes",
    "memory.cuda_context_GB": "memory_context_bytes",
    "memory.workspace_GB": "memory_workspace_bytes",
    "memory.nccl_buffsize_MiB": "nccl_buffer_bytes",
    "memory.nccl_channels": "nccl_channels",
    "memory.nccl_buffers_per_channel": "nccl_buffers_per_channel",
    "memory.fragmentation": "memory_fragmentation",
    "memory.headroom_GB": "memory_headroom_bytes",
    "memory.zero3_unit": "zero3_unit",
    "memory.zero3_live_units": "zero3_live_units",
    "memory.zero3_max_live_params": "zero3_max_live_params",
    "memory.zero3_pp_unsharded": "zero3_pp_unsharded",
    "memory.zero3_pp_grad_bytes": "zero3_pp_grad_bytes",
    "memory.saved_input_high_precision": "saved_input_high_precision",
    "memory.logits_bytes": "logits_bytes",
    "memory.compiled_logits_bytes": "compiled_logits_bytes",
    "memory.parallel_logits_bytes": "parallel_logits_bytes",
    "memory.per_stage_memory": "per_stage_memory",
    "memory.head_input_gathered": "head_input_gathered",
    "memory.loss_freed_before_recompute": "loss_freed_before_recompute",
    "memory.optimizer_state_bytes_per_param": "optimizer_state_bytes_per_param",
    "memory.selective_policy": "selective_policy",
    "memory.mla_recompute_up_proj": "mla_recompute_up_proj",
    "memory.activation_offload_layers": "activation_offload_layers",
    "memory.pipeline_microbatch_group": "pipeline_microbatch_group",
    "memory.recompute_norm_act": "recompute_norm_act",
    "memory.compiled": "compiled",
    "memory.compiled_fuses": "compiled_fuses",
}
"""TOML key (section.key) -> field. Keys ending in _us are microseconds, _GB gigabytes (1e9 bytes), _MiB
mebibytes. [gemm.peak_fraction] and
[gemm.fp8_peak_fraction] are tables of GPU family -> fraction."""

PER_LEVEL = {"network.bus_bw_fraction", "network.latency_us", "network.ring_step_latency_us"}
"""Keys holding one value per network level, bottom-up (the last repeats): a single number means every level."""

TABLES = {"gemm.peak_fraction": "gemm_peak_fraction", "gemm.fp8_peak_fraction": "gemm_fp8_peak_fraction",
          "gemm.fp4_peak_fraction": "gemm_fp4_peak_fraction", "gemm.sustained_by_family": "gemm_sustained_by_family",
          "memory.device_MiB": "memory_device_bytes"}

RECIPE_KEYS = {"precision", *Recipe.model_fields} - {"model_config"}
"""Keys of a [recipe.NAME] table (the Recipe fields)."""


def _parse_recipes(raw: Any, origin: str, sources: dict[str, str], require_source: bool) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise InvalidInput(f"{origin}: [recipe] must hold one table per recipe name")
    out: dict[str, dict[str, Any]] = {}
    for name, body in raw.items():
        if not isinstance(body, dict):
            raise InvalidInput(f"{origin}: [recipe.{name}] must be a table")
        unknown = set(body) - RECIPE_KEYS
        if unknown:
            raise InvalidInput(f"{origin}: [recipe.{name}]: unknown key(s) {sorted(unknown)}; expected "
                               f"{', '.join(sorted(RECIPE_KEYS))}")
        out[name] = {k: _leaf(v, f"recipe.{name}.{k}", sources, require_source, origin) for k, v in body.items()}
    return out


def _leaf(raw: Any, path: str, sources: dict[str, str], require_source: bool, origin: str) -> Any:
    try:
        return unwrap(raw, path, sources, require_source, "every value in a shipped profile")
    except InvalidInput as exc:  # name the file, as every other error of the profile does
        raise InvalidInput(f"{origin}: {exc}") from None


def parse_profile(doc: dict[str, Any], origin: str, require_source: bool = False) -> ExecutionProfile:
    sources: dict[str, str] = {}
    fields: dict[str, Any] = {}
    for key in ("name", "description"):
        if key in doc:
            fields[key] = doc[key]
    if "name" not in doc:
        raise InvalidInput(f"{origin}: missing required 'name'")
    sections = {"gemm", "attention", "elementwise", "network", "overlap", "optimizer", "goodput", "moe", "memory",
                "context"}
    frameworks = doc.get("framework", {})
    if not isinstance(frameworks, dict):
        raise InvalidInput(f"{origin}: [framework] must hold one table per framework")
    for fw, body in frameworks.items():
        if not isinstance(body, dict) or set(body) - sections:
            raise InvalidInput(f"{origin}: [framework.{fw}] may hold only the sections {', '.join(sorted(sections))}")
        over = parse_profile({"name": fw, **body}, f"{origin} [framework.{fw}]", require_source)
        fields.setdefault("frameworks", {})[fw] = {k: getattr(over, k) for k in over.model_fields_set
                                                   if k not in ("name", "sources", "spreads")}
        sources.update({f"framework.{fw}.{k}": v for k, v in over.sources.items()})
    if "recipe" in doc:
        fields["recipes"] = _parse_recipes(doc["recipe"], origin, sources, require_source)
    unknown = set(doc) - sections - {"name", "description", "framework", "recipe"}
    if unknown:
        raise InvalidInput(f"{origin}: unknown top-level key(s) {sorted(unknown)}; expected name, description and "
                           f"the sections {', '.join(sorted(sections))} and [recipe.NAME] tables")
    for section in sections & set(doc):
        body = doc[section]
        if not isinstance(body, dict):
            raise InvalidInput(f"{origin}: [{section}] must be a table")
        for key, raw in body.items():
            path = f"{section}.{key}"
            if path in TABLES:
                if not isinstance(raw, dict):
                    raise InvalidInput(f"{origin}: [{path}] must be a table of GPU family = "
                                       + ("MiB" if path.endswith("_MiB") else "fraction"))
                scale = 2.0**20 if path.endswith("_MiB") else 1.0
                fields[TABLES[path]] = {k: _leaf(v, f"{path}.{k}", sources, require_source, origin) * scale
                                        for k, v in raw.items()}
                continue
            if path not in FIELDS:
                close = difflib.get_close_matches(path, [*FIELDS, *TABLES], n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise InvalidInput(f"{origin}: unknown key '{path}'{hint}")
            value = _leaf(raw, path, sources, require_source, origin)
            if path.endswith("_us") and is_number(value):
                value = value * 1e-6
            elif path.endswith("_us") and isinstance(value, list) and all(map(is_number, value)):
                value = [v * 1e-6 for v in value]
            elif path.endswith(("_GB", "_MiB")) and is_number(value):
                value = value * (1e9 if path.endswith("_GB") else 2.0**20)
            if path in PER_LEVEL and is_number(value):
                value = (value,)  # one number for a per-level list: every level (the last value repeats)
            fields[FIELDS[path]] = value
    try:
        return ExecutionProfile(**fields, sources=sources, spreads=spreads_of(doc))
    except ValidationError as exc:  # name the TOML key (overlap.tp), not the field (overlap_tp)
        keys = {field: key for key, field in {**FIELDS, **TABLES}.items()}
        err = exc.errors()[0]
        loc = ".".join(keys.get(str(p), str(p)) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise InvalidInput(f"{origin}: {loc}: {msg}" if loc else f"{origin}: {msg}") from None


def profile_dir() -> Path:
    return Path(str(resources.files("planner.profiles")))


def profile_names() -> list[str]:
    return sorted(p.stem for p in profile_dir().glob("*.toml"))


def load_profile_file(path: str | Path, require_source: bool = False) -> ExecutionProfile:
    return parse_profile(load_toml(path, "profile file"), str(path), require_source=require_source)


@cache
def _shipped(name: str) -> ExecutionProfile:
    return load_profile_file(profile_dir() / f"{name}.toml", require_source=True)


def _framework_keeps(base: str, framework: str, overrides: Sequence[Override]) -> list[Override]:
    """`overrides` for 'BASE/FRAMEWORK': a --set of a key the shipped [framework.FRAMEWORK] section also sets is
    applied there too, so the user's value is the one priced (the framework's values replace the profile's, and
    without this `--set profile.elementwise.layer_overhead_us=X` under 'realistic/torchtitan' changed nothing while
    the summary said the plan was made with it)."""
    from planner.sourced import _shipped_doc  # the shipped file parsed once per process (only read here)

    section = _shipped_doc(str(profile_dir() / f"{base}.toml"), "profile file").get("framework", {}).get(framework, {})
    out = list(overrides)
    for o in overrides:
        if o.target != "profile" or not o.keys or o.keys[0] == "framework":
            continue
        node: Any = section
        for key in o.keys:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            out.append(Override(o.target, ("framework", framework, *o.keys), o.value, o.text))
    return out


def framework_of(name: str) -> tuple[str, str] | None:
    """(NAME, FRAMEWORK) of a profile name 'NAME/FRAMEWORK' (one slash; ExecutionProfile.for_framework names the
    profile it makes so), else None."""
    base, slash, framework = name.partition("/")
    return (base, framework) if slash and "/" not in framework else None


def shipped_framework(name_or_path: str) -> tuple[str, str] | None:
    """framework_of, where NAME is a shipped profile and no file of that path exists: how get_profile reads
    'realistic/torchtitan' (the shipped profile with its [framework.torchtitan] values)."""
    pair = framework_of(name_or_path)
    return pair if pair and pair[0] in profile_names() and not Path(name_or_path).exists() else None


def get_profile(name_or_path: str, overrides: Sequence[Override] = ()) -> ExecutionProfile:
    """A shipped profile ('paper', 'realistic') or a path to a user TOML file, with `overrides` (--set profile.*)
    applied to its document before validation. 'NAME/FRAMEWORK' (a shipped profile and one of its [framework.*]
    sections, e.g. 'realistic/torchtitan', when no such file exists) is that profile as the framework runs it
    (ExecutionProfile.for_framework): what `plan --emit torchtitan` prices."""
    pair = shipped_framework(name_or_path)
    if pair is not None:
        base, framework = pair
        prof = get_profile(base, overrides)  # a bad value is blamed on the --set the user typed
        keeps = _framework_keeps(base, framework, overrides)
        if len(keeps) > len(overrides):
            prof = get_profile(base, keeps)
        if not prof.frameworks:
            with_sections = [n for n in profile_names() if _shipped(n).frameworks]
            raise InvalidInput(f"profile {name_or_path!r}: the {base} profile has no [framework.*] sections; "
                               f"NAME/FRAMEWORK takes a profile that has them ({', '.join(with_sections)})")
        if framework not in prof.frameworks:
            raise InvalidInput(f"profile {name_or_path!r}: the {base} profile has no [framework.{framework}] section; "
                               f"choose one of {', '.join(sorted(prof.frameworks))}")
        return prof.for_framework(framework)
    return load_sourced(name_or_path, profile_names(), profile_dir(), "execution profile", "profile file", "profile",
                        parse_profile, _shipped, overrides)
