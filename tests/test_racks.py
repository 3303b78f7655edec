"""Network levels used in whole units (docs/model.md, "The search space"): GB200/GB300 NVL72 jobs take 4-GPU
compute trays, at most 16 of a rack's 18 (64 of 72 GPUs), the same number in every rack; the plan counts the racks
bought and the spare GPUs in them.

The rack arithmetic is checked against hand calculations written here; the search over the new space against the
brute-force enumerator (planner.search.exhaustive) and the independent oracle (tests/oracle.py, which has its own
reading of the rule); the CLI against exit codes and its JSON.
"""

from __future__ import annotations

import json
import math

import numpy as np
import oracle
import pytest
from cli_helpers import invoke

from planner.errors import InvalidInput
from planner.hardware import get_hardware
from planner.overrides import parse_overrides
from planner.parallel.placement import greedy_placement
from planner.parallel.space import (
    SearchOptions,
    check_layout,
    fill_levels,
    level_products,
    nearest_cluster_sizes,
    rack_use,
)
from planner.schema import NetworkLevel
from planner.search.cpsat import solve_cpsat
from planner.search.exhaustive import solve_exhaustive
from planner.workload import workload_from_shape

GB200 = get_hardware("gb200-nvl72")
H100 = get_hardware("h100")

# Test hardware: "racks" of 8 GPUs used in units of 2, at most 6 per rack (2 spares), InfiniBand above; and the same
# racks grouped 4 to a pod (32 GPUs) below an unbounded level.
TRAY = H100.model_copy(update={"name": "tray", "levels": (
    NetworkLevel(name="rack", size=8, unit=2, usable=6, bw_bidir_Bps=900e9, lat_s=1.0e-6),
    NetworkLevel(name="IB", bw_bidir_Bps=50e9, lat_s=2.0e-6),
)})
POD = H100.model_copy(update={"name": "pod", "levels": (
    NetworkLevel(name="rack", size=8, unit=2, usable=6, bw_bidir_Bps=900e9, lat_s=1.0e-6),
    NetworkLevel(name="pod", size=32, bw_bidir_Bps=200e9, lat_s=2.0e-6),
    NetworkLevel(name="IB", bw_bidir_Bps=50e9, lat_s=4.0e-6),
)})


# --------------------------------------------------------------------------------------------------
# Racks and spares, by hand
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gpus,racks,per_rack", [
    (512, 8, 64),     # 512 = 8 x 64: 16 trays of 4 in each of 8 racks
    (1024, 16, 64),
    (2048, 32, 64),
    (2496, 39, 64),   # 2,496 = 39 x 64
    (2560, 40, 64),
    (64, 1, 64),      # one rack, 16 trays
    (8, 1, 8),        # inside one rack: any whole number of trays
    (2, 1, 2),        # smaller than one tray: the job sits in one tray
    (72, 2, 36),      # 72 > 64 usable: the largest per-rack count <= 64 that divides 72 is 36 (9 trays)
    (68, 17, 4),      # 68 = 4 x 17 (17 prime): one tray in each of 17 racks
])
def test_gb200_racks_and_spares_by_hand(gpus, racks, per_rack):
    use = rack_use(GB200, gpus)
    assert use is not None
    assert (use.groups, use.gpus_per_group) == (racks, per_rack)
    assert use.spare_gpus == racks * 72 - gpus  # each rack bought whole: 72 GPUs
    assert fill_levels(GB200.levels, gpus) == (per_rack, racks)


def test_512_gb200_gpus_leave_64_spares():
    use = rack_use(GB200, 512)
    assert use is not None and use.spare_gpus == 8 * 8 == 64  # 8 racks x (72 - 64)
    assert rack_use(GB200, 2496).spare_gpus == 39 * 8  # type: ignore[union-attr]


@pytest.mark.parametrize("gpus", [6, 65, 70, 3 * 1031])  # not a whole number of trays (65, 70: not multiples of 4)
def test_gb200_counts_that_are_not_whole_trays_are_refused(gpus):
    assert fill_levels(GB200.levels, gpus) is None
    assert rack_use(GB200, gpus) is None


def test_nearest_counts_step_in_trays():
    assert nearest_cluster_sizes(GB200, 65) == (64, 68)
    assert nearest_cluster_sizes(GB200, 6) == (4, 8)
    assert nearest_cluster_sizes(GB200, 3) == (3, 3)
    assert nearest_cluster_sizes(H100, 12) == (8, 16)  # ordinary levels: whole 8-GPU nodes, as before


