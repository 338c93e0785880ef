"""The whole conformance suite: every substore's mixin in one class."""

from __future__ import annotations

from .agents import AgentConformance
from .checkpoints import CheckpointConformance
from .events import RunEventConformance
from .runs import RunConformance


class StoreConformance(
    AgentConformance, RunConformance, RunEventConformance, CheckpointConformance
):
    """Every substore's contract; mix into a class that defines ``store_url``."""
