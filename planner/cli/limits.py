"""`limits`: the closed-form bounds of the paper's §5 (Table 2) beside the latency wall `plan` finds."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from planner.cli.app import app
from planner.cli.options import check_positive_flag, number_option
from planner.cli.output import emit_json, stdout_console, to_json
from planner.errors import InvalidInput
from planner.paper import DAY_S, PAPER_BATCH_TOKENS, PAPER_LATENCY_S, PAPER_LAYERS, THREE_MONTHS_S

DEFAULT_LIMITS_HARDWARE = ("v100", "a100", "h100", "h100-superpod")
"""Table 2's four systems: DGX-1, DGX A100, DGX H100 and the hypothetical H100 SuperPOD."""


@app.command("limits")
def limits_command(
    gpu: Annotated[list[str] | None, typer.Option(
        "--gpu", help="Hardware name or TOML file; repeat for several (default: Table 2's v100, a100, h100, "
        "h100-superpod).", metavar="NAME|FILE.toml", show_default=False)] = None,
    batch_tokens: Annotated[float, number_option("--batch-tokens", help="b, tokens per batch.")] = PAPER_BATCH_TOKENS,
    layers: Annotated[float, number_option("--layers", help="L, layers.")] = PAPER_LAYERS,
    experts: Annotated[float, number_option("--experts", help="E, sparsity factor (1 = dense).")] = 1.0,
    days: Annotated[float, number_option("--days", help="Training duration (the paper's 3 months = 91.3125 days).")
                    ] = THREE_MONTHS_S / DAY_S,
    latency_us: Annotated[float, number_option(
        "--latency-us", help="t_L, latency of one matmul plus its communication, µs.")] = PAPER_LATENCY_S * 1e6,
    alpha: Annotated[float, number_option(
        "--alpha", help="App. 8.3: alpha_b - alpha_L (0 = §5; 0.191 with DeepSeek batch scaling).")] = 0.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON list of rows and nothing else.")] = False,
    inferred: Annotated[bool, typer.Option(
        "--inferred/--no-inferred", help="Also find the latency wall `plan` reports for the shape it infers "
        "(about a second per system).")] = True,
) -> None:
    """Closed-form bounds of the paper's §5: d', b', T_critical (Eq. 13) and T_limit (Eq. 18), like Table 2, beside
    the latency wall `plan` reports for the shape it infers."""
    from planner.hardware import get_hardware
    from planner.limits import inferred_wall, limits_for
    from planner.render.limits import assumptions_text, fmt_sci, inferred_table, limits_table

    check_positive_flag("--days", days)
    check_positive_flag("--latency-us", latency_us)
    check_positive_flag("--batch-tokens", batch_tokens)
    check_positive_flag("--layers", layers)
    check_positive_flag("--experts", experts)
    if not math.isfinite(alpha):
        raise InvalidInput(f"--alpha must be a finite number below 0.5, got {alpha!r}")
    rows = []
    for name in gpu or DEFAULT_LIMITS_HARDWARE:
        hw = get_hardware(name)
        row = limits_for(hw, batch_tokens, layers, experts, days * DAY_S, latency_us * 1e-6, alpha)
        if inferred:  # b, L, E and t_L do not enter: the inferred shape has its own, the hardware its latencies
            row = row.model_copy(update={"inferred": inferred_wall(hw, days * DAY_S, sparse=experts > 1)})
        rows.append(row)
    if json_out:
        emit_json(to_json(rows))
        return
    console = stdout_console()
    console.print(limits_table(rows, width=console.width))
    r = rows[0]
    console.print(assumptions_text(r))
    console.print(f"Latency bounds at these b, L, E, t_L (hardware-independent): utilisation-preserving runs up to "
                  f"{fmt_sci(r.t_critical_latency_flop, 2)} FLOP (Eq. 14); at any utilisation N_p <= "
                  f"{fmt_sci(r.n_params_limit, 2)} (Eq. 17), T <= {fmt_sci(r.t_limit_flop, 2)} FLOP (Eq. 18).")
    if inferred:
        console.print()
        console.print(inferred_table(rows, width=console.width))
