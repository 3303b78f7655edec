"""Issue 18's smaller items: `hardware show` takes a file wherever a name works and no hint names what fails;
a cluster size that does not fill the network levels gets the nearest sizes that do; `--help` is not cut at
80 columns when piped; the sweep plot's ceiling labels keep apart; `limits` states its assumptions and puts the
latency wall `plan` reports beside Eq. 18."""

from __future__ import annotations

import json
import re

import pytest
from cli_helpers import invoke

from planner.hardware import parse_hardware
from planner.parallel.space import level_products, nearest_cluster_sizes
from planner.reference import HARDWARE_EXAMPLE
from planner.render.sweep import CEILING_LABEL_GAP, ceiling_label_positions


def test_hardware_show_takes_the_file_a_plan_was_made_on(capsys, tmp_path, monkeypatch):
    path = tmp_path / "h100-ib800.toml"
    path.write_text(HARDWARE_EXAMPLE)
    code, out, _ = invoke(capsys, ["plan", "--compute", "1e22", "--gpu", str(path), "--json"])
    notes = " ".join(json.loads(out)["notes"])
    # The estimate note points at `hardware show` with the plan's --gpu, never at the file's `name` alone.
    assert code == 0 and "gpu.sustained_clock_factor" in notes and "hardware show h100-ib800`" not in notes
    code, out, err = invoke(capsys, ["hardware", "show", str(path)])
    assert (code, err) == (0, "") and "h100-ib800" in out and "800 Gb/s per GPU = 100 GB/s each way" in out
    code, out, _ = invoke(capsys, ["hardware", "show", str(path), "--json"])
    assert json.loads(out)["levels"][1]["bw_bidir_Bps"] == 200e9
    # A file named without .toml, in the current directory, works where a name does.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").write_text(HARDWARE_EXAMPLE)
    code, out, _ = invoke(capsys, ["hardware", "show", "mine"])
    assert code == 0 and "Hardware 'h100-ib800'" in out
    code, _, err = invoke(capsys, ["hardware", "show", "x" * 5000])  # too long for a path: an unknown name
    assert code == 2 and err.startswith("error: unknown GPU/hardware")


def test_a_plan_on_a_user_file_asks_for_the_file_again(capsys, tmp_path):
    path = tmp_path / "h100-ib800.toml"
    path.write_text(HARDWARE_EXAMPLE)
    _, out, _ = invoke(capsys, ["plan", "--compute", "1e22", "--gpu", str(path), "--json"])
    saved = tmp_path / "plan.json"
    saved.write_text(out)
    code, _, err = invoke(capsys, ["evaluate", "--plan", str(saved)])
    assert code == 2 and "'h100-ib800', which is not a shipped system" in err and "--gpu FILE.toml" in err
    code, _, _ = invoke(capsys, ["evaluate", "--plan", str(saved), "--gpu", str(path)])
    assert code == 0


def _levels(*sizes: int | None):
    doc = {"name": "t", "gpus_per_node": 4, "gpu": {"name": "g", "sms": 1, "flop_per_clock_per_thread": 1,
                                                     "max_clock_MHz": 1, "sustained_clock_factor": 1, "hbm_GBps": 1,
                                                     "l2_GBps": 1, "l2_MiB": 1, "register_file_per_block_KiB": 1,
                                                     "l1_per_sm_KiB": 1, "hbm_GB": 1, "matmul_latency_us": 0,
                                                     "dsmem": False},
           "levels": [{"name": f"L{k}", "bw_bidir_GBps": 1, "lat_us": 1, **({"size": s} if s else {})}
                      for k, s in enumerate(sizes)]}
    return parse_hardware(doc, "test")


@pytest.mark.parametrize(("sizes", "n", "expected"), [
    ((72, None), 100, (72, 144)),          # GB200 NVL72: whole racks above one rack
    ((72, None), 50, (50, 50)),            # inside one rack any count fills it
    ((8, None), 12, (8, 16)),              # DGX nodes of 8
    ((4, 32, None), 40, (32, 64)),         # past the second level: whole groups of 32
    ((4, 32, None), 18, (16, 20)),         # between the levels: whole groups of 4
    ((4, 32), 40, (32, None)),             # bounded top: nothing above 32
])
def test_nearest_cluster_sizes(sizes, n, expected):
    hw = _levels(*sizes)
    assert nearest_cluster_sizes(hw, n) == expected
    for k in expected:  # each answer fills the levels, as the search's own rule says
        if k is not None:
            assert level_products(hw, [k])[1][0]


def test_evaluate_suggests_cluster_sizes_that_fill_the_levels(capsys):
    # GB200 NVL72 jobs take 4-GPU trays (docs/model.md, "The search space"): 66 GPUs are 16.5 trays.
    code, _, err = invoke(capsys, ["evaluate", "--gpu", "gb200-nvl72", "--compute", "1e24", "--dp", "33",
                                   "--tp-ff", "2"])
    assert code == 2
    assert "the nearest cluster sizes that do: 64 and 68 GPUs (e.g. dp=32 or dp=34)" in err
    code, _, err = invoke(capsys, ["evaluate", "--gpu", "gb200-nvl72", "--compute", "1e24", "--dp", "32",
                                   "--tp-ff", "2"])
    assert "cannot fill" not in err  # the suggested size fills the levels (this batch then asks dp to divide it)


