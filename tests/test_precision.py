"""Low-precision recipes (issue 25; docs/model.md §1c): FP8 and FP4 GEMMs priced from measured rates, the recipes'
quantization work, 16-bit layers and weight casts, checked against hand arithmetic on Llama 3 8B."""

from __future__ import annotations

import pytest

from planner import api
from planner.errors import InvalidInput
from planner.profile import get_profile
from planner.schema import Layout, Workload
from planner.workload import load_model_preset

H100_HBM_Bps = 3352e9  # hardware_specs/h100.toml
ELEMENTWISE_FRACTION = 0.85  # profiles/realistic.toml [elementwise] hbm_fraction

# Llama 3 8B (models/llama3-8b.toml): d_model 4096, 32 query heads x 128, 8 KV heads, SwiGLU d_ff 14,336, 32 layers.
# Per layer and token, the GEMM inputs (columns of X) and outputs (rows of dY) of q, kv, o, mlp up+gate, mlp down;
# q and kv share their input, which a recipe casting once per module input (Transformer Engine's fused QKV) casts once:
INPUT_ELEMENTS = 4096 + 4096 + 4096 + 14336  # 26,624
OUTPUT_ELEMENTS = 4096 + 2 * 1024 + 4096 + 2 * 14336 + 4096  # 43,008
LAYERS = 32


def _workload(precision: str, recipe: str | None = None, seq_len: int = 8192) -> Workload:
    wl = load_model_preset("llama3-8b")
    return Workload(**{**wl.model_dump(), "precision": precision, "recipe": recipe})


