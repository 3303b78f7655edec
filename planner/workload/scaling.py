"""Workload: from a compute budget (or an explicit shape, or a preset file) to the model the planner lays out.

The model is the paper's toy model (§2): `L` stacked sparse MLP blocks, each with `E` experts of two weight
matrices `d_ff x d_model` and `d_model x d_ff`, top-1 balanced routing, attention folded into the MLP
(its QKV and output projections can be fused with the MLP matmuls, §2). So

    N_p = 2 L E d_model d_ff     (Eq. 1)     total parameters; N_p / E active per token
    T   = 6 (N_p / E) D                     training FLOP (forward + two backward GEMMs per forward GEMM)
    D   = 20 N_p                            tokens (Chinchilla on total parameters, App. 8.1.4)

Three ways in:

* `infer_workload(T)`: solve the baseline scaling relations of App. 8.1.4 for the shape at compute `T`, then
  round to hardware-friendly integers (docs/model.md §1); the training tokens absorb the rounding so the plan
  trains `T` (budget "exact"), or follow the rounded shape as the paper's do (budget "paper"). The request is kept
  in `Workload.requested_compute_flop` so reports can show both.
* `workload_from_shape(...)`: an explicit shape (command-line flags).
* `load_model_preset(name_or_path)`: a TOML file from `models/` (shipped as package `planner.models`) or the
  user's own file.

Everything here is a pure function of its arguments, in float64.
"""

from __future__ import annotations

import difflib
import math
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import ValidationError

from planner.errors import MAX_TOML_BYTES, InvalidInput, parse_toml, read_text_file, validation_message
from planner.schema import TransformerShape, Workload
from planner.schema.preset import ModelPreset

BatchLaw = Literal["paper", "deepseek", "fixed"]
BATCH_LAWS: tuple[str, ...] = ("paper", "deepseek", "fixed")

Budget = Literal["exact", "paper"]
BUDGETS: tuple[str, ...] = ("exact", "paper")
"""How the training tokens follow an inferred shape (docs/model.md §1):

* "exact" (what `plan --compute` uses): the tokens absorb the shape's rounding, as a whole number of optimizer
  steps, so the plan trains the compute asked for (within half a step: below 0.5 % from 100 steps up);
* "paper": D = 20 x the rounded N_p (App. 8.1.4), so the trained compute moves with the rounding (about 0.7x to 1.5x of
  the request); the paper reproduction uses it, because its tables were computed that way."""

MIN_COMPUTE_FLOP = 1e18
"""Smallest budget `infer_workload` accepts: ~1e8 parameters, far below where parallelism limits matter."""
MAX_COMPUTE_FLOP = 1e40
"""Largest budget `infer_workload` accepts: 9 orders of magnitude past the paper's latency wall (~2e31)."""

MAX_SHAPE_INT = 2**40
"""Largest explicit shape integer (d_model, d_ff, L, E, batch, seq_len): beyond it divisor enumeration would hang
and degree products overflow int64. Inferred shapes stay far below it except the batch at ~1e40 FLOP."""

FRIENDLY_FACTORS: tuple[int, ...] = (1, 3, 5, 7, 9)
"""Odd parts allowed in a hardware-friendly integer f * 2^k (docs/model.md §1): small odd parts keep divisors rich."""

SEQ_LEN_TOKENS = 2048
"""Sequence length of App. 8.1.4 (reported only; every batch here is counted in tokens)."""

# App. 8.1.4 constants, named once.
_PAPER_BATCH_TOKENS = 2.0**22  # GPT-3's batch at its compute, the anchor of the paper's law
_PAPER_BATCH_ANCHOR_FLOP = 3e23
_PAPER_BATCH_EXPONENT = 1.0 / 6.0
_DEEPSEEK_COEFF = 0.2920  # Bi et al. (2024), as used in §6.3.2 / Fig. 9
_DEEPSEEK_EXPONENT = 0.3271
_LAYERS_COEFF = 0.10056
_LAYERS_EXPONENT = 0.3751
_SPARSE_EXPERTS_AT_ANCHOR = 8.0  # GPT-4-like sparsity at d_model = 12288, d_ff = 4 d_model
_SPARSE_ANCHOR_WIDTH_SQ = 4.0 * 12288.0**2  # d_model * d_ff of that anchor
_FF_RATIO = 4
_CHINCHILLA_TOKENS_PER_PARAM = 20.0
_FLOP_PER_ACTIVE_PARAM_TOKEN = 6.0


