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


def test_of_object_is_per_object_not_per_equal_value():
    """`of_object` computes once per object (by identity) and holds the object: an equal but distinct object is
    computed again, and a dropped object's id cannot alias a new one while its entry is kept."""
    from planner.recent import of_object

    calls: list[object] = []

    def make(o: object) -> str:
        calls.append(o)
        return repr(o)

    store: dict[int, tuple[object, str]] = {}
    a, b = (1, 2), tuple([1, 2])  # equal, distinct objects
    assert of_object(store, a, make, 2) == "(1, 2)" and of_object(store, a, make, 2) == "(1, 2)"
    assert len(calls) == 1
    assert of_object(store, b, make, 2) == "(1, 2)" and len(calls) == 2
    assert all(entry[0] is obj for obj, entry in zip((a, b), store.values()))
    of_object(store, [3], make, 2)  # a third object drops the least recent (a)
    assert id(a) not in store and len(store) == 2
