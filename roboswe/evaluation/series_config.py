"""The `[series]` section of a run config: trials per series, retention mode, budgets.

Budgets come from each task's manifest; a run config may only tighten them (a smaller
number), never loosen them. ``effective_budgets`` applies that rule per task.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from roboswe.sim.manifest import TaskManifest

PositiveInt = Annotated[int, msgspec.Meta(gt=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]


class BudgetLoosened(ValueError):
    """A run config asks for a larger budget than the task's manifest allows."""


class SeriesConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How each task's series runs; every budget left unset is the manifest's."""

    trials: Annotated[int, msgspec.Meta(ge=1, le=100)] = 5
    # "retain": trials keep workspace and conversation; "none": fresh-context control (both reset every trial).
    retain: Literal["retain", "none"] = "retain"
    backend: Literal["docker", "bwrap"] | None = None  # None: docker when a daemon answers, else bwrap
    trial_steps: PositiveInt | None = None
    trial_seconds: PositiveFloat | None = None
    script_steps: PositiveInt | None = None
    script_seconds: PositiveFloat | None = None
    verify: bool = True  # replay every series right after it ends


class Budgets(msgspec.Struct, frozen=True, kw_only=True):
    """The budgets a trial runs under (recorded with the series)."""

    trial_steps: int
    trial_seconds: float
    script_steps: int
    script_seconds: float


def effective_budgets(config: SeriesConfig, manifest: TaskManifest) -> Budgets:
    """The manifest's budgets, tightened by the config; raises BudgetLoosened naming the key."""
    b = manifest.budgets
    pairs = {
        "trial_steps": (config.trial_steps, b.trial.steps),
        "trial_seconds": (config.trial_seconds, b.trial.seconds),
        "script_steps": (config.script_steps, b.script.steps),
        "script_seconds": (config.script_seconds, b.script.seconds),
    }
    out = {}
    for key, (asked, allowed) in pairs.items():
        if asked is not None and asked > allowed:
            raise BudgetLoosened(
                f"[series] {key} = {asked} would loosen task {manifest.id!r}'s manifest budget of {allowed}; "
                "a run config may only tighten budgets. Lower it or remove the key."
            )
        out[key] = asked if asked is not None else allowed
    if out["script_steps"] > out["trial_steps"]:
        out["script_steps"] = out["trial_steps"]
    return Budgets(**out)
