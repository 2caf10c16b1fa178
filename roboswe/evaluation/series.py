"""Series (DESIGN.md section 1): T trials of one task with one participant, and resume.

Trials 2..T keep the workspace and the conversation (``retain``), or start empty like
trial 1 (``none``, the fresh-context control). ``roboswe.evaluation.trial`` carries out each trial.

Resume: ``SeriesHistory.read`` looks at what the run database already holds. Ended
trials stay as they are; a started trial without an end is closed as ``incomplete``
(reason ``interrupted``) and re-run as a new attempt whose ``recovers`` names it. The
workspace is restored from the interrupted trial's starting checkpoint (or the last
checkpoint of the trial before), and the conversation from the recorded turns.
"""

from __future__ import annotations

import base64
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import structlog
import trio

from roboswe.actors import PeerDead
from roboswe.evaluation.admission import AdmittedTask
from roboswe.evaluation.series_config import Budgets
from roboswe.evaluation.trial import (
    BRIDGE_DEADLINE,
    INFRA_ERRORS,
    RECORD_DEADLINE,
    SIM_DEADLINE,
    TrialIncomplete,
    TrialRunner,
    turn_from_event,
)
from roboswe.evaluation.trial import encode_png as encode_png  # noqa: F401  (kept importable from here; the viewer tests use it)
from roboswe.protocol import recorder as rec
from roboswe.protocol.bridge import CloseTrial, ScriptLimits
from roboswe.protocol.context import AppendTurns, ResetContext
from roboswe.protocol.participant import Turn
from roboswe.records.reader import RunReader, TrialView
from roboswe.sandbox.checkpoints import BlobStore, load_manifest, restore

log = structlog.get_logger()

@dataclass
class Links:
    """The peers a series talks to (objects with ``request``/``send``, e.g. runtime Clients)."""

    sim: Any
    bridge: Any
    recorder: Any
    provider: Any = None
    context: Any = None
    sim_robot_endpoint: str | None = None  # what the bridge connects to; None: the run's configured one
    sim_keys: str | None = None  # CURVE key directory the bridge uses for a remote simulator


@dataclass
class Progress:
    """Live figures of the job, read by the coordinator to answer GetProgress."""

    state: str = "starting"
    detail: str = ""
    job: str = "run"
    series_done: int = 0
    series_total: int = 0
    task: str = ""
    series_id: str = ""
    mode: str = ""
    trial: int = 0
    trials: int = 0
    operation: str = ""
    steps_used: int = 0
    steps_budget: int = 0
    active_s: float = 0.0
    active_budget_s: float = 0.0
    last_outcome: str = ""
    lines: list[str] = field(default_factory=list)
    active_clock: Callable[[], float] | None = None  # the running trial's active time, read at each query

    def snapshot(self) -> dict[str, Any]:
        """The figures as of now (active time read live from the running trial)."""
        out = {k: v for k, v in vars(self).items() if k not in ("lines", "active_clock")}
        if self.active_clock is not None:
            out["active_s"] = self.active_clock()
        return out

    def say(self, line: str) -> None:
        self.lines.append(f"{time.strftime('%H:%M:%S')} {line}")
        log.info("progress", line=line)


class SeriesPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Everything fixed about one series."""

    run_id: str
    series_id: str
    task: AdmittedTask
    budgets: Budgets
    trials: int
    retain: str  # "retain" | "none"
    backend: str | None
    model: str
    run_dir: str

    @property
    def manifest(self) -> dict[str, Any]:
        return self.task.manifest

    @property
    def reference_fingerprint(self) -> str:
        return (self.task.fingerprint or {}).get("digest", "")

    @property
    def seed(self) -> int:
        return int((self.task.fingerprint or {}).get("seed", self.task.manifest["seed"]))

    def limits(self) -> ScriptLimits:
        return ScriptLimits(steps=self.budgets.script_steps, seconds=self.budgets.script_seconds)

    def workspace_dir(self) -> Path:
        return Path(self.run_dir) / "workspaces" / slug(self.series_id)


def slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)



def make_dir(path: Path) -> Path:
    """Create a directory the sandbox user can traverse (bwrap binds it as that user)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    return path