# --------------------------------------------------------------------------------------------------
# Validation helpers (every bad value becomes a one-line InvalidInput naming it)
# --------------------------------------------------------------------------------------------------


def _finite_positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a positive finite number, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x <= 0:
        raise InvalidInput(f"{name} must be a positive finite number, got {value!r}")
    return x


def _positive_int(name: str, value: Any) -> int:
    """A positive whole number; integral floats (e.g. TOML `4.194304e6`) are accepted."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a positive whole number, got {value!r}")
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise InvalidInput(f"{name} must be a positive whole number, got {value!r}")
    n = int(value)
    if n <= 0:
        raise InvalidInput(f"{name} must be a positive whole number, got {value!r}")
    if n > MAX_SHAPE_INT:
        raise InvalidInput(f"{name} {value!r} is too large: at most {MAX_SHAPE_INT:.4g} (2^40) is accepted")
    return n


def _shape_ints(d_model: Any, d_ff: Any, layers: Any, experts: Any, batch_tokens: Any, seq_len: Any
                ) -> tuple[int, int, int, int, int, int]:
    """The sizes every shape has, each a positive whole number (named in the error when not)."""
    names = ("d_model", "d_ff", "layers", "experts", "batch_tokens", "seq_len")
    a, b, c, d, e, f = (_positive_int(n, v) for n, v in zip(names, (d_model, d_ff, layers, experts, batch_tokens,
                                                                      seq_len)))
    return a, b, c, d, e, f


def _non_negative_int(name: str, value: Any) -> int:
    """0 or a positive whole number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
        return 0
    return _positive_int(name, value)


def check_compute(compute_flop: Any, name: str = "compute") -> float:
    """A compute budget in FLOP within the accepted range; `name` is what the errors call it (the CLI passes the
    flag typed, e.g. --compute or sweep's --from)."""
    if isinstance(compute_flop, bool) or not isinstance(compute_flop, (int, float)):
        raise InvalidInput(f"{name} must be a number of FLOP, got {compute_flop!r}")
    t = float(compute_flop)
    if not math.isfinite(t) or t <= 0:
        raise InvalidInput(f"{name} must be a positive finite number of FLOP, got {compute_flop!r}")
    if not MIN_COMPUTE_FLOP <= t <= MAX_COMPUTE_FLOP:
        raise InvalidInput(
            f"{name} {t:g} FLOP is outside the accepted range "
            f"{MIN_COMPUTE_FLOP:g} to {MAX_COMPUTE_FLOP:g} FLOP"
        )
    return t


# --------------------------------------------------------------------------------------------------
# Batch-size laws (App. 8.1.4; §6.3.2 and Fig. 9 for the alternatives)
# --------------------------------------------------------------------------------------------------


def batch_tokens_law(compute_flop: float, experts: float, law: str = "paper") -> float:
    """Critical batch size in tokens (unrounded float) for a run of `compute_flop` FLOP with `experts` experts.

    * "paper" (App. 8.1.4): b = 2^22 * E^(1/2) * (T / 3e23)^(1/6).
    * "deepseek" (§6.3.2, Fig. 9, after Bi et al. 2024): b = E^(1/2) * 0.2920 * T^0.3271.
    * "fixed" (§6.3.2, Fig. 9's "no scaling"): b = 2^22, whatever T and E.
    """
    t = _finite_positive("compute", compute_flop)
    e = _finite_positive("experts", experts)
    if e < 1:
        raise InvalidInput(f"experts must be at least 1, got {experts!r}")
    if law == "paper":
        return _PAPER_BATCH_TOKENS * math.sqrt(e) * (t / _PAPER_BATCH_ANCHOR_FLOP) ** _PAPER_BATCH_EXPONENT
    if law == "deepseek":
        return math.sqrt(e) * _DEEPSEEK_COEFF * t**_DEEPSEEK_EXPONENT
    if law == "fixed":
        return _PAPER_BATCH_TOKENS
    raise InvalidInput(f"unknown batch scaling law {law!r}; accepted: {', '.join(BATCH_LAWS)}")


# --------------------------------------------------------------------------------------------------
# Hardware-friendly rounding (docs/model.md §1)
# --------------------------------------------------------------------------------------------------


