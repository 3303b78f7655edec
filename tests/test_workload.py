"""Workload inference (paper App. 8.1.4, §6.3.2), friendly rounding, explicit shapes and presets.

Expected numbers are derived by hand in the comments (or from closed forms written here), never read back from
`planner.workload`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.errors import InvalidInput
from planner.workload import (
    batch_tokens_law,
    continuous_shape,
    friendly_round,
    infer_workload,
    load_model_preset,
    model_preset_names,
    read_model_preset,
    workload_from_shape,
)

# Largest log-space step between consecutive friendly numbers >= 8 is 10 -> 12 (octave 8, 9, 10, 12, 14, 16),
# so rounding a value >= 8 moves it by at most a factor sqrt(6/5).
HALF_GAP = math.sqrt(6 / 5)


def is_friendly(n: int) -> bool:
    """n = f * 2^k with f in {1, 3, 5, 7, 9}, k >= 0."""
    if n < 1:
        return False
    while n % 2 == 0:
        n //= 2
    return n in (1, 3, 5, 7, 9)


# --------------------------------------------------------------------------------------------------
# Batch laws
# --------------------------------------------------------------------------------------------------


def test_paper_batch_law_at_anchor_is_gpt3_batch():
    # (3e23 / 3e23)^(1/6) = 1: dense gives 2^22 exactly, E = 4 gives 2^22 * sqrt(4) = 2^23.
    assert batch_tokens_law(3e23, 1, "paper") == 2**22
    assert batch_tokens_law(3e23, 4, "paper") == 2**23


def test_paper_batch_law_scales_as_sixth_root():
    # 64x the compute -> 64^(1/6) = 2x the batch.
    assert batch_tokens_law(64 * 3e23, 1, "paper") == pytest.approx(2**23, rel=1e-12)
    # 1e28: (1e28 / 3e23)^(1/6) = 33333.3^(1/6) = e^(10.41431 / 6) = 5.6727 -> 2.3793e7 tokens.
    assert batch_tokens_law(1e28, 1, "paper") == pytest.approx(2.3793e7, rel=1e-4)


def test_deepseek_batch_law_by_hand():
    # T = 1e24: T^0.3271 = 10^(24 * 0.3271) = 10^7.8504 = 7.0860e7; * 0.2920 = 2.0691e7 tokens.
    assert batch_tokens_law(1e24, 1, "deepseek") == pytest.approx(2.0691e7, rel=1e-4)
    # E = 16 multiplies by sqrt(16) = 4.
    assert batch_tokens_law(1e24, 16, "deepseek") == pytest.approx(4 * 2.0691e7, rel=1e-4)


def test_fixed_batch_law_ignores_compute_and_experts():
    for t, e in ((1e20, 1), (1e28, 16), (1e35, 64)):
        assert batch_tokens_law(t, e, "fixed") == 2**22


@pytest.mark.parametrize("args", [(0, 1, "paper"), (-1e24, 1, "paper"), (math.nan, 1, "paper"),
                                  (1e24, 0, "paper"), (1e24, 0.5, "paper"), (1e24, 1, "linear")])
def test_batch_law_rejects_bad_input(args):
    with pytest.raises(InvalidInput):
        batch_tokens_law(*args)


# --------------------------------------------------------------------------------------------------
# Friendly rounding
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, expected",
    [
        (0.3, 1),         # below 1 -> 1 (k >= 0)
        (1, 1),
        (2, 2),
        (6, 6),           # 3 * 2
        (7, 7),
        (10.9, 10),       # 10.9^2 = 118.81 < 10 * 12 = 120
        (11, 12),         # 121 > 120
        (13, 14),         # 169 > 12 * 14 = 168
        (17, 18),         # 289 > 16 * 18 = 288
        (100, 96),        # 10000 < 96 * 112 = 10752
        (1000, 1024),     # 1e6 > 896 * 1024 = 917504
        (1500, 1536),     # 2.25e6 > 1280 * 1536 = 1966080
        (3.2e6, 3145728),  # GPT-3's 3.2M batch: 3 * 2^20 (3.2e6^2 = 1.024e13 < 3 * 2^20 * 7 * 2^19 = 1.1545e13)
        (2**40, 2**40),
    ],
)
def test_friendly_round_values(x, expected):
    assert friendly_round(x) == expected
    assert is_friendly(expected)


def test_every_integer_up_to_8_is_friendly():
    # 1, 2, 3, 4, 5, 6 = 3 * 2, 7, 8 = 2^3
    assert [friendly_round(n) for n in range(1, 9)] == list(range(1, 9))


def test_friendly_round_near_tie():
    # The log-space midpoint of 8 and 9 is sqrt(72); just below goes down, just above goes up.
    assert friendly_round(math.sqrt(72) * (1 - 1e-12)) == 8
    assert friendly_round(math.sqrt(72) * (1 + 1e-12)) == 9


def test_friendly_round_always_friendly_and_close():
    for x in np.logspace(math.log10(8), 12, 500):  # the sqrt(6/5) bound holds from 8 up
        r = friendly_round(float(x))
        assert is_friendly(r)
        assert 1 / HALF_GAP <= r / x <= HALF_GAP * (1 + 1e-12)


@pytest.mark.parametrize("bad", [0, -3, math.nan, math.inf, "8", True])
def test_friendly_round_rejects_bad_input(bad):
    with pytest.raises(InvalidInput):
        friendly_round(bad)


# --------------------------------------------------------------------------------------------------
# Unrounded solution of App. 8.1.4
# --------------------------------------------------------------------------------------------------

# With d_ff = 4 d: d * d_ff = 4 d^2, L = 0.10056 (4 d^2)^0.3751 = 0.10056 * 4^0.3751 * d^0.7502, and the MLP
# parameters per expert are 2 L * 4 d^2 = C d^2.7502 with C = 8 * 0.10056 * 4^0.3751.
C = 8 * 0.10056 * 4**0.3751


def test_continuous_dense_closed_form():
    t = 1e28
    # Dense: T = 6 N_p * 20 N_p = 120 N_p^2, N_p = sqrt(1e28 / 120) = 9.1287e12; N_p = C d^2.7502.
    n_p = math.sqrt(t / 120)
    assert n_p == pytest.approx(9.1287e12, rel=1e-4)
    d = (n_p / C) ** (1 / 2.7502)
    s = continuous_shape(t, sparse=False)
    assert s.d_model == pytest.approx(d, rel=1e-9)
    assert s.d_ff == pytest.approx(4 * d, rel=1e-9)
    assert s.layers == pytest.approx(0.10056 * (4 * d * d) ** 0.3751, rel=1e-9)
    assert s.experts == 1
    assert s.params == pytest.approx(n_p, rel=1e-9)
    assert s.tokens == pytest.approx(20 * n_p, rel=1e-9)
    assert s.compute_flop == pytest.approx(t, rel=1e-9)


def test_continuous_sparse_closed_form():
    t = 1e28
    # Sparse: E = 8 sqrt(4 d^2 / (4 * 12288^2)) = d / 1536, N_p = E * C d^2.7502,
    # T = 120 N_p^2 / E = 120 C^2 d^6.5004 / 1536  ->  d = (1536 T / (120 C^2))^(1 / 6.5004).
    d = (1536 * t / (120 * C**2)) ** (1 / 6.5004)
    e = d / 1536
    s = continuous_shape(t, sparse=True)
    assert s.d_model == pytest.approx(d, rel=1e-9)
    assert s.experts == pytest.approx(e, rel=1e-9)
    assert s.layers == pytest.approx(0.10056 * (4 * d * d) ** 0.3751, rel=1e-9)
    # N_p = sqrt(T E / 120) for the unrounded model.
    assert s.params == pytest.approx(math.sqrt(t * e / 120), rel=1e-9)
    assert s.params == pytest.approx(2 * s.layers * s.experts * s.d_model * s.d_ff, rel=1e-12)
    assert s.compute_flop == pytest.approx(t, rel=1e-9)


# --------------------------------------------------------------------------------------------------
# Rounded workloads
# --------------------------------------------------------------------------------------------------

# T ~ L^2 E d^4 (T = 120 N_p^2 / E, N_p = 8 L E d^2), each rounding of a value >= 8 moves it by <= sqrt(6/5):
DENSE_COMPUTE_BOUND = HALF_GAP ** (2 + 4)           # (6/5)^3 ~= 1.728
SPARSE_COMPUTE_BOUND_E8 = HALF_GAP ** (2 + 4 + 1)   # E >= 8: (6/5)^3.5 ~= 1.893
SPARSE_COMPUTE_BOUND = HALF_GAP ** 6 * math.sqrt(2)  # any E >= 1 (1 -> 2 is the widest gap): ~= 2.444


def check_friendly_shape(w, sparse: bool):
    assert is_friendly(w.d_model) and w.d_model % 8 == 0
    assert w.d_ff == 4 * w.d_model
    assert is_friendly(w.layers)
    assert is_friendly(w.experts)
    if not sparse:
        assert w.experts == 1
    assert w.batch_tokens % w.experts == 0 and is_friendly(w.batch_tokens // w.experts)
    n_p = 2 * w.layers * w.experts * w.d_model * w.d_ff
    assert w.params == n_p
    assert w.tokens == 20 * n_p
    assert w.compute_flop == pytest.approx(6 * (n_p / w.experts) * 20 * n_p, rel=1e-12)


def test_infer_1e28_dense_by_hand():
    w = infer_workload(1e28, budget="paper")
    check_friendly_shape(w, sparse=False)
    # Unrounded (closed form above): d = 46214, L = 534.28.
    # d / 8 = 5776.75, between 5120 and 6144: 5776.75^2 = 3.337e7 > 5120 * 6144 = 3.146e7 -> 6144 -> d = 49152.
    # L = 534.28, between 512 and 576: 534.28^2 = 2.855e5 < 512 * 576 = 2.949e5 -> 512.
    # b = 2.3793e7 (above), between 5 * 2^22 and 3 * 2^23: 5.661e14 > 5.278e14 -> 3 * 2^23 = 25165824.
    assert (w.d_model, w.d_ff, w.layers, w.experts, w.batch_tokens) == (49152, 196608, 512, 1, 25165824)
    # N_p = 2 * 512 * 49152 * 196608 = 9.8956e12; D = 20 N_p; T = 120 N_p^2 = 1.1751e28.
    assert w.params == 2 * 512 * 49152 * 196608
    assert w.compute_flop == pytest.approx(1.1751e28, rel=1e-4)
    assert w.requested_compute_flop == 1e28
    assert w.seq_len == 2048
    assert "dense" in w.label and "8.1.4" in w.label and "paper batch law" in w.label


def test_infer_1e28_sparse_by_hand():
    w = infer_workload(1e28, sparse=True, budget="paper")
    check_friendly_shape(w, sparse=True)
    # Unrounded: d = 27374.4, L = 360.71, E = d / 1536 = 17.822.
    # d / 8 = 3421.8, between 3072 and 3584: 1.1709e7 > 1.1010e7 -> 3584 -> d = 28672.
    # L = 360.71, between 320 and 384: 1.3011e5 > 1.2288e5 -> 384.   E = 17.822 -> 18 (317.6 > 16 * 18 = 288).
    # b = 2^22 * sqrt(18) * 5.6727 = 1.00946e8; b / 18 = 5.6081e6, between 5 * 2^20 and 3 * 2^21:
    #   3.1451e13 < 3.2985e13 -> 5 * 2^20 = 5242880 -> batch = 18 * 5242880 = 94371840.
    assert (w.d_model, w.layers, w.experts, w.batch_tokens) == (28672, 384, 18, 94371840)
    assert w.experts >= 2
    assert "sparse" in w.label
    assert 1 / SPARSE_COMPUTE_BOUND_E8 <= w.compute_flop / 1e28 <= SPARSE_COMPUTE_BOUND_E8


def test_batch_law_choice_changes_only_the_batch():
    base = infer_workload(1e28, budget="paper")
    ds = infer_workload(1e28, batch_scaling="deepseek", budget="paper")
    fx = infer_workload(1e28, batch_scaling="fixed", budget="paper")
    for w in (ds, fx):
        assert (w.d_model, w.layers, w.experts, w.tokens) == (base.d_model, base.layers, base.experts, base.tokens)
    assert fx.batch_tokens == 2**22
    # DeepSeek at 1e28: 0.2920 * 10^(28 * 0.3271) = 0.2920 * 10^9.1588 = 4.2090e8; friendly neighbours
    # 3 * 2^27 = 4.0265e8 and 7 * 2^26 = 4.6976e8: 4.2090e8^2 = 1.7716e17 < 4.0265e8 * 4.6976e8 = 1.8915e17
    # -> 3 * 2^27 = 402653184.
    assert batch_tokens_law(1e28, 1, "deepseek") == pytest.approx(4.2090e8, rel=1e-4)
    assert ds.batch_tokens == 3 * 2**27
    assert "deepseek batch law" in ds.label


@pytest.mark.parametrize("sparse", [False, True])
def test_actual_compute_within_rounding_of_request(sparse):
    bound = SPARSE_COMPUTE_BOUND if sparse else DENSE_COMPUTE_BOUND
    for t in np.logspace(18, 40, 221):
        w = infer_workload(float(t), sparse=sparse, budget="paper")
        check_friendly_shape(w, sparse)
        ratio = w.compute_flop / t
        assert 1 / bound <= ratio <= bound, (t, ratio)
        if w.experts >= 8:
            assert 1 / SPARSE_COMPUTE_BOUND_E8 <= ratio <= SPARSE_COMPUTE_BOUND_E8


@pytest.mark.parametrize("law", ["paper", "deepseek", "fixed"])
@pytest.mark.parametrize("sparse", [False, True])
def test_monotone_in_compute(sparse, law):
    prev, prev_batch = None, 0
    for t in np.logspace(22, 32, 201):
        w = infer_workload(float(t), sparse=sparse, batch_scaling=law, budget="paper")
        cur = (w.d_model, w.layers, w.experts, w.params, w.tokens)
        if prev is not None:
            assert all(c >= p for c, p in zip(cur, prev)), (t, prev, cur)
            if not sparse:
                assert w.batch_tokens >= prev_batch
        prev, prev_batch = cur, w.batch_tokens
        # The batch is the law's value up to the rounding of b / E (a value >= 8 here, so within sqrt(6/5));
        # for sparse runs it may dip slightly where E steps up, but never by more than that rounding.
        exact = batch_tokens_law(float(t), w.experts, law)
        assert 1 / HALF_GAP <= w.batch_tokens / exact <= HALF_GAP


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("compute", [1e24, 1e25, 1e26, 1e28, 1e29])
def test_exact_budget_trains_the_request(compute, sparse):
    """The issue's cases: the default budget trains the compute asked for within 0.5 %, in whole optimizer steps of
    the same rounded shape and batch the paper's budget uses."""
    w = infer_workload(compute, sparse=sparse)
    paper = infer_workload(compute, sparse=sparse, budget="paper")
    assert (w.d_model, w.d_ff, w.layers, w.experts, w.batch_tokens) == \
        (paper.d_model, paper.d_ff, paper.layers, paper.experts, paper.batch_tokens)
    assert w.tokens % w.batch_tokens == 0
    # By hand: 6 N_a D = T with D rounded to the nearest whole batch, so |trained - T| <= 3 N_a b.
    assert abs(w.compute_flop - compute) <= 3.0 * w.active_params * w.batch_tokens
    assert w.compute_flop / compute == pytest.approx(1.0, abs=0.005)
    assert "tokens for the requested compute" in w.label


