"""CLI rough edges found in review (task qa3), each pinned by a test that failed before its fix: --version with
--json; the toy model's fixed-count infeasibility names batch sizes as well as GPU counts; evaluate and validate
agree on the README's DeepSeek-V3 MFU."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import pytest
from cli_helpers import TINY, invoke

from planner.cli.app import plan_app

README = Path(__file__).resolve().parent.parent / "README.md"

# --------------------------------------------------------------------------------------------------
# 1. --version --json: one JSON document, as every other --json output, from both console scripts
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv,prog", [(["--version", "--json"], "planner"), (["--json", "--version"], "planner"),
                                       (["--version", "--json"], "plan"), (["--json", "--version"], "plan"),
                                       (["plan", "--version", "--json"], "planner")])
def test_version_with_json_is_one_json_document(capsys, argv, prog):
    code, out, err = invoke(capsys, argv, plan_app, "plan") if prog == "plan" else invoke(capsys, argv)
    assert code == 0 and err == ""
    assert json.loads(out) == {"name": "planner", "version": version("planner")}


@pytest.mark.parametrize("argv,prog", [(["--version"], "planner"), (["--version"], "plan")])
def test_version_without_json_stays_one_line(capsys, argv, prog):
    code, out, err = invoke(capsys, argv, plan_app, "plan") if prog == "plan" else invoke(capsys, argv)
    assert (code, out, err) == (0, f"planner {version('planner')}\n", "")


def test_json_alone_is_still_a_usage_error_in_json(capsys):
    code, out, err = invoke(capsys, ["--json"])
    assert code == 2 and err == "" and json.loads(out)["error"]["code"] == "usage"


# --------------------------------------------------------------------------------------------------
# 2. the toy model on a fixed count its batch cannot split: batches as well as counts, each one checked by running it
# --------------------------------------------------------------------------------------------------

TOY_BATCH = re.compile(r"keep ([\d,]+) GPUs and make the global batch ([\d,]+) or ([\d,]+) tokens, which the "
                       r"data-parallel degree of a [\d,]+-GPU layout divides \(as an explicit shape: (.*) "
                       r"--batch-tokens N (--tokens \d+)\)")


@pytest.mark.parametrize("argv,gpus,own,factor", [
    # 1e24 FLOP: d_ff 32768 = 2^15, d_model 8192 = 2^13, L 160 = 2^5 x 5, b 5,242,880 = 5 x 2^20. 1,000 = 2^3 x 5^3:
    # the model-parallel degrees take 2^3 and one 5, so N_DP carries 25, which b must be a multiple of.
    (["--compute", "1e24", "--gpu", "h100"], 1000, 5_242_880, 25),
    # TINY (d_ff 1024, d_model 256, L 4, b 64): 24 = 2^3 x 3 and nothing but the batch has a 3; 63 and 66 are the
    # multiples of 3 next to 64.
    ([*TINY], 24, 64, 3),
])
def test_toy_count_the_batch_cannot_split_names_batches_that_plan(capsys, argv, gpus, own, factor):
    code, _, err = invoke(capsys, [*argv, "--gpus", str(gpus)], plan_app, "plan")
    assert code == 1 and f"no layout can split this model over exactly {gpus:,} GPUs" in err
    m = TOY_BATCH.search(" ".join(err.split()))
    assert m, err
    assert int(m.group(1).replace(",", "")) == gpus
    batches = [int(g.replace(",", "")) for g in m.group(2, 3)]
    assert batches[0] < own < batches[1] and all(b % factor == 0 for b in batches)
    if factor == 3:
        assert batches == [63, 66]
    code, out, _ = invoke(capsys, [*argv, "--gpus", str(gpus), "--json"], plan_app, "plan")
    compute = json.loads(out)["workload"]["compute_flop"]
    for b in batches:  # the flags as the message gives them, with N filled in: each must plan on exactly `gpus`
        flags = [*m.group(4).split(), "--batch-tokens", str(b), *m.group(5).split(), "--gpus", str(gpus),
                 "--gpu", "h100", "--json"]
        code, out, err = invoke(capsys, flags, plan_app, "plan")
        doc = json.loads(out)
        assert code == 0 and doc["status"] == "optimal" and doc["gpus"] == gpus, err
        assert doc["workload"]["batch_tokens"] == b
        assert doc["workload"]["compute_flop"] == pytest.approx(compute, rel=1e-12)  # same N and D: same compute


# --------------------------------------------------------------------------------------------------
# 3. README's DeepSeek-V3 example: evaluate and validate give one MFU for the record, and say what it counts
# --------------------------------------------------------------------------------------------------

def test_readme_deepseek_mfu_is_validates_for_the_record(capsys):
    """validate prices mbridge2509-deepseek-v3-1024gpu-fp8 with the realistic profile's [framework.megatron-bridge]
    overrides; the README's evaluate command gives them with --set, so both report the same MFU (both in model FLOPs
    against the FP8 peak). Before, the README's command left them out and printed 12.9 % against validate's 16.2 %."""
    import shlex

    from test_readme import COMMANDS

    from planner.profile import get_profile
    from planner.validation import RUNS_PATH, load_runs, validate

    run = next(r for r in load_runs(RUNS_PATH) if r.id == "mbridge2509-deepseek-v3-1024gpu-fp8")
    row = validate([run], get_profile("realistic"))[0]
    cmd = next(c for c in COMMANDS if c.startswith("planner evaluate --model deepseek-v3"))
    code, out, err = invoke(capsys, [*shlex.split(cmd)[1:], "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert row.predicted_mfu is not None and doc["mfu"] == pytest.approx(row.predicted_mfu, rel=1e-9)
    assert doc["peak_flops"] == pytest.approx(1.979e15, rel=0.01)  # H100 SXM5 dense FP8 (hardware_specs/h100.toml)
    assert f"{doc['mfu'] * 100:.1f} % MFU" in " ".join(README.read_text(encoding="utf-8").split())


def test_validate_says_what_its_mfu_counts(capsys, tmp_path):
    from planner.validation import RUNS_PATH

    blocks = RUNS_PATH.read_text(encoding="utf-8").split("[[run]]")
    one = tmp_path / "one.toml"
    one.write_text("[[run]]" + next(b for b in blocks if '"mbridge2509-deepseek-v3-1024gpu-fp8"' in b))
    code, out, _ = invoke(capsys, ["validate", "--runs", str(one), "--json"])
    assert code == 0
    text = json.loads(out)["mfu_counts"]
    code, out, _ = invoke(capsys, ["validate", "--runs", str(one)])
    assert code == 0 and "MFU (both columns): model FLOPs per token" in " ".join(out.split())
    assert "model FLOPs per token" in text and "megatron-bridge" in text and "--set" in text