def friendly_round(x: float) -> int:
    """The integer of the form f * 2^k (f in {1, 3, 5, 7, 9}, k >= 0) nearest to `x` in log space.

    Such numbers keep divisor sets rich, so the layout search (`N_TP | d`, `N_PP * i | L`, `N_EP | E`) has many
    candidates. Consecutive friendly numbers are at most a factor 6/5 apart above 8 (8, 9, 10, 12, 14, 16, ...),
    so rounding changes a value >= 8 by at most a factor sqrt(6/5) ~= 1.095; below 8 every integer is friendly.
    Values below 1 round to 1. A tie (x exactly at the geometric mean of two neighbours) goes to the smaller.
    """
    v = _finite_positive("value to round", x)
    if v <= 1.0:
        return 1
    k0 = math.floor(math.log2(v))
    # Every friendly number within a factor 2 of v: f * 2^k with f <= 9 < 2^4 needs k in [k0 - 4, k0 + 1].
    candidates = sorted({f << k for f in FRIENDLY_FACTORS for k in range(max(0, k0 - 4), k0 + 2)})
    lo = max(c for c in candidates if c <= v)
    hi = min(c for c in candidates if c >= v)
    if lo == hi:
        return lo
    # |ln v - ln lo| <= |ln hi - ln v|  <=>  v^2 <= lo * hi (compared without logs so ties are decided exactly).
    return lo if v * v <= float(lo * hi) else hi


def _round_d_model(x: float) -> int:
    """d_model: friendly, and a multiple of 8 (tensor-core granularity, App. 8.1.1) once it is at least 8.

    8 * friendly_round(x / 8) is still of the form f * 2^k (with k >= 3), so the multiple-of-8 rule costs nothing
    in divisor richness; it only excludes 9 * 2^0, 9 * 2^1, 9 * 2^2 and the like.
    """
    return 8 * friendly_round(x / 8.0) if x >= 8.0 else friendly_round(x)


# --------------------------------------------------------------------------------------------------
# The App. 8.1.4 relations, unrounded
# --------------------------------------------------------------------------------------------------


class ContinuousShape(NamedTuple):
    """The exact (real-valued) solution of the App. 8.1.4 relations at a compute budget, before rounding."""

    d_model: float
    d_ff: float
    layers: float
    experts: float
    params: float
    tokens: float
    compute_flop: float


def _shape_of_width(d_model: float, sparse: bool) -> ContinuousShape:
    """App. 8.1.4 relations as functions of d_model alone.

    Sparse E = 8 sqrt(d_model d_ff / (4 * 12288^2)) is clamped below at 1: below d_model = 1536 the law would ask
    for fewer than one expert, and the sparse model is then simply dense (the clamp keeps T(d_model) continuous
    and increasing, so the solve below stays well posed).
    """
    d_ff = _FF_RATIO * d_model
    width_sq = d_model * d_ff
    layers = _LAYERS_COEFF * width_sq**_LAYERS_EXPONENT
    experts = max(1.0, _SPARSE_EXPERTS_AT_ANCHOR * math.sqrt(width_sq / _SPARSE_ANCHOR_WIDTH_SQ)) if sparse else 1.0
    params = 2.0 * layers * experts * width_sq
    tokens = _CHINCHILLA_TOKENS_PER_PARAM * params
    compute = _FLOP_PER_ACTIVE_PARAM_TOKEN * (params / experts) * tokens
    return ContinuousShape(d_model, d_ff, layers, experts, params, tokens, compute)


def continuous_shape(compute_flop: float, sparse: bool = False) -> ContinuousShape:
    """Solve the App. 8.1.4 relations for the real-valued shape whose training compute is exactly `compute_flop`.

    T(d_model) is a strictly increasing power law (T ~ d_model^5.5 dense, ~ d_model^6.5 sparse), so bisection on
    log d_model converges to the unique root; it is run to float64 resolution.
    """
    t = check_compute(compute_flop)
    lo, hi = 0.0, math.log(1e12)  # d_model in [1, 1e12] covers the accepted compute range with a wide margin
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _shape_of_width(math.exp(mid), sparse).compute_flop < t:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return _shape_of_width(math.exp(0.5 * (lo + hi)), sparse)


# --------------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------------


