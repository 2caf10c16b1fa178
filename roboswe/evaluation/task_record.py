"""A task family's own evidence of a trial, recorded as the trial ends (e.g. RoboPaint's round).

The simulator keeps it (``TakeTaskRecord``); here it becomes one ``task_record`` event holding the
family's data (RoboPaint: the ordered action log with results, contact and protective-stop
events, the canvas hash, resources used) and one artifact per file (the canvas PNG), read back
by the recorder with its SHA-256. Families that keep none cost one round trip and record nothing.
Verification (verify.py) replays against this record.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, get_args

import structlog

from roboswe.actors import RemoteError
from roboswe.evaluation.peers import SIM_DEADLINE, Links
from roboswe.evaluation.plan import slug
from roboswe.protocol import recorder as rec
from roboswe.protocol import sim as simp
from roboswe.records.reader import RunReader

log = structlog.get_logger()

EVENT = "task_record"
ARTIFACT_KINDS = set(get_args(rec.ArtifactKind))


def end_argument(outcome: str, reason: str) -> str | None:
    """What the family is told as the trial ends: its end reason, or None (only read) for an incomplete trial."""
    return None if outcome == "incomplete" else reason


async def record_task_record(links: Links, trial_id: str, index: int, end: str | None) -> dict[str, Any] | None:
    """Take the family's record (finalized by ``end``), store its files as artifacts and record the event.

    Returns the event's data, or None when the family keeps no record or the simulator could not
    give one (logged; the trial's own records are unaffected).
    """
    try:
        data, files = await links.sim.task_record(end)
    except RemoteError as e:  # no scene (it failed to load), or a simulator that predates the request
        log.warning("task_record_unavailable", trial=trial_id, code=e.error.code, detail=e.error.detail)
        return None
    if not data:
        return None
    stored: dict[str, dict[str, Any]] = {}
    for name, blob in files.items():
        kind = PurePosixPath(name).stem
        if kind not in ARTIFACT_KINDS or slug(name) != name:
            log.warning("task_file_skipped", trial=trial_id, file=name, why="not a known artifact kind")
            continue
        receipt = await links.recorder.store_artifact(
            f"{trial_id}/{name}", kind, f"tasks/{slug(trial_id)}/{name}", blob,
            {"round": index, "family": data.get("family", "")}, trial_id=trial_id)
        stored[name] = {"path": receipt.path, "sha256": receipt.sha256, "size": receipt.size}
    event = {**data, "round": index, "files": stored}
    await links.recorder.event(EVENT, trial_id, **event)
    return event


def recorded(reader: RunReader, trial_id: str) -> dict[str, Any] | None:
    """The trial's task record (the last one, should there be several), or None."""
    found = reader.events(trial_id=trial_id, event=EVENT)
    return dict(found[-1][1].data) if found else None


# --- verification: the record against a replay ------------------------------------------------


def divergence(recorded: dict[str, Any], replayed: dict[str, Any], how: str) -> str:
    """The first disagreement between a recorded task record and a replay's ('' when they agree).

    A canvas hash that differs is named first, with its round: it is the evidence the record
    stands on. Then the actions in order (kind, waypoints, result, contact figures).
    """
    where = f"round {recorded.get('round', '?')}"
    rec_canvas, rep_canvas = recorded.get("canvas") or {}, replayed.get("canvas") or {}
    if rec_canvas.get("sha256") != rep_canvas.get("sha256"):
        return (f"{where}: canvas sha256 {str(rec_canvas.get('sha256'))[:16]} recorded, "
                f"{str(rep_canvas.get('sha256'))[:16]} in the {how} replay")
    rec_actions, rep_actions = recorded.get("actions", []), replayed.get("actions", [])
    for k, (a, b) in enumerate(zip(rec_actions, rep_actions)):
        if a != b:
            keys = sorted(key for key in set(a) | set(b) if a.get(key) != b.get(key))
            return f"{where}: action {k} ({a.get('kind')}) differs in the {how} replay: {', '.join(keys)}"
    if len(rec_actions) != len(rep_actions):
        return f"{where}: {len(rec_actions)} actions recorded, {len(rep_actions)} in the {how} replay"
    return ""


def summary(recorded: dict[str, Any], replayed: dict[str, Any]) -> dict[str, Any]:
    return {"round": recorded.get("round"), "actions": [len(recorded.get("actions", [])), len(replayed.get("actions", []))],
            "canvas_sha256": [(recorded.get("canvas") or {}).get("sha256"), (replayed.get("canvas") or {}).get("sha256")]}


async def replay_action_log(links: Links, recorded: dict[str, Any], manifest: dict[str, Any], seed: int,
                            trial_steps: int, fingerprint: str) -> dict[str, Any]:
    """Re-execute the recorded action log in a fresh scene through the generic interface; returns that record.

    Each action carries its own replay form (``{"step": rows}`` or ``{"wait": n}``); the rest
    (the submission) happens at the recorded end. Raises ValueError when the fresh scene is not
    the trial's (fingerprint).
    """
    loaded = await links.sim.load(manifest, seed, trial_steps)
    if loaded.fingerprint.digest != fingerprint:
        raise ValueError(f"fresh scene fingerprint {loaded.fingerprint.digest[:16]} is not the trial's {fingerprint[:16]}")
    for action in recorded.get("actions", []):
        how = action.get("replay") or {}
        if "step" in how:
            # One Step of the action's rows (one MoveFlange); a rejected batch is rejected again, and compared.
            await links.sim.ask(simp.Step(actions=how["step"]), simp.StepResult, SIM_DEADLINE)
        elif "wait" in how:
            await links.sim.wait(int(how["wait"]))
    replayed, _ = await links.sim.task_record(recorded.get("end"))
    return replayed