def _evaluate(precision: str, recipe: str | None, gpu: str = "h100", profile: str = "realistic"):
    wl = _workload(precision, recipe)
    seqs = wl.batch_tokens // wl.seq_len
    lay = Layout(dp=8, tp_ff=1, tp_model=1, pp=1, microbatches=seqs // 8, schedule="1f1b", placement={"dp": (8, 1)})
    hw = api.resolve(gpu, profile)
    return api.evaluate(lay, hw, wl), wl, seqs // 8


@pytest.mark.parametrize(("recipe", "bytes_per_element"), [("delayed", 4.0), ("current", 6.0), ("mxfp8", None)])
def test_quantize_work_is_the_recipes_bytes_at_hbm_bandwidth(recipe: str, bytes_per_element: float | None
                                                              ) -> None:
    if bytes_per_element is None:  # mxfp8 needs Blackwell; its bytes are checked on the profile value below
        mxfp8 = get_profile("realistic").recipes["mxfp8"]
        assert mxfp8.quantize_bytes_per_element == pytest.approx(2 + 2 * (1 + 1 / 32))
        return
    ev, wl, microbatches = _evaluate("fp8", recipe)
    (row,) = [op for op in ev.ops if op.name.startswith("quantize")]
    tokens = 8192  # one sequence per microbatch on each data-parallel rank
    by_hand = (INPUT_ELEMENTS + OUTPUT_ELEMENTS) * tokens * bytes_per_element * LAYERS * microbatches / (
        H100_HBM_Bps * ELEMENTWISE_FRACTION)
    assert row.seconds == pytest.approx(by_hand, rel=1e-9)


ROWWISE_CAST_B = 13.77  # profiles/realistic.toml [recipe.rowwise], derived by benchmarks/rowwise_linear.py
ROWWISE_RESCALE_B = 18.38


def _rowwise(compiled: bool):
    """Llama 3 8B on 8 H100s (data parallel) under torchao's row-wise recipe, eager or compiled."""
    from planner.hardware import with_profile

    wl = _workload("fp8", "rowwise")
    seqs = wl.batch_tokens // wl.seq_len
    lay = Layout(dp=8, tp_ff=1, tp_model=1, pp=1, microbatches=seqs // 8, schedule="1f1b", placement={"dp": (8, 1)})
    hw = api.resolve("h100", "realistic")
    hw = with_profile(hw, hw.profile.model_copy(update={"compiled": compiled}))
    return api.evaluate(lay, hw, wl), seqs // 8


# weight gradients: q 4096 x 4096, kv 2048 x 4096, o 4096 x 4096, up + gate 28,672 x 4096, down 4096 x 14,336
LAYER_PARAMS = 4096 * (4096 + 2048 + 4096 + 28672) + 4096 * 14336  # 218,103,808


def test_rowwise_work_is_torchaos_casts_per_module_and_the_backward_rescale() -> None:
    """torchao's row-wise recipe (profiles/realistic.toml [recipe.rowwise]), eager: every nn.Linear casts its own
    input, so the attention input is cast three times (wq, wk, wv) and the MLP input twice (w1, w3); each output
    gradient once; both at the recipe's 13.77 B per element; and the backward GEMMs' 16-bit outputs are scaled after
    the GEMM at 18.38 B per element: every module's input gradient and every weight gradient."""
    ev, microbatches = _rowwise(compiled=False)
    (row,) = [op for op in ev.ops if op.name.startswith("quantize")]
    tokens = 8192
    per_module_inputs = 3 * 4096 + 4096 + 2 * 4096 + 14336  # wq wk wv, wo, w1 w3, w2: 38,912 per token
    assert per_module_inputs == 38912
    per_token_bytes = (per_module_inputs + OUTPUT_ELEMENTS) * ROWWISE_CAST_B + per_module_inputs * ROWWISE_RESCALE_B
    by_hand = LAYERS * microbatches * (tokens * per_token_bytes + LAYER_PARAMS * ROWWISE_RESCALE_B) / (
        H100_HBM_Bps * ELEMENTWISE_FRACTION)
    assert row.seconds == pytest.approx(by_hand, rel=1e-9)
    # no slower GEMM kernel: the row-wise GEMMs are priced as the per-tensor ones
    current, _, _ = _evaluate("fp8", "current")
    gemm = {op.name: op.seconds for op in current.ops if op.kind == "gemm"}
    assert {op.name: op.seconds for op in ev.ops if op.kind == "gemm"} == pytest.approx(gemm)


def test_rowwise_compiled_casts_a_shared_input_once() -> None:
    """Compiled, the casts wq, wk and wv (and w1, w3) make of their one input are the same ops on the same tensor,
    which the partitioner's common-subexpression pass merges: each distinct input is cast once (attention input,
    wo input, MLP input, w2 input: 4,096 + 4,096 + 4,096 + 14,336 = 26,624 per token), the output gradients as
    eager, and the rescales still per module (each module's input gradient is its own GEMM's output)."""
    ev, microbatches = _rowwise(compiled=True)
    (row,) = [op for op in ev.ops if op.name.startswith("quantize")]
    tokens = 8192
    per_token_bytes = ((INPUT_ELEMENTS + OUTPUT_ELEMENTS) * ROWWISE_CAST_B
                       + (3 * 4096 + 4096 + 2 * 4096 + 14336) * ROWWISE_RESCALE_B)
    by_hand = LAYERS * microbatches * (tokens * per_token_bytes + LAYER_PARAMS * ROWWISE_RESCALE_B) / (
        H100_HBM_Bps * ELEMENTWISE_FRACTION)
    assert row.seconds == pytest.approx(by_hand, rel=1e-9)
    eager, _ = _rowwise(compiled=False)
    (eager_row,) = [op for op in eager.ops if op.name.startswith("quantize")]
    # the two casts saved per token and layer: 2 x 4,096 (wk, wv) + 4,096 (w3) elements
    saved = LAYERS * microbatches * tokens * 3 * 4096 * ROWWISE_CAST_B / (H100_HBM_Bps * ELEMENTWISE_FRACTION)
    assert eager_row.seconds - row.seconds == pytest.approx(saved, rel=1e-9)


def test_rowwise_bytes_are_the_ones_torchaos_measured_table_gives() -> None:
    """The profile's effective row-wise bytes are what benchmarks/rowwise_linear.py derives from torchao's measured
    per-shape speed-ups (not fitted to any validation run); torchao's own roofline count (8 B casts, 4 B rescales)
    reproduces that table's float8 speed-ups about 1.3x too high at M >= 16,384, the derived bytes within 9 % on
    average."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "rowwise_linear.py"
    spec = importlib.util.spec_from_file_location("rowwise_linear", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    q, r, err = mod.derive()
    rowwise = get_profile("realistic").recipes["rowwise"]
    assert (rowwise.quantize_bytes_per_element, rowwise.rescale_bytes_per_element) == (ROWWISE_CAST_B,
                                                                                     ROWWISE_RESCALE_B)
    assert q == pytest.approx(ROWWISE_CAST_B, abs=0.005)
    assert r == pytest.approx(ROWWISE_RESCALE_B, abs=0.005)
    assert err < 0.10
    # the table itself: torchao's 36 x 6 speed-ups; spot values read off the image
    table = mod.measured()
    assert len(table) == 216
    assert table[(16384, 4096, 1024)] == 0.57 and table[(32768, 16384, 32768)] == 1.73


def _tp8(gather: bool):
    """Llama 3 8B with TP 8 and sequence parallelism on H100 under per-tensor current scaling, with and without the
    FP8 all-gathers of torchtitan's tensorwise TP (profile field tp_gather_low_precision)."""
    from planner.hardware import with_profile

    wl = _workload("fp8", "current")
    seqs = wl.batch_tokens // wl.seq_len
    lay = Layout(dp=1, tp_ff=8, tp_model=1, pp=1, microbatches=seqs, schedule="1f1b", sp=1,
                 placement={"tp_ff": (8, 1)})
    hw = api.resolve("h100", "realistic")
    hw = with_profile(hw, hw.profile.model_copy(update={"tp_gather_low_precision": gather}))
    return api.evaluate(lay, hw, wl), seqs


def test_fp8_tp_gathers_cast_on_the_sequence_shard() -> None:
    """torchao's Float8ColwiseParallel / Float8RowwiseParallel: a column-parallel GEMM's input and a row-parallel
    GEMM's output gradient are cast on the 1/8 sequence shard (6 - 1 = 5 B per element of the shard) and gathered
    in FP8, then transposed once in FP8 for the weight gradient (2 B per gathered element): 5 / 8 + 2 = 2.625 B
    instead of 6. Per token and layer (TP 8 shards: q out 512, kv out 256, o in 512, up out 3,584, down in 1,792):
    gathered q in, o out, up in, down out 4 x 4,096 at 2.625 B; the local o in, down in, q, kv and up outputs
    512 + 1,792 + 512 + 256 + 3,584 at 6 B. The TP all-reduces (a reduce-scatter and an all-gather each) move
    (2 + 1) / (2 + 2) = 0.75 of their bytes."""
    on, seqs = _tp8(True)
    off, _ = _tp8(False)
    tokens = 8192  # one sequence per microbatch
    gathered = 2.625 * 4 * 4096 + 6.0 * (512 + 1792 + 512 + 256 + 3584)  # 82,944 B per token
    local = 6.0 * ((4096 + 512 + 4096 + 1792) + (512 + 256 + 4096 + 3584 + 4096))  # 138,240 B per token
    hbm = H100_HBM_Bps * ELEMENTWISE_FRACTION
    for ev, per_token in ((on, gathered), (off, local)):
        (row,) = [op for op in ev.ops if op.name.startswith("quantize")]
        assert row.seconds == pytest.approx(LAYERS * seqs * tokens * per_token / hbm, rel=1e-9)
    assert on.step.tp_s == pytest.approx(0.75 * off.step.tp_s, rel=1e-9)


def test_mxfp8_grouped_gemms_run_at_torchaos_measured_share() -> None:
    """An expert's GEMM under MXFP8 runs as a grouped GEMM: torchao's B200 measurements (65.6 %, 65.1 % and 52.1 %
    of the FP8 peak for forward, input gradient and weight gradient, against the dense 76.3 %) make a compute-bound
    expert GEMM 0.763 / 0.656 = 1.163x, 0.763 / 0.651 = 1.172x and 0.763 / 0.521 = 1.464x as long as a dense one."""
    from planner.cost.terms import Rates

    hw = api.resolve("b200", "realistic")
    r = Rates(hw, precision="fp8", recipe=hw.profile.recipe("mxfp8"), recipe_name="mxfp8")
    out, inp, tokens = 8192.0, 8192.0, 65536.0  # large enough that the launch latency does not count
    for pass_, ratio in (("fprop", 0.763 / 0.656), ("dgrad", 0.763 / 0.651), ("wgrad", 0.763 / 0.521)):
        grouped = float(r.gemm_pass(out, inp, tokens, pass_, grouped=True)[()])
        dense = float(r.gemm_pass(out, inp, tokens, pass_)[()])
        assert grouped / dense == pytest.approx(ratio, rel=2e-3)
    bf16 = Rates(hw)
    assert float(bf16.gemm_pass(out, inp, tokens, "fprop", grouped=True)[()]) == pytest.approx(
        float(bf16.gemm_pass(out, inp, tokens, "fprop")[()]))  # 16-bit grouped GEMMs keep the dense rate


def test_fp8_gemms_run_at_the_measured_fp8_fraction_of_the_fp8_peak() -> None:
    """The MAMF tables: H100 FP8 1402.6 of 1979 TFLOP/s (0.709), BF16 0.801 of 989: a large FP8 GEMM is
    0.709 x 2 / 0.801 = 1.77x as fast as BF16 (the GEMM kernels only; quantization is its own row)."""
    fp8, _, _ = _evaluate("fp8", "current")
    bf16, _, _ = _evaluate("bf16", None)
    gemm = {op.name: op.seconds for op in fp8.ops if op.kind == "gemm"}
    ref = {op.name: op.seconds for op in bf16.ops if op.kind == "gemm"}
    assert gemm["lm head"] == pytest.approx(ref["lm head"])  # the LM head stays 16-bit
    assert ref["mlp down"] / gemm["mlp down"] == pytest.approx(0.709 * 2 / 0.801, rel=0.02)


def test_fp8_faster_than_bf16_by_about_the_published_ratio() -> None:
    """torchtitan's Llama 3.1 8B on H100 (FSDP, compiled): FP8 gains 1.28-1.34x over BF16 on the same layout
    (docs/validation.md); the model's gain on this layout must land in that band within 10 %."""
    fp8, _, _ = _evaluate("fp8", "current")
    bf16, _, _ = _evaluate("bf16", None)
    gain = bf16.step.step_s / fp8.step.step_s
    assert 1.28 * 0.9 <= gain <= 1.34 * 1.1


def test_delayed_scaling_is_cheaper_than_current_scaling() -> None:
    delayed, _, _ = _evaluate("fp8", "delayed")
    current, _, _ = _evaluate("fp8", "current")
    assert delayed.step.step_s < current.step.step_s


def test_paper_profile_prices_fp8_at_the_fp8_rate_with_nothing_else() -> None:
    ev, _, _ = _evaluate("fp8", "current", profile="paper")
    assert not [op for op in ev.ops if op.name.startswith("quantize")]


def test_fp4_needs_fp4_tensor_cores() -> None:
    with pytest.raises(InvalidInput, match="no FP4 rate"):
        _evaluate("fp4", "nvfp4", gpu="h100")


def test_recipe_must_match_the_precision() -> None:
    with pytest.raises(ValueError, match="fp4 recipe"):
        _workload("fp8", "nvfp4")


def test_weight_casts_are_priced_once_per_step_with_the_optimizer() -> None:
    """Current scaling refreshes the FP8 weight copies once per step: 6 B per parameter of the shard the optimizer
    updates (ZeRO-1 over 8 ranks), on top of the optimizer's 30 B per parameter."""
    from planner.cost.terms import optimizer_s
    from planner.parallel.space import Tuples

    wl = _workload("fp8", "current")
    lay = Layout(dp=8, tp_ff=1, tp_model=1, pp=1, microbatches=256, schedule="1f1b", placement={"dp": (8, 1)})
    hw = api.resolve("h100", "realistic")
    cols = Tuples.from_layouts([lay])
    with_cast = float(optimizer_s(hw, wl, cols)[0])
    without = float(optimizer_s(hw, Workload(**{**wl.model_dump(), "precision": "bf16", "recipe": None}), cols)[0])
    assert with_cast / without == pytest.approx((30.0 + 6.0) / 30.0)


def _tiny(precision: str, recipe: str | None) -> Workload:
    from planner.workload.scaling import transformer_workload

    wl = transformer_workload(256, 512, 8, 1, 256, 64 * 256, 1e9, {"heads": 4, "kv_heads": 2, "vocab": 512,
                                                                   "ffn": "swiglu"}, "tiny")
    return Workload(**{**wl.model_dump(), "precision": precision, "recipe": recipe})


@pytest.mark.parametrize(("precision", "recipe", "gpus", "zero"), [
    ("fp8", "current", 16, 3), ("fp8", "delayed", 8, None), ("fp8", "mxfp8", 32, None), ("fp4", "nvfp4", 16, 3),
    ("bf16", None, 64, 3)])
def test_cpsat_matches_the_enumerator_with_recipes_and_zero3_latency(precision: str, recipe: str | None, gpus: int,
                                                                    zero: int | None) -> None:
    """The recipes' quantization rows, their 16-bit layers and the ZeRO-3 ring latency are terms like any other:
    CP-SAT proves the enumerator's optimum under the realistic profile on Blackwell (FP4 needs it)."""
    from planner.hardware import get_hardware, with_profile
    from planner.parallel.space import SearchOptions
    from planner.profile import get_profile
    from planner.search.cpsat import solve_cpsat
    from planner.search.exhaustive import solve_exhaustive

    # ZeRO-3 under DeepSpeed's framework values: its gathers neither overlap nor run hierarchically, so their ring
    # latency is exposed and in the step
    prof = get_profile("realistic")
    hw = with_profile(get_hardware("b200"), prof.for_framework("deepspeed") if zero == 3 else prof)
    wl = _tiny(precision, recipe)
    opts = SearchOptions(gpus=gpus, fixed=(("zero", zero),) if zero else ())
    ex, cp = solve_exhaustive(hw, wl, opts, None), solve_cpsat(hw, wl, opts, None)
    assert ex.status == cp.status == "optimal" and ex.space_size == cp.space_size
    ee, ec = api.evaluate(ex.layout, hw, wl), api.evaluate(cp.layout, hw, wl)
    assert abs(ec.step.step_s - ee.step.step_s) <= 1e-9 * ee.step.step_s
    if zero == 3 and ec.layout.dp > 1:  # the ring latency of the per-microbatch gathers is in the step
        assert ec.step.exposed_comm_s > 0


@pytest.mark.parametrize(("recipe", "experts", "gpu", "gpus"), [
    ("current", 1, "h100", 16), ("rowwise", 1, "h100", 16), ("mxfp8", 4, "b200", 16), (None, 1, "h100", 16)])
def test_cpsat_matches_the_enumerator_with_fp8_tp_gathers_rowwise_and_grouped_experts(recipe: str | None, experts: int,
                                                                                      gpu: str, gpus: int) -> None:
    """torchtitan's FP8 TP gathers (its framework values), the row-wise recipe's per-module casts and rescales, and
    MXFP8's grouped expert GEMMs are terms like any other: CP-SAT proves the enumerator's optimum; in BF16 too (recipe
    None), as `plan --emit torchtitan` prices with 'realistic/torchtitan'."""
    from planner.hardware import get_hardware, with_profile
    from planner.parallel.space import SearchOptions
    from planner.profile import get_profile
    from planner.search.cpsat import solve_cpsat
    from planner.search.exhaustive import solve_exhaustive
    from planner.workload.scaling import transformer_workload

    prof = get_profile("realistic").for_framework("torchtitan")
    assert prof.tp_gather_low_precision
    hw = with_profile(get_hardware(gpu), prof)
    shape = {"heads": 4, "kv_heads": 2, "vocab": 512, "ffn": "swiglu"} | ({"top_k": 2} if experts > 1 else {})
    base = transformer_workload(256, 512, 8, experts, 256, 64 * 256, 1e9, shape, "tiny")
    wl = Workload(**{**base.model_dump(), "precision": "fp8" if recipe else "bf16", "recipe": recipe})
    opts = SearchOptions(gpus=gpus)
    ex, cp = solve_exhaustive(hw, wl, opts, None), solve_cpsat(hw, wl, opts, None)
    assert ex.status == cp.status == "optimal" and ex.space_size == cp.space_size
    ee, ec = api.evaluate(ex.layout, hw, wl), api.evaluate(cp.layout, hw, wl)
    assert abs(ec.step.step_s - ee.step.step_s) <= 1e-9 * ee.step.step_s


@pytest.mark.parametrize(("precision", "expected"), [
    ("fp8", {"--fp8-format": "hybrid", "--fp8-recipe": "tensorwise"}),
    ("fp8-delayed", {"--fp8-format": "hybrid", "--fp8-recipe": "delayed"}),
    ("mxfp8", {"--fp8-format": "hybrid", "--fp8-recipe": "mxfp8"}),
    ("nvfp4", {"--fp4-format": "e2m1", "--fp4-recipe": "nvfp4"})])
def test_emitted_megatron_arguments_name_the_recipe(capsys, precision: str, expected: dict[str, str]) -> None:
    """Megatron-LM's words for the recipes (megatron/training/arguments.py: --fp8-recipe tensorwise | delayed |
    mxfp8 | blockwise; --fp4-format e2m1 with --fp4-recipe nvfp4)."""
    from planner.export import parse_megatron
    from tests.cli_helpers import invoke

    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpu", "b200", "--gpus", "8", "--precision",
                                     precision, "--emit", "megatron"])
    assert code == 0, err
    args = parse_megatron(out)
    assert {k: args.get(k) for k in expected} == expected


