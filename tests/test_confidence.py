"""--confidence P (planner.confidence, planner.uncertainty): spreads as data, the sample points, the hand-checkable
propagation of the model's error, the must-show, and bad input."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import invoke

from planner import api
from planner.confidence import confidence, draw, scrambled_halton
from planner.errors import InvalidInput
from planner.schema import Spread
from planner.schema.request import PlanRequest
from planner.uncertainty import ModelError, model_error

ROOT = Path(__file__).resolve().parent.parent


def test_spread_quantiles_by_hand():
    # uniform on [0.8, 1.2]: a quarter of the way is 0.9
    assert Spread(low=0.8, high=1.2, why="t").factor(0.25) == pytest.approx(0.9)
    # loguniform on [0.5, 2]: the median is the geometric mean, 1
    assert Spread(low=0.5, high=2.0, shape="loguniform", why="t").factor(0.5) == pytest.approx(1.0)
    # triangular on [0.5, 2] with mode 1: F(1) = (1 - 0.5) / (2 - 0.5) = 1/3, and F(0.75) = 0.25^2 / (1.5 x 0.5) = 1/12
    tri = Spread(low=0.5, high=2.0, shape="triangular", why="t")
    assert tri.factor(1 / 3) == pytest.approx(1.0)
    assert tri.factor(1 / 12) == pytest.approx(0.75)
    # F(1.5) = 1 - 0.5^2 / (1.5 x 1) = 5/6
    assert tri.factor(5 / 6) == pytest.approx(1.5)


def test_spread_must_bracket_the_value():
    with pytest.raises(ValueError):
        Spread(low=1.1, high=1.3, why="t")


def test_shipped_spreads_load_into_the_documents():
    hw = api.resolve("h100", "realistic")
    assert hw.spreads["gpu.l2_GBps"].low == 0.8
    assert hw.profile.spreads["memory.fragmentation"].high == 1.875
    fm = api.failure_model("default")
    assert fm.spreads["restart_minutes"].shape == "loguniform"


def test_model_error_file_matches_the_held_out_table():
    """validation/model_error.toml holds the held-out ratios docs/validation.md lists run by run (both generated from
    the same validate rows), grouped by precision."""
    doc = tomllib.loads((ROOT / "validation" / "model_error.toml").read_text())
    table = {}
    for line in (ROOT / "docs" / "validation.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 11 and cells[2] == "held-out":
            table[cells[1]] = (cells[6], float(cells[10]))
    for group in ("bf16", "low_precision"):
        g = doc[group]
        assert len(g["ids"]) == len(g["factors"]) == g["runs"]
        for run_id, factor in zip(g["ids"], g["factors"]):
            precision, ratio = table[run_id]
            assert precision in g["precisions"]
            assert factor == pytest.approx(ratio, abs=0.006)  # the table rounds to 2 decimals
    assert doc["bf16"]["runs"] + doc["low_precision"]["runs"] == len(table)


def test_model_error_empirical_quantile_by_hand():
    me = ModelError("t", (1.0, 1.2), "t")
    # plotting positions 0.25 and 0.75: flat outside, linear between
    assert me.factor(0.1) == 1.0
    assert me.factor(0.5) == pytest.approx(1.1)
    assert me.factor(0.9) == 1.2
    assert model_error("paper", "bf16") is None
    assert model_error("realistic", "fp8").group == "low_precision"


def test_scrambled_halton_is_seeded_and_stratified():
    a, b = scrambled_halton(64, 5, 7), scrambled_halton(64, 5, 7)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, scrambled_halton(64, 5, 8))
    assert ((a > 0) & (a < 1)).all()
    # base 2: 64 points, one in each interval [j/64, (j+1)/64)
    assert sorted(np.floor(a[:, 0] * 64).astype(int).tolist()) == list(range(64))
    # base 3: 27 points, one in each [j/27, (j+1)/27)
    c = scrambled_halton(27, 2, 0)
    assert sorted(np.floor(c[:, 1] * 27).astype(int).tolist()) == list(range(27))


REALISTIC = dict(compute_flop=1e26, gpu="h100", days=90, profile="realistic")


def test_same_seed_same_samples_and_user_sets_are_fixed():
    plan = api.plan(**REALISTIC)
    rows, me, sets1, f1 = draw(plan, REALISTIC, 16, 3)
    _, _, sets2, f2 = draw(plan, REALISTIC, 16, 3)
    assert (sets1, f1) == (sets2, f2)
    assert draw(plan, REALISTIC, 16, 4)[2] != sets1
    names = [r.input for r, _, _ in rows]
    assert "goodput.restart_minutes" in names and "profile.gemm.sustained_factor" not in names  # fitted: in me
    assert me is not None and me.group == "bf16"
    fixed = {**REALISTIC, "overrides": ["goodput.restart_minutes=10"]}
    assert "goodput.restart_minutes" not in [r.input for r, _, _ in draw(plan, fixed, 4, 3)[0]]


HAND = dict(compute_flop=1e23, gpu="h100", days=30)


@pytest.mark.slow  # about 6 s: 8 searches
def test_only_the_model_error_uncertain_by_hand():
    """Only the step-time factor is uncertain, with a known distribution: the empirical distribution of {1.0, 1.2}
    (1.0 below u = 0.25, 1.2 above u = 0.75, linear between). With 8 points, one falls in each [j/8, (j+1)/8) in
    dimension 0, so the smallest factor (P10: the ceil(0.1 x 8) = 1st) is 1.0, the 8th (P90) is 1.2 and the 4th (P50)
    lies in [1 + 0.2 x (2 x 3/8 - 0.5), 1.1) = [1.05, 1.1): the days on the chosen cluster are its point days times
    those factors."""
    point = api.plan(**HAND)
    me = ModelError("hand", (1.0, 1.2), "hand")
    c = confidence(point, HAND, 0.9, samples=8, seed=1, jobs=1, include=["step-time model"], model=me)
    assert [u.input for u in c.inputs] == ["step-time model"]
    assert c.gpus == c.gpus_p90 == api.plan(**{**HAND, "days": 30 / 1.2}).gpus  # the slowest samples must meet
    d = api.plan(**{**HAND, "days": None, "gpus": c.gpus}).wall_clock_days
    assert c.days_p10 == pytest.approx(d * 1.0, rel=1e-9)
    assert c.days_p90 == pytest.approx(d * 1.2, rel=1e-9)
    assert d * 1.05 * (1 - 1e-9) <= c.days_p50 < d * 1.1
    assert c.days_p90 <= 30 * (1 + 1e-9) and c.met >= 0.9
    # P50: the 4th smallest factor, in [1.05, 1.1), decides
    assert api.plan(**{**HAND, "days": 30 / 1.05}).gpus <= c.gpus_p50 <= api.plan(**{**HAND, "days": 30 / 1.1}).gpus
    assert c.gpus_p50 <= c.gpus


@pytest.mark.slow
def test_must_show_more_gpus_for_more_confidence_and_reproducible():
    plan = api.plan(**REALISTIC)
    c50 = confidence(plan, REALISTIC, 0.5, samples=16, seed=0)
    c90 = confidence(plan, REALISTIC, 0.9, samples=16, seed=0)
    assert c90.gpus is not None and c50.gpus is not None and c90.gpus > c50.gpus
    assert c90.days_p10 <= c90.days_p50 <= c90.days_p90 <= 90 * (1 + 1e-9)
    assert {u.input for u in c90.inputs} >= {"step-time model", "goodput.restart_minutes", "gpu.l2_GBps"}
    again = confidence(plan, REALISTIC, 0.9, samples=16, seed=0)
    assert again.model_dump() == c90.model_dump()


@pytest.mark.parametrize("bad", ["0", "1.5", "x", "1", "-0.2"])
def test_bad_confidence_is_one_line_exit_2(capsys, bad):
    code, out, err = invoke(capsys, ["plan", "--compute", "1e25", "--confidence", bad])
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "--confidence" in err and "Traceback" not in err


def test_confidence_with_gpus_or_bad_samples_is_refused(capsys):
    code, _, err = invoke(capsys, ["plan", "--compute", "1e25", "--confidence", "0.9", "--gpus", "64"])
    assert code == 2 and "drop --gpus" in err
    code, _, err = invoke(capsys, ["plan", "--compute", "1e25", "--confidence", "0.9", "--samples", "1"])
    assert code == 2 and "--samples" in err
    with pytest.raises(InvalidInput):
        confidence(api.plan(**HAND), HAND, math.nan)


def test_sensitivity_reuses_the_layout_only_where_a_re_plan_agrees():
    """--sensitivity answers a memory input or the restart time moved up by re-pricing the plan's layout
    (planner.sensitivity.ONLY_REMOVES): each such answer equals the re-plan it replaces."""
    from planner.sensitivity import _fmt, _move, _reused, candidates

    kw = dict(compute_flop=1e24, gpu="h100", days=30, profile="realistic")
    plan = api.plan(**kw)
    request = PlanRequest(**kw)
    reused = 0
    for field, _why, value, cap, (_lo, hi) in candidates("h100", "realistic", "default", plan):
        text = f"{field}={_fmt(_move(field, value, hi, cap))}"
        got = _reused(plan, request, field, hi, [text])
        if field.startswith(("profile.memory.", "goodput.restart_minutes")):
            again = api.plan(**{**kw, "overrides": [text]})
            if got is not None:
                reused += 1
                assert got[0] == again.gpus
                assert got[1] == pytest.approx(again.wall_clock_days, rel=1e-12)
        else:
            assert got is None  # a move that can change step times is always searched
    assert reused >= 3
    # a move that takes the plan's own layout away (70 GB of an 80 GB H100 kept free) is searched, not re-priced
    total_gb = plan.memory.total_bytes / 1e9
    assert total_gb + 70 > 80
    assert _reused(plan, request, "profile.memory.headroom_GB", 35.0, ["profile.memory.headroom_GB=70"]) is None
