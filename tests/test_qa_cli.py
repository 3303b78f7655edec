"""Known CLI defects, each pinned: errors about --set / --bw values name the flag and the value the user typed; the
--json failure contract (one JSON document on stdout, nothing on stderr, non-zero exit); one rule for printed
percentages; a fixed GPU count that the batch cannot split says which counts and batches would."""

from __future__ import annotations

import json
import re

import pytest
from cli_helpers import EXH, TINY, invoke

from planner.cli.app import plan_app
from planner.economics import fmt_pct

MAIN = ["--compute", "1e28", "--gpu", "h100", "--days", "90"]


# --------------------------------------------------------------------------------------------------
# 1. a bad per-level or --set value: the error names what was typed, not levels[0].bw_bidir_GBps
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("flags,line", [
    (["--bw", "NVLink=0"], "error: --bw NVLink=0: the value should be greater than 0"),
    (["--bw=InfiniBand=-5"], "error: --bw InfiniBand=-5: the value should be greater than 0"),
    (["--bw", "NVLink=abc"], "error: --bw NVLink=abc: expected a number, got 'abc'"),
    (["--bw", "Foo=3"], "error: --bw Foo=3: no network level 'Foo'; this hardware has NVLink, InfiniBand (or use an "
                        "index 0..1, or *)"),
    (["--set", "levels.1.lat_us=-1"], "error: --set levels.1.lat_us=-1: the value should be greater than or equal "
                                      "to 0"),
    (["--set", "gpu.hbm_GB=-1"], "error: --set gpu.hbm_GB=-1: the value should be greater than 0"),
    (["--set", "profile.overlap.tp=2"], "error: --set profile.overlap.tp=2: the value should be less than or equal "
                                        "to 1"),
    (["--set", "goodput.restart_minutes=-1"], "error: --set goodput.restart_minutes=-1: the value should be greater "
                                              "than or equal to 0"),
])
def test_a_bad_override_names_the_flag_and_value(capsys, flags, line):
    code, out, err = invoke(capsys, [*MAIN, *flags], plan_app, "plan")
    assert code == 2 and out == ""
    assert err == line + "\n"
    assert "levels[" not in err and "with --set:" not in err


def test_the_last_of_two_overrides_of_a_field_is_blamed(capsys):
    # levels.0 and NVLink are the same field on h100: the value in effect (the last) is the one named
    code, _, err = invoke(capsys, [*MAIN, "--set", "levels.0.bw_bidir_GBps=0", "--bw", "NVLink=-1"], plan_app, "plan")
    assert code == 2 and err.startswith("error: --bw NVLink=-1: ")


def test_an_error_about_another_field_names_the_overrides_that_led_to_it(capsys):
    # NVLink groups of 3 on h100: the parser objects to gpus_per_node = 8 (not overridden); the line says which --set
    code, _, err = invoke(capsys, [*MAIN, "--set", "levels.NVLink.size=3"], plan_app, "plan")
    assert code == 2
    assert err.startswith("error: h100 with --set levels.NVLink.size=3: gpus_per_node = 8 does not fit the lowest "
                          "network level (NVLink, groups of 3 GPUs)")


def test_evaluate_names_the_flag_too(capsys):
    code, _, err = invoke(capsys, ["evaluate", *TINY, "--dp", "8", "--bw", "NVLink=0"])
    assert code == 2 and err == "error: --bw NVLink=0: the value should be greater than 0\n"


# --------------------------------------------------------------------------------------------------
# 2. --json: a failure is one JSON document on stdout, nothing on stderr, a non-zero exit code
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,code_name", [
    (["plan", *MAIN, "--bw", "NVLink=0"], "bad_input"),
    (["plan", "--compute", "nan", "--days", "90"], "bad_input"),
    (["plan", *MAIN, "--frobnicate"], "usage"),
    (["evaluate", *TINY, "--dp", "3"], "bad_input"),
    (["hardware", "show", "no-such-gpu"], "bad_input"),
    (["models", "show", "no-such-model"], "bad_input"),
    (["limits", "--alpha", "0.7"], "bad_input"),
])
def test_json_errors_are_one_document_on_stdout_and_nothing_on_stderr(capsys, argv, code_name):
    code, out, err = invoke(capsys, argv)  # without --json: the one line on stderr, nothing on stdout
    assert code == 2 and out == "" and err.startswith("error: ") and len(err.splitlines()) == 1
    line = err.removeprefix("error: ").rstrip("\n")
    code_j, out_j, err_j = invoke(capsys, [*argv, "--json"])
    assert code_j == 2 and err_j == ""
    doc = json.loads(out_j)
    assert doc == {"status": "error", "error": {"code": code_name, "message": doc["error"]["message"], "exit_code": 2}}
    if code_name == "bad_input":  # the same words as the line a person reads
        assert doc["error"]["message"] == line