def test_torchtitan_export_refuses_a_recipe_it_does_not_run(capsys) -> None:
    from tests.cli_helpers import invoke

    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpu", "b200", "--gpus", "8", "--precision",
                                     "mxfp8", "--emit", "torchtitan"])
    assert code in (1, 2) and "tensorwise" in err and len(err.strip().splitlines()) == 1


def test_a_records_bf16_layers_replace_the_recipes_kept_share() -> None:
    # Megatron-Bridge's NVFP4 benchmarks keep no layer in BF16 (bf16_with_nvfp4_mixed: first_last_layers_bf16 off),
    # where the realistic profile's nvfp4 recipe keeps the NVFP4 paper's 16 %. A record's bf16_layers = n prices
    # the run with kept_layer_fraction n / layers (4 of 80: 0.05); fewer 16-bit layers is faster; every layer in
    # 16-bit is not a low-precision run and is refused.
    from planner.validation import load_runs, validate

    run = next(r for r in load_runs() if r.id == "mbridge260401-llama3-70b-64gpu-nvfp4-gb300")
    assert run.bf16_layers == 0 and run.layers == 80
    realistic = get_profile("realistic")
    four = run.model_copy(update={"bf16_layers": 4})
    share = realistic.recipes["nvfp4"].model_copy(update={"kept_layer_fraction": 0.05})
    by_profile = realistic.model_copy(update={"recipes": {**realistic.recipes, "nvfp4": share}})
    paper_share = run.model_copy(update={"bf16_layers": None})
    rows = validate([run, four, paper_share], realistic)
    assert rows[1].predicted_tokens_per_s == pytest.approx(
        validate([paper_share], by_profile)[0].predicted_tokens_per_s, rel=1e-12)
    assert rows[0].predicted_tokens_per_s > rows[1].predicted_tokens_per_s > rows[2].predicted_tokens_per_s
    refused = validate([run.model_copy(update={"bf16_layers": 80})], realistic)[0]
    assert refused.predicted_tokens_per_s is None and "bf16_layers 80" in refused.problem


