"""`planner hardware list` and `hardware show` without importing rich: the tables planner/render/light.py builds
with rich (a heavy-headed box or, without a header, a square one; a bold header, a left-justified italic title,
section rules; the specs of planner.hardware_listing), drawn in
plain Python by rich's rules for such a table: each column's range of widths measured from its cells (longest word
to longest line, plus one cell of padding each side), the wrappable columns shrunk in turn when the table is wider
than the console, words wrapped as rich wraps them (planner.fasthelp.wrap), right-justified cells padded on the left,
the header's cells aligned to the bottom, one SGR sequence per styled run. Whatever it does not reproduce exactly
raises Unsupported and the fast path uses rich instead: a table rich would have to crop (a word or an unwrappable
cell wider than its column), an emoji code or a tab in a cell, an environment rich reads that is not modelled here
(TTY_COMPATIBLE), a non-UTF-8 stdout, Windows. tests/test_fastpath.py compares the bytes with the full path's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import TextIO

from planner.fasthelp import Unsupported, _isatty, same_libraries, settled_width, wrap

_CODES = {"bold": "1", "italic": "3"}


def _measure(cells: Sequence[str], max_width: int) -> tuple[int, int]:
    """rich's measurement of a column of text cells, each with one cell of padding each side, within max_width."""
    if max_width < 1:
        return 0, 0
    lows, highs = [], []
    for cell in cells:
        if max_width - 2 < 1:
            low, high = max_width, max_width
        else:
            lines = cell.splitlines()
            longest = max((len(line) for line in lines), default=0)
            words = cell.split()
            low, high = (max(len(w) for w in words) if words else longest), longest
            low = min(max(0, low), high)  # normalised, then at most max_width
            low, high = min(low, max_width), min(high, max_width)
            if high < 1:
                low, high = 0, 0
            low, high = min(low + 2, max_width), min(high + 2, max_width)
        low = min(max(0, low), high)
        lows.append(low)
        highs.append(high)
    return min(max(lows), max_width), min(max(highs), max_width)


def _reduce(total: int, ratios: list[int], maximums: list[int], values: list[int]) -> list[int]:
    """rich's ratio_reduce: take `total` from `values` in proportion to `ratios`, at most `maximums` each."""
    ratios = [r if m else 0 for r, m in zip(ratios, maximums)]
    total_ratio = sum(ratios)
    if not total_ratio:
        return values[:]
    out = []
    for ratio, maximum, value in zip(ratios, maximums, values):
        if ratio and total_ratio > 0:
            taken = min(maximum, round(ratio * total / total_ratio))
            out.append(value - taken)
            total -= taken
            total_ratio -= ratio
        else:
            out.append(value)
    return out


def _collapse(widths: list[int], wrappable: list[bool], max_width: int) -> list[int]:
    """rich's Table._collapse_widths: shrink the widest wrappable columns toward the next widest until it fits."""
    total = sum(widths)
    excess = total - max_width
    if any(wrappable):
        while total and excess > 0:
            widest = max(w for w, ok in zip(widths, wrappable) if ok)
            second = max(w if ok and w != widest else 0 for w, ok in zip(widths, wrappable))
            gap = widest - second
            ratios = [1 if (w == widest and ok) else 0 for w, ok in zip(widths, wrappable)]
            if not any(ratios) or not gap:
                break
            widths = _reduce(excess, ratios, [min(excess, gap)] * len(widths), widths)
            total = sum(widths)
            excess = total - max_width
    return widths


Column = tuple[str, str | None, str, bool, str]


def column_widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], max_width: int,
                  show_header: bool = True) -> list[int]:
    """The widths (padding included) rich gives the columns of a table that does not expand."""
    cells = [[*([header] if show_header else []), *(row[k] for row in rows)] for k, (header, *_) in enumerate(columns)]
    widths = [_measure(c, max_width)[1] or 1 for c in cells]
    if sum(widths) > max_width:
        widths = _collapse(widths, [not column[3] for column in columns], max_width)
        if sum(widths) > max_width:
            raise Unsupported("rich would crop columns")
        widths = [_measure(c, w)[1] or 0 for c, w in zip(cells, widths)]
    return widths


