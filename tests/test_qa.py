"""A capacity planner's pass over the CLI: what a user reads is whole, legible at 80 columns and consistent with the
JSON, and bad input for the money flags is one line and exit 2."""

from __future__ import annotations

import json

import pytest
from cli_helpers import invoke

from planner.economics import fmt_pct

CMP = ["plan", "--compute", "1e22", "--days", "30", "--gpu", "h100,gb200-nvl72", "--quiet"]


def test_comparison_fits_80_columns_with_every_digit(capsys, monkeypatch):
    """At an 80-column terminal the ranking splits into two tables instead of cutting figures to "$12…"; each cost
    printed is price x GPUs held x wall-clock hours, worked out here from the JSON document's own fields."""
    argv = [*CMP, "--gpu-price", "h100=2,gb200-nvl72=4"]  # one flag, two prices
    code, out, err = invoke(capsys, [*argv, "--json"])
    assert code == 0, err
    doc = json.loads(out)
    monkeypatch.setenv("COLUMNS", "80")
    code, text, err = invoke(capsys, argv)
    assert code == 0, err
    assert max(len(line) for line in text.splitlines()) <= 80 and "…" not in text
    assert "priced by the paper profile" in text
    for o in doc["options"]:
        p = o["plan"]
        assert o["price_per_gpu_hour"] == {"h100": 2.0, "gb200-nvl72": 4.0}[o["hardware"]]
        held_hours = p["held_gpus"] * o["wall_clock_days"] * 24.0
        assert o["cost_usd"] == pytest.approx(o["price_per_gpu_hour"] * held_hours, rel=1e-12)
        assert o["cost_usd"] < 1e6  # printed in whole dollars
        assert f"${o['cost_usd']:,.0f}" in text and f"${o['price_per_gpu_hour']:.2f}" in text
    # a GB200 NVL72 rack is held whole: 72 GPUs paid for, the job's few used, and the table says so
    nvl = next(o for o in doc["options"] if o["hardware"] == "gb200-nvl72")
    assert nvl["plan"]["held_gpus"] == 72 and nvl["gpus"] < 72
    assert f"holds 72 GPUs ({72 - nvl['gpus']} spare" in " ".join(text.split())


def test_comparison_shows_each_plans_warnings(capsys):
    """A plan flagged as beyond any announced build keeps its flag in the ranking: a 1 kW "largest site" flags
    even a few GPUs (each H100 draws more than 1 kW at the facility)."""
    code, out, err = invoke(capsys, [*CMP, "--set", "facility.largest_site_MW=0.001", "--json"])
    assert code == 0, err
    for o in json.loads(out)["options"]:  # a script reading the ranking sees them without opening each plan
        assert o["warnings"] == o["plan"]["warnings"] and o["warnings"][0].startswith("beyond any announced build")
    code, out, err = invoke(capsys, [*CMP, "--set", "facility.largest_site_MW=0.001"])
    assert code == 0, err
    assert "optimal (!)" in out
    assert " ".join(out.split()).count("WARNING: beyond any announced build") == 2


def test_comparison_why_under_the_table(capsys):
    """Options that cannot meet the request say why in full sentences below the table (exit 1 when none can):
    8 GPUs of 989 TFLOP/s peak need at least 1e22 / (8 x 989.4e12) s = 14.6 days for 1e22 FLOP, more than 1 day."""
    assert 1e22 / (8 * 989.4e12) / 86400 > 14
    code, out, err = invoke(capsys, ["plan", "--compute", "1e22", "--days", "1", "--gpu", "h100,h200", "--gpus", "8",
                                     "--quiet"])
    assert code == 1 and "no accelerator of h100, h200 meets the request" in err
    lines = out.splitlines()
    assert any(line.startswith("h100: infeasible: ") for line in lines)
    assert any(line.startswith("h200: infeasible: ") for line in lines)