def _mixtral_ops(precision: str, recipe: str | None, profile: str) -> dict[str, float]:
    wl = load_model_preset("mixtral-8x7b")
    wl = Workload(**{**wl.model_dump(), "precision": precision, "recipe": recipe})
    seqs = wl.batch_tokens // wl.seq_len
    lay = Layout(dp=1, tp_ff=1, tp_model=1, pp=1, ep=8, microbatches=seqs // 8, schedule="1f1b",
                 placement={"dp": (1, 1), "ep": (8, 1)})
    ev = api.evaluate(lay, api.resolve("h100", profile), wl)
    return {op.name: op.seconds for op in ev.ops}


def test_the_router_stays_16_bit_under_a_recipe() -> None:
    """Megatron Core keeps the MoE router in its original precision under every FP8 recipe (Megatron-LM
    docs/discussions/deepseek-v3-gb200-optimization, section 1): its GEMM costs what it costs in BF16 and adds no
    quantization, while the experts' GEMMs run at the FP8 rate. The paper profile (no recipe) keeps its idealisation:
    every layer GEMM at the FP8 rate."""
    bf16, fp8 = _mixtral_ops("bf16", None, "realistic"), _mixtral_ops("fp8", "current", "realistic")
    assert fp8["router"] == pytest.approx(bf16["router"], rel=1e-12)
    assert fp8["expert up + gate"] < 0.75 * bf16["expert up + gate"]
    paper_bf16, paper_fp8 = _mixtral_ops("bf16", None, "paper"), _mixtral_ops("fp8", "current", "paper")
    assert paper_fp8["router"] < 0.75 * paper_bf16["router"]


@pytest.mark.parametrize("command", [["plan", "--gpus", "8"], ["evaluate", "--dp", "8"]])
def test_mxfp8_on_a_gpu_without_block_scaled_tensor_cores_is_refused(capsys, command: list[str]) -> None:
    """Session 6 review: `--precision mxfp8` on an H100 planned (MFU 42 % for llama3-8b on 64 GPUs), though
    Transformer Engine runs MXFP8 only from compute capability 10.0 (fp8.py check_mxfp8_support); the FP4 rate a
    hardware file gives marks the same Blackwell tensor cores, and `--precision fp4` on an H100 was refused already."""
    from tests.cli_helpers import invoke

    for gpu in ("h100", "h200", "h800"):
        code, out, err = invoke(capsys, [command[0], "--model", "llama3-8b", "--gpu", gpu, *command[1:],
                                         "--precision", "mxfp8"])
        assert code == 2 and err.startswith("error:") and len(err.strip().splitlines()) == 1, err
        assert "mxfp8 needs Blackwell" in err and "fp8-blockwise" in err
