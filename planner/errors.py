"""Typed errors. The CLI maps InvalidInput to exit code 2 and Infeasible to exit code 1."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from pydantic import ValidationError

    from planner.schema import Plan


def validation_message(exc: ValidationError, strip_kind: bool = False) -> str:
    """The first problem pydantic found, as 'field.path: message' (no path: the message alone). `strip_kind` drops
    pydantic's 'Value error, ' prefix of a validator's own sentence."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    msg = str(err.get("msg", ""))
    if strip_kind:
        msg = msg.removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def is_number(value: object) -> TypeGuard[int | float]:
    """An int or a float, not a bool (Python's bool is an int; a flag or a TOML true is no number here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_count(value: object) -> TypeGuard[int]:
    """An int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


class PlannerError(Exception):
    """Base class: every error the library raises on purpose."""


class InvalidInput(PlannerError, ValueError):
    """A bad value from the user (flag, file, layout). The message names it and says what is accepted."""


class Infeasible(PlannerError):
    """The request is valid but no layout satisfies it. `explanation` says why and what would be feasible."""

    def __init__(self, message: str, explanation: str = "", plan: Plan | None = None):
        super().__init__(message)
        self.explanation = explanation
        self.plan = plan
        """The plan document (status 'infeasible' or 'unknown'), with the layout when one was found but fails."""


MAX_USER_FILE_BYTES = 50_000_000
"""The largest plan JSON read as user input (docs/reliability.md)."""
MAX_TOML_BYTES = 1_000_000
"""The largest hardware or model TOML file read (real ones are a few kB)."""
MAX_PRICE_PER_GPU_HOUR = 1_000.0
"""The highest price per GPU-hour accepted, USD: on-demand GPU-hours list at $1-$15 (hardware_specs/*.toml cite
them), so a figure above 1,000 is a typo or the price of something else (a whole node or cluster per hour)."""


def read_text_file(path: str | Path, what: str, max_bytes: int = MAX_USER_FILE_BYTES) -> str:
    """A user's file as UTF-8 text; an unreadable, binary, oversized or non-regular file (a directory, FIFO, device
    or socket, which could block or never end) is an InvalidInput naming `what` and the path."""
    p = Path(path)
    try:
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            raise InvalidInput(f"cannot read {what} '{path}': Is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInput(f"{what} '{path}' is not a regular file")
        if st.st_size > max_bytes:
            raise InvalidInput(f"{what} '{path}' is {st.st_size:,} bytes; at most {max_bytes:,} are read")
        # The path may change between the check above (which keeps devices from being opened at all) and the open:
        # open without blocking (a FIFO put there meanwhile would wait for a writer forever) and check what was opened.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InvalidInput(f"{what} '{path}' is not a regular file (it changed while being read)")
            os.set_blocking(fd, True)
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} '{path}': {exc.strerror}") from None
    if len(data) > max_bytes:  # the file grew after stat
        raise InvalidInput(f"{what} '{path}' is over {max_bytes:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{what} '{path}' is not UTF-8 text") from None


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """TOML text as a document; anything the parser refuses is one InvalidInput naming `where`: malformed
    TOML, nesting past the parser's recursion limit, or an integer of more digits than Python converts (4,300: a
    ValueError that tomllib lets through); then tables and arrays at most MAX_DEPTH deep (check_depth)."""
    import tomllib

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"malformed TOML in {where}: {exc}") from None
    except RecursionError:
        raise InvalidInput(f"malformed TOML in {where}: nested too deeply") from None
    except ValueError:  # int('9' * 5000): Python's limit on integer string conversion
        raise InvalidInput(f"malformed TOML in {where}: a number has more digits than any field accepts") from None
    check_depth(doc, where)
    return doc


MAX_DEPTH = 8
"""Deepest nesting of tables and arrays accepted in a TOML file or a --set value (real files nest 3 deep)."""


def check_depth(value: Any, where: str, depth: int = 0) -> None:
    """InvalidInput when tables and arrays nest more than MAX_DEPTH deep (a deep structure is bad input, not a
    RecursionError later)."""
    if depth > MAX_DEPTH:
        raise InvalidInput(f"{where}: tables and arrays nested more than {MAX_DEPTH} deep")
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        check_depth(child, where, depth + 1)