def test_exact_budget_differs_where_the_paper_rounding_moved_the_compute():
    """At 1e28 dense the paper's budget trains 1.1751e28 (hand calculation in test_infer_1e28_dense_by_hand): the
    exact budget trains 1e28 on the same shape, so it takes 1/1.1751 of the paper budget's tokens."""
    w, paper = infer_workload(1e28), infer_workload(1e28, budget="paper")
    assert w.tokens / paper.tokens == pytest.approx(1 / 1.1751, rel=1e-4)


def test_infer_rejects_unknown_budget():
    with pytest.raises(InvalidInput, match="exact, paper"):
        infer_workload(1e28, budget="chinchilla")


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, -math.inf, 1e60, 1e17, "1e28", None, True])
def test_infer_rejects_bad_compute(bad):
    with pytest.raises(InvalidInput) as exc:
        infer_workload(bad)
    assert "compute" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_infer_out_of_range_message_names_value_and_range():
    with pytest.raises(InvalidInput, match=r"1e\+60.*1e\+18 to 1e\+40"):
        infer_workload(1e60)


def test_infer_rejects_unknown_batch_law():
    with pytest.raises(InvalidInput, match="paper, deepseek, fixed"):
        infer_workload(1e28, batch_scaling="chinchilla")


# --------------------------------------------------------------------------------------------------
# Explicit shapes
# --------------------------------------------------------------------------------------------------


