"""What an export is a snapshot of: when it was taken, whether its run was going, its running and pending slots.

An export reads the run database as it is at that moment, so the site is a published snapshot of
the results (as a protocol's results page publishes one): the index states the time and the run's
state. While the run goes (its supervisor lives and is starting or running, as ``roboswe status``
judges it), an attempt with no end recorded is *running*, and a slot the job has not reached is
*pending*: the series' slots without an attempt and the tasks the run was asked for (its pinned task
list, else RUN_DIR/job.json) that have no series yet. Neither is scored: the figures are those of
the scored slots at the snapshot, the same as ``roboswe report`` then. Once the run has stopped, the
same slots read as they always did: incomplete (interrupted) and not started; so they do while the
job is a replay job (``roboswe verify``), which runs no trial.

``refresh`` (``roboswe view --live``) asks the pages to look for a newer export every so many seconds:
``data/snapshot.js`` holds the snapshot's time alone, and a page whose export it no longer is reloads.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

SNAPSHOT_DATA = "data/snapshot.js"  # key "snapshot": {"at": ...}; the pages of a --live site poll it


def run_state(run_dir: Path) -> tuple[bool, str]:
    """(whether the run is going, its state in words) from its supervisor's state file."""
    from roboswe.actors.supervisor import SupervisorStateError, read_state, run_active

    try:
        state = read_state(run_dir)
        live = run_active(run_dir)
    except FileNotFoundError:
        return False, "not running (no supervisor state)"
    except SupervisorStateError as e:
        return False, f"unknown ({e})"
    if live:
        return True, state.state
    if state.state in ("starting", "running", "stopping"):
        return False, "stopped (its supervisor is gone)"
    return False, state.state + (f": {state.failure}" if state.failure else "")


def _job(run_dir: Path) -> Any:
    """RUN_DIR/job.json (roboswe.evaluation.job.Job), or None without a readable one."""
    from roboswe.evaluation.job import read_job

    try:
        return read_job(run_dir)
    except (FileNotFoundError, ValueError):
        return None


def _trials_per_series(run_config: dict[str, Any]) -> int:
    from roboswe.evaluation.series_config import SeriesConfig

    trials = (run_config.get("series") or {}).get("trials")
    return trials if isinstance(trials, int) and trials > 0 else SeriesConfig().trials


def snapshot(run_dir: Path, run: Any, summary: dict[str, Any], refresh: float | None = None) -> dict[str, Any]:
    """The snapshot's facts for data/run.js; marks ``summary``'s attempts with no end ``running`` while the run goes."""
    live, state = run_state(run_dir)
    job = _job(run_dir)
    if live and job is not None and job.kind == "verify":  # replays only: no trial runs, no slot is reached
        live, state = False, "replaying its trials (roboswe verify)"
    running = 0
    pending = 0
    for s in summary["series"]:
        latest = {a["index"]: a["attempt"] for a in s["attempts"]}  # attempts are in (index, attempt) order
        for a in s["attempts"]:
            # an earlier attempt a resumed run left without an end was interrupted, not running
            a["running"] = (live and a["ended_at"] is None and a["recovered_by"] is None
                            and a["attempt"] == latest[a["index"]])
            running += a["running"]
        if live:
            pending += max(0, s["trials"] - len({a["index"] for a in s["attempts"]}))
    started = {s["task"] for s in summary["series"]}
    trials = _trials_per_series(dict(run.config.run_config))
    asked = list(run.config.tasks) or (list(job.tasks) if job is not None else [])  # the pinned list, else the job's
    unstarted = [{"task": t, "trials": trials} for t in asked if t not in started]
    if live:
        pending += sum(u["trials"] for u in unstarted)
    return {"at": time.time(), "live": live, "run_state": state, "running": running, "pending": pending,
            "unstarted_tasks": unstarted, "refresh": refresh}