def test_json_infeasible_is_the_plan_document_and_nothing_on_stderr(capsys):
    # 7 GPUs cannot split TINY (d_ff 1024, d_model 256, 4 layers, b/E 64: powers of two only)
    code, out, err = invoke(capsys, ["plan", *TINY, *EXH, "--gpus", "7", "--json"])
    assert code == 1 and err == ""
    doc = json.loads(out)
    assert doc["status"] == "infeasible" and "7 GPUs" in doc["explanation"]
    code, out, err = invoke(capsys, ["plan", *TINY, *EXH, "--gpus", "7"])  # without --json: the line on stderr
    assert code == 1 and err.startswith("infeasible: ")


def test_the_help_and_readme_state_the_json_contract(capsys):
    from pathlib import Path

    code, out, _ = invoke(capsys, ["plan", "--help"])
    assert code == 0 and "nothing on stderr" in " ".join(out.split())
    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text().split())
    assert "With `--json` every outcome is one JSON document on stdout and nothing is written to stderr" in readme


def _help_texts():
    """(command path, parameter or 'help', text) for every command and option of the app."""
    import typer

    from planner.cli import app

    def walk(cmd, path):
        yield path, "help", cmd.help or ""
        for param in cmd.params:
            yield path, param.name, getattr(param, "help", None) or ""
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, f"{path} {name}")

    yield from walk(typer.main.get_command(app), "planner")


def test_no_help_text_loses_a_bracketed_name_to_rich_markup(capsys):
    """Help is rendered in rich markup mode, which swallows an unescaped `[word]` as a style tag: `--profile`'s help
    printed "the profile's  values" for "the profile's [framework.torchtitan] values". Every bracket a help text
    means literally is escaped (rich's tag rule: `[` then a letter, #, / or @, unescaped), and the rendered page
    shows the name."""
    tag = re.compile(r"(?<!\\)\[[a-z#/@][^\[]*?\]")
    swallowed = [(path, name, m.group(0)) for path, name, text in _help_texts() for m in tag.finditer(text)]
    assert swallowed == []
    code, out, _ = invoke(capsys, ["plan", "--help"])
    assert code == 0 and "profile's [framework.torchtitan] values" in " ".join(out.replace("│", " ").split())


# --------------------------------------------------------------------------------------------------
# 3. one rule for every printed percentage
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("x,text", [
    (0.459, "45.9%"), (0.46, "46.0%"), (0.4596, "46.0%"), (0.05, "5.0%"), (0.0005, "0.1%"), (0.00047, "0.047%"),
    (0.0, "0.0%"), (0.9996, "100%"), (1.0, "100%"), (2.5, "250%"), (12.345, "1,234%"), (None, "—"),
])
def test_fmt_pct_rule(x, text):
    assert fmt_pct(x) == text


def test_a_plan_report_prints_every_percentage_by_the_one_rule(capsys):
    """Every percentage the planner itself computes in a transformer plan's report (shares of the step, of HBM,
    MFU): one decimal below 100 %, whole from 100 % on, two significant figures below 0.05 %. Before the rule the
    memory table printed '5.66%' beside '102%' and the step table '0.178%' beside '18.9%'."""
    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpus", "64", "--quiet"])
    assert code == 0, err
    found = re.findall(r"(?<![\d.,-])(\d[\d,]*(?:\.\d+)?)%", out)  # "30-50 %" of a data file's note has a space
    assert len(found) >= 20
    for text in found:
        value = float(text.replace(",", ""))
        if value >= 100:
            assert "." not in text, text
        elif value >= 0.05 or value == 0:
            assert re.fullmatch(r"\d+\.\d", text), text
        else:
            assert len(text.lstrip("0.")) <= 2, text


# --------------------------------------------------------------------------------------------------
# 4. a GPU count the batch cannot split: the counts and the batches that would
# --------------------------------------------------------------------------------------------------

