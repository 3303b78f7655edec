"""What a user reads, checked against hand-worked figures: parameter counts in billions ("B", as model sizes are
written, not "G"), no "rack" for a DGX node's NVLink, the usable HBM in GB with its GiB beside it."""

from __future__ import annotations

import json

from cli_helpers import invoke

from planner.render.limits import fmt_si
from planner.render.plan import fmt_count

H100_4 = ["plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "4", "--profile", "realistic"]


def test_counts_read_in_billions_not_giga():
    # 9.66e11 parameters is 966 billion; 1.72e13 tokens 17.2 trillion; 5.6e7 GPU-hours 56 million
    assert fmt_si(9.66e11) == "966B"
    assert fmt_count(9.66e11) == "9.66e11 (966B)"
    assert fmt_count(7.06e10) == "7.06e10 (70.6B)"
    assert fmt_count(1.72e13) == "1.72e13 (17.2T)" and fmt_count(5.6e7) == "5.60e7 (56M)"


def test_the_main_plan_prints_no_giga_parameters(capsys):
    """1e26 FLOP infers 9.66e11 parameters (the README's 1e26 examples): printed as 966B, never 966G."""
    code, out, err = invoke(capsys, ["plan", "--compute", "1e26", "--gpu", "h100", "--days", "90"])
    assert code == 0, err
    rows = [line for line in out.splitlines() if "parameters N_p" in line]
    assert len(rows) == 2 and all("9.66e11 (966B)" in r for r in rows) and "966G" not in out


def test_an_h100_node_is_not_called_a_rack(capsys, monkeypatch):
    """4 GPUs of one 8-GPU DGX node: the node, its 4 idle GPUs, and no rack anywhere in the text."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = invoke(capsys, [*H100_4, "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["gpus"], doc["nodes"], doc["racks"], doc["spare_gpus"]) == (4, 1, 1, 4)  # racks: NVLink domains
    code, text, err = invoke(capsys, H100_4)
    assert code == 0, err
    head = " ".join(text.split("\n")[:2])
    assert "(1 node, 4 spare GPUs in it," in head and "rack" not in head
    assert not any(line.lstrip("│ ").startswith("racks") for line in text.splitlines())
    # capacity: nvidia-smi's 81,559 MiB less the driver's 0.45 GB (profiles/realistic.toml) = 85.07 GB = 79.2 GiB
    usable = 81559 * 2**20 - 0.45e9
    assert round(usable / 1e9, 2) == 85.07 and round(usable / 2**30, 1) == 79.2
    assert "85.07 GB (79.2 GiB)" in text


def test_comparison_gives_racks_only_for_rack_scale_systems(capsys, monkeypatch):
    """1e22 FLOP in 30 days (paper profile): the h100 row has nodes and no racks; the GB200 NVL72 row has one rack
    held whole (72 GPUs) and its 4-GPU trays."""
    argv = ["plan", "--compute", "1e22", "--days", "30", "--gpu", "h100,gb200-nvl72", "--quiet"]
    code, out, err = invoke(capsys, [*argv, "--json"])
    assert code == 0, err
    opts = {o["hardware"]: o for o in json.loads(out)["options"]}
    monkeypatch.setenv("COLUMNS", "250")
    code, text, err = invoke(capsys, argv)
    assert code == 0, err
    row = {name: next(line for line in text.splitlines() if f" {name} " in line) for name in opts}
    h, g = opts["h100"], opts["gb200-nvl72"]
    assert f"— / {h['nodes']:,}" in row["h100"]
    assert g["plan"]["held_gpus"] == 72 and g["nodes"] == -(-g["gpus"] // 4)  # trays of 4 GPUs, rounded up
    assert f"{g['racks']:,} / {g['nodes']:,}" in row["gb200-nvl72"]


def test_power_reads_without_python_exponents():
    """Facility power in the plan text and its warning: 1,924,145,348,608 H100s draw about 3.25e9 MW; printed as
    '3.25e6 GW' (never '3.25e+06 GW'), 1,234.5 GW as '1,230 GW' (never '1.23e+03 GW'), and 999.96 MW as '1,000 MW'."""
    from planner.economics import fmt_g3, fmt_MW

    assert fmt_MW(3.25e9) == "3.25e6 GW" and fmt_MW(1234.5e3) == "1,230 GW" and fmt_MW(999.96) == "1,000 MW"
    assert fmt_MW(51.94) == "51.9 MW" and fmt_MW(1250.38) == "1.25 GW" and fmt_MW(5000) == "5 GW"
    assert fmt_g3(3.25e9 / 5000) == "650,000" and fmt_g3(6.5096e5) == "651,000"


def test_power_limited_explanation_brackets_the_fastest():
    """1e21 FLOP in 1 day within 0.04 MW: 24 H100s are needed (0.0406 MW), at most 23 fit, and the fastest within the
    limit lies between the bound the search could not meet and the plan it found; the advice rounds that plan up."""
    import re

    import pytest

    from planner import api
    from planner.errors import Infeasible

    with pytest.raises(Infeasible) as exc:
        api.plan(1e21, "h100", 1, power_mw=0.04)
    text = exc.value.explanation
    m = re.search(r"fastest plan found takes ([\d.]+) days on ([\d,]+) GPUs, ([\d.]+) MW \(and no plan within the "
                  r"limit finishes in ([\d.]+) days, so the fastest possible lies between the two\): ask --days "
                  r"([\d.]+)", text)
    assert m, text
    took, gpus, mw, bound, ask = float(m[1]), int(m[2].replace(",", "")), float(m[3]), float(m[4]), float(m[5])
    assert bound < took <= ask and gpus <= 23
    assert mw == pytest.approx(0.0406 * gpus / 24, rel=0.01)  # power scales with the GPUs: 0.0406 MW for 24


def test_a_missing_low_precision_rate_names_the_ones_the_gpu_has(capsys):
    """H100 has FP8 but no FP4 (its datasheet): NVFP4 there is told 'fp8 or bf16', not only bf16; A100 has neither
    (Ampere has no FP8 tensor cores): 'bf16'. One line, exit 2."""
    code, _, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "64",
                                   "--precision", "nvfp4"])
    assert code == 2 and err.strip().endswith("use precision fp8 or bf16") and len(err.strip().splitlines()) == 1
    code, _, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpu", "a100", "--gpus", "64",
                                   "--precision", "fp8"])
    assert code == 2 and err.strip().endswith("use precision bf16")


def test_the_emitted_memory_comment_gives_gib_beside_gb(capsys):
    """The launch file's memory line: decimal GB, and the GiB a datasheet's '80 GB' and nvidia-smi use beside them
    (85.07e9 B = 79.23 GiB on an H100)."""
    import re

    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "64",
                                     "--emit", "megatron"])
    assert code == 0, err
    line = next(x for x in out.splitlines() if "predicted memory per GPU" in x)
    gb_used, gb_cap, gib_used, gib_cap = map(float, re.findall(
        r"([\d.]+) GB of ([\d.]+) GB usable HBM \(([\d.]+) of ([\d.]+) GiB\)", line)[0])
    assert gb_cap == 85.07 and gib_cap == 79.23
    assert abs(gb_used * 1e9 / 2**30 - gib_used) < 0.01