def test_workload_from_shape_defaults_to_chinchilla_tokens():
    # N_p = 2 * 2 * 2 * 8 * 32 = 2048 (active 1024); D = 20 * 2048 = 40960; T = 6 * 1024 * 40960 = 251658240.
    w = workload_from_shape(8, 32, 2, 2, 16)
    assert w.params == 2048 and w.active_params == 1024
    assert w.tokens == 40960
    assert w.compute_flop == 251658240
    assert w.steps == 40960 / 16
    assert w.requested_compute_flop is None


def test_workload_from_shape_explicit_tokens():
    w = workload_from_shape(12288, 49152, 96, 1, 3145728, 300e9)
    # 6 * 2 * 96 * 12288 * 49152 * 300e9 = 6 * 1.15964e11 * 3e11 = 2.08735e23.
    assert w.compute_flop == pytest.approx(2.08735e23, rel=1e-5)


def test_workload_from_shape_batch_must_divide_among_experts():
    with pytest.raises(InvalidInput, match=r"batch_tokens 10 is not a multiple of experts 4.*8 or 12"):
        workload_from_shape(8, 32, 2, 4, 10)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(d_model=0), "d_model"),
        (dict(d_ff=-32), "d_ff"),
        (dict(layers=2.5), "layers"),
        (dict(experts=True), "experts"),
        (dict(batch_tokens=math.nan), "batch_tokens"),
        (dict(tokens=0.0), "tokens"),
        (dict(tokens=math.inf), "tokens"),
    ],
)
def test_workload_from_shape_rejects_bad_values(kwargs, name):
    args = dict(d_model=8, d_ff=32, layers=2, experts=1, batch_tokens=16)
    args.update(kwargs)
    with pytest.raises(InvalidInput, match=name):
        workload_from_shape(**args)


