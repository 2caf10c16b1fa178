"""Series (DESIGN.md section 1): T trials of one task with one participant, and resume.

Trials 2..T keep the workspace and the conversation (``retain``), or start empty like
trial 1 (``none``, the fresh-context control). ``roboswe.evaluation.trial`` carries out each trial.

Resume: ``SeriesHistory.read`` looks at what the run database already holds. Ended
trials stay as they are; a started trial without an end is closed as ``incomplete``
(cause ``interrupted``) and re-run as a new attempt whose ``recovers`` names it. The
workspace is restored from the interrupted trial's starting checkpoint (or the last
checkpoint of the trial before), and the conversation from the recorded turns.

``--retry-incomplete`` (``retry_incomplete``): a slot whose latest attempt ended ``incomplete``
for a cause that may go away (``retryable``, ``RETRYABLE_CAUSES``) is re-run the same way, as a linked
attempt from the state it started in, at most ``MAX_INCOMPLETE_RETRIES`` times per slot; after
that the slot stays missing. A ``failure`` (the participant's) is never re-run. Slots after it
that already ended are kept as they are: in ``retain`` mode they saw the incomplete attempt,
not its re-run (the records show both attempts and the link).

A context overflow (one exchange larger than the input budget B) stops the series: the
remaining slots stay missing, and the ``series_stopped`` event holds the overflow evidence.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import structlog

from roboswe.evaluation.conversation import Conversation, recorded_conversation
from roboswe.evaluation.peers import INFRA_ERRORS, Links
from roboswe.evaluation.plan import SeriesPlan, previous_figures
from roboswe.evaluation.progress import Progress, job_figures
from roboswe.evaluation.trial import TrialRunner
from roboswe.evaluation.workspace import TrialWorkspace, open_workspace
from roboswe.protocol import recorder as rec
from roboswe.protocol import sim as simp
from roboswe.protocol.participant import Turn
from roboswe.records.reader import RunReader, TrialView
from roboswe.sandbox.checkpoints import BlobStore

log = structlog.get_logger()


# --- what the database already holds for a series -----------------------------------------------


class SeriesHistory(msgspec.Struct, kw_only=True):
    """A series as recorded so far: where to go on, and what to restore."""

    recorded: bool  # the series row exists
    next_index: int  # first trial index still to run (T+1: all ended)
    kept: list[TrialView]  # ended attempts before next_index (their turns stay in the conversation)
    interrupted: TrialView | None  # the attempt of next_index to close (if open) and re-run
    next_attempt: int
    previous: dict[str, Any] | None  # figures of the trial before next_index, for its opening
    only_slot: bool = False  # later slots already ended: re-run next_index alone
    stopped_by: TrialView | None = None  # the attempt whose context overflow stopped the series

    @classmethod
    def read(cls, reader: RunReader, series_id: str, trials: int, *, retry_incomplete: bool = False) -> SeriesHistory:
        recorded = any(s.series_id == series_id for s in reader.series())
        views = reader.trials(series_id) if recorded else []
        by_index: dict[int, list[TrialView]] = {}
        for v in views:
            by_index.setdefault(v.start.index, []).append(v)
        rerun = {v.start.recovers for v in views if v.start.recovers}  # attempts a later attempt replaced
        kept: list[TrialView] = []
        next_index, interrupted, attempt, stopped_by = trials + 1, None, 0, None
        for index in range(1, trials + 1):
            attempts = by_index.get(index, [])
            kept_here = [a for a in attempts
                         if a.end is not None and not was_interrupted(a.end) and a.trial_id not in rerun]
            latest = attempts[-1] if attempts else None
            if latest is None:
                next_index, attempt = index, 0
                break
            if latest.end is None or was_interrupted(latest.end):
                next_index, interrupted, attempt = index, latest, latest.start.attempt + 1
                kept += kept_here
                break
            if stops_series(latest.end):
                kept += kept_here
                stopped_by = latest
                break
            if (retry_incomplete and retryable(latest.end)
                    and incomplete_retries(attempts) <= MAX_INCOMPLETE_RETRIES):
                next_index, interrupted, attempt = index, latest, latest.start.attempt + 1
                kept += [a for a in kept_here if a is not latest]
                break
            kept += kept_here
        only_slot = next_index <= trials and any(by_index.get(i) for i in range(next_index + 1, trials + 1))
        before = [v for v in kept if v.start.index == next_index - 1]
        previous = previous_figures(next_index - 1, before[-1].end) if before else None
        return cls(recorded=recorded, next_index=next_index, kept=kept, interrupted=interrupted,
                   next_attempt=attempt, previous=previous, only_slot=only_slot, stopped_by=stopped_by)


def was_interrupted(end: rec.TrialEnded) -> bool:
    """Whether an ended attempt was cut off by the harness (killed run, dead peer) and is to be re-run."""
    return end.cause == "interrupted"


def stops_series(end: rec.TrialEnded) -> bool:
    """Whether an ended attempt stops its series: an exchange too large for the input budget B would
    not fit the next trial's requests either (the context policy never truncates it)."""
    return end.cause == "context_overflow"


