"""The ``[transfer]`` section of a family 02 (RoboCasa Harness Transfer) manifest, and its pure rules.

A composite task is one RoboCasa scene (its task class sets up the kitchen: objects, which drawer or
cabinet, how open) with an ordered list of stage predicates (stages.py); its success is every stage
true at one instant. RLE-Bench scores a fresh agent's trial by the best whole stage vector the trusted
side observed at one instant (never stages satisfied at different times combined), giving no credit for
what was already true at reset:

    trial_score = 1                                             (simulator-confirmed success)
                = (best_count − reset_count) / (total − reset_count)   otherwise
    reward      = mean trial_score over the planned agents; a missing trial scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import msgspec

Positive = Annotated[int, msgspec.Meta(gt=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]


class Composite(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One composite task: a RoboCasa scene and the stages that grade it, in order."""

    name: str
    instruction: str  # what an agent attempting it is told
    kitchen_task: str  # the kitchen manifest under configs/tasks/ (robot, controller, cameras, kit)
    env: str  # the RoboCasa task class that sets the scene up (its own predicate is not the composite's)
    stages: Annotated[tuple[str, ...], msgspec.Meta(min_length=1)]  # stages.STAGES names

    def __post_init__(self) -> None:
        from .stages import STAGES

        unknown = [s for s in self.stages if s not in STAGES]
        if unknown:
            raise ValueError(f"composite {self.name}: no stage {unknown}; the stages are {sorted(STAGES)}")


class Transfer(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The practice composites, the held-out one, and the fresh agents' caps (RLE-Bench: 5, 1 h, 5,000 steps)."""

    practice: Annotated[tuple[Composite, ...], msgspec.Meta(min_length=1)]
    heldout: Composite
    agents: Positive = 5  # fresh agents with the harness; as many again with an empty workspace (the control)
    agent_actions: Positive = 5000
    agent_seconds: PositiveFloat = 3600
    batch_max: Positive = 200
    harness_dir: str = "agent_harness"  # what is sealed and restored; its MANUAL.md is the manual
    control: bool = True

    def __post_init__(self) -> None:
        if self.heldout.name in {c.name for c in self.practice}:
            raise ValueError(f"transfer: the held-out composite {self.heldout.name} is also a practice task")

    @property
    def manual(self) -> str:
        return f"{self.harness_dir}/MANUAL.md"


def trial_score(reset: Sequence[bool], best: Sequence[bool], success: bool) -> float:
    """One trial's score from its recorded stage vectors: at reset and the best one seen at one instant."""
    if len(reset) != len(best) or not best:
        raise ValueError(f"stage vectors of {len(reset)} and {len(best)} stages")
    if success:
        return 1.0
    total, at_reset, best_count = len(best), sum(map(bool, reset)), sum(map(bool, best))
    if best_count < at_reset:
        raise ValueError(f"the best vector ({best_count} stages) is worse than the reset vector ({at_reset})")
    if total == at_reset:  # everything held at reset and no success was confirmed: nothing left to earn
        return 0.0
    return (best_count - at_reset) / (total - at_reset)


def transfer_reward(scores: Sequence[float | None], agents: int) -> float:
    """The mean over ``agents`` planned trials; a trial with no score (never attempted) counts 0."""
    if len(scores) > agents:
        raise ValueError(f"{len(scores)} trial scores for {agents} planned agents")
    for s in scores:
        if s is not None and not 0.0 <= s <= 1.0:
            raise ValueError(f"a trial score of {s}")
    return sum(s or 0.0 for s in scores) / agents
