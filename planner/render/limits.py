"""Rich table of Section 5's closed-form bounds, laid out like the paper's Table 2."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from planner.limits import DAY_S, PAPER_BATCH_TOKENS, PAPER_LATENCY_S, PAPER_LAYERS, LimitsRow

# Counts, never bytes: B is a billion, as model sizes are written ("405B parameters"), not G.
_SI_SUFFIXES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


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


def limits_table(rows: Sequence[LimitsRow], title: str = "Closed-form limits (paper §5, Table 2)",
                 width: int | None = None) -> Table:
    """One line per system: C, B_net, B_DRAM, S, d', b', T_critical (Eq. 13) and T_limit (Eq. 18); with `width`
    (the terminal's columns) and too wide for it, one column per system instead (fit_table).

    The caption states the shared assumptions (b, L, E, duration, t_L, alpha) when all rows share them.
    """
    headers = ("System", "GPUs/device", "Arithmetic\n(MAC/s, peak)", "Network\n(words/s, 1 dir)",
               "DRAM\n(words/s, 1 dir)", "SRAM\n(words)", "d'", "b'", "T_critical\n(FLOP, Eq. 13)",
               "T_limit\n(FLOP, Eq. 18)")
    body = [(r.hardware, str(r.gpus_per_device), fmt_sci(r.c_mac_per_s, 3), fmt_sci(r.b_net_words_per_s, 2),
             fmt_sci(r.b_dram_words_per_s, 2), fmt_si(r.sram_words), fmt_si(r.d_prime),
             f"{fmt_si(r.b_prime)} ({'SRAM' if r.weights_in_sram else 'DRAM'})", fmt_sci(r.t_critical_flop, 2),
             fmt_sci(r.t_limit_flop, 2)) for r in rows]
    return fit_table(title, headers, body, _caption(rows) if rows else None, width)


def fit_table(title: str, headers: Sequence[str], body: Sequence[Sequence[str]], caption: str | None,
              width: int | None) -> Table:
    """A table with one row per system (the first cell names it), its figures never wrapped; when that is wider
    than `width`, the same cells turned a quarter: one row per quantity, one column per system, so that no figure
    is cut to an ellipsis at an 80-column terminal."""
    table = Table(title=title, caption=caption)
    for k, h in enumerate(headers):
        table.add_column(h, justify="left" if k == 0 else "right", no_wrap=k > 0)
    for cells in body:
        table.add_row(*cells)
    if width is None or Console(width=10_000, markup=False).measure(table).maximum <= width:
        return table
    turned = Table(title=title, caption=caption)
    turned.add_column(headers[0])
    for cells in body:
        turned.add_column(cells[0], justify="right", no_wrap=True)
    for k, h in enumerate(headers[1:], start=1):
        turned.add_row(h.replace("\n", " "), *(cells[k] for cells in body))
    return turned


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


def inferred_table(rows: Sequence[LimitsRow], width: int | None = None) -> Table:
    """Eq. 18's T_limit beside the latency wall `plan` reports for the inferred shape, and Eq. 18 again at that
    shape's b, L and per-layer latency (which lands near the planner's number: the gap is the assumptions)."""
    headers = ("System", "T_limit\n(Eq. 18)", "plan's bound\n(inferred shape)", "its b\n(tokens)", "its L", "its E",
               "critical path\nper layer", "Eq. 18 at its\nb, L, E, t_L = path/4")
    body = []
    for r in rows:
        w = r.inferred
        if w is None:
            continue
        if (w.compute_flop is None or math.isinf(w.compute_flop) or w.batch_tokens is None or w.layers is None
                or w.experts is None or w.layer_critical_path_s is None or w.eq18_flop is None):
            beyond = "below 1e18" if w.compute_flop is None else "above 1e40"  # the accepted --compute range
            body.append((r.hardware, fmt_sci(r.t_limit_flop, 2), beyond, *("—",) * 5))
            continue
        body.append((r.hardware, fmt_sci(r.t_limit_flop, 2), fmt_sci(w.compute_flop, 3), fmt_sci(w.batch_tokens, 2),
                     f"{w.layers:g}", f"{w.experts:g}", f"{w.layer_critical_path_s * 1e6:.3g} µs",
                     fmt_sci(w.eq18_flop, 3)))
    first = next((r.inferred for r in rows if r.inferred is not None), None)
    caption = None
    if first is not None:
        caption = (
            f"`plan --compute C{' --sparse' if first.sparse else ''}` infers the shape at each C (App. 8.1.4, "
            f"{first.batch_law} batch law: b and L grow with C) and is infeasible once one microbatch's critical path "
            "through all L layers, times the D/b steps, exceeds the run; past it, it prints this bound as \"at most "
            "about X FLOP\". Eq. 18 keeps b, L and t_L fixed; at the inferred shape's b/L and with t_L = a quarter of "
            "the hardware's per-layer critical path it gives nearly the same number: the two differ by their "
            f"assumptions, not their physics. Priced by the {first.profile} profile.")
    return fit_table("The latency wall two ways: Eq. 18 (fixed b, L, t_L) and `plan` (inferred shape)", headers,
                     body, caption, width)
