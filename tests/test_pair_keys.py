"""The pair tables' per-key store (planner.search.cpsat._key_combos) and the least features (presolve.LeastFeatures)
are keyed by the hardware as a group term's feature reads it (presolve.feature_key). Moving a numeric or boolean field
of the execution profile or of the GPU that leaves that key unchanged must leave every key's combinations and
features unchanged, or two searches would share a wrong table. Checked here field by field, on a dense and an MoE
transformer and the paper's toy model, against the features computed from scratch (cpsat._combos, no store)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.cost import terms as T
from planner.cost.rows import unique_rows
from planner.hardware import get_hardware, with_profile
from planner.parallel.dimensions import GROUPS
from planner.parallel.space import SearchOptions, build_space, model_parallel_rows, tuples_for_model_parallel
from planner.schema import Workload
from planner.search import cpsat
from planner.search.presolve import LeastFeatures, feature_key
from planner.workload.scaling import transformer_workload

INSTANCES = [
    ("h100", "realistic", transformer_workload(64, 128, 4, 1, 64, 16 * 64, 1e9,
                                               {"heads": 4, "kv_heads": 2, "vocab": 256}, "tiny dense")),
    ("h100-superpod", "realistic", transformer_workload(64, 128, 4, 4, 64, 16 * 64, 1e9,
                                                        {"heads": 4, "kv_heads": 2, "vocab": 256, "top_k": 2},
                                                        "tiny moe")),
    ("h100", "paper", Workload(d_model=256, d_ff=1024, layers=8, experts=1, batch_tokens=4096, tokens=1e9)),
]


def _keys(hw, wl, group):
    """The distinct keys `_group_pairs` sees for `group` on every tuple of up to 64 GPUs of the space."""
    space = build_space(hw, wl, SearchOptions())
    t = tuples_for_model_parallel(space, model_parallel_rows(space), space.dp_m)
    t = t.take(np.nonzero(t.gpus <= 64)[0])
    gterms = [g for g in T.group_terms(wl, hw.profile) if g.group == group]
    names = (*GROUPS[group], *dict.fromkeys(k for g in gterms for k in g.keys))
    uniq, _ = unique_rows([np.asarray(t[d], dtype=np.int64) for d in names])
    return names, gterms, uniq


def _moved(value):
    """A numeric value (or tuple of them) moved by 37 %, a boolean flipped; None for anything else (text,
    tables)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 1.37 + (1 if value == 0 else 0)
    if isinstance(value, tuple) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                  for v in value):
        return tuple(v * 1.37 + (1 if v == 0 else 0) for v in value)
    return None


def _variants(hw):
    """(what moved, the hardware with it moved) for every numeric and boolean profile and GPU field whose move leaves
    the stores' key (presolve.feature_key) unchanged."""
    out = []
    for field in type(hw.profile).model_fields:
        new = _moved(getattr(hw.profile, field))
        if new is not None:
            out.append((f"profile.{field}", with_profile(hw, hw.profile.model_copy(update={field: new}))))
    for field in type(hw.gpu).model_fields:
        new = _moved(getattr(hw.gpu, field))
        if new is not None:
            out.append((f"gpu.{field}", hw.model_copy(update={"gpu": hw.gpu.model_copy(update={field: new})})))
    return out


@pytest.mark.parametrize("hw_name,profile,wl", INSTANCES, ids=[w.label or f"toy{k}" for k, (_, _, w)
                                                                 in enumerate(INSTANCES)])
def test_fields_outside_the_key_leave_features_unchanged(hw_name, profile, wl):
    hw = with_profile(get_hardware(hw_name), profile)
    moved = 0
    for group in GROUPS:
        names, gterms, uniq = _keys(hw, wl, group)
        if not gterms:
            continue
        base = [cpsat._combos(hw, wl, group, names, gterms, v, True) for v in uniq]
        for what, hw2 in _variants(hw):
            if feature_key(hw2, wl) != feature_key(hw, wl):
                continue  # another key: the stores keep it apart
            g2 = [g for g in T.group_terms(wl, hw2.profile) if g.group == group]
            if [g.name for g in g2] != [g.name for g in gterms]:
                continue  # other terms: another key of the store
            for v, (combo, feats) in zip(uniq, base):
                combo2, feats2 = cpsat._combos(hw2, wl, group, names, g2, v, True)
                assert np.array_equal(feats, feats2), (what, group, v)
                assert all(np.array_equal(combo[d], combo2[d]) for d in combo), (what, group, v)
            moved += 1
    assert moved > 50  # the check saw many fields moved, not none


