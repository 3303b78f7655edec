"""Rich table of Section 5's closed-form bounds, laid out like the paper's Table 2."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.table import Table

from planner.limits import DAY_S, PAPER_BATCH_TOKENS, PAPER_LATENCY_S, PAPER_LAYERS, LimitsRow

_SI_SUFFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def fmt_sci(x: float, sig: int = 3) -> str:
    """Scientific notation with `sig` significant figures and a bare exponent: 5.02e14, 2e28, 1.9e28."""
    if not math.isfinite(x):
        return "∞" if x > 0 else str(x)
    if x == 0:
        return "0"
    mantissa, exponent = f"{x:.{sig - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def fmt_si(x: float, sig: int = 3) -> str:
    """A count with an SI suffix and `sig` significant figures: 26.4k, 151M, 590, 16."""
    if not math.isfinite(x):
        return "∞" if x > 0 else str(x)
    for scale, suffix in _SI_SUFFIXES:
        if abs(x) >= scale:
            return f"{_round_sig(x / scale, sig):g}{suffix}"
    return f"{_round_sig(x, sig):g}"


def _round_sig(x: float, sig: int) -> float:
    if x == 0:
        return 0.0
    return round(x, sig - 1 - math.floor(math.log10(abs(x))))


def limits_table(rows: Sequence[LimitsRow], title: str = "Closed-form limits (paper §5, Table 2)") -> Table:
    """One line per system: C, B_net, B_DRAM, S, d', b', T_critical (Eq. 13) and T_limit (Eq. 18).

    The caption states the shared assumptions (b, L, E, duration, t_L, alpha) when all rows share them.
    """
    table = Table(title=title)
    table.add_column("System")
    table.add_column("GPUs/device", justify="right")
    table.add_column("Arithmetic\n(MAC/s, peak)", justify="right")
    table.add_column("Network\n(words/s, 1 dir)", justify="right")
    table.add_column("DRAM\n(words/s, 1 dir)", justify="right")
    table.add_column("SRAM\n(words)", justify="right")
    table.add_column("d'", justify="right")
    table.add_column("b'", justify="right")
    table.add_column("T_critical\n(FLOP, Eq. 13)", justify="right")
    table.add_column("T_limit\n(FLOP, Eq. 18)", justify="right")
    for r in rows:
        table.add_row(
            r.hardware,
            str(r.gpus_per_device),
            fmt_sci(r.c_mac_per_s, 3),
            fmt_sci(r.b_net_words_per_s, 2),
            fmt_sci(r.b_dram_words_per_s, 2),
            fmt_si(r.sram_words),
            fmt_si(r.d_prime),
            f"{fmt_si(r.b_prime)} ({'SRAM' if r.weights_in_sram else 'DRAM'})",
            fmt_sci(r.t_critical_flop, 2),
            fmt_sci(r.t_limit_flop, 2),
        )
    if rows:
        table.caption = _caption(rows)
    return table


def _caption(rows: Sequence[LimitsRow]) -> str:
    first = rows[0]
    keys = ("batch_tokens", "layers", "experts", "t_train_s", "t_latency_s", "alpha", "t0_mac")
    if any(getattr(r, k) != getattr(first, k) for r in rows for k in keys):
        return "Rows use different assumptions; see the JSON output for each row's inputs."
    parts = [
        f"b = {fmt_sci(first.batch_tokens, 2)} tokens",
        f"L = {first.layers:g}",
        f"E = {first.experts:g}",
        f"t_train = {first.t_train_s / DAY_S:.4g} days",
        f"t_L = {first.t_latency_s * 1e6:g} µs",
    ]
    if first.alpha:
        parts.append(f"App. 8.3 alpha = {first.alpha:.3g} (T0 = {fmt_sci(first.t0_mac, 2)} in the MAC formulas)")
    return (
        "One device = one node (first network level). " + ", ".join(parts)
        + ". Peak (max-clock) arithmetic; 1 MAC = 2 FLOP; b' (SRAM) means weights fit on chip (S/d'^2 >= 4)."
    )


def assumptions_text(row: LimitsRow) -> str:
    """What every bound of the table assumes, in one paragraph (the paper's "usual values" named as such)."""
    usual = (row.batch_tokens, row.layers, row.experts, row.t_latency_s) == (PAPER_BATCH_TOKENS, PAPER_LAYERS, 1.0,
                                                                              PAPER_LATENCY_S)
    which = " (the paper's usual values, §5.1)" if usual else ""
    return (f"Assumptions{which}: a batch of b = "
            f"{fmt_sci(row.batch_tokens, 2)} tokens and L = {row.layers:g} layers whatever the compute"
            f"{' (App. 8.3: at T0, then as power laws of T)' if row.alpha else ''}, E = {row.experts:g}, a "
            f"{row.t_train_s / DAY_S:.4g}-day run, t_L = {row.t_latency_s * 1e6:g} µs per matmul and its "
            "communication, 4 t_L per layer per step (Eq. 17), D = 20 N_p; a node is one device at peak arithmetic.")


def inferred_table(rows: Sequence[LimitsRow]) -> Table:
    """Eq. 18's T_limit beside the latency wall `plan` reports for the inferred shape, and Eq. 18 again at that
    shape's b, L and per-layer latency (which lands near the planner's number: the gap is the assumptions)."""
    table = Table(title="The latency wall two ways: Eq. 18 (fixed b, L, t_L) and `plan` (inferred shape)")
    for col in ("System", "T_limit\n(Eq. 18)", "plan's bound\n(inferred shape)", "its b\n(tokens)", "its L",
                "its E", "critical path\nper layer", "Eq. 18 at its\nb, L, E, t_L = path/4"):
        table.add_column(col, justify="left" if col == "System" else "right")
    for r in rows:
        w = r.inferred
        if w is None:
            continue
        if (w.compute_flop is None or math.isinf(w.compute_flop) or w.batch_tokens is None or w.layers is None
                or w.experts is None or w.layer_critical_path_s is None or w.eq18_flop is None):
            beyond = "below 1e18" if w.compute_flop is None else "above 1e40"  # the accepted --compute range
            table.add_row(r.hardware, fmt_sci(r.t_limit_flop, 2), beyond, *("—",) * 5)
            continue
        table.add_row(r.hardware, fmt_sci(r.t_limit_flop, 2), fmt_sci(w.compute_flop, 3), fmt_sci(w.batch_tokens, 2),
                      f"{w.layers:g}", f"{w.experts:g}", f"{w.layer_critical_path_s * 1e6:.3g} µs",
                      fmt_sci(w.eq18_flop, 3))
    first = next((r.inferred for r in rows if r.inferred is not None), None)
    if first is not None:
        table.caption = (
            f"`plan --compute C{' --sparse' if first.sparse else ''}` infers the shape at each C (App. 8.1.4, "
            f"{first.batch_law} batch law: b and L grow with C) and is infeasible once one microbatch's critical path "
            "through all L layers, times the D/b steps, exceeds the run; past it, it prints this bound as \"at most "
            "about X FLOP\". Eq. 18 keeps b, L and t_L fixed; at the inferred shape's b/L and with t_L = a quarter of "
            "the hardware's per-layer critical path it gives nearly the same number: the two differ by their "
            "assumptions, not their physics.")
    return table
