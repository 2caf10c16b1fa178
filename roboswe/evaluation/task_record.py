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
from roboswe.evaluation.peers import Links
from roboswe.evaluation.plan import slug
from roboswe.protocol import recorder as rec
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
