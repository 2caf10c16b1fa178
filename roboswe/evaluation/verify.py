"""Verification by replay (DESIGN.md section 7): re-run a trial's state-changing operations.

For each ended trial: restore its starting checkpoint into an empty directory (the
manifest is validated first; this trusted step runs here, never in the sandbox), load a
fresh scene, check its fingerprint, open a sandbox with the same backend and image, and
re-run the recorded writes, execs, waits and action chunks in order (a chunk that was one
environment action, e.g. a MoveFlange, is re-sent whole even when the scene rejected it: the
scene counted it; one the harness's own check refused never reached the scene and is skipped). Per exec the replay is compared
with the record; at the end, whether the replay reached the recorded outcome over the same
control-step interval.

What counts (the score is the robot's, not the program's printout): the verdict is about
*execution* -- each exec's control steps, every step's commanded action and physics state, the
success interval, the final control step, the family's own record. A program's *output* (exit
status, stdout and stderr digests, the limit that stopped it) is compared too and kept in
``detail["output_differences"]``, but never makes a mismatch: a script that prints the time
would otherwise opt any trial out of scoring. Whatever the participant's programs do differently
on replay (another file layout, a script gone, other actions) is a divergence, never an
``error``: ``error`` is kept for causes outside the participant (a restore, fingerprint, image or
peer that failed). How the verdict scores is in ``roboswe.records.metrics`` (a recorded failure
scores 0 whatever its replay did; a success scores only when ``verified``). A family that keeps its
own record of the trial (task_record.py; RoboPaint's action log and canvas) is checked twice:
the replayed scene, finalized as the trial ended, must give the same record, and the recorded
action log re-executed in another fresh scene must too; a canvas hash that differs is a
``mismatch`` naming the round.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import structlog
import trio

from roboswe.actors import RemoteError
from roboswe.evaluation import task_record
from roboswe.evaluation.actions import executable_prefix, step
from roboswe.evaluation.feedback import (
    Acted,
    ExecOutcome,
    FileFeedback,
    Refused,
    SandboxOpened,
    Waited,
    read_feedback,
    sha256_text,
)
from roboswe.evaluation.peers import INFRA_ERRORS, Links
from roboswe.evaluation.plan import slug
from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series_config import Budgets
from roboswe.evaluation.workspace import TrialWorkspace, WorkspaceError, open_workspace
from roboswe.protocol import recorder as rec
from roboswe.protocol.bridge import ScriptLimits
from roboswe.protocol.participant import ACTION_OPERATIONS, InvalidOperation, parse_operation
from roboswe.records.reader import RunReader, TrialView
from roboswe.sandbox.checkpoints import BlobStore, CheckpointError

log = structlog.get_logger()

REPLAYED = ("write_file", "exec", "wait")
EXECUTION = ("steps",)  # per exec: what moved the robot; a difference is a divergence
OUTPUT = ("exit_status", "stdout_sha256", "stderr_sha256", "limit")  # per exec: recorded, never a mismatch
STATE_TOLERANCE = 1e-9  # same host, same binaries: physics replays bit for bit; this only absorbs printing noise


class ReplayError(Exception):
    """The replay could not be carried out (not a disagreement): the verdict is ``error``."""


def trial_budgets(reader: RunReader, view: TrialView) -> SandboxOpened:
    """The budgets, seed, sandbox backend and image the trial ran under, from its trial_opened event."""
    for _, event in reader.events(trial_id=view.trial_id):
        if event.event == "trial_opened":
            try:
                return SandboxOpened.from_event(event.data)
            except ValueError as e:
                raise ReplayError(f"trial {view.trial_id}: {e}") from None
    raise ReplayError(f"trial {view.trial_id} has no trial_opened event: it never opened a sandbox, nothing to replay")


def replayable(view: TrialView) -> bool:
    """Trials with a scored outcome (success or failure) are replayed; incomplete ones are not."""
    return view.end is not None and view.end.outcome in ("success", "failure")


async def verify_trial(links: Links, reader: RunReader, run_dir: Path, view: TrialView,
                       manifest: dict[str, Any], reference_fingerprint: str) -> rec.VerificationRecord:
    """Replay one trial and record its verdict (durably); never raises for a failed replay."""
    started_wall, t0 = time.time(), time.monotonic()
    replay_id = f"{view.trial_id}/replay-{int(started_wall * 1000)}"
    workspace = open_workspace(links, run_dir / "replays" / slug(replay_id))  # under RUN_DIR, or on the worker's node
    detail: dict[str, Any] = {"execs": [], "waits": [], "writes": 0}
    verdict, divergence, reproduced, replay_outcome = "error", "", None, None
    opened = False
    try:
        pinned = await _fresh_start(links, reader, run_dir, view, manifest, reference_fingerprint, workspace, detail)
        budgets = pinned.budgets
        opened_msg = await links.bridge.open(replay_id, workspace.where, pinned.backend, ScriptLimits(
            steps=budgets.script_steps, seconds=budgets.script_seconds))
        opened = True
        detail["backend"], detail["image_digest"] = opened_msg.backend, opened_msg.image_digest
        if opened_msg.image_digest != pinned.image_digest:
            raise ReplayError(f"sandbox image {opened_msg.image_digest[:16]} is not the trial's {pinned.image_digest[:16]}")
        divergence = await _replay_operations(links, reader, view, replay_id, workspace, budgets, detail)
        divergence, reproduced, replay_outcome = await _compare_end(links, reader, view, manifest, pinned, divergence, detail)
        verdict = "mismatch" if divergence else "verified"
    except ReplayError as e:
        detail["cause"] = str(e)
    except INFRA_ERRORS as e:
        detail["cause"] = f"infrastructure: {type(e).__name__}: {e}"
    except (WorkspaceError, OSError, KeyError) as e:
        detail["cause"] = f"{type(e).__name__}: {e}"
    finally:
        if opened:
            with trio.CancelScope(shield=True):
                try:
                    await links.bridge.close(replay_id)
                except INFRA_ERRORS:
                    pass
        with trio.CancelScope(shield=True):
            try:
                await workspace.drop()
            except INFRA_ERRORS:
                pass  # a worker's node that went away took the replay's workspace with it
    detail.pop("_states", None)
    detail["replay_seconds"] = round(time.monotonic() - t0, 3)
    record = rec.VerificationRecord(
        verification_id=replay_id, trial_id=view.trial_id, verdict=verdict, outcome_reproduced=reproduced,
        replay_outcome=replay_outcome, first_divergence=divergence, detail=detail, started_at=started_wall, ended_at=time.time())
    await links.recorder.durable(record)
    log.info("trial_verified", trial=view.trial_id, verdict=verdict, divergence=divergence, cause=detail.get("cause"),
             output_differences=len(detail.get("output_differences", [])))
    return record


async def _fresh_start(links: Links, reader: RunReader, run_dir: Path, view: TrialView, manifest: dict[str, Any],
                       reference_fingerprint: str, workspace: TrialWorkspace, detail: dict[str, Any]) -> SandboxOpened:
    """The trial's starting workspace restored and its scene loaded fresh; what it ran under. Raises ReplayError."""
    pinned = trial_budgets(reader, view)
    start = next((c for c in reader.checkpoints(view.trial_id) if c.label == "trial_start"), None)
    if start is None:
        raise ReplayError(f"trial {view.trial_id} has no trial_start checkpoint")
    try:
        await workspace.fresh()
        await workspace.restore(start.manifest, BlobStore(run_dir / "blobs"))
    except CheckpointError as e:
        raise ReplayError(f"starting checkpoint {start.checkpoint_id} refused: {e}") from None
    detail["checkpoint"] = start.checkpoint_id
    loaded = await links.sim.load(manifest, pinned.seed, pinned.budgets.trial_steps)
    fp = loaded.fingerprint.digest
    detail["fingerprint"] = fp
    if fp != view.start.fingerprint or fp != reference_fingerprint:
        raise ReplayError(f"fresh scene fingerprint {fp[:16]} differs from the trial's {view.start.fingerprint[:16]} "
                          f"/ the admitted {reference_fingerprint[:16]}")
    return pinned