def test_dgx_nodes_have_no_spares():
    use = rack_use(H100, 512)
    assert use is not None and (use.groups, use.gpus_per_group, use.spare_gpus) == (64, 8, 0)
    assert fill_levels(H100.levels, 12) is None  # ordinary levels are still filled exactly


def test_level_above_racks_is_filled_in_whole_pods():
    # pod = 4 racks of (at most 6 of) 8 GPUs. 48 = 2 pods x 4 racks x 6; 18 = 3 racks x 6 in one pod.
    assert fill_levels(POD.levels, 48) == (6, 4, 2)
    assert fill_levels(POD.levels, 18) == (6, 3, 1)
    # 36 = 6 x 6 racks spills past one pod (4 racks) without filling two; 4 or 2 per rack neither: refused.
    assert fill_levels(POD.levels, 36) is None
    assert oracle.level_targets(POD, 36) is None
    # 24: 6 per rack would need 4 racks = 24 in one pod, fine.
    assert fill_levels(POD.levels, 24) == (6, 4, 1)
    assert POD.level_caps == (6, 4, None)


@pytest.mark.parametrize("hw", [GB200, TRAY, POD, H100], ids=lambda h: h.name)
def test_level_rule_agrees_with_the_oracle(hw):
    for n in range(1, 400):
        mine = fill_levels(hw.levels, n)
        theirs = oracle.level_targets(hw, n)
        if mine is None:
            assert theirs is None or not _fills(theirs, n, hw), n
        else:
            assert theirs is not None, n
            assert [math.prod(mine[:h + 1]) for h in range(len(mine))] == theirs, n


@pytest.mark.parametrize("hw", [GB200, TRAY, POD, H100, get_hardware("h100-superpod")], ids=lambda h: h.name)
def test_vectorised_rule_is_the_scalar_rule(hw):
    counts = np.arange(1, 5000)
    prods, valid = level_products(hw, counts)
    for n, p, ok in zip(counts.tolist(), prods.tolist(), valid.tolist(), strict=True):
        fill = fill_levels(hw.levels, n)
        assert ok == (fill is not None), n
        if ok:
            assert tuple(p) == fill, n


def _fills(targets, n, hw) -> bool:
    """The ordinary rule's targets (min(n, size)) describe a valid cluster only if they chain by divisibility."""
    chain = [1, *targets]
    return all(b % a == 0 for a, b in zip(chain, chain[1:], strict=False)) and targets[-1] == n


def test_bounded_top_unit_level_caps_the_cluster():
    rack = H100.model_copy(update={"name": "one-rack", "levels": (
        NetworkLevel(name="NVL72", size=72, unit=4, usable=64, bw_bidir_Bps=1.8e12, lat_s=1e-6),)})
    assert rack.max_gpus == 64
    assert fill_levels(rack.levels, 64) == (64,)
    assert fill_levels(rack.levels, 68) is None


# --------------------------------------------------------------------------------------------------
# The hardware file: unit / usable, validated, and changed with --set
# --------------------------------------------------------------------------------------------------


def test_set_usable_to_whole_racks():
    whole = get_hardware("gb200-nvl72", parse_overrides(["levels.0.usable=72"]))
    assert fill_levels(whole.levels, 72) == (72, 1)
    assert rack_use(whole, 144).spare_gpus == 0  # type: ignore[union-attr]
    assert whole.sources["levels[0].usable"] == "--set"


@pytest.mark.parametrize("setting,words", [
    ("levels.0.usable=70", "multiple of unit (4)"),
    ("levels.0.usable=76", "at most size (72)"),
    ("levels.InfiniBand.unit=4", "lowest level only"),
    ("levels.0.unit=0", "greater than 0"),
    ("levels.0.unit=2.5", "whole number"),
])
def test_bad_unit_or_usable_is_one_line(setting, words):
    with pytest.raises(InvalidInput) as exc:
        get_hardware("gb200-nvl72", parse_overrides([setting]))
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_greedy_placement_fills_64_per_rack():
    pl = greedy_placement(GB200, {"tp_ff": 8, "pp": 4, "dp": 16})  # 512 GPUs
    assert math.prod(pl[d][0] for d in pl) == 64 and math.prod(pl[d][1] for d in pl) == 8
    assert pl["tp_ff"] == (8, 1)


def test_greedy_refusal_names_the_tray_rule():
    with pytest.raises(InvalidInput) as exc:
        greedy_placement(GB200, {"tp_ff": 2, "dp": 3})  # 6 GPUs: one and a half trays
    assert "a multiple of 4 and at most 64" in str(exc.value)
    assert "4 and 8 GPUs" in str(exc.value)


# --------------------------------------------------------------------------------------------------
# The searches agree on the new space
# --------------------------------------------------------------------------------------------------

