"""planner.recent: the bounded stores the re-plans of one process share."""

from __future__ import annotations

from planner.recent import keep, recall


def test_recent_keeps_the_most_recently_used():
    # a store of 2: reading 'a' makes it the most recent, so adding 'c' drops 'b' (the least recently used)
    store: dict[str, int] = {}
    keep(store, "a", 1, 2)
    keep(store, "b", 2, 2)
    assert recall(store, "a") == 1 and recall(store, "z") is None
    keep(store, "c", 3, 2)
    assert list(store) == ["a", "c"]
    keep(store, "a", 4, 2)  # a key kept again replaces its value, drops nothing
    assert store == {"c": 3, "a": 4} and list(store) == ["c", "a"]