async def _compare_end(links: Links, reader: RunReader, view: TrialView, manifest: dict[str, Any], pinned: SandboxOpened,
                       divergence: str, detail: dict[str, Any]) -> tuple[str, bool, str]:
    """After the operations: the family's record, the success interval, the control steps and every step's state
    against the trial's. Returns (first divergence, outcome reproduced, replay outcome); raises ReplayError."""
    recorded = task_record.recorded(reader, view.trial_id)
    if recorded is not None:  # finalize the replayed scene as the trial ended (RoboPaint saves its canvas)
        replayed, _ = await links.sim.task_record(recorded.get("end"))
        detail["task_record"] = {"operations": task_record.summary(recorded, replayed)}
        divergence = divergence or task_record.divergence(recorded, replayed, "operations")
    status = await links.sim.success()
    interval = [status.achieved_step - status.interval + 1, status.achieved_step] if status.achieved else None
    original = list(view.end.success_interval) if view.end.success_interval else None
    replay_outcome = "success" if status.achieved else "failure"
    reproduced = (interval == original) and replay_outcome == view.end.outcome
    detail["success"] = {"original": original, "replay": interval, "original_outcome": view.end.outcome,
                         "control_steps": [view.end.control_steps, status.control_step]}
    if not divergence and not reproduced:
        divergence = f"success: original interval {original} ({view.end.outcome}), replay {interval}"
    if not divergence and status.control_step != view.end.control_steps:
        divergence = f"control steps: original {view.end.control_steps}, replay {status.control_step}"
    await _collect_states(links, detail)
    divergence = divergence or compare_states(reader, view, detail)
    if recorded is not None:  # the action log alone, in another fresh scene
        try:
            replayed = await task_record.replay_action_log(links, recorded, manifest, pinned.seed,
                                                           pinned.budgets.trial_steps, view.start.fingerprint)
        except ValueError as e:
            raise ReplayError(f"action-log replay: {e}") from None
        detail["task_record"]["action_log"] = task_record.summary(recorded, replayed)
        divergence = divergence or task_record.divergence(recorded, replayed, "action-log")
    return divergence, reproduced, replay_outcome


