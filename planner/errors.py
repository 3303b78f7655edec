"""Typed errors. The CLI maps InvalidInput to exit code 2 and Infeasible to exit code 1."""


class PlannerError(Exception):
    """Base class: every error the library raises on purpose."""


class InvalidInput(PlannerError, ValueError):
    """A bad value from the user (flag, file, layout). The message names it and says what is accepted."""


class Infeasible(PlannerError):
    """The request is valid but no layout satisfies it. `explanation` says why and what would be feasible."""

    def __init__(self, message: str, explanation: str = "", details: dict | None = None):
        super().__init__(message)
        self.explanation = explanation
        self.details = details or {}
