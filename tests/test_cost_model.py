"""The step-time cost model against hand calculations (docs/model.md §3-§7; paper §3, App. 8.1.2-8.1.5, App. 8.2).

Every expected number below is written out from Table 1, Eq. 2, Eq. 19-22 or docs/model.md §7 by hand, never
obtained by calling the function under test. Network tests use a one-level "flat" network whose
bidirectional bandwidth is 2 x word_bytes B/s, i.e. one word per second per direction, so a bandwidth time
in seconds *is* the number of words a GPU receives. (GEMM times are irrelevant to those tests.)
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cost import network as net
from planner.cost.pipeline import (
    bubble_fraction,
    bubble_fraction_1f1b,
    microbatches_in_flight,
    zb_h2_valid,
)
from planner.cost.step import evaluate, step_arrays
from planner.hardware import get_hardware
from planner.parallel.dimensions import DEGREES
from planner.parallel.space import Tuples
from planner.schema import Hardware, Layout, NetworkLevel, Workload

H100 = get_hardware("h100")
GPU = H100.gpu
WORD = GPU.word_bytes  # 2 bytes


def flat(lat_s: float = 0.0, bw_bidir: float = 2.0 * WORD) -> Hardware:
    """One unbounded level; by default 1 word/s per direction, so seconds = words received."""
    return Hardware(name="flat", gpu=GPU,
                    levels=(NetworkLevel(name="flat", size=None, bw_bidir_Bps=bw_bidir, lat_s=lat_s),))


def layout(dp=1, tp_ff=1, tp_model=1, pp=1, interleave=1, ep=1, m=1, schedule="1f1b", placement=None) -> Layout:
    """A layout; without `placement` every degree sits on the single flat level."""
    if placement is None:
        placement = {"dp": (dp,), "tp_ff": (tp_ff,), "tp_model": (tp_model,), "pp": (pp,), "ep": (ep,)}
    return Layout(dp=dp, tp_ff=tp_ff, tp_model=tp_model, pp=pp, interleave=interleave, ep=ep, microbatches=m,
                  schedule=schedule, placement=placement)


def row(hw: Hardware, wl: Workload, lay: Layout) -> dict[str, float]:
    arr = step_arrays(hw, wl, Tuples.from_layouts([lay]), {d: np.array([lay.placement[d]]) for d in DEGREES})
    return {k: float(v[0]) for k, v in arr.items()}


# A small dense workload for the network volumes: N_p = 2 L E d_model d_ff = 2 * 8 * 1 * 1024 * 4096 = 67,108,864.
B = 65536
DENSE = Workload(d_model=1024, d_ff=4096, layers=8, experts=1, batch_tokens=B, tokens=1e9)


def sparse(experts: int) -> Workload:
    return Workload(d_model=1024, d_ff=4096, layers=8, experts=experts, batch_tokens=B, tokens=1e9)


# --------------------------------------------------------------------------------------------------
# Table 1 / App. 8.1.2, single level
# --------------------------------------------------------------------------------------------------


class TestTable1SingleLevel:
    def test_dp_allreduce_eq2(self):
        # Eq. 2: each of N ranks receives 2 (N - 1) / N words per word all-reduced.
        for n, w, expected in [(2, 1000.0, 1000.0), (4, 1000.0, 1500.0), (8, 800.0, 1400.0), (1, 5.0, 0.0)]:
            got = net.allreduce_level_words(np.array([w]), np.array([[n]]))
            assert got.shape == (1, 1)
            assert got[0, 0] == pytest.approx(expected, rel=1e-15)

    def test_dp_step_volume(self):
        # N_DP = 4 replicas of a model split N_TP,ff = 2 ways: each GPU holds 67,108,864 / 2 = 33,554,432
        # parameters and receives 2 * 3/4 * 33,554,432 = 50,331,648 words per step.
        r = row(flat(), DENSE, layout(dp=4, tp_ff=2, m=1))
        assert r["dp_s"] == pytest.approx(50_331_648.0, rel=1e-12)

    def test_tp_1d_and_2d(self):
        # Table 1 / §3.1.4: 4 L b [d_ff (N_TP,model - 1) + d_model (N_TP,ff - 1)] / N_TP words per TP worker.
        # N_TP,ff = 4, N_TP,model = 2: 4 * 8 * 65536 * (4096 * 1 + 1024 * 3) / 8 = 262,144 * 7168 = 1,879,048,192.
        r = row(flat(), DENSE, layout(tp_ff=4, tp_model=2))
        assert r["tp_s"] == pytest.approx(1_879_048_192.0, rel=1e-12)
        # 1D (N_TP,model = 1), N_TP,ff = 8: 4 * 8 * 65536 * (1024 * 7) / 8 = 262,144 * 7168 = 1,879,048,192
        # (the same number as above, since 4096 * 1 + 1024 * 3 = 1024 * 7).
        r = row(flat(), DENSE, layout(tp_ff=8))
        assert r["tp_s"] == pytest.approx(1_879_048_192.0, rel=1e-12)
        # N_TP,model = 4 only: 4 * 8 * 65536 * 4096 * 3 / 4 = 2,097,152 * 12288 / 4 = 6,442,450,944.
        r = row(flat(), DENSE, layout(tp_model=4))
        assert r["tp_s"] == pytest.approx(6_442_450_944.0, rel=1e-12)
        assert r["dp_s"] == 0.0 and r["pp_ep_s"] == 0.0

    def test_tp_with_dp_pp_ep_is_total_over_gpus(self):
        # With DP, PP and EP the Table 1 total 4 L b [d_ff (N_m - 1) + d_model (N_f - 1)] is spread over every GPU.
        # E = 4, N_DP = N_PP = N_EP = N_TP,ff = N_TP,model = 2 (32 GPUs): total 4 * 8 * 65536 * (4096 + 1024)
        # = 10,737,418,240 words; per GPU 335,544,320.
        r = row(flat(), sparse(4), layout(dp=2, tp_ff=2, tp_model=2, pp=2, ep=2, m=2))
        assert r["gpus"] == 32
        assert r["tp_s"] == pytest.approx(335_544_320.0, rel=1e-12)

    def test_pp_volume(self):
        # Table 1: 2 b d_model (N_PP i - 1) words per step in total; N_PP = 4, i = 2, L = 8, 4 GPUs:
        # 2 * 65536 * 1024 * 7 / 4 = 234,881,024 words per GPU.
        r = row(flat(), DENSE, layout(pp=4, interleave=2, m=4))
        assert r["pp_ep_s"] == pytest.approx(234_881_024.0, rel=1e-12)
        # Without interleaving: 2 * 65536 * 1024 * 3 / 4 = 100,663,296.
        r = row(flat(), DENSE, layout(pp=4, interleave=1, m=4))
        assert r["pp_ep_s"] == pytest.approx(100_663_296.0, rel=1e-12)

    def test_ep_volume(self):
        # Table 1: 2 b d_model (L - 1)(N_EP - 1)/N_EP in total; E = N_EP = 4, L = 8, 4 GPUs:
        # 2 * 65536 * 1024 * 7 * 3/4 / 4 = 176,160,768 words per GPU.
        r = row(flat(), sparse(4), layout(ep=4))
        assert r["pp_ep_s"] == pytest.approx(176_160_768.0, rel=1e-12)

    def test_pp_and_ep_coincide(self):
        # App. 8.1.2 single-level counts: 2 (N_PP i - 1) PP crossings plus 2 (1 - 1/N_EP)(L - N_PP i) EP ones per
        # token. N_PP = 2, i = 1, N_EP = E = 2, L = 8: 1 + 0.5 * 6 = 4 crossings per pass, so
        # 2 * 65536 * 1024 * 4 / 4 GPUs = 134,217,728 words per GPU.
        r = row(flat(), sparse(2), layout(pp=2, ep=2, m=2))
        assert r["pp_ep_s"] == pytest.approx(134_217_728.0, rel=1e-12)

    def test_bandwidth_is_half_the_bidirectional_figure(self):
        # Same TP case on a 1000 B/s bidirectional link: 500 B/s each way, 2-byte words -> 1,879,048,192 * 2 / 500 s.
        r = row(flat(bw_bidir=1000.0), DENSE, layout(tp_ff=4, tp_model=2))
        assert r["tp_s"] == pytest.approx(1_879_048_192.0 * 2 / 500.0, rel=1e-12)


# --------------------------------------------------------------------------------------------------
# Hierarchical all-reduce (App. 8.1.2)
# --------------------------------------------------------------------------------------------------


class TestHierarchicalAllReduce:
    def test_two_levels_by_hand(self):
        # 8 ranks in a node x 4 nodes, w = 1e9 words. Level 1: 2 * 7/8 * w = 1.75e9 words. Level 2: the data left
        # is split over the 8 in-node ranks: 2 * 3/4 * w / 8 = 1.875e8 words.
        w = 1e9
        words = net.allreduce_level_words(np.array([w]), np.array([[8, 4]]))
        assert words[0, 0] == pytest.approx(1.75e9, rel=1e-15)
        assert words[0, 1] == pytest.approx(1.875e8, rel=1e-15)
        # H100 levels: 900 GB/s and 100 GB/s bidirectional -> 450e9 and 50e9 B/s each way; 2-byte words.
        # Level 1: 3.5e9 B / 450e9 = 7.7778 ms; level 2: 3.75e8 B / 50e9 = 7.5 ms; the levels overlap -> max.
        bw = np.array([450e9, 50e9])
        t = net.allreduce_time_s(np.array([w]), np.array([[8, 4]]), bw, 2)
        assert t[0] == pytest.approx(3.5e9 / 450e9, rel=1e-12)
        # Latency: two one-way latencies per level with more than one rank.
        lat = np.array([1e-6, 7e-6])
        assert net.allreduce_latency_s(np.array([[8, 4]]), lat)[0] == pytest.approx(2e-6 + 14e-6)
        assert net.allreduce_latency_s(np.array([[1, 4]]), lat)[0] == pytest.approx(14e-6)
        assert net.allreduce_latency_s(np.array([[8, 1]]), lat)[0] == pytest.approx(2e-6)
        assert net.allreduce_latency_s(np.array([[1, 1]]), lat)[0] == 0.0

    def test_unused_lower_level(self):
        # All 4 ranks on level 2 (factor 1 in the node): level 1 moves nothing, level 2 the full 2 * 3/4 * w.
        words = net.allreduce_level_words(np.array([1000.0]), np.array([[1, 4]]))
        assert words[0, 0] == 0.0
        assert words[0, 1] == pytest.approx(1500.0)

    def test_dp_on_h100_preset(self):
        # DP = 32 as 8 in-node x 4 nodes on the H100 preset, each GPU holding the whole DENSE model (67,108,864
        # parameters): level 1 2 * 7/8 * 67,108,864 = 117,440,512 words = 234,881,024 B / 450e9 B/s = 521.96 us;
        # level 2 2 * 3/4 * 67,108,864 / 8 = 12,582,912 words = 25,165,824 B / 50e9 = 503.32 us. Max: level 1.
        lay = layout(dp=32, m=1, placement={"dp": (8, 4), "tp_ff": (1, 1), "tp_model": (1, 1), "pp": (1, 1),
                                            "ep": (1, 1)})
        r = row(H100, DENSE, lay)
        assert r["dp_s"] == pytest.approx(234_881_024 / 450e9, rel=1e-12)
        assert r["latency_dp_s"] == pytest.approx(4 * 1.125e-6, rel=1e-12)

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.floats(1.0, 1e12))
    def test_matches_paper_count(self, factors, w):
        # App. 8.1.2: level h reduces w words across N(h) participants prod_{k>h} N(k) times, i.e. 2 (N(h) - 1) w
        # prod_{k>h} N(k) words received over the whole group; per GPU divide by prod_k N(k).
        got = net.allreduce_level_words(np.array([w]), np.array([factors]))[0]
        n = math.prod(factors)
        for h, f in enumerate(factors):
            expected = 2 * (f - 1) * w * math.prod(factors[h + 1:]) / n
            assert got[h] == pytest.approx(expected, rel=1e-12, abs=1e-9)


# --------------------------------------------------------------------------------------------------
# Joint frequencies P_PP, P_EP, P_P2P (App. 8.1.2, Eq. 19-20)
# --------------------------------------------------------------------------------------------------


class TestFrequencies:
    def test_app_8_2_example(self):
        # L = 12, N_PP = 3, i = 2: 5 stage interfaces among 11 inter-layer interfaces.
        p = net.pp_frequencies(np.array([[3]]), 2, 12)[0]
        assert p[1] == pytest.approx(5 / 11, rel=1e-15)
        assert p[0] == pytest.approx(6 / 11, rel=1e-15)
        # Same without interleaving: 2 interfaces.
        p = net.pp_frequencies(np.array([[3]]), 1, 12)[0]
        assert p[1] == pytest.approx(2 / 11, rel=1e-15)

    def test_no_pipeline(self):
        p = net.pp_frequencies(np.array([[1, 1]]), 4, 32)[0]
        assert list(p) == [1.0, 0.0, 0.0]

    def test_two_level_pipeline_eq19(self):
        # N_PP factors (2, 4), i = 2, L = 32, h* = 2.
        # Level 2: i N_PP(2) - 1 = 7 -> 7/31. Level 1: i N_PP(2) (N_PP(1) - 1) = 8 -> 8/31.
        # Level 0: (L - i N_PP) / (L - 1) = (32 - 16) / 31 = 16/31.
        p = net.pp_frequencies(np.array([[2, 4]]), 2, 32)[0]
        assert p == pytest.approx([16 / 31, 8 / 31, 7 / 31], rel=1e-14)

    def test_pipeline_above_an_unused_level(self):
        # Factors (2, 1, 2), i = 1, L = 8: h* = 3. Level 3: 2 - 1 = 1; level 2: 2 (1 - 1) = 0;
        # level 1: 2 * 1 * (2 - 1) = 2; level 0: 8 - 4 = 4. Out of 7.
        p = net.pp_frequencies(np.array([[2, 1, 2]]), 1, 8)[0]
        assert p == pytest.approx([4 / 7, 2 / 7, 0.0, 1 / 7], rel=1e-14)
        # Pipeline only on the lowest level, interleaved: no interface can cross level 2 (the wrap-arounds of
        # the interleave stay within level 1). (4, 1), i = 2, L = 16: 7 at level 1, 16 - 8 = 8 at level 0.
        p = net.pp_frequencies(np.array([[4, 1]]), 2, 16)[0]
        assert p == pytest.approx([8 / 15, 7 / 15, 0.0], rel=1e-14)

    def test_ep_telescopes(self):
        # N_EP factors (2, 4, 3): N_EP = 24. Eq. 20: P(3) = 2/3, P(2) = 3/12, P(1) = 1/24, P(0) = 1/N_EP = 1/24.
        p = net.ep_frequencies(np.array([[2, 4, 3]]))[0]
        assert p == pytest.approx([1 / 24, 1 / 24, 3 / 12, 2 / 3], rel=1e-14)
        assert p[1:].sum() == pytest.approx(1 - 1 / 24, rel=1e-14)

    def test_p2p_two_levels_by_hand(self):
        # N_PP (2, 2), i = 1, L = 8: P_PP = [4/7, 2/7, 1/7]. N_EP (2, 2): P_EP = [1/4, 1/4, 1/2].
        # P_P2P(0) = 4/7 * 1/4 = 1/7.
        # P_P2P(1) = P_PP(0) P_EP(1) + P_PP(1) P_EP(0) + P_PP(1) P_EP(1) = 4/28 + 2/28 + 2/28 = 2/7.
        # P_P2P(2) = P_PP(2) + P_EP(2) (1 - P_PP(2)) = 1/7 + 3/7 = 4/7.
        p_pp = net.pp_frequencies(np.array([[2, 2]]), 1, 8)
        p_ep = net.ep_frequencies(np.array([[2, 2]]))
        assert p_pp[0] == pytest.approx([4 / 7, 2 / 7, 1 / 7], rel=1e-14)
        assert p_ep[0] == pytest.approx([1 / 4, 1 / 4, 1 / 2], rel=1e-14)
        p = net.p2p_frequencies(p_pp, p_ep)[0]
        assert p == pytest.approx([1 / 7, 2 / 7, 4 / 7], rel=1e-12)

    def test_p2p_volume_two_levels(self):
        # The same placement through step_arrays on a two-level network at 1 word/s on both levels:
        # per GPU 2 b d_model (L - 1) P_P2P(h) / N_GPU, with E = 4, N_PP = N_EP = 4 -> 16 GPUs.
        # Level 1: 2 * 65536 * 1024 * 7 * 2/7 / 16 = 16,777,216; level 2 (4/7): 33,554,432. Max = level 2.
        hw = Hardware(name="two", gpu=GPU, levels=(
            NetworkLevel(name="a", size=4, bw_bidir_Bps=2.0 * WORD, lat_s=0.0),
            NetworkLevel(name="b", size=None, bw_bidir_Bps=2.0 * WORD, lat_s=0.0)))
        lay = layout(pp=4, ep=4, m=4, placement={"dp": (1, 1), "tp_ff": (1, 1), "tp_model": (1, 1), "pp": (2, 2),
                                                 "ep": (2, 2)})
        r = row(hw, sparse(4), lay)
        assert r["pp_ep_s"] == pytest.approx(33_554_432.0, rel=1e-12)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.integers(1, 6), min_size=1, max_size=4), st.data())
    def test_p2p_sums_to_one(self, pp_factors, data):
        H = len(pp_factors)
        ep_factors = data.draw(st.lists(st.integers(1, 6), min_size=H, max_size=H))
        i = data.draw(st.integers(1, 3))
        n_pp = math.prod(pp_factors)
        L = n_pp * i * data.draw(st.integers(1, 4))
        if L < 2:
            L = 2 * n_pp * i
        p_pp = net.pp_frequencies(np.array([pp_factors]), i, L)
        p_ep = net.ep_frequencies(np.array([ep_factors]))
        p = net.p2p_frequencies(p_pp, p_ep)[0]
        assert (p >= -1e-12).all()
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        assert p_pp[0].sum() == pytest.approx(1.0, abs=1e-12)
        assert p_ep[0, 1:].sum() == pytest.approx(1 - 1 / math.prod(ep_factors), abs=1e-12)
        # No crossing at all: no pipeline boundary (Eq. 19 with h = 1) and the same expert rank everywhere.
        n_ep = math.prod(ep_factors)
        expected0 = (Fraction(L - i * n_pp, L - 1) if n_pp > 1 else Fraction(1)) / n_ep
        assert p[0] == pytest.approx(float(expected0), abs=1e-12)


# --------------------------------------------------------------------------------------------------
# Pipeline bubble (Eq. 22) and schedules
# --------------------------------------------------------------------------------------------------


class TestBubble:
    def test_eq22_values(self):
        # f_b = (N_PP - 1 + z) / (N_PP - 1 + z + i m), z = (i - 1) max(0, N_PP - m).
        cases = [
            (4, 1, 8, 3 / 11),  # z = 0
            (1, 1, 5, 0.0),  # no pipeline, no bubble
            (3, 2, 3, 2 / 8),  # App. 8.2 example (L = 12, N_PP = 3, i = 2), m = 3: z = 0 -> 2 / (2 + 6)
            (3, 2, 2, 3 / 7),  # m = 2 < N_PP: z = 1 * (3 - 2) = 1 -> (2 + 1) / (2 + 1 + 4)
        ]
        for pp, i, m, expected in cases:
            assert bubble_fraction_1f1b(pp, i, m) == pytest.approx(expected, rel=1e-15)
        # N_PP = 8, i = 4, m = 2: z = 3 * 6 = 18, f_b = (7 + 18) / (7 + 18 + 8) = 25/33.
        assert bubble_fraction_1f1b(8, 4, 2) == pytest.approx(25 / 33, rel=1e-15)

    def test_zero_bubble(self):
        assert bubble_fraction(4, 1, 7, True) == 0.0
        assert bubble_fraction(4, 1, 7, False) == pytest.approx(3 / 10)

    def test_zb_h2_microbatch_rule(self):
        # ZB-H2 needs m >= 2 N_PP - 1 and is modelled without interleaving.
        assert zb_h2_valid(4, 1, 7)
        assert not zb_h2_valid(4, 1, 6)
        assert zb_h2_valid(1, 1, 1)
        assert not zb_h2_valid(4, 2, 16)
        assert list(zb_h2_valid(np.array([2, 2, 3]), 1, np.array([2, 3, 5]))) == [False, True, True]

    def test_in_flight(self):
        # 1F1B: N_PP (capped at m); ZB-H2: 2 N_PP - 1. Interleaved 1F1B (Megatron warm-up on the first stage):
        # (N_PP - 1) * 2 + (i - 1) N_PP chunks + the one running, each 1/i of a stage:
        # N_PP = 4, i = 2: (6 + 4 + 1) / 2 = 5.5 stages.
        assert microbatches_in_flight(4, 1, 8, False) == 4
        assert microbatches_in_flight(4, 1, 2, False) == 2
        assert microbatches_in_flight(4, 1, 8, True) == 7
        assert microbatches_in_flight(4, 2, 8, False) == pytest.approx(5.5)


# --------------------------------------------------------------------------------------------------
# Latency accounting and the critical-path floor (docs/model.md §6)
# --------------------------------------------------------------------------------------------------

SMALL = Workload(d_model=256, d_ff=1024, layers=8, experts=1, batch_tokens=4096, tokens=1e9)


class TestLatency:
    def test_1f1b_latency_by_hand(self):
        # Flat network, one-way latency l. Per block per pass: two TP all-reduces (model group, ff group) of
        # 2 l each = 4 l; L = 8 blocks -> 32 l; one pipeline boundary (N_PP = 2, i = 1) -> 1 l; both passes:
        # 66 l per microbatch. 1F1B: each GPU pays m / N_PP = 4/2 of it = 132 l; plus the DP all-reduce 2 l.
        lat = 1e-3
        lay = layout(dp=2, tp_ff=2, tp_model=2, pp=2, m=4)
        r = row(flat(lat_s=lat, bw_bidir=1e30), SMALL, lay)
        assert r["latency_dp_s"] == pytest.approx(2 * lat, rel=1e-12)
        assert r["latency_s"] == pytest.approx(134 * lat, rel=1e-12)

    def test_ep_latency_is_worst_case(self):
        # EP latency: every one of the L - 1 interfaces pays the highest EP level (App. 8.1.2). Two levels with
        # latencies 1 ms (in node) and 10 ms; N_EP = 2 on level 2, N_PP = 2 on level 1, i = 1, L = 8, m = 2.
        # Per pass: the pipeline boundary sits at max(1, 2) = level 2, the six other interfaces at level 2 too:
        # 7 * 10 ms = 70 ms; both passes 140 ms; 1F1B share m / N_PP = 1 -> 140 ms.
        hw = Hardware(name="two", gpu=GPU, levels=(
            NetworkLevel(name="a", size=8, bw_bidir_Bps=1e30, lat_s=1e-3),
            NetworkLevel(name="b", size=None, bw_bidir_Bps=1e30, lat_s=1e-2)))
        lay = layout(pp=2, ep=2, m=2, placement={"dp": (1, 1), "tp_ff": (1, 1), "tp_model": (1, 1), "pp": (2, 1),
                                                 "ep": (1, 2)})
        r = row(hw, Workload(d_model=256, d_ff=1024, layers=8, experts=2, batch_tokens=4096, tokens=1e9), lay)
        assert r["latency_s"] == pytest.approx(0.140, rel=1e-12)

    def test_zb_h2_floor_grows_with_latency(self):
        # ZB-H2 hides TP/PP latencies in Eq. 21 (t_lat = DP latency only), so only the floor can see them.
        # Flat network at 5 us (the later simulator's value) and at 100x that. Layout: N_DP = N_TP,ff =
        # N_TP,model = N_PP = 2, m = 4 >= 2 N_PP - 1, L = 8. Latencies on the critical path, in units of l:
        #   TP: 2 passes * 8 blocks * 2 all-reduces * 2 l = 64 l; PP: 2 passes * (N_PP - 1) = 2 l;
        #   DP all-reduce (outside the path but in the floor): 2 l.  Total 68 l.
        lay = layout(dp=2, tp_ff=2, tp_model=2, pp=2, m=4, schedule="zb-h2")
        lo, hi = 5e-6, 5e-4
        a = evaluate(flat(lat_s=lo, bw_bidir=1e15), SMALL, lay).step
        b = evaluate(flat(lat_s=hi, bw_bidir=1e15), SMALL, lay).step
        assert a.floor_s > a.eq21_s and b.floor_s > b.eq21_s  # the floor sets the step in both
        assert a.step_s == a.floor_s and b.step_s == b.floor_s
        assert b.step_s - a.step_s == pytest.approx(68 * (hi - lo), rel=1e-9)
        # Eq. 21 alone sees only the DP latency change: 2 * (hi - lo).
        assert b.eq21_s - a.eq21_s == pytest.approx(2 * (hi - lo), rel=1e-9)

    def test_zb_h2_floor_at_spec_latency(self):
        # The shipped H100 preset (1.125 us on both levels) and the same with latencies x100. Tiny GEMMs sit at the
        # 4.5 us kernel latency, so with TP groups spanning both levels and N_PP = 1, m = 1, the floor binds even
        # at 1.125 us. TP groups (2, 2) on both levels: one all-reduce costs 2 (l1 + l2) = 4 l;
        # per block per pass two of them: 8 l; 2 passes * 8 blocks: 128 l. DP (2, 1): 2 l. Total 130 l.
        lay = layout(dp=2, tp_ff=4, tp_model=4, m=1, schedule="zb-h2", placement={
            "dp": (2, 1), "tp_ff": (2, 2), "tp_model": (2, 2), "pp": (1, 1), "ep": (1, 1)})
        slow = H100.model_copy(update={"levels": tuple(
            lvl.model_copy(update={"lat_s": 100 * lvl.lat_s}) for lvl in H100.levels)})
        a = evaluate(H100, SMALL, lay).step
        b = evaluate(slow, SMALL, lay).step
        assert a.step_s == a.floor_s and b.step_s == b.floor_s
        assert b.step_s > a.step_s
        assert b.step_s - a.step_s == pytest.approx(130 * 99 * 1.125e-6, rel=1e-9)

    def test_floor_applies_to_1f1b(self):
        # 1F1B with m < N_PP pays only m / N_PP of the serial latency in Eq. 21; the floor still holds.
        lay = layout(tp_ff=2, tp_model=2, pp=8, m=1)
        r = row(flat(lat_s=1e-3, bw_bidir=1e15), SMALL, lay)
        # Path latency: 2 passes * (8 blocks * 4 l + 7 boundaries * l) = 78 l = 78 ms; Eq. 21 charges 1/8 of it.
        assert r["latency_s"] == pytest.approx(78e-3 / 8, rel=1e-12)
        assert r["critical_path_s"] > 78e-3
        assert r["step_s"] == pytest.approx(max(r["eq21_s"], r["floor_s"]))
        assert r["step_s"] >= 78e-3


# --------------------------------------------------------------------------------------------------
# Memory (docs/model.md §7)
# --------------------------------------------------------------------------------------------------


class TestMemory:
    def test_breakdown_by_hand(self):
        # DENSE (N_p = 67,108,864), N_DP = 2, N_TP,ff = 2, N_PP = 2, m = 4, 1F1B:
        #   params per GPU P = 67,108,864 / 4 = 16,777,216
        #   weights 2 P = 33,554,432; grads 2 P = 33,554,432; optimizer 12 P / N_DP = 100,663,296
        #   activations: (d_model / 1 + d_ff / 2) = 3072 words/token x nanobatch 65536 / (1 * 2 * 4) = 8192
        #     x 4 layers on the stage x 1 expert x in flight min(N_PP, m) = 2 x 2 B = 402,653,184
        #   reserve 2e9; total 2,570,425,344.
        mem = evaluate(flat(), DENSE, layout(dp=2, tp_ff=2, pp=2, m=4)).memory
        assert mem.weights_bytes == pytest.approx(33_554_432)
        assert mem.grads_bytes == pytest.approx(33_554_432)
        assert mem.optimizer_bytes == pytest.approx(100_663_296)
        assert mem.activations_bytes == pytest.approx(402_653_184)
        assert mem.reserve_bytes == pytest.approx(2e9)
        assert mem.total_bytes == pytest.approx(2_570_425_344)
        assert mem.capacity_bytes == 80e9 and mem.fits

    def test_zb_h2_and_experts(self):
        # E = 4, N_EP = 2, N_TP,model = 2, N_PP = 2, zb-h2 with m = 4 (in flight min(2 N_PP - 1, m) = 3):
        #   N_p = 4 * 67,108,864 = 268,435,456; P = 268,435,456 / (2 * 2 * 2) = 33,554,432
        #   activations: (1024/2 + 4096) = 4608 words x nanobatch 65536 / (4 * 1 * 4) = 4096 tokens
        #     x 4 layers x 2 experts on the GPU x 3 in flight x 2 B = 18,874,368 * 48 = 905,969,664
        mem = evaluate(flat(), sparse(4), layout(tp_model=2, pp=2, ep=2, m=4, schedule="zb-h2")).memory
        assert mem.weights_bytes == pytest.approx(2 * 33_554_432)
        assert mem.optimizer_bytes == pytest.approx(12 * 33_554_432)
        assert mem.activations_bytes == pytest.approx(905_969_664, rel=1e-12)

    def test_does_not_fit(self):
        # A 116-billion-parameter model on one GPU: 16 B per parameter of state alone is ~1.9 TB > 80 GB.
        big = Workload(d_model=12288, d_ff=49152, layers=96, experts=1, batch_tokens=2**22, tokens=1e9)
        mem = evaluate(flat(), big, layout(m=64)).memory
        assert mem.total_bytes > 16 * 2 * 96 * 12288 * 49152
        assert not mem.fits


def test_evaluate_rejects_wrong_level_count():
    with pytest.raises(ValueError):
        evaluate(H100, DENSE, layout(dp=2))  # one-level placement on a two-level system


def test_placement_keys_are_the_degrees():
    assert set(layout().placement) == set(DEGREES)
