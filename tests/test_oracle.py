"""`planner.api.plan` against an independent brute-force oracle (tests/oracle.py) on tiny instances.

The oracle builds the layout space from the rules in docs/model.md ("The search space") with its own divisor and
placement code, prices every layout with the package's public cost model, and takes the lexicographic optimum in
exact floats. The planner must agree on feasibility and on the GPU count, and its step time must be the oracle's
optimum to 1e-9 relative. Where the planner returns a different layout, that layout must itself be a feasible layout
of the oracle's space, priced within 10 ns of the optimum's step time (and, on an exact float tie, of its network
time): CP-SAT works in whole nanoseconds, each term rounded up (docs/model.md, "Times as integers"), so it may
pick any layout within 5 ns of the float optimum.

Hardware: the shipped h100 (NVLink groups of 8, InfiniBand above, unbounded), a three-level copy of it with small
groups (2, 4, 16 GPUs: every level is used by clusters of 4-16 GPUs, and its top level is bounded, so an infeasible
deadline is proven over the whole space), and an h100 with 2.02 GB of HBM (2 GB of it the fixed reserve), on which
memory decides the GPU count. The expected GPU counts in the instance list are what the oracle found when the
deadlines were chosen (between the fastest layouts of neighbouring GPU counts); they only document the instances.
"""

from __future__ import annotations

import math

import oracle
import pytest

from planner.api import plan
from planner.cost.matmul import matmul_time_s
from planner.errors import Infeasible
from planner.hardware import get_hardware
from planner.schema import Layout, NetworkLevel, Workload

TIE_S = 10e-9
"""CP-SAT rounding allowance: integer nanoseconds, each summed term rounded up (at most 5 ns per expression)."""
REL = 1e-9
DAY_S = 86400.0

H100 = get_hardware("h100")
TRI16 = H100.model_copy(update={"name": "tri16", "levels": (
    NetworkLevel(name="pair", size=2, bw_bidir_Bps=900e9, lat_s=1.0e-6),
    NetworkLevel(name="quad", size=4, bw_bidir_Bps=200e9, lat_s=2.0e-6),
    NetworkLevel(name="pod", size=16, bw_bidir_Bps=50e9, lat_s=4.0e-6),
)})
SMALL_HBM = H100.model_copy(update={"name": "h100-2.02gb", "gpu": H100.gpu.model_copy(update={"hbm_bytes": 2.02e9})})
HARDWARE = {"h100": H100, "h100-superpod": get_hardware("h100-superpod"), "tri16": TRI16, "small-hbm": SMALL_HBM}

# (d_model, d_ff, layers, experts, batch_tokens); 1e9 training tokens each.
DENSE = (256, 1024, 4, 1, 4096)
SPARSE = (128, 512, 2, 4, 1024)
TINY = (64, 256, 2, 1, 512)
WIDE = (512, 2048, 2, 1, 2048)
SPARSE_E4_L4 = (64, 256, 4, 4, 1024)


def workload(shape) -> Workload:
    d, f, layers, e, b = shape
    return Workload(d_model=d, d_ff=f, layers=layers, experts=e, batch_tokens=b, tokens=1e9)


def _inst(hw, shape, *, deadline_s=None, gpus=None, schedule="auto", overlap=False, expect=None, slow=False):
    """One instance; `expect` is the oracle's GPU count (None: infeasible)."""
    mode = f"dl{deadline_s:g}s" if deadline_s is not None else f"N{gpus}"
    ident = f"{hw}-{'x'.join(map(str, shape))}-{mode}-{schedule}" + ("-overlap" if overlap else "")
    marks = [pytest.mark.slow] if slow else []
    return pytest.param(hw, shape, deadline_s, gpus, schedule, overlap, expect, id=ident, marks=marks)


INSTANCES = [
    # deadline mode: fewest GPUs, then step time, then network time
    _inst("h100", DENSE, deadline_s=32.0, expect=8),
    _inst("h100", DENSE, deadline_s=30.0, schedule="1f1b", overlap=True, expect=8, slow=True),  # ~3 s
    _inst("tri16", SPARSE, deadline_s=60.0, expect=4),
    _inst("tri16", DENSE, deadline_s=32.4, schedule="1f1b", overlap=True, expect=8, slow=True),  # ~14 s
    _inst("small-hbm", WIDE, deadline_s=1e6, expect=4),  # 1 and 2 GPUs do not fit in 2.02 GB
    # the whole space's best is 106.9 s; the oracle proves it by pricing all of it (~7 s)
    _inst("tri16", TINY, deadline_s=100.0, schedule="zb-h2", expect=None, slow=True),
    # fixed-cluster mode: least step time, then network time
    _inst("h100", SPARSE, gpus=16, schedule="zb-h2", expect=16, slow=True),  # ~3 s
    _inst("tri16", TINY, gpus=8, schedule="1f1b", overlap=True, expect=8),
    _inst("tri16", SPARSE, gpus=8, schedule="zb-h2", overlap=True, expect=8),
    _inst("h100", DENSE, gpus=12, expect=None),  # 12 GPUs cannot fill whole 8-GPU NVLink groups
    # larger spaces (2,000-9,000 layouts each)
    _inst("h100", DENSE, deadline_s=30.0, expect=16, slow=True),
    _inst("tri16", SPARSE, deadline_s=53.7, expect=8, slow=True),
    _inst("tri16", TINY, deadline_s=107.4, schedule="zb-h2", overlap=True, expect=2, slow=True),
    _inst("tri16", TINY, deadline_s=100.0, expect=None, slow=True),
    _inst("h100", SPARSE, gpus=16, expect=16, slow=True),
    _inst("h100-superpod", SPARSE, gpus=16, schedule="1f1b", overlap=True, expect=16, slow=True),
    _inst("tri16", DENSE, gpus=8, expect=8, slow=True),
    _inst("tri16", SPARSE, gpus=16, schedule="zb-h2", overlap=True, expect=16, slow=True),
    _inst("tri16", SPARSE_E4_L4, gpus=16, schedule="1f1b", expect=16, slow=True),
]