SHAPE = (384, 1536, 6, 2, 96)  # factors of 3 and 2: clusters of 6, 12, 24 GPUs
DENSE_B2K = (512, 2048, 2, 1, 2048)


@pytest.mark.parametrize("hw,shape,gpus,deadline,expect", [
    (TRAY, SHAPE, 12, None, (6, 2)),     # 12 = 2 racks x 6 (ordinary 8-GPU levels refuse 12)
    (TRAY, SHAPE, 6, None, (6, 1)),
    (POD, SHAPE, 24, None, (6, 4, 1)),
    (POD, SHAPE, 12, None, (6, 2, 1)),
    (TRAY, DENSE_B2K, None, 3.0, (4, 1)),
    (TRAY, DENSE_B2K, None, 2.8, (4, 128)),  # 512 = 2^9: 4 per rack (6 does not divide it), 128 racks
], ids=["tray-N12", "tray-N6", "pod-N24", "pod-N12", "tray-dl3.0", "tray-dl2.8"])
def test_cpsat_matches_enumerator_on_unit_levels(hw, shape, gpus, deadline, expect):
    wl = workload_from_shape(*shape)
    opts = SearchOptions(gpus=gpus)
    ex = solve_exhaustive(hw, wl, opts, deadline)
    cp = solve_cpsat(hw, wl, opts, deadline, time_limit_s=60.0)
    assert ex.status == cp.status == "optimal"
    assert cp.space_size == ex.space_size
    assert ex.layout is not None and cp.layout is not None
    assert check_layout(hw, wl, ex.layout) == [] and check_layout(hw, wl, cp.layout) == []
    assert cp.layout.gpus == ex.layout.gpus == math.prod(expect)
    for lay in (ex.layout, cp.layout):  # the per-level products are the rule's
        assert tuple(math.prod(lay.placement[d][h] for d in lay.placement) for h in range(len(hw.levels))) == expect
    from planner.cost.step import evaluate
    se = evaluate(hw, wl, ex.layout).step
    sc = evaluate(hw, wl, cp.layout).step
    assert abs(se.step_s - sc.step_s) <= 10e-9


@pytest.mark.parametrize("hw,gpus", [(TRAY, 12), pytest.param(POD, 24, marks=pytest.mark.slow)],  # pod: ~4.5 s
                         ids=["tray-N12", "pod-N24"])
def test_planner_matches_the_oracle_on_unit_levels(hw, gpus):
    from planner.api import plan

    wl = workload_from_shape(48, 192, 3, 1, 48)  # 700-1,300 layouts on these counts
    res = oracle.solve(hw, wl, gpus=gpus)
    assert res.best is not None and res.priced <= 2_000
    p = plan(workload=wl, gpu=hw, gpus=gpus)
    assert p.status == "optimal" and p.gpus == gpus
    assert p.step_time_s is not None
    assert res.best.step_s <= p.step_time_s <= res.best.step_s + 10e-9


# --------------------------------------------------------------------------------------------------
# The commands
# --------------------------------------------------------------------------------------------------

REALISTIC = ["--model", "llama3-70b", "--profile", "realistic", "--json"]


@pytest.mark.parametrize("gpus,extra,racks", [
    (512, [], 8),
    (1024, [], 16),
    (2496, ["--batch-sequences", "2496"], 39),  # 2,496 = 39 x 64 needs a factor 39: dp 39 of 2,496 sequences
])
def test_plan_fixed_gb200_cluster(capsys, gpus, extra, racks):
    code, out, err = invoke(capsys, ["plan", *REALISTIC, "--gpu", "gb200-nvl72", "--gpus", str(gpus), *extra])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "optimal" and doc["gpus"] == gpus
    assert (doc["racks"], doc["gpus_per_rack"], doc["spare_gpus"]) == (racks, 64, racks * 8)
    assert doc["rack_level"] == "NVLink (NVL72)"
    assert doc["nodes"] == gpus // 4


@pytest.mark.parametrize("gpus,degrees,extra", [
    (512, ["--tp-ff", "8", "--pp", "4", "--dp", "16", "--microbatches", "128"], []),
    (1024, ["--tp-ff", "8", "--pp", "8", "--dp", "16", "--microbatches", "128"], []),
    (2496, ["--tp-ff", "8", "--pp", "8", "--dp", "39", "--microbatches", "64"], ["--batch-sequences", "2496"]),
])
def test_evaluate_gb200_cluster(capsys, gpus, degrees, extra):
    code, out, err = invoke(capsys, ["evaluate", *REALISTIC, "--gpu", "gb200-nvl72", *degrees, *extra])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["gpus"] == gpus and doc["racks"] == gpus // 64 and doc["spare_gpus"] == gpus // 64 * 8