async def _replay_operations(links: Links, reader: RunReader, view: TrialView, replay_id: str, ws: TrialWorkspace,
                             budgets: Budgets, detail: dict[str, Any]) -> str:
    """Re-run writes, execs and waits in order; returns the first divergence ('' when none)."""
    first = ""

    def diverge(text: str) -> None:
        nonlocal first
        first = first or text

    for op in reader.operations(view.trial_id):
        if op.operation not in REPLAYED and op.operation not in ACTION_OPERATIONS:
            continue
        try:
            recorded = read_feedback(op.operation, op.feedback)
        except ValueError as e:
            raise ReplayError(f"operation {op.seq}: {e}") from None
        match recorded:
            case Refused():
                continue  # refused before it ran: nothing to replay
            case FileFeedback():  # write_file
                try:
                    await ws.write(op.arguments["path"], op.arguments["content"])
                except WorkspaceError as e:  # the replayed programs left another file layout
                    diverge(f"operation {op.seq} write_file {op.arguments['path']!r}: written originally, refused on replay: {e}")
                    continue
                detail["writes"] += 1
            case ExecOutcome() as orig:
                script = op.arguments["path"]
                try:  # as the trial checked before running it: a script the replayed programs removed is theirs
                    await ws.read(script, 1)
                except WorkspaceError as e:
                    diverge(f"operation {op.seq} exec {script!r}: ran originally, not runnable on replay: {e}")
                    continue
                try:
                    fb = await links.bridge.exec(replay_id, script, budgets.script_seconds)
                except RemoteError as e:
                    raise ReplayError(f"exec {script} (operation {op.seq}) refused: {e.error.detail}") from None
                agree = {
                    "steps": [orig.steps, fb.steps],
                    "exit_status": [orig.exit_status, fb.exit_status],
                    "stdout_sha256": [orig.stdout_sha256, sha256_text(fb.stdout)],
                    "stderr_sha256": [orig.stderr_sha256, sha256_text(fb.stderr)],
                    "limit": [orig.limit, fb.limit],
                }
                differs = [k for k, (a, b) in agree.items() if a != b]
                detail["execs"].append({"seq": op.seq, "script": script, "agree": not differs,
                                        "differs": differs, "values": agree})
                said = [k for k in differs if k in OUTPUT]
                if said:
                    detail.setdefault("output_differences", []).append(
                        {"seq": op.seq, "script": script, "differs": said})
                if moved := [k for k in differs if k in EXECUTION]:
                    diverge(f"operation {op.seq} exec {script}: " +
                            ", ".join(f"{k} {agree[k][0]!r} vs {agree[k][1]!r}" for k in moved))
            case Acted(one_action=True) as acted:  # one environment action: the whole chunk, accepted or rejected
                chunk = _recorded_chunk(op)
                result = await step(links.sim, chunk)
                rejected = [acted.stopped == "invalid_action", result.stopped == "invalid_action"]
                detail.setdefault("chunks", []).append({"seq": op.seq, "controls": [acted.controls, result.applied],
                                                        "rejected": rejected})
                if result.applied != acted.controls or rejected[0] != rejected[1]:
                    diverge(f"operation {op.seq} {op.operation}: {acted.controls} control steps "
                            f"({'rejected' if rejected[0] else 'accepted'}) vs {result.applied} "
                            f"({'rejected' if rejected[1] else 'accepted'})")
            case Acted(executed=executed) if executed:  # the chunk's executed actions, in one Step
                result = await step(links.sim, executable_prefix(_recorded_chunk(op), executed))
                detail.setdefault("chunks", []).append({"seq": op.seq, "executed": [executed, result.applied]})
                if result.applied != executed:
                    diverge(f"operation {op.seq} {op.operation}: executed {executed} vs {result.applied}")
            case Waited(applied=applied):
                result = await links.sim.wait(int(op.arguments["steps"]))
                detail["waits"].append({"seq": op.seq, "applied": [applied, result.applied]})
                if result.applied != applied:
                    diverge(f"operation {op.seq} wait: applied {applied} vs {result.applied}")
        await _collect_states(links, detail)
    return first