def _planner_layout(p) -> Layout:
    lay = p.layout
    return Layout(dp=lay.dp, tp_ff=lay.tp_ff, tp_model=lay.tp_model, pp=lay.pp, interleave=lay.interleave, ep=lay.ep,
                  microbatches=lay.microbatches, schedule=lay.schedule,
                  placement={k: tuple(v) for k, v in lay.placement.items()})


@pytest.mark.parametrize("hw_name,shape,deadline_s,gpus,schedule,overlap,expect", INSTANCES)
def test_planner_matches_oracle(hw_name, shape, deadline_s, gpus, schedule, overlap, expect):
    hw, wl = HARDWARE[hw_name], workload(shape)
    days = None if deadline_s is None else deadline_s / DAY_S
    oracle_deadline = None if days is None else days * DAY_S  # the planner's own conversion
    res = oracle.solve(hw, wl, deadline_s=oracle_deadline, gpus=gpus, schedule=schedule, dp_overlap=overlap)
    assert res.priced <= 30_000
    if oracle_deadline is not None and res.deadline_margin_s is not None:
        # No layout sits within 20 ns per step of the deadline, where the planner's integer nanoseconds could differ.
        assert res.deadline_margin_s > wl.steps * 20e-9

    try:
        p = plan(workload=wl, gpu=hw, days=days, gpus=gpus, schedule=schedule, dp_overlap=overlap)
    except Infeasible:
        p = None

    if expect is None:
        assert res.best is None and res.feasible == {}
        assert p is None, f"planner found {p.gpus} GPUs, step {p.step_time_s!r} s; the oracle found nothing"
        return
    best = res.best
    assert best is not None and best.gpus == expect
    assert p is not None, f"planner found nothing; the oracle found {best.layout!r}"
    assert p.status == "optimal"
    assert p.gpus == best.gpus

    lay = _planner_layout(p)
    mine = res.price_of(lay)
    assert mine is not None, f"the planner's layout {lay!r} is not a feasible layout of the space in docs/model.md"
    assert math.isclose(p.step_time_s, mine.step_s, rel_tol=REL, abs_tol=0.0)
    if oracle.layout_key(lay) == oracle.layout_key(best.layout):
        assert math.isclose(p.step_time_s, best.step_s, rel_tol=REL, abs_tol=0.0)
        assert math.isclose(mine.network_s, best.network_s, rel_tol=REL, abs_tol=0.0)
    else:
        detail = f"planner {lay!r} step {mine.step_s!r} / oracle {best.layout!r} step {best.step_s!r}"
        assert best.step_s <= mine.step_s <= best.step_s + TIE_S, detail
        if mine.step_s == best.step_s:
            assert mine.network_s <= best.network_s + TIE_S, detail


# --------------------------------------------------------------------------------------------------
# The oracle itself, checked by hand
# --------------------------------------------------------------------------------------------------


