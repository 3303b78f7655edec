"""planner: provably optimal parallel layouts for frontier-scale training (see README.md)."""

from planner.api import evaluate, plan

__all__ = ["plan", "evaluate"]