def test_printed_text_is_not_rich_markup(capsys, tmp_path):
    """Text from files is data: a description with "[economics]" prints as written and an unmatched "[/bold]" is no
    internal error (rich read both as style tags)."""
    from pathlib import Path

    preset = (Path(__file__).parent.parent / "models" / "llama3-8b.toml").read_text()
    lines = [('description = "mine [/bold] with [economics]"' if line.startswith("description =") else line)
             for line in preset.splitlines()]
    path = tmp_path / "mine.toml"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = invoke(capsys, ["models", "show", str(path)])
    assert code == 0, err
    assert "mine [/bold] with [economics]" in out


def test_models_list_names_attention_by_its_heads(capsys):
    """GPT-3 175B has 96 heads and 96 key/value heads (Brown et al. 2020, Table 2.1: multi-head attention); Llama 3 8B
    has 32 heads and 8 key/value heads (GQA); DeepSeek-V3 uses multi-head latent attention."""
    code, out, err = invoke(capsys, ["models", "list"])
    assert code == 0, err
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│") and
            line.split("│")[1].strip()}
    assert "(MHA," in rows["gpt3-175b"] and "(GQA," in rows["llama3-8b"] and "(MLA," in rows["deepseek-v3"]
    assert "Families, scaled to a compute budget" in out and "llama3" in out.split("Families")[-1]


@pytest.mark.parametrize("name", ["llama3", "LLAMA3", "models/families/llama3.toml"])
def test_models_show_a_family_says_how_to_use_it(capsys, name):
    code, out, err = invoke(capsys, ["models", "show", name])
    assert code == 2 and err.count("\n") == 1
    assert "is a model family" in err and "--model-family llama3" in err


def test_models_show_a_name_that_is_preset_and_family_shows_the_preset(capsys):
    from planner.workload import model_preset_names
    from planner.workload.families import families

    both = sorted(set(families()) & set(model_preset_names()))
    for name in both:  # deepseek-v3: the published model and the family scaled from it
        code, out, err = invoke(capsys, ["models", "show", name])
        assert code == 0 and name in out, err


@pytest.mark.parametrize("args, words", [
    (["--price-per-gpu-hour", "1e300"], "--price-per-gpu-hour 1e+300: at most 1,000 USD per GPU-hour"),
    (["--price-per-gpu-hour", "0"], "--price-per-gpu-hour must be a positive finite number"),
    (["--set", "economics.price_per_gpu_hour_USD=5000"], "less than or equal to 1000"),
])
def test_price_bounds(capsys, args, words):
    code, out, err = invoke(capsys, ["plan", "--compute", "1e22", "--gpu", "h100", "--days", "30", *args])
    assert code == 2 and err.count("\n") == 1 and words in err, err


@pytest.mark.parametrize("flag, words", [
    ("h100=2000", "--gpu-price h100=2000: at most 1,000 USD per GPU-hour"),
    ("h100=2,h100=3", "--gpu-price prices h100 twice"),
    ("h100=2,", "give NAME=USD"),
    ("h100=nan", "give NAME=USD"),
])
def test_gpu_price_bad(capsys, flag, words):
    code, out, err = invoke(capsys, [*CMP, "--gpu-price", flag])
    assert code == 2 and err.count("\n") == 1 and words in err, err


def test_parse_prices():
    from planner.compare import parse_prices

    assert parse_prices(["h100=2.5", "b200=6,h200=3.25"]) == {"h100": 2.5, "b200": 6.0, "h200": 3.25}


def test_emit_names_the_family_shape():
    """A shape the planner scaled from a family is in the launch file's comments: the script has no other way to know
    it. The numbers are the workload's own, and steps x sequences x sequence length = tokens."""
    from planner.export import family_model_lines
    from planner.workload.families import workload_for_family

    wl = workload_for_family("llama3", 1e24)
    tr = wl.transformer
    assert tr is not None
    text = "\n".join(family_model_lines(wl))
    assert all(line.startswith("# ") for line in text.splitlines())
    assert f"{wl.layers} layers, hidden {wl.d_model:,}, FFN {wl.d_ff:,}" in text
    assert f"{tr.heads} attention heads of {tr.head_dim}, {tr.kv_heads} KV heads" in text
    per_step = wl.batch_tokens // wl.seq_len
    assert per_step * wl.seq_len == wl.batch_tokens
    assert wl.steps * per_step * wl.seq_len == pytest.approx(wl.tokens, rel=1e-12)
    assert f"{per_step:,} per step, {wl.steps:,.0f} steps" in text
    from planner.workload import load_model_preset

    assert family_model_lines(load_model_preset("llama3-70b")) == []  # a preset: the user has its shape


