"""Bounded stores of recent results: a plain dict kept in use order (the most recently used last), so that the
re-plans of one process (`plan --sensitivity`, `--confidence`, a study's worker) reuse what they share while memory
stays bounded. A base-layer module with no imports of the package."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def recall(store: dict[K, V], key: K) -> V | None:
    """The entry for `key`, made the most recently used; None when there is none (a store that keeps None as a
    value asks `key in store` first)."""
    if key not in store:
        return None
    value = store.pop(key)
    store[key] = value
    return value


def keep(store: dict[K, V], key: K, value: V, entries: int) -> V:
    """`value` stored under `key` as the most recently used, the least recently used dropped while more than
    `entries` would be kept; returns `value`."""
    store.pop(key, None)
    while store and len(store) >= entries:
        store.pop(next(iter(store)))
    store[key] = value
    return value
