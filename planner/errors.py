"""Typed errors. The CLI maps InvalidInput to exit code 2 and Infeasible to exit code 1."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.schema import Plan


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


def read_text_file(path: str | Path, what: str) -> str:
    """A user's file as UTF-8 text; an unreadable or binary file is an InvalidInput naming `what` and the path."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} '{path}': {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{what} '{path}' is not UTF-8 text") from None
