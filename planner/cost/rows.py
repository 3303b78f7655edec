"""Row-wise quantities computed once per distinct value of the columns they read.

Presolve prices hundreds of thousands of degree tuples at once, but a GPU's shard of a weight or of an activation
depends on a few of a tuple's degrees only (N_TP,ff, N_TP,model, sp, ...), which take a few hundred distinct values
together. `DistinctRows` finds those once (without sorting: each column's values are few) and evaluates a row-wise
function on one row per distinct value, spreading the results back: the same numbers, element by element, as
evaluating it on every row.

The function must be row-wise (each output row a function of the same input row) and may read only the listed
columns: `DistinctRows.apply` hands it a mapping that refuses (raises) any other column of the rows, and then
evaluates the function on every row instead, so a function that reads more is slow, never wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

DENSE_KEYS = 1 << 22
"""Largest product of the columns' value counts for which distinct rows are found with a dense table (no sort)."""


SMALL_VALUES = 1 << 16
"""Integer columns whose values all lie in [0, SMALL_VALUES) are indexed through a table instead of a search."""


def _values_and_index(col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values of an integer column and each row's index among them: by a table over the values
    when they are small and non-negative (degrees, flags), else a sample's values first, checked against every row
    (a sort of the whole column only when the sample missed a value)."""
    if len(col) and 0 <= col.min() and col.max() < SMALL_VALUES:
        seen = np.zeros(int(col.max()) + 1, dtype=bool)
        seen[col] = True
        return np.nonzero(seen)[0].astype(col.dtype), (np.cumsum(seen) - 1)[col]
    sample = col if len(col) < 4096 else col[:: max(1, len(col) // 4096)]
    vals = np.unique(sample)
    idx = np.searchsorted(vals, col)
    if len(col) >= 4096:
        miss = (idx >= len(vals)) | (vals[np.minimum(idx, len(vals) - 1)] != col)
        if miss.any():
            vals = np.unique(col)
            idx = np.searchsorted(vals, col)
    return vals, idx


def unique_rows(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Unique rows of integer columns (sorted by the columns' values, first column slowest) and the inverse index:
    the same as np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True), much faster on the millions of
    rows presolve sees (a dense table when the columns' value counts multiply to at most DENSE_KEYS, else one 1-D
    sort of a mixed key)."""
    n = len(columns[0])
    key = np.zeros(n, dtype=np.int64)
    space = 1
    for col in columns:
        vals, idx = _values_and_index(col)
        key = key * len(vals) + idx
        space *= max(1, len(vals))
    if n and space <= DENSE_KEYS:
        seen = np.zeros(space, dtype=bool)
        seen[key] = True
        ukey = np.nonzero(seen)[0]
        rank = np.cumsum(seen) - 1
        inv = rank[key]
        first = np.empty(len(ukey), dtype=np.int64)
        first[inv] = np.arange(n)  # some row of each key: rows with one key have the same values
    else:
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    uniq = np.stack([c[first] for c in columns], axis=1) if len(first) else np.zeros((0, len(columns)), np.int64)
    return uniq, inv.ravel()


MIN_ROWS = 256
"""Fewer rows than this (one layout priced, a few hundred candidates) are evaluated directly: finding their distinct
values would cost more than it saves."""


class _Unlisted(Exception):
    """The function read a column that DistinctRows was not built on."""


class _Only(Mapping[str, np.ndarray]):
    """The distinct rows' listed columns; any other column of the full rows raises _Unlisted (so does iterating,
    which would read them all), so that a function reading more than it was declared to is noticed."""

    def __init__(self, sub: dict[str, np.ndarray], full: Mapping[str, Any]):
        self._sub, self._full = sub, full

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self._sub:
            return self._sub[key]
        if key in self._full:
            raise _Unlisted(key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if key in self._sub:
            return True
        if key in self._full:
            raise _Unlisted(key)
        return False

    def __iter__(self) -> Iterator[str]:
        raise _Unlisted(None)

    def __len__(self) -> int:
        raise _Unlisted(None)


class DistinctRows:
    """The distinct combinations of `keys` (those of them the rows have) among the rows of `cols` (from MIN_ROWS
    rows up; fewer are evaluated as they are)."""

    def __init__(self, cols: Mapping[str, Any], keys: tuple[str, ...]):
        self.cols = cols
        present = [k for k in keys if k in cols]
        columns = [np.asarray(cols[k], dtype=np.int64) for k in present]
        self.n = len(columns[0]) if columns else 0
        self.inverse: np.ndarray | None = None
        self.sub: dict[str, np.ndarray] = {}
        if columns and self.n >= MIN_ROWS:
            uniq, self.inverse = unique_rows(columns)
            self.sub = {k: uniq[:, i] for i, k in enumerate(present)}

    def apply(self, fn: Callable[[Mapping[str, np.ndarray]], Any]) -> Any:
        """fn(cols), evaluated once per distinct row; arrays (alone, in a tuple or a dict) are spread back to
        every row. fn must be row-wise (see the module docstring)."""
        if self.inverse is None:
            return fn(self.cols)
        try:
            out = fn(_Only(self.sub, self.cols))
        except _Unlisted:
            return fn(self.cols)
        return self._spread(out)

    def _spread(self, out: Any) -> Any:
        if isinstance(out, tuple):
            return tuple(self._spread(x) for x in out)
        if isinstance(out, dict):
            return {k: self._spread(v) for k, v in out.items()}
        arr = np.asarray(out)
        if arr.ndim == 0:
            return out
        assert self.inverse is not None
        return np.broadcast_to(arr, (len(next(iter(self.sub.values()))),) + arr.shape[1:])[self.inverse]