def test_fields_inside_the_key_do_move_features():
    """The other way round: moving a field the key reads (the collectives' share of the levels' bandwidth) changes
    some feature, and the two hardwares get different stores."""
    hw = with_profile(get_hardware("h100"), "realistic")
    wl = INSTANCES[0][2]
    names, gterms, uniq = _keys(hw, wl, "tp_ff")
    faster = hw.profile.model_copy(update={"collective_bw_fraction": tuple(
        0.5 * f for f in hw.profile.collective_bw_fraction)})
    hw2 = with_profile(hw, faster)
    a = [cpsat._combos(hw, wl, "tp_ff", names, gterms, v, True)[1] for v in uniq]
    b = [cpsat._combos(hw2, wl, "tp_ff", names, gterms, v, True)[1] for v in uniq]
    assert any(not np.array_equal(x, y) for x, y in zip(a, b))
    names_t = tuple(g.name for g in gterms)
    assert cpsat._key_combos(hw, wl, "tp_ff", names_t, True) is not cpsat._key_combos(hw2, wl, "tp_ff", names_t, True)
    assert cpsat._key_combos(hw, wl, "tp_ff", names_t, True) is cpsat._key_combos(hw, wl, "tp_ff", names_t, True)


def test_least_features_agree_with_the_pair_tables():
    """LeastFeatures (the placement-free bound's features, cached by bytes of each key) gives, per key, the least over
    the key's factor vectors of each term's feature: the same as the least over `_combos` unpruned, computed here."""
    hw = with_profile(get_hardware("h100-superpod"), "realistic")
    wl = INSTANCES[1][2]
    least = LeastFeatures(hw, wl)
    for group in GROUPS:
        names, gterms, uniq = _keys(hw, wl, group)
        for n, g in enumerate(gterms):
            cols = {k: uniq[:, names.index(k)] for k in (*GROUPS[group], *g.keys)}
            got = least.least(g, cols)
            again = least.least(g, cols)  # from the cache this time
            want = [cpsat._combos(hw, wl, group, names, gterms, v, False)[1][:, n].min() for v in uniq]
            assert np.array_equal(got, again)
            assert np.allclose(got, want, rtol=1e-12, atol=0.0), (group, g.name)


def test_the_key_holds_the_workload_and_the_levels():
    """The features also read the workload (pipeline traffic: its layer count) and the levels (latencies, sizes):
    changing either changes some feature, and the key with it (a key without the workload or the levels would share a
    wrong table)."""
    hw = with_profile(get_hardware("h100"), "realistic")
    wl = INSTANCES[0][2]
    deeper = transformer_workload(64, 128, 6, 1, 64, 16 * 64, 1e9, {"heads": 4, "kv_heads": 2, "vocab": 256},
                                  "tiny dense")
    slower = hw.model_copy(update={"levels": tuple(lv.model_copy(update={"lat_s": 3 * lv.lat_s})
                                                   for lv in hw.levels)})
    assert feature_key(hw, deeper) != feature_key(hw, wl)
    assert feature_key(slower, wl) != feature_key(hw, wl)
    for hw2, wl2 in ((hw, deeper), (slower, wl)):
        if hw2 is slower and hw.profile.collective_latency_s is not None:
            hw2 = with_profile(slower, slower.profile.model_copy(update={"collective_latency_s": None}))
            hw = with_profile(hw, hw.profile.model_copy(update={"collective_latency_s": None}))
        names, gterms, uniq = _keys(hw, wl, "pp_ep")
        a = [cpsat._combos(hw, wl, "pp_ep", names, gterms, v, False)[1] for v in uniq]
        b = [cpsat._combos(hw2, wl2, "pp_ep", names, gterms, v, False)[1] for v in uniq]
        assert any(not np.array_equal(x, y) for x, y in zip(a, b))