def fresh_dir(path: Path) -> Path:
    """An empty directory at ``path``; earlier content is removed (checkpoints hold it)."""
    if path.exists():
        shutil.rmtree(path)
    make_dir(path.parent)
    return make_dir(path)


# --- recording --------------------------------------------------------------------------------


class Recording:
    """The coordinator's side of the recorder: fire-and-forget records and durable receipts."""

    def __init__(self, recorder: Any, run_id: str):
        self.recorder = recorder
        self.run_id = run_id
        self.seconds = 0.0  # time spent waiting for receipts

    async def put(self, record: Any) -> None:
        await self.recorder.send(record)

    async def durable(self, *records: Any) -> None:
        """Commit records; after a recorder restart, waits for it and sends them again (a repeat is a no-op)."""
        t0 = time.monotonic()
        for attempt in range(2):
            try:
                with trio.fail_after(RECORD_DEADLINE):
                    await self.recorder.request(rec.Durable(records=list(records)))
                break
            except PeerDead:
                if attempt:
                    raise
                with trio.move_on_after(RECORD_DEADLINE):
                    while not self.recorder.peer_alive:
                        await trio.sleep(0.2)
        self.seconds += time.monotonic() - t0

    async def event(self, event: str, trial: str | None = None, /, **data: Any) -> None:
        await self.put(rec.EventRecord(run_id=self.run_id, event=event, at=time.time(), trial_id=trial, data=data))

    async def checkpoint(self, trial: str, checkpoint_id: str, label: str, workspace: Path, op_seq: int | None) -> Any:
        t0 = time.monotonic()
        with trio.fail_after(RECORD_DEADLINE):
            reply = await self.recorder.request(rec.CaptureCheckpoint(
                checkpoint_id=checkpoint_id, trial_id=trial, label=label, workspace=str(workspace), op_seq=op_seq))
        self.seconds += time.monotonic() - t0
        return reply.message


# --- what the database already holds for a series -----------------------------------------------


class SeriesHistory(msgspec.Struct, kw_only=True):
    """A series as recorded so far: where to go on, and what to restore."""

    recorded: bool  # the series row exists
    next_index: int  # first trial index still to run (T+1: all ended)
    kept: list[TrialView]  # ended attempts before next_index (their turns stay in the conversation)
    interrupted: TrialView | None  # the attempt of next_index to close and re-run
    next_attempt: int
    previous: dict[str, Any] | None  # figures of the trial before next_index, for its opening

    @classmethod
    def read(cls, reader: RunReader, series_id: str, trials: int) -> SeriesHistory:
        recorded = any(s.series_id == series_id for s in reader.series())
        views = reader.trials(series_id) if recorded else []
        by_index: dict[int, list[TrialView]] = {}
        for v in views:
            by_index.setdefault(v.start.index, []).append(v)
        kept: list[TrialView] = []
        next_index, interrupted, attempt = trials + 1, None, 0
        for index in range(1, trials + 1):
            attempts = by_index.get(index, [])
            kept_here = [a for a in attempts if a.end is not None and a.end.reason != "interrupted"]
            latest = attempts[-1] if attempts else None
            if latest is None:
                next_index, attempt = index, 0
                break
            if latest.end is None or latest.end.reason == "interrupted":
                next_index, interrupted, attempt = index, latest, latest.start.attempt + 1
                kept += kept_here
                break
            kept += kept_here
        previous = None
        before = [v for v in kept if v.start.index == next_index - 1]
        if before:
            end = before[-1].end
            previous = {"index": next_index - 1, "outcome": end.outcome, "reason": end.reason,
                        "control_steps": end.control_steps, "sim_time": end.sim_time, "active_time": end.active_time}
        return cls(recorded=recorded, next_index=next_index, kept=kept, interrupted=interrupted,
                   next_attempt=attempt, previous=previous)


