"""Network cost model (paper §3 and App. 8.1.2), vectorised over layouts.

Conventions:
- `factors` arrays have shape (n, H): a degree's factor on each network level, bottom-up.
- `bw_unidir_Bps` and `lat_s` have shape (H,): per-GPU one-direction bandwidth and one-way latency per level.
- Volumes are counted as words *received* per GPU (paper footnote 6); a word is `word_bytes` bytes.
"""

from __future__ import annotations

import numpy as np


def allreduce_level_words(words, factors: np.ndarray) -> np.ndarray:
    """Words received per GPU at each level by a hierarchical all-reduce (Eq. 2, App. 8.1.2).

    The all-reduce runs level by level, bottom up, as reduce-scatter then all-gather; after level h the
    data left to reduce is split over the ranks already reduced below it, so level h moves
    2 (p_h - 1) / p_h * w / prod_{k<h} p_k words per GPU. With a single level this is Eq. 2 exactly,
    and summed over all GPUs it is the paper's "reduce d words across N_X(h) participants
    prod_{k>h} N_X(k) times" count. Returns shape (n, H).
    """
    factors = np.asarray(factors, dtype=np.float64)
    below = np.cumprod(np.concatenate([np.ones_like(factors[:, :1]), factors[:, :-1]], axis=1), axis=1)
    return 2.0 * (factors - 1.0) / factors * (np.asarray(words, dtype=np.float64)[..., None] / below)


def allreduce_time_s(words, factors: np.ndarray, bw_unidir_Bps: np.ndarray, word_bytes: int) -> np.ndarray:
    """Bandwidth time of a hierarchical all-reduce: the levels' transfers overlap, so the max over levels."""
    per_level = allreduce_level_words(words, factors) * word_bytes / bw_unidir_Bps[None, :]
    return per_level.max(axis=1)


def allreduce_latency_s(factors: np.ndarray, lat_s: np.ndarray) -> np.ndarray:
    """Latency of one hierarchical all-reduce: two one-way latencies per level that has more than one rank."""
    return (2.0 * (np.asarray(factors) > 1) * lat_s[None, :]).sum(axis=1)


def pp_frequencies(pp_factors: np.ndarray, interleave, layers: int) -> np.ndarray:
    """P_PP(h), h = 0..H: probability that an inter-layer interface is a pipeline boundary at level h (App. 8.1.2).

    Uses Eq. 19: with interleaving i there are i * prod_{k=h}^{h*} N_PP(k) - 1 stage interfaces at level h or
    above, out of L - 1 inter-layer interfaces. Returns shape (n, H + 1); column 0 is "no pipeline boundary".
    """
    pp_factors = np.asarray(pp_factors, dtype=np.float64)
    n, H = pp_factors.shape
    out = np.zeros((n, H + 1))
    if layers <= 1:
        out[:, 0] = 1.0
        return out
    i = np.asarray(interleave, dtype=np.float64) * np.ones(n)
    # at_or_above[h] = i * prod_{k >= h} N_PP(k) - 1 for h = 1..H (levels with factor 1 contribute nothing).
    suffix = np.cumprod(pp_factors[:, ::-1], axis=1)[:, ::-1]
    total_pp = suffix[:, 0]
    at_or_above = np.where(total_pp[:, None] > 1, i[:, None] * suffix - 1.0, 0.0)
    # Eq. 19 holds only for h <= h*; above the highest pipeline level no interface crosses (the suffix product
    # there is 1, and i - 1 would wrongly count the interleave wrap-arounds, which cross level h* itself).
    has_pp_above = np.concatenate([suffix[:, 1:] > 1, np.zeros((n, 1), dtype=bool)], axis=1)
    at_or_above = np.where(has_pp_above | (pp_factors > 1), at_or_above, 0.0)
    exact = at_or_above - np.concatenate([at_or_above[:, 1:], np.zeros((n, 1))], axis=1)
    out[:, 1:] = exact / (layers - 1)
    out[:, 0] = 1.0 - out[:, 1:].sum(axis=1)
    return out


def ep_frequencies(ep_factors: np.ndarray) -> np.ndarray:
    """P_EP(h), h = 0..H, under uniform top-1 routing (Eq. 20): (N_EP(h) - 1) / prod_{k>=h} N_EP(k);
    P_EP(0) = 1/N_EP."""
    ep_factors = np.asarray(ep_factors, dtype=np.float64)
    n, H = ep_factors.shape
    suffix = np.cumprod(ep_factors[:, ::-1], axis=1)[:, ::-1]
    out = np.zeros((n, H + 1))
    out[:, 1:] = (ep_factors - 1.0) / suffix
    out[:, 0] = 1.0 / suffix[:, 0]
    return out


def p2p_frequencies(p_pp: np.ndarray, p_ep: np.ndarray) -> np.ndarray:
    """Joint P_P2P(h') = sum over max(h_PP, h_EP) = h' of P_PP(h_PP) P_EP(h_EP) (App. 8.1.2), via the CDFs."""
    cdf = np.cumsum(p_pp, axis=1) * np.cumsum(p_ep, axis=1)
    return np.diff(cdf, axis=1, prepend=0.0)


def top_level(factors: np.ndarray) -> np.ndarray:
    """Highest level (1-based) with a factor above 1; 0 when the degree is 1."""
    factors = np.asarray(factors)
    H = factors.shape[1]
    used = factors > 1
    idx = H - np.argmax(used[:, ::-1], axis=1)
    return np.where(used.any(axis=1), idx, 0)


def p2p_latency_per_pass_s(pp_factors: np.ndarray, interleave, ep_factors: np.ndarray, layers: int,
                           lat_s: np.ndarray) -> np.ndarray:
    """Serial point-to-point latency of one microbatch in one direction through all L blocks (App. 8.1.2).

    Each pipeline boundary at level h costs one one-way latency at level max(h, h_EP*), and, when expert
    parallelism is used, every other interface costs one at h_EP*: routing latency is taken at its worst case
    (the highest EP level), since a microbatch waits for its slowest token.
    """
    n, H = np.asarray(pp_factors).shape
    counts = pp_frequencies(pp_factors, interleave, layers) * max(layers - 1, 0)  # (n, H+1) interfaces per level
    he = top_level(ep_factors)  # (n,)
    lat0 = np.concatenate([[0.0], lat_s])  # level 0 = no communication
    levels = np.arange(H + 1)[None, :]
    eff = np.maximum(levels, he[:, None])  # effective level of each interface class
    return (counts * lat0[eff]).sum(axis=1)