# --------------------------------------------------------------------------------------------------
# Presets
# --------------------------------------------------------------------------------------------------

SHIPPED = ("paper-1e28-dense", "falcon-180b-mlp", "gpt3-175b-mlp", "mixtral-like-sparse")


def test_shipped_presets_listed():
    assert set(SHIPPED) <= set(model_preset_names())


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_presets_load(name):
    p = read_model_preset(name)
    w = p.workload
    assert p.description.strip() and p.source.strip()
    assert "attention" in p.note.lower() and "folded" in p.note.lower()
    for v in (w.d_model, w.d_ff, w.layers, w.experts, w.batch_tokens, w.tokens, w.seq_len):
        assert v > 0
    assert w.batch_tokens % w.experts == 0
    assert load_model_preset(name) == w


def test_preset_values_by_hand():
    gpt3 = load_model_preset("gpt3-175b-mlp")
    assert (gpt3.d_model, gpt3.d_ff, gpt3.layers, gpt3.experts) == (12288, 49152, 96, 1)
    assert gpt3.batch_tokens == 3 * 2**20 and gpt3.tokens == 300e9
    falcon = load_model_preset("falcon-180b-mlp")
    assert (falcon.d_model, falcon.d_ff, falcon.layers, falcon.batch_tokens) == (12288, 4 * 12288, 80, 2**22)
    mix = load_model_preset("mixtral-like-sparse")
    assert (mix.d_model, mix.d_ff, mix.layers, mix.experts) == (4096, 14336, 32, 8)
    # Chinchilla default: N_p = 2 * 32 * 8 * 4096 * 14336 = 30064771072; D = 20 N_p.
    assert mix.params == 30064771072 and mix.tokens == 20 * 30064771072