def _cell_lines(text: str, width: int, justify: str, no_wrap: bool, overflow: str) -> list[str]:
    """A cell's text lines, each `width` wide, as rich wraps and justifies them."""
    out = []
    for line in text.split("\n"):
        wrap(line, max(width, len(line)))  # the character check
        parts = [line] if no_wrap else [line[a:b] for a, b in wrap(line, width, fold=overflow == "fold")]
        for part in parts:
            if justify == "right":
                part = part.rstrip()
            if len(part) > width:
                raise Unsupported("a cell wider than its column")
            out.append(part.rjust(width) if justify == "right" else part.ljust(width))
    return out


def render(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str] | None], width: int,
           show_header: bool = True) -> list[list[tuple[str, str]]]:
    """The table's lines as (text, SGR codes) runs; a None row ends a section (a rule under the row before)."""
    body = [row for row in rows if row is not None]
    for text in [title, *(c[0] for c in columns), *(cell for row in body for cell in row)]:
        if "\t" in text or re.search(r":\S*:", text):
            raise Unsupported("a tab or an emoji code")
    extra = 2 + len(columns) - 1
    widths = column_widths(columns, body, width - extra, show_header)
    if min(widths) < 3:
        raise Unsupported("a column without room for text")
    table_width = sum(widths) + extra
    lines: list[list[tuple[str, str]]] = [[(part.ljust(table_width), _CODES["italic"])]
                                          for part in (title[a:b] for a, b in wrap(title, table_width))]
    heavy = "━" if show_header else "─"
    lines.append([(("┏" if show_header else "┌") + ("┳" if show_header else "┬").join(heavy * w for w in widths)
                   + ("┓" if show_header else "┐"), "")])

    def row_lines(cells: Sequence[str], header: bool, edge: str) -> None:
        blocks = []
        for cell, w, (_, style, justify, no_wrap, overflow) in zip(cells, widths, columns):
            code = _CODES["bold"] if header else (_CODES[style] if style else "")
            blocks.append((code, w, _cell_lines(cell, w - 2, justify, no_wrap, overflow)))
        height = max(len(b[2]) for b in blocks)
        for k in range(height):
            line: list[tuple[str, str]] = [(edge, "")]
            for code, w, texts in blocks:
                index = k - (height - len(texts)) if header else k  # the header aligns to the bottom
                if 0 <= index < len(texts):
                    line += [(" ", code), (texts[index], code), (" ", code)]
                else:
                    line.append((" " * w, code))
                line.append((edge, ""))
            lines.append(line)

    if show_header:
        row_lines([c[0] for c in columns], True, "┃")
        lines.append([("┡" + "╇".join("━" * w for w in widths) + "┩", "")])
    for k, row in enumerate(rows):
        if row is None:
            if k + 1 < len(rows):  # rich draws no rule after the last row
                lines.append([("├" + "┼".join("─" * w for w in widths) + "┤", "")])
            continue
        row_lines(row, False, "│")
    lines.append([("└" + "┴".join("─" * w for w in widths) + "┘", "")])
    return lines


def console(env: Mapping[str, str], stream: TextIO, piped_width: int) -> tuple[int, bool]:
    """(width, styles on) of planner.render.stdout_console() in this environment: `piped_width` columns when stdout is
    not a terminal and COLUMNS is unset; rich reads FORCE_COLOR, COLUMNS, LINES, TERM and the terminal's size."""
    if os.name == "nt" or "TTY_COMPATIBLE" in env:
        raise Unsupported("environment")
    same_libraries(("rich",))
    if not (getattr(stream, "encoding", None) or "utf-8").lower().startswith("utf"):
        raise Unsupported("encoding")
    force = env.get("FORCE_COLOR")
    terminal = force != "" if force is not None else _isatty(stream)
    dumb = terminal and env.get("TERM", "").lower() in ("dumb", "unknown")
    width: int | None = None if _isatty(stream) or "COLUMNS" in env else piped_width
    return settled_width(env, width, dumb), terminal and not dumb


def to_text(lines: list[list[tuple[str, str]]], styled: bool) -> str:
    out = []
    for line in lines:
        for text, code in line:
            out.append(f"\x1b[{code}m{text}\x1b[0m" if styled and code and text else text)
        out.append("\n")
    return "".join(out)