def _recorded_chunk(op: rec.OperationRecord) -> list[list[float]]:
    """The action rows of a recorded direct-action operation (re-parsed from its arguments)."""
    try:
        return parse_operation(op.operation, op.arguments).chunk()  # type: ignore[attr-defined]
    except InvalidOperation as e:
        raise ReplayError(f"operation {op.seq}: {e}") from None


async def _collect_states(links: Links, detail: dict[str, Any]) -> None:
    """Take the replay's per-step physics states since the last call (compared with the record at the end)."""
    states = await links.sim.take_states()
    if states is not None:
        detail.setdefault("_states", []).append((states.step, states.qpos, states.qvel, states.action))


def compare_states(reader: RunReader, view: TrialView, detail: dict[str, Any]) -> str:
    """Compare the replay's per-step qpos/qvel and commanded actions with the recorded control traces.

    Returns the first divergence ('' when none). The states are compared first: a physics
    divergence is the stronger finding. Traces recorded before actions were are compared on
    the state alone, and ``detail["actions"]`` says so.
    """
    import numpy as np

    from roboswe.sim.physics_state import trace_arrays

    taken = detail.pop("_states", [])
    traces = reader.control_traces(view.trial_id)
    if not traces or not taken:
        detail["states"] = {"compared": 0, "note": "no per-step states to compare"}
        return ""
    original = [trace_arrays(t) for t in traces]
    o_steps = np.concatenate([np.arange(t.step_start, t.step_end) for t in traces])
    o_qpos = np.concatenate([a["qpos"] for a in original])
    o_qvel = np.concatenate([a["qvel"] for a in original])
    r_steps = np.concatenate([t[0] for t in taken])
    r_qpos = np.concatenate([t[1] for t in taken])
    r_qvel = np.concatenate([t[2] for t in taken])
    if not np.array_equal(o_steps, r_steps) or o_qpos.shape != r_qpos.shape:
        detail["states"] = {"compared": 0, "original_steps": len(o_steps), "replay_steps": len(r_steps)}
        return f"per-step states: original covers {len(o_steps)} steps, replay {len(r_steps)}"
    dq, dv = np.abs(o_qpos - r_qpos), np.abs(o_qvel - r_qvel)
    detail["states"] = {"compared": len(o_steps), "max_abs_qpos_diff": float(dq.max(initial=0.0)),
                        "max_abs_qvel_diff": float(dv.max(initial=0.0))}
    bad = np.flatnonzero((dq > STATE_TOLERANCE).any(axis=1) | (dv > STATE_TOLERANCE).any(axis=1))
    if bad.size:
        return (f"per-step states diverge from control step {int(o_steps[bad[0]])} "
                f"(max |qpos| difference {float(dq.max()):.3g})")
    return _compare_actions(o_steps, original, taken, detail)


