"""The ``[kitchen]`` section of a family 01 (RoboCasa Speed-Run) manifest, and its pure rules.

Typed here (the family's own) and named by roboswe/rle/manifest.py. RLE-Bench's speed-run: one
kitchen subtask, three harness levels with the same task, plan, seeds and weights (only what the
participant observes and which tools it gets differ), development charged against the manifest's
``budget.charged_steps``, evaluation in ``trials`` hidden kitchens of at most ``trial_actions``
actions each, and

    reward = success_rate × (outcome_weight + efficiency_weight × (1 − development_steps / budget)).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

Positive = Annotated[int, msgspec.Meta(gt=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
Weight = Annotated[float, msgspec.Meta(ge=0, le=1)]
Level = Literal["L1", "L2", "L3"]
LEVELS: tuple[Level, ...] = ("L1", "L2", "L3")
PRIVILEGED_PREFIX = "priv_"
"""L3's privileged state keys all start with this; a report names every one it exposed."""


class Kitchen(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which RoboCasa task grades the subtask, on which kitchen manifest, at which level, with which caps."""

    subtask: str  # RLE-Bench's subtask slug, e.g. "02-close-cabinet"
    kitchen_task: str  # the kitchen manifest under configs/tasks/ (robot, controller, cameras, layout, assets)
    env: str  # the RoboCasa task class whose _check_success grades it (may differ from the kitchen manifest's)
    review: Annotated[str, msgspec.Meta(min_length=10)]  # what that predicate checks, as a person read it
    predicate_sha256: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]  # of the source they read
    stands_in_for: str | None = None  # on the kit: the RLE-Bench subtask this kit task replaces, and why
    level: Level = "L1"
    batch_max: Positive = 200  # actions per development step batch (1..batch_max)
    trials: Positive = 5  # hidden evaluation kitchens, one trial each
    trial_actions: Positive = 1000  # actions per evaluation trial at most
    evaluate_seconds: PositiveFloat = 3600
    outcome_weight: Weight = 0.8
    efficiency_weight: Weight = 0.2

    def __post_init__(self) -> None:
        if abs(self.outcome_weight + self.efficiency_weight - 1.0) > 1e-9:
            raise ValueError(f"kitchen: outcome_weight + efficiency_weight = "
                             f"{self.outcome_weight + self.efficiency_weight}, not 1")


def speedrun_reward(kitchen: Kitchen, successes: int, development_steps: int, budget: int) -> float:
    """RLE-Bench's speed-run reward from recorded counts; unreached trials are failures (``successes`` of
    ``kitchen.trials``), and efficiency earns nothing without success."""
    if not 0 <= successes <= kitchen.trials:
        raise ValueError(f"{successes} successes of {kitchen.trials} trials")
    if not 0 <= development_steps <= budget:
        raise ValueError(f"{development_steps} development steps outside the budget {budget}")
    success_rate = successes / kitchen.trials
    return success_rate * (kitchen.outcome_weight + kitchen.efficiency_weight * (1 - development_steps / budget))


def batch_refusal(size: int, allowance: int, batch_max: int) -> str | None:
    """Why a batch of ``size`` actions is refused whole (nothing charged, nothing moves), or None.

    RLE-Bench: a batch holds 1..batch_max actions and cannot exceed the remaining allowance; it is
    never cut to what is left."""
    if not 1 <= size <= batch_max:
        return f"a batch holds 1..{batch_max} actions, this one {size}"
    if size > allowance:
        return f"a batch of {size} actions exceeds the {allowance} left; nothing was applied"
    return None
