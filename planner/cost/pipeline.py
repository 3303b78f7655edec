"""Pipeline schedules (paper §3.2.1, App. 8.1.3 and 8.2), vectorised."""

from __future__ import annotations

import numpy as np


def bubble_fraction_1f1b(pp, interleave, microbatches, group: int | None = None) -> np.ndarray:
    """Eq. 22: f_b = (N_PP - 1 + z) / (N_PP - 1 + z + i m), z = (i - 1) max(0, N_PP - m).

    `group`: the interleaved schedule's microbatches per virtual stage (N; None: the paper's schedule, one group of
    m when m < N_PP). Eq. 22's z is the dependency stall of a group smaller than the pipeline: each of its i - 1
    moves to the next virtual stage waits N_PP - size chunk times for its first microbatch to come round; with
    groups of N (the last one the remainder) z = (i - 1) sum over groups of max(0, N_PP - size)."""
    pp = np.asarray(pp, dtype=np.float64)
    i = np.asarray(interleave, dtype=np.float64)
    m = np.asarray(microbatches, dtype=np.float64)
    if group is None:
        z = (i - 1.0) * np.maximum(0.0, pp - m)
    else:
        n = np.minimum(float(group), m)
        full = np.floor(m / n)
        rem = m - full * n
        z = (i - 1.0) * (full * np.maximum(0.0, pp - n) + np.where(rem > 0, np.maximum(0.0, pp - rem), 0.0))
    return (pp - 1.0 + z) / (pp - 1.0 + z + i * m)


def zb_h2_valid(pp, interleave, microbatches) -> np.ndarray:
    """ZB-H2 is bubble-free only with m >= 2 N_PP - 1 microbatches (§3.2.1); it is modelled with i = 1."""
    return (np.asarray(microbatches) >= 2 * np.asarray(pp) - 1) & (np.asarray(interleave) == 1)


def bubble_fraction(pp, interleave, microbatches, zero_bubble, group: int | None = None) -> np.ndarray:
    """f_b by schedule: Eq. 22 for 1F1B (`group`: `bubble_fraction_1f1b`), 0 for ZB-H2 (App. 8.1.3)."""
    return np.where(np.asarray(zero_bubble, dtype=bool), 0.0,
                    bubble_fraction_1f1b(pp, interleave, microbatches, group))


def microbatches_in_flight(pp, interleave, microbatches, zero_bubble) -> np.ndarray:
    """Microbatches whose activations the first stage holds at peak, in whole-stage units (docs/model.md §7).

    1F1B without interleaving: N_PP (at most m). Interleaved 1F1B warms up (N_PP - 1) * 2 + (i - 1) * N_PP
    virtual-stage chunks plus the one in progress, each 1/i of the stage's layers: (N_PP (i + 1) - 1) / i.
    ZB-H2 keeps about twice the 1F1B footprint: 2 N_PP - 1 (paper §3.2.1).
    """
    pp = np.asarray(pp, dtype=np.float64)
    i = np.asarray(interleave, dtype=np.float64)
    m = np.asarray(microbatches, dtype=np.float64)
    one_f_one_b = np.where(i > 1, (pp * (i + 1.0) - 1.0) / i, pp)
    n = np.where(np.asarray(zero_bubble, dtype=bool), 2.0 * pp - 1.0, one_f_one_b)
    return np.minimum(n, m)