def restore_workspace(reader: RunReader, run_dir: Path, history: SeriesHistory, dest: Path) -> str | None:
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
    restore(load_manifest(chosen.manifest), BlobStore(run_dir / "blobs"), dest)
    return chosen.checkpoint_id


def recorded_conversation(reader: RunReader, trial_ids: list[str]) -> tuple[list[Turn], dict[str, bytes]]:
    """The turns (in recorded order) and images of these trials, from the run's events."""
    wanted = set(trial_ids)
    turns: list[Turn] = []
    images: dict[str, bytes] = {}
    for _, event in reader.events():
        if event.trial_id not in wanted:
            continue
        if event.event == "turn":
            turns.append(turn_from_event(event.data))
        elif event.event == "image":
            images[event.data["digest"]] = base64.b64decode(event.data["data"])
    return turns, images


# --- a whole series -------------------------------------------------------------------------------


class Conversation:
    """What the context manager must hold for this series; rebuilt from the records when it does not.

    The context manager keeps the conversation in memory. If the supervisor restarts it, its
    archive no longer has the turns it acknowledged: the trial under way ends ``incomplete``
    and the next trial starts from the conversation rebuilt from the recorded turns.
    """

    def __init__(self, links: Links, plan: SeriesPlan, recording: Recording,
                 reader_factory: Callable[[], RunReader]):
        self.links = links
        self.plan = plan
        self.recording = recording
        self.reader_factory = reader_factory
        self.trial_ids: list[str] = []  # trials whose turns belong to the conversation
        self.expected = 0
        self.turn_number = 0
        self.lost = False

    def next_turn_number(self) -> int:
        self.turn_number += 1
        return self.turn_number

    async def reset(self, turns: list[Turn], images: dict[str, bytes]) -> None:
        context = self.links.context
        if context is None:
            return
        with trio.fail_after(SIM_DEADLINE):
            await context.request(ResetContext(series=self.plan.series_id))
            if turns:
                digests = list(images)
                await context.request(AppendTurns(turns=turns, image_digests=digests), [images[d] for d in digests])
        self.expected, self.lost = len(turns), False
        self.turn_number = max(self.turn_number, len(turns))

    async def append(self, turn: Turn, digests: list[str], blobs: list[bytes]) -> None:
        context = self.links.context
        if context is None:
            return
        with trio.fail_after(SIM_DEADLINE):
            state = (await context.request(AppendTurns(turns=[turn], image_digests=digests), blobs)).message
        self.expected += 1
        if getattr(state, "archived", self.expected) != self.expected:
            self.lost = True
            await self.recording.event("context_lost", None, series=self.plan.series_id, expected=self.expected,
                                       archived=state.archived)
            raise TrialIncomplete(f"infrastructure: the context manager holds {state.archived} turns, expected "
                                  f"{self.expected} (it was restarted); the conversation is rebuilt for the next trial")

    async def in_sync(self) -> bool:
        """Whether the context manager still holds every turn it acknowledged (False after a restart)."""
        if self.links.context is None:
            return True
        try:
            with trio.fail_after(SIM_DEADLINE):
                state = (await self.links.context.request(AppendTurns(turns=[]))).message
        except INFRA_ERRORS:
            return False
        return getattr(state, "archived", -1) == self.expected

    async def rebuild(self) -> None:
        """Reset the context manager to the recorded turns of ``trial_ids``."""
        with trio.fail_after(RECORD_DEADLINE):
            await self.links.recorder.request(rec.Flush())  # turns are sent fire-and-forget
        with self.reader_factory() as reader:
            turns, images = recorded_conversation(reader, self.trial_ids)
        await self.reset(turns, images)
        await self.recording.event("context_rebuilt", None, series=self.plan.series_id, turns=len(turns))