# Causes of an incomplete end that are not the participant's doing and may go away on a second try
# (protocol/recorder.py says what each means): the provider (an outage after its retries), a
# configuration fixed since (the key exported), infrastructure, a fresh scene whose fingerprint
# differs from the admitted one, a harness error. Never a context overflow (it stops the series),
# never an interruption (re-run anyway). An end recorded without a cause is not retried.
RETRYABLE_CAUSES: tuple[rec.IncompleteCause, ...] = (
    "provider", "configuration", "infrastructure", "fingerprint_mismatch", "internal")
MAX_INCOMPLETE_RETRIES = 2  # linked re-runs per slot under --retry-incomplete; then the slot stays missing


def retryable(end: rec.TrialEnded) -> bool:
    """Whether an ended attempt may be re-run under ``--retry-incomplete``: incomplete for a retryable cause."""
    return end.outcome == "incomplete" and end.cause in RETRYABLE_CAUSES


def incomplete_retries(attempts: list[TrialView]) -> int:
    """How many attempts of one slot ended incomplete for a retryable cause (interruptions not counted)."""
    return sum(1 for a in attempts if a.end is not None and retryable(a.end))


async def restore_workspace(reader: RunReader, run_dir: Path, history: SeriesHistory, dest: TrialWorkspace) -> str | None:
    """Restore the workspace a resumed retain-mode series continues from; returns the checkpoint id used.

    That is the interrupted trial's starting checkpoint, or else the last checkpoint of the
    latest kept trial (every write and exec is checkpointed, so it is that trial's final workspace).
    """
    chosen = None
    if history.interrupted is not None:
        chosen = next((c for c in reader.checkpoints(history.interrupted.trial_id) if c.label == "trial_start"), None)
    for view in reversed(history.kept):
        if chosen is not None:
            break
        points = reader.checkpoints(view.trial_id)
        chosen = points[-1] if points else None
    if chosen is None:
        return None
    await dest.restore(chosen.manifest, BlobStore(run_dir / "blobs"))
    return chosen.checkpoint_id


# --- a whole series -------------------------------------------------------------------------------


MAX_RERUNS = 3  # linked re-runs of interrupted attempts per call; the supervisor's restart limit usually stops first