def test_comparison_under_the_paper_profile_points_to_the_realistic_one(capsys):
    code, out, err = invoke(capsys, [*CMP, "--json"])
    assert code == 0, err
    assert any("--profile realistic" in n for n in json.loads(out)["notes"])
    code, out, err = invoke(capsys, [*CMP, "--profile", "realistic", "--json"])
    assert code == 0, err
    assert not any("--profile realistic" in n for n in json.loads(out)["notes"])


@pytest.mark.parametrize("argv", [
    ["evaluate", "--gpu", "h100,h200", "--model", "llama3-8b", "--tp", "1", "--dp", "8"],
    ["hardware", "show", "all"],
])
def test_several_accelerators_where_one_is_needed(capsys, argv):
    code, out, err = invoke(capsys, argv)
    assert code == 2 and err.count("\n") == 1 and "names several accelerators where one is needed" in err, err


def test_api_plan_with_several_accelerators_says_compare():
    from planner.api import plan
    from planner.errors import InvalidInput

    with pytest.raises(InvalidInput, match="planner.compare.compare"):
        plan(1e22, gpu="h100,h200", days=30)


def test_sweep_text_prints_mfu_as_percent_within_80_columns(capsys, monkeypatch):
    """README: fractions are fractions in JSON and percentages with a % in text; the summary's notes are lines under
    its table, not a column squeezed to a word per line."""
    argv = ["sweep", "--gpu", "h100", "--from", "1e21", "--to", "1e22", "--points", "2", "--days", "30", "--jobs", "1",
            "--quiet"]
    code, out, err = invoke(capsys, [*argv, "--json"])
    assert code == 0, err
    doc = json.loads(out)
    monkeypatch.setenv("COLUMNS", "80")
    code, text, err = invoke(capsys, argv)
    assert code == 0, err
    assert max(len(line) for line in text.splitlines()) <= 80 and "…" not in text
    for p in doc["plans"]:
        assert f"{p['mfu'] * 100:.1f}%" in text
    s = doc["summaries"][0]
    assert f"{s['ceiling_mfu'] * 100:.1f}%" in text
    assert all(f"h100: {note}"[:60] in " ".join(text.split()) for note in s["notes"])


@pytest.mark.parametrize("flag", [["--samples", "5"], ["--seed", "3"]])
def test_sampling_flags_need_confidence(capsys, flag):
    code, out, err = invoke(capsys, ["plan", "--compute", "1e22", "--gpu", "h100", "--days", "30", *flag])
    assert code == 2 and err.count("\n") == 1 and "add --confidence" in err, err


@pytest.mark.parametrize("price", [-1.0, float("nan"), "x", 5000.0])
def test_compare_refuses_a_bad_price_before_planning(price):
    from planner.compare import compare
    from planner.errors import InvalidInput

    with pytest.raises(InvalidInput, match="--gpu-price"):
        compare(["h100", "h200"], compute_flop=1e21, days=30, prices={"h200": price})


def test_an_option_without_a_price_is_not_ranked_and_says_why(capsys):
    """b300's hardware file carries no price: its plan is optimal, but a cost ranking cannot place it."""
    from planner.hardware import get_hardware

    econ = get_hardware("b300").economics
    assert econ is None or econ.price_per_gpu_hour_usd is None
    code, out, err = invoke(capsys, ["plan", "--compute", "1e22", "--days", "30", "--gpu", "h100,b300", "--quiet"])
    assert code == 0, err
    assert "b300: not ranked: no price in its hardware file" in " ".join(out.split())