def _compare_actions(steps, original: list[dict[str, Any]], taken: list[tuple], detail: dict[str, Any]) -> str:
    """The commanded action of every control step, original vs replay (NaN rows: no action, e.g. the reset state)."""
    import numpy as np

    if not any("action" in a for a in original):
        detail["actions"] = {"compared": 0, "note": "the record has no commanded actions (recorded before they were)"}
        return ""
    width = max(a["action"].shape[1] for a in original if "action" in a)
    o_act = np.concatenate([a["action"] if "action" in a else np.full((len(a["qpos"]), width), np.nan) for a in original])
    r_act = _joined_actions([t[3] for t in taken], len(steps))
    if o_act.shape != r_act.shape:
        detail["actions"] = {"compared": 0, "original_width": o_act.shape[1], "replay_width": r_act.shape[1]}
        return f"commanded actions: original has {o_act.shape[1]} components per step, replay {r_act.shape[1]}"
    same = (np.abs(o_act - r_act) <= STATE_TOLERANCE) | (np.isnan(o_act) & np.isnan(r_act))
    differing = np.flatnonzero(~same.all(axis=1))
    detail["actions"] = {"compared": len(steps), "differing_steps": int(differing.size)}
    if differing.size:
        i = int(differing[0])
        return (f"commanded action diverges at control step {int(steps[i])}: "
                f"original {o_act[i].tolist()}, replay {r_act[i].tolist()}")
    return ""


def _joined_actions(batches: list, rows: int):
    """The replay's action batches as one (rows, width) array; batches of another width (e.g. only the reset state) as NaN."""
    import numpy as np

    width = max((b.shape[1] for b in batches), default=0)
    joined = np.concatenate([b if b.shape[1] == width else np.full((len(b), width), np.nan) for b in batches])
    return joined if len(joined) == rows else np.full((rows, width), np.nan)


async def verify_series(links: Links, reader: RunReader, progress: Progress, run_dir: Path,
                        series_id: str, manifest: dict[str, Any], reference_fingerprint: str,
                        *, only_unverified: bool = True, trial_ids: list[str] | None = None) -> list[rec.VerificationRecord]:
    """Replay the series' ended trials (latest attempt per index); skips those already replayed if asked."""
    out = []
    for view in reader.trials(series_id):
        if trial_ids and view.trial_id not in trial_ids:
            continue
        if not replayable(view) or (only_unverified and view.verification is not None):
            continue
        progress.update(operation=f"verify trial {view.start.index}")
        await links.wait_alive()
        record = await verify_trial(links, reader, run_dir, view, manifest, reference_fingerprint)
        cause = record.first_divergence or record.detail.get("cause", "")
        progress.say(f"{series_id}: trial {view.start.index} replay {record.verdict}"
                     + (f" ({cause})" if cause else "")
                     + (f", {view.end.outcome} reproduced" if record.outcome_reproduced else ""))
        out.append(record)
    return out


def summary(reader: RunReader, series_id: str) -> list[dict[str, Any]]:
    """Per trial attempt: outcome, reason, steps, active time, verdict (for the CLI's closing table)."""
    rows = []
    for v in reader.trials(series_id):
        rows.append({"trial": v.start.index, "attempt": v.start.attempt, "outcome": v.outcome or "interrupted",
                     "reason": v.end.reason if v.end else "", "steps": v.end.control_steps if v.end else 0,
                     "active_s": round(v.end.active_time, 1) if v.end else 0.0,
                     "verdict": v.verification.verdict if v.verification else "", "recovers": v.start.recovers})
    return rows