async def run_series(links: Links, plan: SeriesPlan, progress: Progress,
                     reader_factory: Callable[[], RunReader], *, reruns: int = 0,
                     retry_incomplete: bool = False,
                     next_series: Callable[[], Awaitable[None]] | None = None,
                     trial_done: Callable[[rec.TrialEnded], Awaitable[None]] | None = None) -> list[rec.TrialEnded]:
    """Run (or continue) one series to its last trial; returns the ends recorded by this call.

    ``retry_incomplete``: re-run retryable incomplete slots as linked attempts (see the module docs).
    ``next_series``: called once the last trial's scene is loaded, as ``stage_next_scene`` is for the
    others (the job stages the first scene of the series this worker runs next).
    ``trial_done``: called with each trial's end as soon as it is recorded (the job queues its video then).
    Raises RuntimeError when attempts keep being interrupted (more than MAX_RERUNS re-runs).
    """
    recording = links.recorder
    with reader_factory() as reader:
        history = SeriesHistory.read(reader, plan.series_id, plan.trials, retry_incomplete=retry_incomplete)
        if not history.recorded:
            await recording.durable(series_record(plan))
        progress.update(task=plan.task.id, series_id=plan.series_id, mode=plan.retain, trials=plan.trials)
        if history.next_index > plan.trials:
            return []
        workspace, turns, images, interrupted_steps = await _continue_from(links, plan, progress, reader, history)
    if history.interrupted is not None:
        await _close_attempt(links, plan, progress, history, interrupted_steps)
    conversation = Conversation(plan.series_id, links.context, recording, reader_factory)
    conversation.trial_ids = [v.trial_id for v in history.kept] if plan.retain == "retain" else []
    await conversation.reset(turns, images)

    ends = []
    previous = history.previous
    recovers = history.interrupted.trial_id if history.interrupted is not None else None
    attempt = history.next_attempt
    last = history.next_index if history.only_slot else plan.trials
    for index in range(history.next_index, last + 1):
        await links.wait_alive()
        if plan.retain == "none":  # the fresh-context control: nothing carries over
            await open_workspace(links, workspace).fresh()
            conversation.trial_ids = []
            await conversation.reset([], {})
        elif conversation.lost or not await conversation.in_sync():
            await conversation.rebuild()
        progress.say(f"{plan.series_id}: trial {index}/{plan.trials} starts")
        runner = TrialRunner(links, plan, progress, index=index, attempt=attempt, workspace=workspace,
                             recovers=recovers, conversation=conversation)
        if index < last:
            runner.after_load = lambda: stage_next_scene(links, plan)
        elif next_series is not None:
            runner.after_load = next_series
        ended = await runner.run(previous if plan.retain == "retain" else None)
        ends.append(ended)
        if trial_done is not None:
            await trial_done(ended)
        so_far = job_figures(progress.job_message())
        progress.say(f"{plan.series_id}: trial {index}/{plan.trials} {ended.outcome} ({ended.reason}), "
                     f"{ended.control_steps} steps, {ended.active_time:.1f} s active" + (f" (job: {so_far})" if so_far else ""))
        if was_interrupted(ended):
            # A peer died under the trial (its worker's simulator, say; the supervisor restarts it). That costs
            # this attempt only: re-run it as a linked attempt from where it started, as a resumed run does.
            if reruns >= MAX_RERUNS:
                raise RuntimeError(f"{plan.series_id}: trial {index} was interrupted {reruns + 1} times in a row "
                                   f"({ended.reason}); see `roboswe logs --series {plan.series_id}`, then --resume")
            await links.wait_alive()
            return ends + await run_series(links, plan, progress, reader_factory, reruns=reruns + 1,
                                           retry_incomplete=retry_incomplete, next_series=next_series,
                                           trial_done=trial_done)
        if stops_series(ended):
            await stop_series(links, plan, progress, index, ended, runner.overflow)
            return ends
        if ended.cause == "configuration":
            # Every later trial would end the same way (a refused key, an unknown model): start none. The
            # front end stops the run on seeing it; deciding it here too means no later trial slips in
            # before its next look (a staged scene makes the next trial start within milliseconds).
            # Nothing is recorded as stopped: `--resume` continues here once the configuration is fixed.
            progress.say(f"{plan.series_id}: trial {index} ended incomplete for a configuration problem; "
                         "no further trial starts (fix it, then --resume)")
            return ends
        previous = previous_figures(index, ended)
        recovers, attempt, reruns = None, 0, 0  # "in a row" counts one slot's attempts: this one ended
    if retry_incomplete or history.only_slot:  # more slots to re-run, or the rest of the series after one
        return ends + await run_series(links, plan, progress, reader_factory, retry_incomplete=retry_incomplete,
                                       next_series=next_series, trial_done=trial_done)
    return ends


def series_record(plan: SeriesPlan) -> rec.SeriesRecord:
    """The series' row: its task, model, mode and pins (budgets, backend, fingerprint, manifest, seed, assets)."""
    return rec.SeriesRecord(
        series_id=plan.series_id, run_id=plan.run_id, task=plan.task.id, model=plan.model, mode=plan.retain,
        trials=plan.trials, created_at=time.time(),
        pins={"budgets": msgspec.to_builtins(plan.budgets), "backend": plan.backend,
              "fingerprint": plan.reference_fingerprint, "manifest_digest": plan.task.manifest_digest,
              "seed": plan.seed, "assets": plan.assets})