def test_plan_gb300(capsys):
    code, out, err = invoke(capsys, ["plan", *REALISTIC, "--gpu", "gb300-nvl72", "--gpus", "1024"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "optimal" and (doc["racks"], doc["spare_gpus"]) == (16, 128)
    assert doc["peak_flops"] == pytest.approx(2.5e15, rel=1e-3)  # dense BF16 per Blackwell Ultra GPU


def test_text_output_counts_racks_and_spares(capsys):
    code, out, err = invoke(capsys, ["plan", "--model", "llama3-70b", "--profile", "realistic", "--gpu",
                                     "gb200-nvl72", "--gpus", "512"])
    assert code == 0, err
    assert "in 8 racks, 64 spare GPUs" in out
    assert "64 GPUs used in each" in out


def test_evaluate_six_gb200_gpus_is_a_one_line_error(capsys):
    code, out, err = invoke(capsys, ["evaluate", "--model", "llama3-8b", "--gpu", "gb200-nvl72", "--tp-ff", "2",
                                     "--pp", "1", "--dp", "3"])
    assert code == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "multiple of 4" in err


# --------------------------------------------------------------------------------------------------
# FP4 rates (data only): dense, from the datasheets
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,dense_fp4", [
    ("b200", 144e15 / 8 / 2),         # HGX B200: FP4 144 PFLOPS with sparsity for 8 GPUs
    ("gb200-nvl72", 1440e15 / 72 / 2),  # GB200 NVL72: 1,440 PFLOPS per rack with sparsity
    ("gb300-nvl72", 1080e15 / 72),      # GB300 NVL72: 1,080 PFLOPS per rack dense (15 PF per GPU)
    ("b300", 108e15 / 8),               # HGX B300: 108 PFLOPS dense for 8 GPUs
])
def test_fp4_peaks_match_datasheets(name, dense_fp4):
    gpu = get_hardware(name).gpu
    assert gpu.fp4 is not None
    assert gpu.fp4.peak_flops == pytest.approx(dense_fp4, rel=1e-3)
    assert gpu.fp4.fp8_flop_per_clock_per_thread is None and gpu.fp4.fp4_flop_per_clock_per_thread is None


def test_no_fp4_before_blackwell():
    assert H100.gpu.fp4 is None


@pytest.mark.parametrize("name,bf16,fp8,hbm_gb,ib_GBps", [
    ("gb300-nvl72", 360e15 / 72 / 2, 720e15 / 72 / 2, 288, 200),  # 360 / 720 PF per rack with sparsity; 800 Gb/s
    ("b300", 36e15 / 8 / 2, 72e15 / 8 / 2, 270, 200),             # 36 / 72 PF per 8 GPUs with sparsity
])
def test_blackwell_ultra_files_match_datasheets(name, bf16, fp8, hbm_gb, ib_GBps):
    hw = get_hardware(name)
    assert hw.gpu.peak_flops == pytest.approx(bf16, rel=1e-3)
    assert hw.gpu.fp8 is not None and hw.gpu.fp8.peak_flops == pytest.approx(fp8, rel=1e-3)
    assert hw.gpu.hbm_bytes == hbm_gb * 1e9
    assert hw.levels[-1].bw_bidir_Bps == ib_GBps * 1e9
    assert hw.levels[0].bw_bidir_Bps == 1800e9


# --------------------------------------------------------------------------------------------------
# Deadline mode on racks bought whole: fewest racks, then fewest GPUs
# --------------------------------------------------------------------------------------------------


def test_rack_candidates_by_hand():
    from planner.api import rack_candidates

    # 400 GB200 GPUs: 40 per rack (the largest multiple of 4 up to 64 dividing 400), 10 racks holding 720 GPUs.
    # Fewer racks: 420 = 7 x 60 and 448 = 7 x 64 (7 racks), then 8 racks: 416 = 8 x 52, 480 = 8 x 60, 512 = 8 x 64.
    cands = rack_candidates(GB200, 400)
    assert cands[:5] == [(7, 420), (7, 448), (8, 416), (8, 480), (8, 512)]
    assert all(r < 10 and 400 < n <= 720 for r, n in cands)
    assert rack_candidates(GB200, 512) == []  # 8 full racks: nothing above 512 in 8 racks takes fewer
    assert rack_candidates(TRAY, 16) == [(3, 18)]  # 16 = 4 racks x 4; 18 = 3 x 6 (24 and 30 take 4 and 5)
    assert rack_candidates(H100, 24) == [] and rack_candidates(H100, 12) == []  # DGX nodes are not racks


