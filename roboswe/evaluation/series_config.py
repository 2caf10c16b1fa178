"""The `[series]` section of a run config: trials per series, retention mode, interface, budgets.

Budgets come from each task's manifest; a run config may only tighten them (a smaller
number), never loosen them. ``effective_budgets`` applies that rule per task.

The interface (``code``: scripts in the sandbox; ``actions``: action chunks the trial executes,
see roboswe/evaluation/actions.py) and the budget track are chosen here too. Two tracks
(as the GR1 tabletop protocol defines them), never pooled as one protocol:

- ``horizon``: ``control_step_cap`` N control steps per trial (one native control per action,
  stop at the first success); identity ``.../control-N/v2``. The default for ``code``.
- ``decisions``: at most ``decision_calls`` D participant calls per trial, each executing at most
  the first ``action_prefix`` K actions of its chunk, so D x K control steps at most; identity
  ``.../decision-D-prefix-K/v1``. The default for ``actions`` (D = 200, K = 5), ``actions`` only.

A family whose environment actions are its own tools has its own interface and is offered only
the interfaces it names (``Family.interfaces``, sim/families.py): the generic ``act`` would send
each of its multi-step actions as its own, another protocol. Its action limit is the family's, so
it runs on the horizon track.

The identity comes from the task family's contract where it has one (``Family.identity``), else
``<family>/control-N/v2`` or ``<family>/decision-D-prefix-K/v1``. Every series records it with its
budgets.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from roboswe.protocol.participant import Interface
from roboswe.sim.manifest import TaskManifest

PositiveInt = Annotated[int, msgspec.Meta(gt=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]

DEFAULT_DECISION_CALLS = 200  # the seed's historical D
DEFAULT_ACTION_PREFIX = 5  # and K



class BudgetLoosened(ValueError):
    """A run config asks for a larger budget than the task's manifest allows."""


class TrackRefused(ValueError):
    """A budget track setting that the track or the task's contract does not allow; the message names it."""


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
    interface: Interface = "code"  # protocol/participant.py; a family's own interface is offered for its tasks only
    budget_mode: Literal["horizon", "decisions"] | None = None  # None: horizon for code, decisions for actions
    control_step_cap: PositiveInt | None = None  # horizon: N (sets trial_steps)
    decision_calls: PositiveInt | None = None  # decisions: D
    action_prefix: PositiveInt | None = None  # decisions: K


RLE_IDENTITY = "rle:"
"""An RLE-Bench session's budget identity starts so (``rle:<protocol version>``): one session, not trials."""


class Budgets(msgspec.Struct, frozen=True, kw_only=True):
    """The budgets a trial runs under (recorded with the series and in each trial_opened event)."""

    trial_steps: int
    trial_seconds: float
    script_steps: int
    script_seconds: float
    interface: str = "code"
    track: str = ""  # "horizon" | "decisions" ("" in records made before tracks existed)
    decision_calls: int | None = None  # D: participant calls per trial (decisions track)
    action_prefix: int | None = None  # K: actions executed per chunk at most (decisions track)
    identity: str = ""  # the budget track's protocol identity


def effective_budgets(config: SeriesConfig, manifest: TaskManifest) -> Budgets:
    """The manifest's budgets, tightened by the config, under the config's track.

    Raises BudgetLoosened naming the key, TrackRefused for a setting the track does not take or an
    interface the task's family does not offer.
    """
    check_interface(config.interface, manifest)
    track = config.budget_mode or ("decisions" if config.interface == "actions" else "horizon")
    calls = prefix = None
    trial_steps = config.trial_steps
    if track == "horizon":
        if config.decision_calls is not None or config.action_prefix is not None:
            raise TrackRefused("[series] decision_calls / action_prefix belong to budget_mode = \"decisions\"; "
                               "the horizon track takes control_step_cap only")
        if config.control_step_cap is not None:
            if trial_steps is not None and trial_steps != config.control_step_cap:
                raise TrackRefused(f"[series] trial_steps = {trial_steps} and control_step_cap = {config.control_step_cap} "
                                   "disagree; the horizon track's cap is the trial's step budget (set one)")
            trial_steps = config.control_step_cap
    else:
        if config.interface != "actions":
            raise TrackRefused("[series] budget_mode = \"decisions\" counts action chunks: it needs interface = \"actions\"")
        if config.control_step_cap is not None:
            raise TrackRefused("[series] control_step_cap is not accepted in the decisions track; "
                               "set budget_mode = \"horizon\" or use decision_calls / action_prefix")
        calls = config.decision_calls or DEFAULT_DECISION_CALLS
        prefix = config.action_prefix or DEFAULT_ACTION_PREFIX
        if trial_steps is not None and trial_steps != calls * prefix:
            raise TrackRefused(f"[series] trial_steps = {trial_steps} differs from decision_calls x action_prefix = "
                               f"{calls * prefix}; the decisions track's step budget is D x K (leave trial_steps out)")
        trial_steps = calls * prefix
    b = manifest.budgets
    pairs = {
        "trial_steps": (trial_steps, b.trial.steps),
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
    identity = track_identity(manifest, track, cap=out["trial_steps"], calls=calls, prefix=prefix)
    return Budgets(**out, interface=config.interface, track=track, decision_calls=calls, action_prefix=prefix,
                   identity=identity)


def check_interface(interface: str, manifest: TaskManifest) -> None:
    """Raises TrackRefused when the task's family does not take ``interface`` (``Family.interfaces``)."""
    from roboswe.sim.families import family, interface_owner

    name = manifest.upstream.package
    offered = family(name).interfaces
    owner = interface_owner(interface)
    if owner is not None and owner.name != name:
        raise TrackRefused(f"[series] interface = {interface!r} is the {owner.name} family's; task {manifest.id!r} is {name}")
    if interface not in offered:
        raise TrackRefused(f"task {manifest.id!r} ({name}) takes [series] interface = {' or '.join(map(repr, offered))}, "
                           f"not {interface!r}")


def track_identity(manifest: TaskManifest, track: str, *, cap: int, calls: int | None, prefix: int | None) -> str:
    """The protocol identity of a task under a budget track; raises TrackRefused outside the contract's limits."""
    from roboswe.sim.families import family
    from roboswe.sim.manifest import ManifestError

    name = manifest.upstream.package
    identity = family(name).identity
    if identity is not None:
        try:
            return identity(manifest, track, cap=cap, calls=calls, prefix=prefix)
        except ManifestError:
            raise
        except ValueError as e:
            raise TrackRefused(str(e)) from None
    if track == "horizon":
        return f"{name}/control-{cap}/v2"
    return f"{name}/decision-{calls}-prefix-{prefix}/v1"
