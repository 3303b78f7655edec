"""Bounded stores of recent results: a plain dict kept in use order (the most recently used last), so that the
re-plans of one process (`plan --sensitivity`, `--confidence`, a study's worker) reuse what they share while memory
stays bounded. A base-layer module with no imports of the package."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


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


def of_object(store: dict[int, tuple[object, V]], obj: T, make: Callable[[T], V], entries: int) -> V:
    """`make(obj)` for an immutable object (a frozen document: its repr as a cache key), kept per object by its
    identity while it is among the `entries` most recent; the store holds the object, so its id is not reused."""
    hit = recall(store, id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    return keep(store, id(obj), (obj, make(obj)), entries)[1]