TALL = (1536, 6144, 24, 1, 2304)  # fast enough on 12 to 18 GPUs for the deadline to fall between counts


def test_fewest_racks_matches_the_enumerator():
    """The enumerator's fastest layout on every count up to the racks of the fewest GPUs, then the rule by hand:
    the fewest racks among the counts that meet the deadline between N0 and what N0's racks hold, then fewest GPUs."""
    from planner.api import plan
    from planner.cost.step import evaluate

    wl = workload_from_shape(*TALL)
    days = 0.0710
    meets = {}
    for n in range(1, 33):
        if fill_levels(TRAY.levels, n) is None:
            continue
        ex = solve_exhaustive(TRAY, wl, SearchOptions(gpus=n), None)
        assert ex.status in ("optimal", "infeasible")
        meets[n] = ex.layout is not None and evaluate(TRAY, wl, ex.layout).training_days <= days
    n0 = min(n for n, ok in meets.items() if ok)
    r0 = rack_use(TRAY, n0).groups
    want = min((rack_use(TRAY, n).groups, n) for n, ok in meets.items() if ok and n0 <= n <= r0 * 8)
    assert (n0, r0) == (16, 4) and want == (3, 18)  # 16 = 4 racks x 4 GPUs; 18 = 3 racks x 6: one rack fewer

    p = plan(workload=wl, gpu=TRAY, days=days)
    assert p.goodput is None  # the deadline is the compute days, as above
    assert p.status == "optimal" and (p.racks, p.gpus) == want and p.fewest_gpus == n0
    assert p.held_gpus == 3 * 8 and p.spare_gpus == 6
    assert p.layout is not None and math.prod(p.layout.placement[d][0] for d in p.layout.placement) == 6
    assert "16 GPUs would need 4 racks; 18 GPUs fit in 3 racks" in p.notes[0]


def test_qa_gb200_plan_takes_fewer_racks(capsys):
    """The QA case: 400 GPUs would take 10 racks (720 held); --gpus 512 takes 8. Racks by hand from the layout: the
    GPUs per rack are the product of the degrees on the rack level, racks = gpus / that."""
    code, out, err = invoke(capsys, ["plan", "--compute", "1e24", "--gpu", "gb200-nvl72", "--days", "30",
                                     "--profile", "realistic", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    per_rack = math.prod(v[0] for v in doc["layout"]["placement"].values())
    assert per_rack <= 64 and doc["gpus"] % per_rack == 0
    racks = doc["gpus"] // per_rack
    assert racks == doc["racks"] <= 8 and doc["held_gpus"] == racks * 72
    assert doc["fewest_gpus"] is not None and doc["fewest_gpus"] < doc["gpus"]
    assert rack_use(GB200, doc["fewest_gpus"]).groups > racks
    assert doc["wall_clock_days"] <= 30
    assert f"{doc['fewest_gpus']:,} GPUs would need" in doc["notes"][0]


def test_a_fewest_racks_count_bounds_no_re_plan():
    """Sensitivity bounds a slowing re-plan by the plan's count only when that count is the fewest GPUs: a plan that
    took more GPUs in fewer racks is not (its re-plan may need fewer GPUs than it, from N0 up)."""
    from planner import api
    from planner import sensitivity as sens
    from planner.schema.request import PlanRequest

    kw = dict(compute_flop=1e24, gpu="gb200-nvl72", days=30.0, profile="realistic", why_smaller=False)
    p = api.plan(**kw)
    assert p.status == "optimal" and p.fewest_gpus is not None and p.gpus is not None and p.fewest_gpus < p.gpus
    assert sens.least_gpus(p, PlanRequest(**kw), "profile.overlap.pp", 0.75, 0.6) is None
    h100 = dict(kw, gpu="h100")
    q = api.plan(**h100)
    assert q.fewest_gpus is None  # not rack-scale: the plan is the fewest GPUs, and it bounds the re-plan
    assert sens.least_gpus(q, PlanRequest(**h100), "profile.overlap.pp", 0.75, 0.6) == q.gpus


def test_text_says_why_more_gpus_than_the_fewest(capsys):
    code, out, err = invoke(capsys, ["plan", "--compute", "1e24", "--gpu", "gb200-nvl72", "--days", "30",
                                     "--profile", "realistic"])
    assert code == 0, err
    flat = " ".join(out.split())
    assert "400 GPUs would need 10 racks; 512 GPUs fit in 8 racks" in flat  # 400 = 10 x 40; 512 = 8 x 64
    assert "fewest racks held, then fewest GPUs" in flat
    assert "Why not fewer than 400 GPUs" in flat
