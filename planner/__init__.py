"""planner: provably optimal parallel layouts for frontier-scale training (see README.md).

`plan` and `evaluate` (planner.api) are loaded on first use, so importing a submodule does not load the API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["evaluate", "plan"]

if TYPE_CHECKING:
    from planner.api import evaluate, plan


def __getattr__(name: str) -> Any:
    if name in __all__:
        from planner import api

        return getattr(api, name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