def test_limits_fit_80_columns_with_every_figure(capsys, monkeypatch):
    """Table 2 has ten columns: at 80 columns it turns a quarter (a column per system) instead of cutting the figures
    to "5.02…"; the paper's d' = 26.4k and b' = 590 for DGX H100 (Table 2) are whole."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = invoke(capsys, ["limits", "--no-inferred"])
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out
    for fragment in ("v100", "a100", "h100-superpod", "26.4k", "590 (DRAM)", "5.86k", "16 (SRAM)", "3.96e15"):
        assert fragment in out, fragment
    code, wide, err = invoke(capsys, ["limits", "--no-inferred", "--gpu", "h100"])  # one system fits as rows
    assert code == 0 and "…" not in wide and "26.4k" in wide


@pytest.mark.parametrize("argv", [["models", "list"], ["hardware", "list"], ["hardware", "show", "gb200-nvl72"],
                                  ["models", "show", "deepseek-v3"]])
def test_listings_at_80_columns_cut_nothing(capsys, monkeypatch, argv):
    """The names one types (--model NAME, --gpu NAME) and every figure stay whole at 80 columns; a long source URL
    folds onto the next line instead of losing its end."""
    from planner.hardware import hardware_names
    from planner.workload import model_preset_names

    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = invoke(capsys, argv)
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out
    if argv[1] == "list":
        names = model_preset_names() if argv[0] == "models" else hardware_names()
        firsts = {line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")}
        assert set(names) <= firsts


def test_sensitivity_table_at_80_columns_cuts_nothing(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = invoke(capsys, ["plan", "--compute", "1e22", "--gpu", "h100", "--days", "30", "--sensitivity",
                                     "--quiet"])
    assert code == 0, err
    assert "What moves the answer" in out
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out


@pytest.mark.parametrize("days", ["1e300", "1e308"])
def test_a_deadline_past_any_float_constrains_nothing(capsys, days):
    """docs/reliability.md: a deadline beyond what CP-SAT's 64-bit integers represent is treated as none; past a
    float's range (1e300 days in nanosecond quanta) it was an internal error (OverflowError, exit 3)."""
    argv = ["plan", "--compute", "1e22", "--gpu", "h100", "--json", "--quiet"]
    code, out, err = invoke(capsys, [*argv, "--days", days])
    assert code == 0, err
    far = json.loads(out)
    code, out, err = invoke(capsys, [*argv, "--days", "1e9"])
    assert code == 0, err
    assert far["status"] == "optimal" and far["gpus"] == json.loads(out)["gpus"]


@pytest.mark.slow
def test_confidence_headline_names_the_probability(capsys):
    """With --confidence the cluster printed is the one that meets the deadline with probability P, not the point
    answer: the first line says so, with the share of samples and the point estimate of the JSON document."""
    argv = ["plan", "--compute", "1e22", "--gpu", "h100", "--days", "30", "--profile", "realistic", "--confidence",
            "0.9", "--samples", "4", "--quiet"]
    code, out, err = invoke(capsys, [*argv, "--json"])
    assert code == 0, err
    c = json.loads(out)["confidence"]
    code, text, err = invoke(capsys, argv)
    assert code == 0, err
    first = " ".join(text.split("Model")[0].split())
    assert first.startswith(f"Plan at P=0.9 (meets 30 days in {fmt_pct(c['met'])} of samples; point estimate "
                            f"{c['point_gpus']:,} GPUs): {c['gpus']:,} x H100")


@pytest.mark.parametrize("argv, words", [
    (["plan", *CMP[1:], "--json"], "it is a Comparison (plan --gpu A,B --json): each plan is under options[k].plan"),
    (["plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "8", "--emit", "megatron", "--json", "--quiet"],
     "it is a LaunchDocument (plan --emit --json): its plan is under .plan"),
])
def test_another_document_given_as_a_plan_says_where_its_plan_is(capsys, tmp_path, argv, words):
    code, out, err = invoke(capsys, argv)
    assert code == 0, err
    path = tmp_path / "doc.json"
    path.write_text(out)
    for command in (["evaluate", "--plan", str(path)], ["export", "--plan", str(path), "--to", "megatron"]):
        code, _, err = invoke(capsys, command)
        assert code == 2 and err.count("\n") == 1 and words in err, err