def test_paper_preset_matches_inference():
    preset = load_model_preset("paper-1e28-dense")
    inferred = infer_workload(1e28, budget="paper")
    fields = ("d_model", "d_ff", "layers", "experts", "batch_tokens", "tokens", "seq_len")
    assert {f: getattr(preset, f) for f in fields} == {f: getattr(inferred, f) for f in fields}


def test_unknown_preset_name_suggests_close_match():
    with pytest.raises(InvalidInput, match="did you mean.*gpt3-175b-mlp"):
        load_model_preset("gpt3-175b-ml")


GOOD_TOML = 'description = "tiny"\nd_model = 64\nd_ff = 256\nlayers = 4\nexperts = 2\nbatch_tokens = 1024\n'


def test_user_preset_file(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(GOOD_TOML)
    w = load_model_preset(str(path))
    # N_p = 2 * 4 * 2 * 64 * 256 = 262144; D = 20 N_p.
    assert w.params == 262144 and w.tokens == 20 * 262144
    assert read_model_preset(path).name == "tiny"


def test_malformed_preset_rejected(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("d_model = 64\nd_ff = [256\n")
    with pytest.raises(InvalidInput, match="malformed TOML"):
        load_model_preset(str(path))


def test_unknown_key_rejected_with_hint(tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text(GOOD_TOML.replace("layers", "layer"))
    with pytest.raises(InvalidInput, match="unknown key 'layer'.*did you mean 'layers'"):
        load_model_preset(str(path))


def test_preset_bad_value_names_file_and_key(tmp_path):
    path = tmp_path / "odd.toml"
    path.write_text(GOOD_TOML.replace("batch_tokens = 1024", "batch_tokens = 1023"))
    with pytest.raises(InvalidInput, match=r"odd\.toml.*batch_tokens 1023"):
        load_model_preset(str(path))
    path.write_text(GOOD_TOML.replace("d_model = 64\n", ""))
    with pytest.raises(InvalidInput, match="missing required key.*d_model"):
        load_model_preset(str(path))


def test_missing_preset_file(tmp_path):
    with pytest.raises(InvalidInput, match="cannot read"):
        load_model_preset(str(tmp_path / "nope.toml"))