def infer_workload(compute_flop: float, sparse: bool = False, batch_scaling: str = "paper",
                   budget: str = "exact") -> Workload:
    """The compute-optimal toy model at `compute_flop` under the App. 8.1.4 scaling, rounded to friendly integers.

    Steps (docs/model.md §1):
    1. solve the relations exactly (`continuous_shape`);
    2. round d_model (friendly, multiple of 8), L and E (friendly; E = 1 when dense) independently;
       d_ff = 4 * rounded d_model. For sparse models friendly rounding already gives E >= 2 whenever the law
       gives E > sqrt(2) (the rounding midpoint between 1 and 2), in particular whenever it gives more than 1.5;
    3. batch = the chosen law (`batch_tokens_law`, §6.3.2) at the *requested* compute with the rounded E,
       rounded to E * friendly_round(b / E) so every expert receives the same friendly number of tokens;
    4. tokens: with budget "exact", the whole number of batches (at least one) nearest to T / (6 N_p / E), so
       6 (N_p / E) D = T within half a batch; with budget "paper", D = 20 * (rounded N_p).

    Under "paper" the rounded shape implies a compute 6 (N_p / E) D other than the request. Since T ~ L^2 E d_model^4
    and each rounding moves its value by at most a factor sqrt(6/5) (values >= 8), the dense actual/requested
    ratio lies within (6/5)^(+-3) ~= 1.73; sparse runs add E's rounding factor (<= sqrt(6/5) for E >= 8).
    """
    t = check_compute(compute_flop)
    if batch_scaling not in BATCH_LAWS:
        raise InvalidInput(f"unknown batch scaling law {batch_scaling!r}; accepted: {', '.join(BATCH_LAWS)}")
    if budget not in BUDGETS:
        raise InvalidInput(f"unknown budget rule {budget!r}; accepted: {', '.join(BUDGETS)}")
    exact = continuous_shape(t, sparse)
    d_model = _round_d_model(exact.d_model)
    layers = friendly_round(exact.layers)
    experts = friendly_round(exact.experts) if sparse else 1
    batch_exact = batch_tokens_law(t, experts, batch_scaling)
    batch_tokens = experts * friendly_round(batch_exact / experts)
    d_ff = _FF_RATIO * d_model
    params = 2.0 * layers * experts * d_model * d_ff
    if budget == "exact":
        steps = max(1, round(t / (_FLOP_PER_ACTIVE_PARAM_TOKEN * (params / experts) * batch_tokens)))
        tokens = float(steps * batch_tokens)
        rule = ", tokens for the requested compute"
    else:
        tokens = _CHINCHILLA_TOKENS_PER_PARAM * params
        rule = ""
    return Workload(
        d_model=d_model,
        d_ff=d_ff,
        layers=layers,
        experts=experts,
        batch_tokens=batch_tokens,
        tokens=tokens,
        seq_len=SEQ_LEN_TOKENS,
        requested_compute_flop=t,
        label=f"paper scaling (App. 8.1.4), {'sparse' if sparse else 'dense'}, {batch_scaling} batch law{rule}",
    )


def workload_from_shape(
    d_model: float,
    d_ff: float,
    layers: float,
    experts: float,
    batch_tokens: float,
    tokens: float | None = None,
    *,
    seq_len: int = SEQ_LEN_TOKENS,
    label: str = "explicit shape",
) -> Workload:
    """A workload from an explicit toy-model shape (§2). `tokens` defaults to 20 N_p (Chinchilla, App. 8.1.4).

    The shape arguments must be positive whole numbers; integral floats (`4096.0`, as the CLI parses `4.096e3`) are
    accepted.

    The batch must be a multiple of `experts`: top-1 balanced routing (§2) gives every expert b / E tokens.
    """
    d_model, d_ff, layers, experts, batch_tokens, seq_len = _shape_ints(d_model, d_ff, layers, experts, batch_tokens,
                                                                         seq_len)
    if batch_tokens % experts:
        lower = batch_tokens - batch_tokens % experts
        suggestion = f"e.g. {lower} or {lower + experts}" if lower > 0 else f"e.g. {experts}"
        raise InvalidInput(
            f"batch_tokens {batch_tokens} is not a multiple of experts {experts}: balanced top-1 routing gives every "
            f"expert batch_tokens / experts tokens, so use a multiple of {experts} ({suggestion})"
        )
    params = 2.0 * layers * experts * d_model * d_ff
    d_tokens = _CHINCHILLA_TOKENS_PER_PARAM * params if tokens is None else _finite_positive("tokens", tokens)
    return Workload(
        d_model=d_model,
        d_ff=d_ff,
        layers=layers,
        experts=experts,
        batch_tokens=batch_tokens,
        tokens=d_tokens,
        seq_len=seq_len,
        label=label,
    )