def test_a_count_the_batch_cannot_split_names_counts_and_batches(capsys):
    """Mixtral 8x7B's 128-sequence batch on 2,496 = 2^6 x 39 GB300 GPUs: the heads, layers and experts are powers of
    two and 32,768 tokens a sequence, so the factor 39 must be the data-parallel degree's, which does not divide 128.
    The message names the nearest usable counts (as the document's infeasibility facts record them) and a batch on
    either side of 128 that 2,496 GPUs can split; each batch named is then planned on 2,496 GPUs to check it."""
    argv = ["--model", "mixtral-8x7b", "--gpu", "gb300-nvl72", "--gpus", "2496", "--profile", "realistic"]
    code, out, err = invoke(capsys, [*argv, "--json"], plan_app, "plan")
    assert code == 1
    doc = json.loads(out)
    facts = doc["infeasibility"]
    why = doc["explanation"]
    assert why.startswith("no layout can split this model over exactly 2,496 GPUs")
    assert f"the nearest GPU counts with a layout are {facts['nearest_gpus_below']:,} and " \
           f"{facts['nearest_gpus_above']:,}" in why
    m = re.search(r"keep 2,496 GPUs and make the global batch ([\d,]+) or ([\d,]+) sequences \(--batch-sequences N\)",
                  why)
    assert m, why
    batches = [int(g.replace(",", "")) for g in m.groups()]
    assert batches[0] < 128 < batches[1]
    for b in batches:
        assert b % 3 == 0 or b % 13 == 0  # a factor of 39 must come from the batch (see the docstring)
        code, out, err = invoke(capsys, [*argv, "--batch-sequences", str(b), "--json"], plan_app, "plan")
        assert code == 0, err
        assert json.loads(out)["gpus"] == 2496


# --------------------------------------------------------------------------------------------------
# Fresh-eyes QA: what a capacity planner reads
# --------------------------------------------------------------------------------------------------

def test_a_bad_choice_reads_without_pydantics_prefix(capsys):
    code, _, err = invoke(capsys, [*MAIN, "--schedule", "foo"], plan_app, "plan")
    assert code == 2
    assert err == ("error: Invalid value for '--schedule': 'foo' is not one of 'auto', '1f1b', 'zb-h2'. "
                   "(see 'plan --help')\n")


def test_sweep_range_error_without_pythons_exponent_plus(capsys):
    code, _, err = invoke(capsys, ["sweep", "--from", "1e26", "--to", "1e24"])
    assert code == 2 and err == "error: --to (1e24) must not be below --from (1e26)\n"


def test_a_folded_expert_layout_note_names_etp_and_expert_ep(capsys):
    """DeepSeek-V3 as Megatron-Bridge folds it (README): tp 2 x dp 64 = 128 ranks per stage regrouped as etp 1 x
    ep 64 x expert-dp 2; the note used to say 'expert-tp 2 x ep 1 x expert-dp 64', the unfolded layout's words."""
    argv = ["evaluate", "--model", "deepseek-v3", "--tp", "2", "--pp", "8", "--vpp", "4", "--dp", "64", "--ep", "64",
            "--etp", "1", "--first-stage-layers", "1", "--last-stage-layers", "0", "--gbs", "8192", "--mbs", "1",
            "--sp", "on", "--placement", "dp=4,16;tp_ff=2,1;pp=1,8", "--json"]
    code, out, err = invoke(capsys, argv)
    assert code in (0, 1), err
    notes = json.loads(out)["notes"]
    assert any("regroup each stage's dp x cp x tp = 128 ranks as expert-tp 1 x ep 64 x expert-dp 2" in n
               for n in notes), notes
    assert not any("expert-tp 2 x ep 1" in n for n in notes)


def test_big_numbers_have_separators(capsys):
    # the toy model of 1e24 FLOP on one TP-8 node: b = 5,242,880 tokens in one nanobatch, 20,790 GB per GPU
    code, out, err = invoke(capsys, ["evaluate", "--compute", "1e24", "--gpu", "h100", "--tp-ff", "8"])
    assert code == 1
    assert re.search(r"nanobatch b / \(E N_DP m\)\s+│ 5,242,880 tokens", out), out
    assert re.match(r"infeasible: the layout needs 20,7\d\d\.\d\d GB per GPU", err), err
    code, out, _ = invoke(capsys, ["models", "show", "deepseek-v3"])
    assert code == 0 and re.search(r"d_model\s+│ 7,168 ", out) and re.search(r"seq_len\s+│ 4,096 tokens", out)


