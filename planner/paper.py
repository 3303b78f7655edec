"""The paper's units of time and its usual values (§5.1), read by the closed-form bounds (planner.limits) and, as option
defaults, by the `limits` command: a base-layer module, so that building the command line loads nothing else."""

DAY_S = 86_400.0
THREE_MONTHS_S = 365.25 / 4 * DAY_S
"""The paper's "3 months": a quarter of a Julian year, 91.3125 days = 7,889,400 s.

Which length reproduces the paper? Table 2's T_critical column and Eqs. 17-18 come out the same at one or two
significant figures for 90, 91.25 and 91.3125 days (they differ by at most 3 % in time, 6 % in compute). Eq. 15
does not: with 90 days it gives 2.49e30 FLOP, which rounds to 2e30, not the printed 3e30; 91.25 and 91.3125 days
give 2.56e30 -> 3e30. The quarter Julian year is also the value the authors' own notebooks use.
"""

# Defaults shared by Table 2 and Eqs. 15-18 (paper §5.1, "our usual values").
PAPER_BATCH_TOKENS = 4e6
PAPER_LAYERS = 100.0
PAPER_LATENCY_S = 9e-6
"""t_L of §5.1.1: ~4.5 us of matmul-kernel latency plus a similar network latency."""