async def _continue_from(links: Links, plan: SeriesPlan, progress: Progress, reader: RunReader,
                         history: SeriesHistory) -> tuple[Path, list[Turn], dict[str, bytes], int]:
    """The workspace, conversation (turns, images) and the interrupted attempt's steps the series goes on from."""
    if history.interrupted is not None and (history.interrupted.end is None or was_interrupted(history.interrupted.end)):
        # The bridge may still hold the interrupted trial open (a restarted coordinator): its
        # workspace is then a mounted volume that cannot be cleared until the trial is closed.
        try:
            await links.bridge.close(history.interrupted.trial_id)
        except INFRA_ERRORS:
            pass  # a fresh bridge has nothing open
    workspace = plan.workspace_dir()
    await open_workspace(links, workspace).fresh()
    interrupted_steps = 0
    if history.interrupted is not None:
        done = reader.operations(history.interrupted.trial_id)
        interrupted_steps = done[-1].step_end if done else 0
    turns: list[Turn] = []
    images: dict[str, bytes] = {}
    if history.next_index > 1 or history.interrupted is not None:
        progress.say(f"{plan.series_id}: continuing at trial {history.next_index} "
                     f"({len(history.kept)} ended trial(s) kept)")
        if plan.retain == "retain":
            restored = await restore_workspace(reader, Path(plan.run_dir), history, open_workspace(links, workspace))
            turns, images = recorded_conversation(reader, [v.trial_id for v in history.kept])
            await links.recorder.event("series_resumed", None, series=plan.series_id, next_index=history.next_index,
                                       workspace_from=restored, turns=len(turns))
    return workspace, turns, images, interrupted_steps


async def _close_attempt(links: Links, plan: SeriesPlan, progress: Progress, history: SeriesHistory,
                         interrupted_steps: int) -> None:
    """Record the attempt about to be re-run as closed: an open one ends ``interrupted``; a retried one is announced."""
    old = history.interrupted
    assert old is not None
    if old.end is None:
        await links.recorder.durable(rec.TrialEnded(
            trial_id=old.trial_id, outcome="incomplete", reason="interrupted", cause="interrupted",
            control_steps=interrupted_steps, ended_at=time.time()))
    if old.end is not None and not was_interrupted(old.end):
        await links.recorder.event("trial_retried", old.trial_id, series=plan.series_id, index=old.start.index,
                                   attempt=history.next_attempt, reason=old.end.reason, cause=old.end.cause,
                                   later_slots_kept=history.only_slot)
        progress.say(f"trial {old.start.index} attempt {old.start.attempt} ended incomplete ({old.end.reason}): "
                     f"re-running it as attempt {history.next_attempt} (--retry-incomplete)")
    else:
        progress.say(f"trial {old.start.index} attempt {old.start.attempt} was interrupted: recorded incomplete, re-running")


async def stage_next_scene(links: Links, plan: SeriesPlan) -> None:
    """Ask the simulator to build the next trial's fresh scene now (``Prepare``), without waiting for it.

    Sent as soon as a trial's own scene is loaded: the simulator builds the next one on a thread of
    its own while this trial runs (a participant thinking leaves it idle, so the build costs nothing;
    a scripted one shares the cores, but the model compile runs without the GIL), and the next
    ``Load`` takes it (same manifest, seed and budget; its fingerprint is checked as any Load's),
    waiting for the build if it is still running. A failed Prepare costs nothing: that Load builds
    the scene itself.
    """
    prepare = simp.Prepare(manifest=simp.encode_manifest(plan.manifest), seed=plan.seed, trial_steps=plan.budgets.trial_steps)
    try:
        await links.sim.client.send(prepare)  # the Ok that comes back later is not awaited
    except INFRA_ERRORS as e:
        log.warning("stage_next_scene_failed", series=plan.series_id, error=f"{type(e).__name__}: {e}")


async def stop_series(links: Links, plan: SeriesPlan, progress: Progress, index: int, ended: rec.TrialEnded,
                      overflow: dict[str, Any] | None) -> None:
    """Record that a context overflow stopped the series at trial ``index``; the later slots stay missing."""
    remaining = list(range(index + 1, plan.trials + 1))
    await links.recorder.durable(rec.EventRecord(
        run_id=plan.run_id, event="series_stopped", at=time.time(), trial_id=ended.trial_id,
        data={"series": plan.series_id, "reason": "context_overflow", "trial": index, "detail": ended.reason,
              "remaining": remaining, "evidence": overflow or {}}))
    progress.say(f"{plan.series_id}: stopped after trial {index}: {ended.reason}; "
                 f"trial(s) {', '.join(map(str, remaining)) or 'none'} not run")