def test_oracle_one_gpu_by_hand():
    """One GPU, one layer, one expert: every degree is 1, every placement factor 1, and 1F1B leaves only the
    microbatch count free (m | b = 8192 = 2^13: 14 layouts). No network, no bubble (N_PP = 1), so the step is
    m x the six GEMMs of one block at the nanobatch b/m, minimised over m. 12 d f b = 6.6e12 FLOP per step is
    9.53 ms at 0.7 x 989.4 TFLOP/s, plus 4.5 us of kernel latency per GEMM."""
    d, f, b = 4096, 16384, 8192
    wl = Workload(d_model=d, d_ff=f, layers=1, experts=1, batch_tokens=b, tokens=1e9)
    res = oracle.solve(H100, wl, gpus=1, schedule="1f1b")
    assert res.priced == 14 == len(res.feasible)
    for p in res.feasible.values():
        lay = p.layout
        assert (lay.dp, lay.tp_ff, lay.tp_model, lay.pp, lay.interleave, lay.ep) == (1, 1, 1, 1, 1, 1)
        assert lay.schedule == "1f1b" and all(v == (1, 1) for v in lay.placement.values())
        assert p.network_s == 0.0

    def six_gemms(nb: float) -> float:
        return float(2 * (matmul_time_s(H100.gpu, f, d, nb) + matmul_time_s(H100.gpu, d, f, nb))
                     + matmul_time_s(H100.gpu, f, d, nb, weight_grad=True)
                     + matmul_time_s(H100.gpu, d, f, nb, weight_grad=True))

    by_m = {m: m * six_gemms(b / m) for m in (2**k for k in range(14))}
    m_best = min(by_m, key=by_m.get)
    assert res.best.layout.microbatches == m_best
    assert res.best.step_s == pytest.approx(by_m[m_best], rel=1e-12)
    flop_s = 12.0 * d * f * b / (989.4e12 * 0.70)
    assert flop_s == pytest.approx(9.5302e-3, rel=1e-3)
    assert flop_s + 6 * m_best * 4.5e-6 <= res.best.step_s <= 1.10 * (flop_s + 6 * m_best * 4.5e-6)

    # Deadline mode with a generous deadline stops after the one-GPU count, with the same optimum.
    loose = oracle.solve(H100, wl, deadline_s=1e12, schedule="1f1b")
    assert loose.priced == 14 and loose.best.gpus == 1
    assert loose.best.step_s == res.best.step_s


def test_oracle_counts_by_hand():
    """Layout counts written out by hand from the rules in docs/model.md."""
    # d_model = d_ff = L = b = 2, dense, 2 GPUs on h100 (one NVLink group: the factor 2 sits on level 1).
    # dp = 2: m = 1, i in {1, 2} for 1F1B plus ZB-H2 (i = 1, m >= 1): 3. tp_ff = 2: m in {1, 2} x i in {1, 2}
    # for 1F1B plus m in {1, 2} for ZB-H2: 6; tp_model = 2: 6. pp = 2: i = 1, m in {1, 2}, 1F1B only
    # (ZB-H2 needs m >= 3): 2. Total 17, one placement each.
    wl = Workload(d_model=2, d_ff=2, layers=2, experts=1, batch_tokens=2, tokens=1e3)
    assert oracle.count_layouts(H100, wl, "auto", gpus=2) == 17
    assert oracle.count_layouts(H100, wl, "1f1b", gpus=2) == 2 + 4 + 4 + 2
    assert oracle.count_layouts(H100, wl, "zb-h2", gpus=2) == 1 + 2 + 2 + 0
    assert oracle.count_layouts(H100, wl, "auto", gpus=3) == 0

    # Three levels of capacity 2, 2, 4. Only tp_ff x tp_model varies (d = f = 4, L = b = 1, 1F1B).
    # 4 GPUs: the levels need products (2, 2, 1): (4, 1) and (1, 4) place one way, (2, 2) two ways: 4.
    # 8 GPUs: products (2, 2, 2); (2, 4): tp_model = 4 as (1,2,2), (2,1,2) or (2,2,1) with tp_ff = 2 on the
    # remaining level: 3; (4, 2) likewise: 6. 16 GPUs: (4, 4) with products (2, 2, 4): tp_ff / tp_model as
    # (2,2,1)/(1,1,4), (1,1,4)/(2,2,1), (1,2,2)/(2,1,2) or (2,1,2)/(1,2,2): 4. 1 GPU: 1; 2 GPUs: (2, 1), (1, 2): 2.
    wl = Workload(d_model=4, d_ff=4, layers=1, experts=1, batch_tokens=1, tokens=1e3)
    assert oracle.count_layouts(TRI16, wl, "1f1b", gpus=4) == 4
    assert oracle.count_layouts(TRI16, wl, "1f1b", gpus=8) == 6
    assert oracle.count_layouts(TRI16, wl, "1f1b", gpus=16) == 4
    assert oracle.count_layouts(TRI16, wl, "1f1b") == 1 + 2 + 4 + 6 + 4


def test_oracle_level_rules():
    """The placement rules on their own: capacities and bottom-up filling."""
    caps = oracle.level_capacities(TRI16)
    assert caps == [2, 2, 4]
    assert oracle.level_capacities(H100) == [8, None]
    assert sorted(oracle.factor_vectors(4, caps)) == [(1, 1, 4), (1, 2, 2), (2, 1, 2), (2, 2, 1)]
    assert oracle.factor_vectors(32, caps) == []
    assert len(oracle.factor_vectors(64, [8, None])) == 4  # 1, 2, 4 or 8 on NVLink
    # 16 GPUs on h100: two whole NVLink groups; dp = 16 can only be (8, 2).
    assert [p["dp"] for p in oracle.placements(H100, {"dp": 16, "tp_ff": 1, "tp_model": 1, "pp": 1, "ep": 1})] == [
        (8, 2)]
    # 2 GPUs on tri16 fill the first level only.
    pls = oracle.placements(TRI16, {"dp": 1, "tp_ff": 2, "tp_model": 1, "pp": 1, "ep": 1})
    assert [p["tp_ff"] for p in pls] == [(2, 1, 1)]