def test_help_is_not_cut_when_piped(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("TERMINAL_WIDTH", raising=False)
    code, out, _ = invoke(capsys, ["sweep", "--help"])
    assert code == 0 and "…" not in out
    flat = " ".join(out.replace("│", " ").split())
    assert "PREFIX-mfu.png and PREFIX-parallelism-HW.png" in flat
    assert "end_of_linear_scaling_flop" in flat


@pytest.mark.parametrize("levels", [[0.56], [0.56, 0.57, 0.58], [0.5, 0.97, 0.98, 0.99], [0.0, 0.01]])
def test_ceiling_labels_keep_apart(levels):
    at = ceiling_label_positions(levels)
    assert len(at) == len(levels) and all(0.0 <= y <= 1.0 for y in at)
    assert all(b - a >= CEILING_LABEL_GAP - 1e-12 for a, b in zip(at, at[1:], strict=False))
    if len(levels) == 1:
        assert at == levels  # a lone label sits at its line


def test_limits_states_its_assumptions_and_the_bound_plan_reports(capsys):
    code, out, _ = invoke(capsys, ["limits", "--gpu", "h100", "--days", "90"])
    flat = " ".join(out.split())
    assert code == 0
    assert "a batch of b = 4.0e6 tokens and L = 100 layers whatever the compute" in flat
    assert "t_L = 9 µs per matmul and its communication" in flat
    code, out, _ = invoke(capsys, ["limits", "--gpu", "h100", "--days", "90", "--json"])
    row = json.loads(out)[0]
    wall = row["inferred"]
    # Eq. 18 by hand at the paper's values: 2 x 3/320 x (4e6 / 100 x 90 days / 9 µs)^2 FLOP.
    assert row["t_limit_flop"] == pytest.approx(2 * 3 / 320 * (4e6 / 100 * 90 * 86400 / 9e-6) ** 2)
    # plan past the wall prints the same inferred-shape bound ...
    code, out, err = invoke(capsys, ["plan", "--compute", "1e33", "--days", "90", "--json"])
    said = re.search(r"at most about ([0-9.e+]+) FLOP", json.loads(out)["explanation"])
    assert code == 1 and said is not None
    assert float(said.group(1)) == pytest.approx(wall["compute_flop"], rel=5e-3)  # printed to 3 figures
    # ... and Eq. 18 at that shape's b, L and a quarter of its per-layer critical path lands within 5 % of it.
    by_hand = 2 * 3 / 320 * (wall["batch_tokens"] / wall["layers"] * 90 * 86400
                             / (wall["layer_critical_path_s"] / 4)) ** 2
    assert wall["eq18_flop"] == pytest.approx(by_hand)
    assert wall["eq18_flop"] == pytest.approx(wall["compute_flop"], rel=0.05)
    assert wall["compute_flop"] > 4 * row["t_limit_flop"]  # the fixed b = 4M, L = 100 bound is the tighter one


def test_limits_without_the_inferred_bound(capsys):
    code, out, _ = invoke(capsys, ["limits", "--gpu", "h100", "--no-inferred", "--json"])
    assert code == 0 and json.loads(out)[0]["inferred"] is None


def test_the_command_list_gives_each_summary_as_one_flowing_sentence(capsys, monkeypatch):
    """Each command's first docstring paragraph wraps at 120 columns in the source; `planner --help` must not carry
    those breaks into the listing (it did: 'deadlines, --set' then 'overrides, ...' on the next line, cut short). At
    listing a summary continues on a second row only where the first row is nearly full (rich's wrap), never after a
    short one (a line break carried over from the source)."""
    from planner.cli import app

    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = invoke(capsys, ["--help"])
    assert code == 0
    panel = out[out.index("Commands"):]
    width = len(panel.splitlines()[0]) - 1  # the panel's top border, from the title on
    rows = [line.strip("│").rstrip() for line in panel.splitlines()[1:] if line.startswith("│")]
    names = [info.name for info in app.registered_commands] + ["hardware", "models"]
    starts = [row.split()[0] for row in rows if not row.startswith("  ")]
    assert sorted(starts) == sorted(names)
    for before, row in zip(rows, rows[1:], strict=False):
        if row.startswith("  "):  # a continuation: the row before it was filled to the panel's width
            assert len(before) > width - 20, (before, row)  # 20: longer than any word of the summaries
    assert any("deadlines, --set overrides, profiles" in row for row in rows)


def test_hardware_list_gives_each_network_level_its_own_line(capsys, monkeypatch):
    """Levels were joined with ' | ' and wrapped wherever the column ended, so one level's latency could land beside
    the next level's name; each level now starts its own line (h100: NVLink 8 at 900 GB/s, then InfiniBand)."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = invoke(capsys, ["hardware", "list"])
    assert code == 0
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("│") and line.split("│")[1].strip() == "h100")
    assert "NVLink 8 @ 900 GB/s" in lines[at] and "InfiniBand" not in lines[at]
    assert "InfiniBand ∞ @" in lines[at + 1] and " | " not in out