async def run_series(links: Links, plan: SeriesPlan, recording: Recording, progress: Progress,
                     reader_factory: Callable[[], RunReader]) -> list[rec.TrialEnded]:
    """Run (or continue) one series to its last trial; returns the ends recorded by this call."""
    run_dir = Path(plan.run_dir)
    with reader_factory() as reader:
        history = SeriesHistory.read(reader, plan.series_id, plan.trials)
        if not history.recorded:
            await recording.durable(rec.SeriesRecord(
                series_id=plan.series_id, run_id=plan.run_id, task=plan.task.id, model=plan.model, mode=plan.retain,
                trials=plan.trials, created_at=time.time(),
                pins={"budgets": msgspec.to_builtins(plan.budgets), "backend": plan.backend,
                      "fingerprint": plan.reference_fingerprint, "manifest_digest": plan.task.manifest_digest,
                      "seed": plan.seed}))
        progress.task, progress.series_id, progress.mode, progress.trials = plan.task.id, plan.series_id, plan.retain, plan.trials
        if history.next_index > plan.trials:
            return []
        workspace = fresh_dir(plan.workspace_dir())
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
                restored = restore_workspace(reader, run_dir, history, workspace)
                turns, images = recorded_conversation(reader, [v.trial_id for v in history.kept])
                await recording.event("series_resumed", None, series=plan.series_id, next_index=history.next_index,
                                      workspace_from=restored, turns=len(turns))
    if history.interrupted is not None:
        old = history.interrupted
        try:
            with trio.fail_after(BRIDGE_DEADLINE):
                await links.bridge.request(CloseTrial(trial=old.trial_id))
        except INFRA_ERRORS:
            pass  # a fresh bridge has nothing open
        if old.end is None:
            await recording.durable(rec.TrialEnded(trial_id=old.trial_id, outcome="incomplete", reason="interrupted",
                                                   control_steps=interrupted_steps, ended_at=time.time()))
        progress.say(f"trial {old.start.index} attempt {old.start.attempt} was interrupted: recorded incomplete, re-running")
    conversation = Conversation(links, plan, recording, reader_factory)
    conversation.trial_ids = [v.trial_id for v in history.kept] if plan.retain == "retain" else []
    await conversation.reset(turns, images)

    ends = []
    previous = history.previous
    recovers = history.interrupted.trial_id if history.interrupted is not None else None
    attempt = history.next_attempt
    for index in range(history.next_index, plan.trials + 1):
        await wait_alive(links)
        if plan.retain == "none":  # the fresh-context control: nothing carries over
            workspace = fresh_dir(plan.workspace_dir())
            conversation.trial_ids = []
            await conversation.reset([], {})
        elif conversation.lost or not await conversation.in_sync():
            await conversation.rebuild()
        progress.say(f"{plan.series_id}: trial {index}/{plan.trials} starts")
        runner = TrialRunner(links, plan, recording, progress, index=index, attempt=attempt, workspace=workspace,
                             recovers=recovers, conversation=conversation)
        ended = await runner.run(previous if plan.retain == "retain" else None)
        ends.append(ended)
        progress.say(f"{plan.series_id}: trial {index}/{plan.trials} {ended.outcome} ({ended.reason}), "
                     f"{ended.control_steps} steps, {ended.active_time:.1f} s active")
        previous = {"index": index, "outcome": ended.outcome, "reason": ended.reason, "control_steps": ended.control_steps,
                    "sim_time": ended.sim_time, "active_time": ended.active_time}
        recovers, attempt = None, 0
    return ends


async def wait_alive(links: Links, seconds: float = 120.0) -> float:
    """Wait (bounded) until every peer answers again, e.g. after the supervisor restarted one; returns seconds waited."""
    t0 = time.monotonic()
    with trio.move_on_after(seconds):
        while True:
            dead = [c for c in (links.sim, links.bridge, links.recorder, links.provider, links.context)
                    if c is not None and not getattr(c, "peer_alive", True)]
            if not dead:
                break
            await trio.sleep(0.2)
    waited = time.monotonic() - t0
    if waited > 0.5:
        log.info("peers_back", waited=round(waited, 2))
    return waited