def test_a_tornado_bar_of_a_field_that_moves_nothing_names_both_ends():
    """A study field whose values all give the same GPUs (hbm on a small plan): the bar is empty, and its ends are
    labelled with the first and last values, not the first twice ('[]' and '[]' in the figure before)."""
    from planner.study import parse_study, tornado_families

    study = parse_study({"study": {"name": "t"}, "base": {"profile": "paper"},
                         "grid": {"gpu": ["h100"], "compute_flop": [1e20, 1e21],
                                  "set": [[], ["gpu.hbm_GB=96"]]}})
    # scenario k: compute index k // 2, set index k % 2 (the first field varies slowest); GPUs by hand
    rows = [{"scenario": k, "in_gpu": "h100", "in_compute_flop": c, "in_set": s, "gpus": g}
            for k, (c, s, g) in enumerate([(1e20, "[]", 2), (1e20, '["gpu.hbm_GB=96"]', 2),
                                           (1e21, "[]", 24), (1e21, '["gpu.hbm_GB=96"]', 24)])]
    (label, mid, bars), = tornado_families(study, rows)
    assert label == "gpu=h100" and mid == 2
    by_field = {b.field: b for b in bars}
    assert (by_field["compute_flop"].low, by_field["compute_flop"].high) == (2, 24)
    flat = by_field["set"]
    assert flat.low == flat.high == 2 and (flat.low_label, flat.high_label) == ("[]", '["gpu.hbm_GB=96"]')


@pytest.mark.parametrize("gpu", ["h100,", ",h100", "h100,,b200"])
def test_an_empty_accelerator_name_is_refused(gpu):
    """`--gpu "h100,"` once became a one-accelerator comparison without a word; a name left out is bad input."""
    from planner.compare import accelerator_names
    from planner.errors import InvalidInput

    with pytest.raises(InvalidInput, match="leaves a name empty"):
        accelerator_names(gpu)
    assert accelerator_names("h100, b200") == ["h100", "b200"]  # spaces around names are still fine


@pytest.mark.parametrize("argv,line", [
    (["plan", "--compute", "-1", "--gpu", "h100", "--days", "30"],
     "error: --compute must be a positive finite number of FLOP, got -1.0"),
    (["plan", "--compute", "1e50", "--gpu", "h100", "--days", "30"],
     "error: --compute 1e+50 FLOP is outside the accepted range 1e+18 to 1e+40 FLOP"),
    (["sweep", "--from", "1e22", "--to", "1e60", "--gpu", "h100"],
     "error: --to 1e+60 FLOP is outside the accepted range 1e+18 to 1e+40 FLOP"),
    (["sweep", "--from", "0", "--to", "1e23", "--gpu", "h100"],
     "error: --from must be a positive finite number of FLOP, got 0.0"),
])
def test_a_bad_compute_names_the_flag(capsys, argv, line):
    """The library says 'compute must be ...' (its argument); the command line names the flag typed."""
    code, out, err = invoke(capsys, argv)
    assert code == 2 and out == "" and err == line + "\n"


@pytest.mark.parametrize("json_out", [False, True])
def test_a_sweep_with_no_feasible_point_exits_1(capsys, json_out):
    """As `plan` does when nothing is feasible: exit 1, one line on stderr (none under --json, whose document
    carries each point's explanation); a sweep with a feasible point exits 0."""
    argv = ["sweep", "--from", "1e30", "--to", "1e31", "--points", "2", "--gpu", "h100", "--days", "1"]
    code, out, err = invoke(capsys, argv + (["--json"] if json_out else []))
    assert code == 1
    if json_out:
        assert err == "" and {p["status"] for p in json.loads(out)["plans"]} == {"infeasible"}
    else:
        assert err == "infeasible: no point of the sweep has a layout that meets the 1-day deadline (the notes above " \
                      "say why)\n"
    code, _, _ = invoke(capsys, ["sweep", "--from", "1e22", "--to", "1e23", "--points", "2", "--gpu", "h100"])
    assert code == 0


def test_the_held_gpus_note_groups_thousands_as_every_other_count(capsys):
    """The spare-GPU note of a rack plan printed "the run holds 1152 GPUs" beside "1,024 x ..." and "1,152 GPUs held"
    in the same output. 1,024 GPUs on GB200 NVL72 take 16 racks of 72 (64 used in each, as the plan says): 1,152
    held, 128 spare."""
    code, out, err = invoke(capsys, ["plan", "--model", "llama3-8b", "--gpu", "gb200-nvl72", "--gpus", "1024",
                                     "--json"])
    assert code == 0, err
    plan = json.loads(out)
    assert (plan["gpus"], plan["racks"], plan["gpus_per_rack"]) == (1024, 16, 64)
    assert "the run holds 1,152 GPUs (128 spare in the racks it takes whole): cost_usd and the power figures count " \
           "them, compute_cost_usd does not" in plan["notes"]