# --------------------------------------------------------------------------------------------------
# Presets: TOML files in models/ (package planner.models) or the user's own file
# --------------------------------------------------------------------------------------------------


TRANSFORMER_KEYS: tuple[str, ...] = (
    "heads", "kv_heads", "head_dim", "ffn", "vocab", "tied_embeddings", "attention", "q_lora_rank", "kv_lora_rank",
    "rope_head_dim", "v_head_dim", "top_k", "expert_d_ff", "shared_experts", "dense_layers", "sliding_window",
    "sliding_window_layers",
)
"""TransformerShape's fields, as preset keys (planner.schema.TransformerShape documents each)."""


def transformer_workload(d_model: Any, d_ff: Any, layers: Any, experts: Any, seq_len: Any, batch_tokens: Any,
                         tokens: Any | None, fields: dict[str, Any], label: str) -> Workload:
    """A real-transformer workload (docs/model.md §1b). `fields` are TransformerShape's (head_dim defaults to
    d_model / heads); `tokens` defaults to 20 x params (Chinchilla). Every bad value is a one-line InvalidInput."""
    d_model, d_ff, layers, experts, batch_tokens, seq_len = _shape_ints(d_model, d_ff, layers, experts, batch_tokens,
                                                                         seq_len)
    fields = dict(fields)
    for key in ("heads", "vocab"):
        if key not in fields:
            raise InvalidInput(f"a transformer needs '{key}'")
    for key, value in fields.items():
        if key not in ("ffn", "attention", "tied_embeddings"):
            fields[key] = _positive_int(key, value) if key in ("heads", "kv_heads", "head_dim", "vocab", "top_k") \
                else _non_negative_int(key, value)
    for key in ("ffn", "attention"):
        if key in fields and not isinstance(fields[key], str):
            raise InvalidInput(f"'{key}' must be a string, got {fields[key]!r}")
    if "tied_embeddings" in fields and not isinstance(fields["tied_embeddings"], bool):
        raise InvalidInput(f"'tied_embeddings' must be true or false, got {fields['tied_embeddings']!r}")
    fields.setdefault("kv_heads", fields["heads"])
    if "head_dim" not in fields:
        if d_model % fields["heads"]:
            raise InvalidInput(f"heads {fields['heads']} does not divide d_model {d_model}: give head_dim")
        fields["head_dim"] = d_model // fields["heads"]
    if batch_tokens % seq_len:
        raise InvalidInput(f"batch of {batch_tokens} tokens is not a whole number of {seq_len}-token sequences")
    try:
        shape = TransformerShape(**fields)
        wl = Workload(d_model=d_model, d_ff=d_ff, layers=layers, experts=experts, batch_tokens=batch_tokens,
                      tokens=1.0, seq_len=seq_len, label=label, transformer=shape)
        d_tokens = _CHINCHILLA_TOKENS_PER_PARAM * wl.params if tokens is None else _finite_positive("tokens", tokens)
        return wl.model_copy(update={"tokens": d_tokens})
    except ValidationError as exc:
        raise InvalidInput(validation_message(exc, strip_kind=True)) from None


PRESET_KEYS: tuple[str, ...] = (
    "description", "source", "note", "kind", "d_model", "d_ff", "layers", "experts", "batch_tokens",
    "batch_sequences", "tokens", "seq_len", "published_params", "published_active_params", "params_source",
    *TRANSFORMER_KEYS,
)
_REQUIRED_PRESET_KEYS = ("d_model", "d_ff", "layers")


def _preset_dir():
    return resources.files("planner.models")


def model_preset_names() -> list[str]:
    """Names of the shipped presets (the stems of `models/*.toml`), sorted."""
    return sorted(p.name[: -len(".toml")] for p in _preset_dir().iterdir() if p.name.endswith(".toml"))


