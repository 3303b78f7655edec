"""Recomputation, ZeRO-1/2/3, sequence and context parallelism, FP8: memory against published formulas and runs,
the search against the enumerator where memory forces the choice (docs/model.md §7b)."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from bound_helpers import pair_bound_and_best

from planner.api import plan
from planner.cost.memory import RESERVE_BYTES
from planner.cost.step import evaluate
from planner.hardware import get_hardware
from planner.parallel.placement import greedy_placement
from planner.parallel.space import SearchOptions, check_layout
from planner.schema import Hardware, Layout, TransformerShape, Workload
from planner.search.cpsat import solve_cpsat
from planner.search.exhaustive import solve_exhaustive
from planner.workload.scaling import load_model_preset, transformer_workload

DEGREE_NAMES = ("dp", "tp_ff", "tp_model", "pp", "ep", "cp")


def layout(hw: Hardware, **values: int) -> Layout:
    degrees = {d: values.get(d, 1) for d in DEGREE_NAMES}
    return Layout(**{**degrees, "microbatches": 1, **values}, placement=greedy_placement(hw, degrees))


def with_hbm(name: str, gb: float) -> Hardware:
    hw = get_hardware(name)
    return hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"hbm_bytes": gb * 1e9})})


# --------------------------------------------------------------------------------------------------
# ZeRO: the seeds' formulas (seeds/001, "ZeRO Memory Savings per GPU", 70B model, N = 64)
# --------------------------------------------------------------------------------------------------


def test_zero_formulas_of_the_seeds_70b_on_64_gpus():
    # The formulas, at the seeds' P = 70e9: 4P + 12P/N = 293 GB, 2P + 14P/N = 155 GB, 16P/N = 17.5 GB.
    P, N = 70e9, 64
    assert (4 * P + 12 * P / N) / 1e9 == pytest.approx(293.1, abs=0.05)
    assert (2 * P + 14 * P / N) / 1e9 == pytest.approx(155.3, abs=0.05)
    assert 16 * P / N / 1e9 == pytest.approx(17.5, abs=0.05)
    # The planner on Llama 3 70B, pure data parallelism over 64 GPUs: the same formulas at its own P, plus what
    # ZeRO-2/3 hold transiently. By hand: the largest weight matrix is the LM head, 128256 x 8192.
    hw = get_hardware("h100")
    wl = load_model_preset("llama3-70b")
    P = wl.params
    largest = 128256 * 8192
    expected = {1: 4 * P + 12 * P / N, 2: 2 * P + 14 * P / N + 2 * largest, 3: 16 * P / N + 3 * 2 * largest}
    for zero, total in expected.items():
        mem = evaluate(hw, wl, layout(hw, dp=N, zero=zero)).memory
        state = mem.weights_bytes + mem.grads_bytes + mem.optimizer_bytes
        assert state == pytest.approx(total, rel=1e-12), zero


# --------------------------------------------------------------------------------------------------
# Activations: Korthikanti et al. 2022, Table 2 (bytes per layer; s sequence, b micro-batch, h hidden, a heads)
# --------------------------------------------------------------------------------------------------

S, B, H, A, T = 2048, 1, 12288, 96, 8  # GPT-3 175B with t = 8, the paper's Table 3 setting


def _korthikanti(sp: bool, recompute: int) -> float:
    sbh = S * B * H
    if recompute == 2:
        return 2 * sbh / (T if sp else 1)
    attention = 0 if recompute == 1 else 5 * A * S / (H * T)
    return sbh * ((34 / T if sp else 10 + 24 / T) + attention)


def _gpt3_as_in_the_paper() -> Workload:
    tr = TransformerShape(heads=A, kv_heads=A, head_dim=H // A, ffn="gelu", vocab=51200, tied_embeddings=True,
                          dropout=True, attention_kernel="unfused")
    return Workload(d_model=H, d_ff=4 * H, layers=96, batch_tokens=64 * S, tokens=300e9, seq_len=S, transformer=tr)


@pytest.mark.parametrize("sp", [False, True], ids=["tp", "tp+sp"])
@pytest.mark.parametrize("recompute", [0, 1, 2], ids=["none", "selective", "full"])
def test_activation_bytes_per_layer_are_korthikantis_table_2(sp, recompute):
    from planner.cost.memory import KEPT_ROLES

    wl = _gpt3_as_in_the_paper()
    mo = wl.model_ops
    assert mo is not None
    cols = {"tp_ff": np.array([T]), "tp_model": np.array([1]), "sp": np.array([int(sp)])}
    per_token = mo.layer.saved_bytes_per_token(cols, KEPT_ROLES[recompute])
    assert float(per_token[0]) * S * B == pytest.approx(_korthikanti(sp, recompute), rel=1e-12)


def test_activation_memory_of_one_stage_by_hand():
    # Korthikanti Table 3's 175B layout: t 8, p 8, micro-batch 1, 64 sequences per step (64 microbatches), with
    # sequence parallelism and selective recomputation (their method): the first stage keeps p microbatches of its
    # 12 layers at 34 s b h / t bytes each (1F1B), and the last one microbatch plus its fp32 logits.
    hw = with_hbm("a100", 80)
    wl = _gpt3_as_in_the_paper()
    ev = evaluate(hw, wl, layout(hw, tp_ff=8, pp=8, microbatches=64, sp=1, recompute=1))
    per_layer = S * B * H * 34 / T
    first = 8 * 12 * per_layer
    assert ev.memory.activations_bytes == pytest.approx(first, rel=1e-12)
    assert ev.memory.fits


# --------------------------------------------------------------------------------------------------
# Published runs that trained: the planner must not call them "does not fit"
# --------------------------------------------------------------------------------------------------

# Narayanan et al. 2021 (SC'21, arXiv:2104.04473), Table 2: ZeRO-3 without model parallelism on A100 80 GB, sequence
# 2048, vocabulary 51200; (layers, hidden, heads, global batch, GPUs, micro-batch). Megatron of 2021: dropout, no
# fused attention; full recomputation (their training-time formula counts the recomputed forward pass).
ZERO3_RUNS = [(96, 12288, 96, 1536, 384, 4), (96, 12288, 96, 1536, 768, 2), (96, 12288, 96, 1536, 1536, 1),
              (105, 20480, 128, 2560, 640, 4), (105, 20480, 128, 2240, 1120, 2), (105, 20480, 128, 2240, 2240, 1)]


def _megatron_2021(layers: int, hidden: int, heads: int, batch: int) -> Workload:
    tr = TransformerShape(heads=heads, kv_heads=heads, head_dim=hidden // heads, ffn="gelu", vocab=51200,
                          tied_embeddings=True, dropout=True, attention_kernel="unfused")
    return Workload(d_model=hidden, d_ff=4 * hidden, layers=layers, batch_tokens=batch * 2048, tokens=300e9,
                    seq_len=2048, transformer=tr)


@pytest.mark.parametrize("run", ZERO3_RUNS, ids=[f"{r[0]}L-{r[4]}gpus" for r in ZERO3_RUNS])
def test_megatron_2021_zero3_runs_fit(run):
    layers, hidden, heads, batch, gpus, mbs = run
    hw = with_hbm("a100", 80)  # Selene: A100 SXM4 80 GB
    wl = _megatron_2021(layers, hidden, heads, batch)
    lay = layout(hw, dp=gpus, microbatches=batch // (gpus * mbs), zero=3, recompute=2)
    assert check_layout(hw, wl, lay) == []
    ev = evaluate(hw, wl, lay)
    assert ev.memory.fits, ev.memory
    # ZeRO-1 (what the planner knew before) does not fit: the optimizer alone would not.
    assert not evaluate(hw, wl, lay.model_copy(update={"zero": 1})).memory.fits


def test_megatron_2021_footnote_530b_does_not_fit_on_560_gpus():
    # Table 2's footnote: the 530B model at micro-batch 4 with ZeRO-3 did not fit on 560 GPUs (they used 640).
    hw = with_hbm("a100", 80)
    wl = _megatron_2021(105, 20480, 128, 2240)
    assert not evaluate(hw, wl, layout(hw, dp=560, microbatches=1, zero=3, recompute=2)).memory.fits


def _llama405(seq_len: int, sequences: int, precision: str = "bf16") -> Workload:
    wl = load_model_preset("llama3-405b")
    return Workload(**{**wl.model_dump(), "seq_len": seq_len, "batch_tokens": seq_len * sequences,
                       "precision": precision})


# torchtitan benchmarks/llama3_h100_202412_torchtitan.md (512 H100 96 GB HBM2e, Float8, full activation
# checkpointing, FSDP): 3D FSDP 8 x TP 8 x PP 8 with local batch 32 (1F1B and interleaved), and 4D with CP 1/2/4/8
# at 32K/64K/128K/256K tokens, local batch 8. Sequence parallelism comes with torchtitan's TP.
TITAN_RUNS = [
    ("3d-1f1b", 8192, 256, dict(dp=8, tp_ff=8, pp=8, microbatches=32)),
    ("3d-interleaved", 8192, 256, dict(dp=8, tp_ff=8, pp=8, interleave=2, microbatches=32)),
    ("4d-cp2", 65536, 8, dict(dp=4, cp=2, tp_ff=8, pp=8, microbatches=2)),
    ("4d-cp4", 131072, 8, dict(dp=2, cp=4, tp_ff=8, pp=8, microbatches=4)),
    ("4d-cp8", 262144, 8, dict(dp=1, cp=8, tp_ff=8, pp=8, microbatches=8)),
]


@pytest.mark.parametrize("name,seq,sequences,values", TITAN_RUNS, ids=[r[0] for r in TITAN_RUNS])
def test_torchtitan_405b_runs_fit(name, seq, sequences, values):
    hw = with_hbm("h100", 96)
    wl = _llama405(seq, sequences, "fp8")
    lay = layout(hw, **values, sp=1, zero=3, recompute=2)
    assert check_layout(hw, wl, lay) == []
    assert evaluate(hw, wl, lay).memory.fits
    # Without FSDP and recomputation (what the planner knew before) it does not.
    assert not evaluate(hw, wl, lay.model_copy(update={"zero": 1, "recompute": 0, "sp": 0})).memory.fits


# Dubey et al. 2024 (arXiv:2407.21783), Table 4: Llama 3 405B on H100 80 GB; 8K sequences without activation
# checkpointing (§3.3.2), 16M tokens per step.
LLAMA3_RUNS = [
    ("8k-8192gpus", 8192, 2048, dict(dp=64, tp_ff=8, pp=16, microbatches=32)),
    ("8k-16384gpus", 8192, 2048, dict(dp=128, tp_ff=8, pp=16, microbatches=16)),
    ("131k-cp16", 131072, 128, dict(dp=8, cp=16, tp_ff=8, pp=16, microbatches=16)),
]


@pytest.mark.parametrize("name,seq,sequences,values", LLAMA3_RUNS, ids=[r[0] for r in LLAMA3_RUNS])
def test_llama3_405b_runs_fit(name, seq, sequences, values):
    hw = get_hardware("h100")
    wl = _llama405(seq, sequences)
    lay = layout(hw, **values, sp=1, zero=3)
    assert check_layout(hw, wl, lay) == [] and lay.gpus in (8192, 16384)
    assert evaluate(hw, wl, lay).memory.fits


# --------------------------------------------------------------------------------------------------
# Time: recomputation and FP8 by hand
# --------------------------------------------------------------------------------------------------


def test_recomputation_costs_its_forward_and_counts_in_hfu_only():
    hw = get_hardware("h100")
    wl = load_model_preset("llama3-8b")
    base = layout(hw, tp_ff=8, microbatches=4)
    ev0, ev1, ev2 = (evaluate(hw, wl, base.model_copy(update={"recompute": r})) for r in (0, 1, 2))
    # MFU counts model FLOPs only: the extra work only lowers it.
    assert ev0.mfu > ev1.mfu > ev2.mfu
    # HFU = MFU x (model + recomputed FLOPs) / model FLOPs; full recomputation re-runs a third of the layers' work.
    layers_flop = 6 * wl.non_embedding_active_params + wl.attention_flop_per_token
    assert ev2.hfu == pytest.approx(ev2.mfu * (1 + layers_flop / 3 / wl.model_flop_per_token), rel=1e-12)
    assert ev1.hfu == pytest.approx(ev1.mfu * (1 + wl.attention_flop_per_token / 3 / wl.model_flop_per_token),
                                    rel=1e-12)
    assert ev0.memory.activations_bytes > ev1.memory.activations_bytes > ev2.memory.activations_bytes


def test_fp8_runs_layer_gemms_faster_and_keeps_gemm_inputs_in_one_byte():
    hw = get_hardware("h100")
    bf16 = load_model_preset("llama3-8b")
    fp8 = Workload(**{**bf16.model_dump(), "precision": "fp8"})
    lay = layout(hw, tp_ff=8, microbatches=4)
    e16, e8 = evaluate(hw, bf16, lay), evaluate(hw, fp8, lay)
    gemm = {o.name: o.seconds for o in e16.ops if o.kind == "gemm"}
    gemm8 = {o.name: o.seconds for o in e8.ops if o.kind == "gemm"}
    assert gemm8["mlp up + gate"] < 0.75 * gemm["mlp up + gate"]  # 2x the FLOP rate, minus fixed latencies
    assert gemm8["lm head"] == gemm["lm head"]  # the LM head stays in bf16
    assert e8.memory.weights_bytes == e16.memory.weights_bytes
    assert e8.memory.activations_bytes < e16.memory.activations_bytes
    assert e8.step.step_s < e16.step.step_s


def test_fp8_needs_a_gpu_with_an_fp8_rate():
    wl = Workload(**{**load_model_preset("llama3-8b").model_dump(), "precision": "fp8"})
    hw = get_hardware("a100")
    assert any("FP8" in p for p in check_layout(hw, wl, layout(hw, tp_ff=8)))


# --------------------------------------------------------------------------------------------------
# The search decides: CP-SAT = the enumerator where memory forces recomputation / ZeRO / CP
# --------------------------------------------------------------------------------------------------


def _tight(extra_bytes: float) -> Hardware:
    hw = get_hardware("h100")
    return hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"hbm_bytes": RESERVE_BYTES + extra_bytes})})


def _tiny_long() -> Workload:
    return transformer_workload(64, 128, 4, 1, 256, 16 * 256, 1e9, {"heads": 4, "kv_heads": 2, "vocab": 256,
                                                                   "ffn": "swiglu"}, "tiny long")


@pytest.mark.slow  # > 5 s: runs in .ci/run's `-m slow` step
@pytest.mark.parametrize("extra,gpus", [(3e6, 4), (3e6, 16), (6e6, 8), (12e6, 8), (12e6, None)])
def test_cpsat_matches_enumerator_when_memory_binds(extra, gpus):
    hw, wl = _tight(extra), _tiny_long()
    opts = SearchOptions(gpus=gpus)
    deadline = None if gpus is not None else 4.2e-4 * wl.steps
    ex = solve_exhaustive(hw, wl, opts, deadline)
    cp = solve_cpsat(hw, wl, opts, deadline)
    assert ex.status == cp.status == "optimal"
    assert ex.space_size == cp.space_size
    ee, ec = evaluate(hw, wl, ex.layout), evaluate(hw, wl, cp.layout)
    assert ec.memory.fits and check_layout(hw, wl, cp.layout) == []
    assert ec.gpus == ee.gpus
    assert abs(ec.step.step_s - ee.step.step_s) <= 1e-9
    assert abs(ec.step.network_s - ee.step.network_s) <= 1e-9


def test_memory_forces_a_saver_and_the_search_finds_it():
    hw, wl = _tight(3e6), _tiny_long()
    res = solve_cpsat(hw, wl, SearchOptions(gpus=4), None)
    lay = res.layout
    assert lay is not None
    plain = lay.model_copy(update={"recompute": 0, "zero": 1, "cp": 1, "sp": 0})
    assert not evaluate(hw, wl, plain).memory.fits  # the savers are what makes it fit
    assert (lay.recompute, lay.zero, lay.cp, lay.sp) != (0, 1, 1, 0)


def test_fixed_options_are_respected():
    hw, wl = _tight(12e6), _tiny_long()
    for name, value in (("recompute", 2), ("zero", 1), ("cp", 2), ("sp", 0)):
        opts = SearchOptions(gpus=8, fixed=((name, value),))
        ex, cp = solve_exhaustive(hw, wl, opts, None), solve_cpsat(hw, wl, opts, None)
        assert cp.layout is not None and ex.layout is not None
        assert cp.layout.degree(name) == value
        assert abs(evaluate(hw, wl, cp.layout).step.step_s - evaluate(hw, wl, ex.layout).step.step_s) <= 1e-9


# --------------------------------------------------------------------------------------------------
# Must show: the 131K-token Llama 3 405B plan chooses context parallelism, proven optimal
# --------------------------------------------------------------------------------------------------


def test_llama3_405b_long_context_plan_uses_cp():
    wl = _llama405(131072, 128)
    doc = plan(workload=wl, gpu="h100", gpus=16384)
    assert doc.status == "optimal" and doc.solver.status == "optimal" and doc.gpus == 16384
    assert doc.layout is not None and doc.layout.cp > 1
    assert doc.memory is not None and doc.memory.total_bytes <= doc.memory.capacity
    # Without context parallelism every layout is worse (or does not fit).
    fixed = plan(workload=wl, gpu="h100", gpus=16384, fixed={"cp": 1})
    assert fixed.step_time_s is not None and doc.step_time_s is not None
    assert fixed.step_time_s > doc.step_time_s


# --------------------------------------------------------------------------------------------------
# The command line: pins, labels, clear errors
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv,message", [
    (["planner", "evaluate", "--model", "llama3-8b", "--tp", "8", "--recompute", "bogus"], "recompute must be"),
    (["plan", "--compute", "1e24", "--recompute", "full"], "needs a transformer workload"),
    (["plan", "--model", "llama3-8b", "--gpus", "64", "--cp", "3"], "--cp 3 is not possible"),
    (["plan", "--model", "llama3-8b", "--gpus", "64", "--precision", "fp8", "--gpu", "a100"], "no FP8 rate"),
    (["planner", "evaluate", "--model", "llama3-8b", "--sp", "on"], "sp=on needs tensor parallelism"),
])
def test_bad_saver_flags_are_one_line_errors(capsys, argv, message):
    from planner.cli import app, plan_app, run

    prog, *args = argv
    code = run(app if prog == "planner" else plan_app, args, prog)
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_evaluate_takes_the_savers_in_words(capsys):
    from planner.cli import app, run

    code = run(app, ["evaluate", "--model", "llama3-8b", "--tp", "8", "--dp", "32", "--mbs", "1", "--sp", "on",
                     "--recompute", "selective", "--zero", "2", "--json"], "planner")
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    lay = doc["layout"]
    assert (lay["sp"], lay["recompute"], lay["zero"], lay["tp_ff"], lay["dp"]) == (1, 1, 2, 8, 32)
    assert doc["hfu"] > doc["mfu"]


# --------------------------------------------------------------------------------------------------
# Presolve over the new dimensions: sound bounds and sound exclusions, against full pricing
# --------------------------------------------------------------------------------------------------


def _priced_space(hw: Hardware, wl: Workload):
    from planner.parallel.space import build_space, level_products, model_parallel_rows, tuples_for_model_parallel
    from planner.search.exhaustive import price_placements
    from planner.search.presolve import ShapeTable, tuple_terms

    space = build_space(hw, wl, SearchOptions())
    t = tuples_for_model_parallel(space, model_parallel_rows(space), space.dp_m)
    _, valid = level_products(hw, t.gpus)
    t = t.take(np.nonzero(valid)[0])
    shapes = ShapeTable.for_space(hw, wl, space)
    q = tuple_terms(hw, wl, t, shapes)
    step = np.full(len(t), np.inf)
    net = np.full(len(t), np.inf)
    # Priced a block of tuples at a time: every placement of the whole space at once held over 2 GB.
    for lo in range(0, len(t), PRICE_BLOCK):
        idx = np.arange(lo, min(lo + PRICE_BLOCK, len(t)))
        rows, _, arr = price_placements(hw, wl, t.take(idx), False, {k: v[idx] for k, v in q.items()})
        if len(rows) == 0:
            continue
        rows = rows + lo
        np.minimum.at(step, rows, arr["step_s"])
        order = np.lexsort((arr["network_s"], arr["step_s"]))
        first = np.full(len(t), -1)
        first[rows[order[::-1]]] = order[::-1]  # the placement with the least (step, network) of each tuple
        net[rows[first[first >= 0]]] = arr["network_s"][first[first >= 0]]
    return space, t, q, shapes, step, net


PRICE_BLOCK = 4096
"""Tuples priced together by `_priced_space` (each with all its placements)."""


@functools.cache
def _priced_tiny_long():
    """`_priced_space` of `_tiny_long()` on the h100's levels, shared by the tests below: what it returns reads no
    HBM capacity (step and network times, and the bytes each tuple needs), so each test compares those bytes with
    its own capacity."""
    return _priced_space(get_hardware("h100"), _tiny_long())


@pytest.mark.slow  # > 5 s: runs in .ci/run's `-m slow` step
def test_bounds_hold_over_the_new_dimensions():
    from planner.search.cpsat import PairIndex
    from planner.search.presolve import LeastFeatures, step_lower_bound

    hw, wl = _tight(12e6), _tiny_long()
    space, t, q, shapes, best, _ = _priced_tiny_long()
    priced = np.isfinite(best)
    assert priced.sum() > 1000 and len(np.unique(t["cp"][priced])) > 2 and len(np.unique(t["zero"])) == 3
    least = LeastFeatures(hw, wl)
    lb = step_lower_bound(hw, wl, t, q, least)
    assert (lb[priced] <= best[priced] * (1 + 1e-12)).all()
    index = PairIndex.build(space, {k: v for k, v in t.items() if k not in ("dp", "microbatches")})
    bound, pair_best = pair_bound_and_best(hw, wl, t, best, priced, index, shapes, shapes.least_work(space), least)
    assert (bound <= pair_best * (1 + 1e-12)).all()


def _no_worse(step_a: float, net_a: float, step_b: float, net_b: float) -> bool:
    """(step, network) of a is lexicographically no worse than b's (the objective's order), up to float noise."""
    tol = 1e-12
    return step_a < step_b * (1 - tol) or (step_a <= step_b * (1 + tol) and net_a <= net_b * (1 + tol))


@pytest.mark.slow  # 9 s in the default run
def test_excluded_options_are_dominated():
    from planner.search.cpsat import OPTION_KEYS
    from planner.search.presolve import dominated_options, unique_rows

    hw = _tight(6e6)
    _, t, q, _, step, net = _priced_tiny_long()
    fits = (q["memory_bytes"] <= hw.gpu.hbm_bytes) & np.isfinite(step)
    t, step, net = t.take(np.nonzero(fits)[0]), step[fits], net[fits]
    out = dominated_options(t, OPTION_KEYS)
    assert 0 < out.sum() < len(out)
    # Every excluded row has a kept row of the same tuple that is no worse in step time, then network time.
    _, group = unique_rows([np.asarray(t[k], dtype=np.int64) for k in OPTION_KEYS])
    for g in np.unique(group[out]):
        members = np.nonzero(group == g)[0]
        kept = members[~out[members]]
        assert len(kept)
        for i in members[out[members]]:
            assert any(_no_worse(step[k], net[k], step[i], net[i]) for k in kept)
    # Sequence parallelism with TP: never worse than without.
    with_tp = np.nonzero((t["tp_ff"] > 1) & (t["sp"] == 0))[0]
    names = tuple(k for k in t if k != "sp")
    _, key = unique_rows([np.asarray(t[k], dtype=np.int64) for k in names])
    on = {int(key[i]): i for i in np.nonzero(t["sp"] == 1)[0]}
    checked = 0
    for i in with_tp:
        k = on.get(int(key[i]))
        if k is not None:
            assert _no_worse(step[k], net[k], step[i], net[i])
            checked += 1
    assert checked > 100


# --------------------------------------------------------------------------------------------------
# CP-SAT = the independent oracle (tests/oracle.py: its own space rules, only the price from the package)
# --------------------------------------------------------------------------------------------------

ORACLE_CASES = [
    pytest.param(0.5e6, 2, id="0.5MB-2gpus-infeasible"),
    pytest.param(1e6, 4, id="1MB-4gpus"),
    pytest.param(2e6, 2, id="2MB-2gpus"),
    pytest.param(0.5e6, 8, id="0.5MB-8gpus", marks=pytest.mark.slow),
    pytest.param(1e6, 8, id="1MB-8gpus", marks=pytest.mark.slow),
]


@pytest.mark.slow  # > 5 s: runs in .ci/run's `-m slow` step
@pytest.mark.parametrize("extra,gpus", ORACLE_CASES)
def test_cpsat_matches_the_independent_oracle_with_memory_savers(extra, gpus):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import oracle

    hw = _tight(extra)
    wl = transformer_workload(64, 128, 2, 1, 64, 8 * 64, 1e9, {"heads": 4, "kv_heads": 2, "vocab": 256,
                                                              "ffn": "swiglu"}, "tiny")
    res = oracle.solve(hw, wl, gpus=gpus)
    cp = solve_cpsat(hw, wl, SearchOptions(gpus=gpus), None)
    if res.best is None:
        assert cp.status == "infeasible" and cp.layout is None
        return
    assert cp.status == "optimal" and cp.layout is not None
    ev = evaluate(hw, wl, cp.layout)
    assert ev.memory.fits
    assert ev.step.step_s == pytest.approx(res.best.step_s, rel=1e-12, abs=0)
    assert ev.step.network_s == pytest.approx(res.best.network_s, rel=1e-12, abs=0)


def test_fp8_mfu_is_against_the_fp8_peak():
    hw = get_hardware("h100")
    wl = Workload(**{**load_model_preset("llama3-8b").model_dump(), "precision": "fp8"})
    ev = evaluate(hw, wl, layout(hw, tp_ff=8, microbatches=4))
    fp8 = hw.gpu.fp8
    assert fp8 is not None and fp8.peak_flops == pytest.approx(2 * hw.gpu.peak_flops)
    step_flop = wl.model_flop_per_token * wl.batch_tokens
    assert ev.mfu == pytest.approx(step_flop / (ev.gpus * fp8.peak_flops * ev.step.step_s), rel=1e-12)
    assert 0 < ev.mfu < 1