def parse_model_preset(doc: dict[str, Any], name: str, origin: str, require_source: bool = False) -> ModelPreset:
    """Validate a parsed preset document; every problem is an InvalidInput prefixed with `origin`."""
    for key in doc:
        if key not in PRESET_KEYS:
            close = difflib.get_close_matches(key, PRESET_KEYS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f"; accepted keys: {', '.join(PRESET_KEYS)}"
            raise InvalidInput(f"{origin}: unknown key '{key}'{hint}")
    missing = [k for k in _REQUIRED_PRESET_KEYS if k not in doc]
    if missing:
        raise InvalidInput(f"{origin}: missing required key(s) {', '.join(missing)}")
    for key in ("description", "source", "note", "params_source"):
        if key in doc and not isinstance(doc[key], str):
            raise InvalidInput(f"{origin}: '{key}' must be a string, got {doc[key]!r}")
    if require_source and not (doc.get("source", "").strip() and doc.get("description", "").strip()):
        raise InvalidInput(f"{origin}: a shipped preset needs a non-empty 'description' and 'source'")
    kind = doc.get("kind", "toy-mlp")
    if kind not in ("toy-mlp", "transformer"):
        raise InvalidInput(f"{origin}: 'kind' must be 'toy-mlp' or 'transformer', got {kind!r}")
    if ("batch_tokens" in doc) == ("batch_sequences" in doc):
        raise InvalidInput(f"{origin}: give exactly one of 'batch_tokens' and 'batch_sequences'")
    seq_len = doc.get("seq_len", SEQ_LEN_TOKENS)
    try:
        if "batch_sequences" in doc:
            batch = _positive_int("batch_sequences", doc["batch_sequences"]) * _positive_int("seq_len", seq_len)
        else:
            batch = doc["batch_tokens"]
        if kind == "transformer":
            fields = {k: doc[k] for k in TRANSFORMER_KEYS if k in doc}
            workload = transformer_workload(doc["d_model"], doc["d_ff"], doc["layers"], doc.get("experts", 1),
                                            seq_len, batch, doc.get("tokens"), fields, label=f"preset {name}")
        else:
            extra = [k for k in TRANSFORMER_KEYS if k in doc]
            if extra:
                raise InvalidInput(f"'{extra[0]}' needs kind = \"transformer\"")
            workload = workload_from_shape(doc["d_model"], doc["d_ff"], doc["layers"], doc.get("experts", 1), batch,
                                           doc.get("tokens"), seq_len=seq_len, label=f"preset {name}")
        published = {k: _finite_positive(k, doc[k]) for k in ("published_params", "published_active_params")
                     if k in doc}
    except InvalidInput as exc:
        raise InvalidInput(f"{origin}: {exc}") from None
    return ModelPreset(
        name=name,
        description=doc.get("description", ""),
        source=doc.get("source", ""),
        note=doc.get("note", ""),
        workload=workload,
        params_source=str(doc.get("params_source", "")),
        **published,
    )


def _read_toml(text: str, origin: str) -> dict[str, Any]:
    return parse_toml(text, f"'{origin}'")  # malformed, too deep or too many digits: one InvalidInput


@cache
def _shipped_preset(name: str) -> ModelPreset:
    origin = f"models/{name}.toml"
    text = _preset_dir().joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return parse_model_preset(_read_toml(text, origin), name, origin, require_source=True)


def read_model_preset(name_or_path: str | Path) -> ModelPreset:
    """A shipped preset by name (see `model_preset_names()`) or a user TOML file by path, with its metadata."""
    text_arg = str(name_or_path)
    if isinstance(name_or_path, Path) or text_arg.endswith(".toml") or "/" in text_arg or "\\" in text_arg:
        path = Path(text_arg)
        text = read_text_file(path, "model preset file", MAX_TOML_BYTES)
        return parse_model_preset(_read_toml(text, str(path)), path.stem, str(path))
    key = text_arg.strip().lower()
    names = model_preset_names()
    if key not in names:
        close = difflib.get_close_matches(key, names, n=3, cutoff=0.5) or [n for n in names if key and key in n][:3]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InvalidInput(f"unknown model preset '{name_or_path}'{hint} (known: {', '.join(names)})")
    return _shipped_preset(key)


def load_model_preset(name_or_path: str | Path) -> Workload:
    """The validated Workload of a shipped preset (by name) or of a user TOML file (by path)."""
    return read_model_preset(name_or_path).workload
