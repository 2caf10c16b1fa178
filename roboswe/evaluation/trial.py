"""One trial of a series, carried out for real and recorded: its loop, its operations, its figures.

A trial loads a fresh scene and checks its fingerprint against the admitted reference
before the participant sees anything, opens a sandbox around the workspace, then asks for
one decision at a time and carries it out: files in the workspace, scripts in the sandbox
through the bridge, direct actions, observations and waits in the simulator. Every message,
operation, checkpoint and the outcome go to the recorder as they happen. Peers are reached
through their facades (``roboswe.evaluation.peers``); this module never touches a socket.

The operations share the trial's clock, budgets and timing (``TrialTiming``), so they stay here.
What the participant is shown of the scene (observations, the opening's goal and images) is
``roboswe.evaluation.observation``; what ended the trial, and the attribution rule that decides
it (participant-caused problems are failures, outside causes incomplete), is
``roboswe.evaluation.ends``: this module raises ``TrialIncomplete`` or lets a peer's error
through, and ``ends.incomplete_end`` gives the end its typed cause.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import structlog
import trio

from roboswe.actors import RemoteError
from roboswe.evaluation.actions import ActionEvidence, run_chunk
from roboswe.evaluation.conversation import Conversation, turn_event_data
from roboswe.evaluation.ends import (
    TrialEnd,
    TrialIncomplete,
    context_cause,
    incomplete_end,
    participant_end,
    provider_cause,
)
from roboswe.evaluation.feedback import (
    Acted,
    ExecOutcome,
    FileFeedback,
    Finished,
    OpResult,
    Refused,
    SandboxOpened,
    Searched,
    Waited,
    feedback_record,
)
from roboswe.evaluation.instructions import system_prompt, trial_opening
from roboswe.evaluation.observation import SceneView
from roboswe.evaluation.peers import INFRA_ERRORS, Links
from roboswe.evaluation.plan import SeriesPlan, trial_id
from roboswe.evaluation.progress import LastEnd, Progress
from roboswe.evaluation.task_record import end_argument, record_task_record
from roboswe.evaluation.workspace import WorkspaceError, check_relative, open_workspace
from roboswe.protocol import recorder as rec
from roboswe.protocol import sim as simp
from roboswe.protocol.participant import (
    INTERFACES,
    SEARCH_HISTORY,
    ActionOperation,
    AnyOperation,
    Decision,
    Exec,
    Finish,
    ImagePart,
    ListFiles,
    Observe,
    ReadFile,
    SearchHistory,
    TextPart,
    Turn,
    Wait,
    WriteFile,
    operation_name,
    result_turn,
)
from roboswe.protocol.provider import Decided, ProviderFailed
from roboswe.sim.physics_state import control_trace_from_states

log = structlog.get_logger()


class TrialRunner:
    """Runs one trial attempt to its end and records it; ``run`` never raises for trial failures."""

    def __init__(self, links: Links, plan: SeriesPlan, progress: Progress, *,
                 index: int, attempt: int, workspace: Path, recovers: str | None, conversation: Conversation):
        self.links = links
        self.plan = plan
        self.rec = links.recorder
        self.progress = progress
        self.index = index
        self.attempt = attempt
        self.trial_id = trial_id(plan.series_id, index, attempt)
        self.workspace_dir = workspace
        self.workspace = open_workspace(links, workspace)  # under RUN_DIR, or on the worker's node
        self.recovers = recovers
        self.conversation = conversation
        self._next_turn = conversation.next_turn_number
        self.seq = 0
        self.decisions = 0
        self.trace_seq = 0
        self.control_step = 0
        self.sim_time = 0.0
        self.success: simp.SuccessStatus | None = None
        self.recovery = 0.0
        self.started = 0.0
        self.timing = rec.TrialTiming()
        self.offered_search = False
        self.system = ""
        self.instruction = ""
        self.opened = False
        self._sim_compute = (0.0, 0.0)  # the simulator's (physics, rendering) seconds at the last reading
        self._recording_before = self.rec.seconds
        self.wall_started = 0.0
        self.after_load: Callable[[], Awaitable[None]] | None = None  # the series' hook: this trial's scene is loaded
        self.view = SceneView(links, self.trial_id, self.timing, self._sim_compute_since)
        self._message_id: str | None = None  # the provider attempt that decided the current operation
        self.overflow: dict[str, Any] | None = None  # OverflowEvidence (as builtins) when the context could not fit
        self.spec: simp.TaskSpec | None = None
        self.evidence = ActionEvidence()  # direct actions (actions interface): the evidence of a policy trial

    # -- figures

    def active_time(self) -> float:
        """Wall time since the participant got the trial's first message, minus infrastructure recovery (retry back-off)."""
        if not self.started:
            return 0.0
        return time.monotonic() - self.started - self.recovery

    def _update_progress(self, operation: str = "") -> None:
        self.progress.update(trial=self.index, steps_used=self.control_step, active_s=self.active_time(),
                             **({"operation": operation} if operation else {}))

    # -- entry point

    async def run(self, previous: dict[str, Any] | None) -> rec.TrialEnded:
        """Run the trial to its end; returns the recorded end (trial failures never raise)."""
        # bound_contextvars restores what was bound before (the fleet binds the series for the whole series).
        with structlog.contextvars.bound_contextvars(series=self.plan.series_id, trial=self.trial_id):
            return await self._run(previous)

    async def _run(self, previous: dict[str, Any] | None) -> rec.TrialEnded:
        self.wall_started = time.monotonic()
        self.progress.update(trial=self.index, operation="load", steps_used=0, steps_budget=self.plan.budgets.trial_steps,
                             active_budget_s=self.plan.budgets.trial_seconds)
        loaded, refused = await self._set_up()
        if refused is not None:  # nothing reached the participant
            await self._close_sandbox()
            return await self._end(refused)
        if self.after_load is not None:
            await self.after_load()  # e.g. stage the next trial's scene while this one runs
        self.conversation.trial_ids.append(self.trial_id)
        self.spec = loaded.spec
        self.system = system_prompt(loaded.spec, self.plan.budgets, self.plan.trials, self.plan.retain)
        self.instruction = loaded.spec.instruction
        try:
            async with self.links.interrupt_on_death():  # a peer that dies mid-trial, even one not asked, ends it
                await self._checkpoint("trial_start", None)
                await self._open(previous)
                self.started = time.monotonic()  # the active-time clock runs from the first participant input
                self.progress.active_clock = self.active_time
                end = await self._loop()
        except Exception as e:  # noqa: BLE001 - an outside cause or a harness bug: the attribution rule (ends.py) names it
            end = incomplete_end(e, self.trial_id)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._close_sandbox()
            raise
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._close_sandbox)  # removing the sandbox overlaps the trial's last records
            return await self._end(end)

    async def _set_up(self) -> tuple[simp.Loaded, TrialEnd | None]:
        """Load the scene and open the sandbox side by side, check the fingerprint and record the start.

        Returns the loaded scene and None, or the incomplete end when the trial cannot reach the participant.
        """
        loaded, failure, opening = None, None, None
        try:
            async with trio.open_nursery() as nursery:

                async def open_sandbox() -> None:
                    nonlocal opening
                    try:
                        await self._open_sandbox()
                    except INFRA_ERRORS as e:
                        opening = e

                nursery.start_soon(open_sandbox)  # the sandbox starts while the scene is built
                try:
                    loaded = await self._load()
                except TrialIncomplete as e:
                    failure = incomplete_end(e, self.trial_id)
                else:
                    if loaded.fingerprint.digest == self.plan.reference_fingerprint:
                        await self.view.prefetch_opening()  # while the sandbox may still be starting (docker)
            if failure is None and loaded.fingerprint.digest != self.plan.reference_fingerprint:
                failure = TrialEnd("incomplete", "fingerprint_mismatch",
                                   f"the fresh scene's fingerprint {loaded.fingerprint.digest[:16]} "
                                   f"differs from the admitted reference {self.plan.reference_fingerprint[:16]}")
                await self.rec.event("fingerprint_mismatch", self.trial_id, got=loaded.fingerprint.digest,
                                     expected=self.plan.reference_fingerprint, versions=loaded.fingerprint.versions)
            await self.rec.durable(self._start_record(loaded.fingerprint.digest if loaded is not None else ""))
            if failure is None and opening is not None:
                failure = incomplete_end(TrialIncomplete(
                    "infrastructure", f"the sandbox could not be opened: {type(opening).__name__}: {opening}"), self.trial_id)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._close_sandbox()
            raise
        assert loaded is not None or failure is not None
        return loaded, failure  # type: ignore[return-value]

    def _start_record(self, fingerprint: str) -> rec.TrialStarted:
        return rec.TrialStarted(trial_id=self.trial_id, series_id=self.plan.series_id, index=self.index,
                                attempt=self.attempt, fingerprint=fingerprint, started_at=time.time(),
                                recovers=self.recovers)

    async def _load(self) -> simp.Loaded:
        t0 = time.monotonic()
        try:
            loaded = await self.links.sim.load(self.plan.manifest, self.plan.seed, self.plan.budgets.trial_steps)
        except INFRA_ERRORS as e:
            raise TrialIncomplete("infrastructure", f"the simulator could not load the scene: {type(e).__name__}: {e}") from None
        self.timing.load += time.monotonic() - t0
        self._sim_compute = await self.links.sim.compute_seconds()
        return loaded

    async def _sim_compute_since(self) -> float:
        """Physics + rendering seconds the simulator spent since the last call (added to timing)."""
        now = await self.links.sim.compute_seconds()
        physics, rendering = (max(0.0, a - b) for a, b in zip(now, self._sim_compute))
        self.timing.physics += physics
        self.timing.rendering += rendering
        self._sim_compute = now
        return physics + rendering

    async def _open_sandbox(self) -> None:
        t0 = time.monotonic()
        opened = await self.links.bridge.open(self.trial_id, self.workspace.where, self.plan.backend, self.plan.limits())
        self.opened = True
        self.timing.sandbox_open = time.monotonic() - t0  # overlaps the scene load
        facts = SandboxOpened(backend=opened.backend, image_digest=opened.image_digest, budgets=self.plan.budgets,
                              seed=self.plan.seed)
        await self.rec.event("trial_opened", self.trial_id, **facts.event_data())

    async def _close_sandbox(self) -> None:
        if not self.opened:
            return
        self.opened = False
        try:
            await self.links.bridge.close(self.trial_id)
        except INFRA_ERRORS as e:
            log.warning("close_trial_failed", trial=self.trial_id, error=str(e))

    async def _checkpoint(self, label: str, op_seq: int | None) -> None:
        cid = f"{self.trial_id}/c{'start' if op_seq is None else op_seq}"
        captured = await self.workspace.checkpoint(self.trial_id, cid, label, op_seq)
        if captured.refused:
            await self.rec.event("checkpoint_refused_entries", self.trial_id, checkpoint=cid, refused=captured.refused)

    async def _take_states(self) -> None:
        states = await self.links.sim.take_states()
        if states is None:
            return
        trace = control_trace_from_states(self.trial_id, self.trace_seq, states)
        self.trace_seq += 1
        await self.rec.record(trace)

    # -- conversation

    async def _append(self, turn: Turn, images: list[tuple[ImagePart, bytes]] = ()) -> None:
        t0 = time.monotonic()
        digests = [part.digest for part, _ in images]
        for part, data in images:
            await self.rec.event("image", self.trial_id, digest=part.digest, camera=part.camera,
                                 media_type=part.media_type, data=base64.b64encode(data).decode())
        await self.rec.event("turn", self.trial_id, **turn_event_data(turn))
        await self.conversation.append(turn, digests, [data for _, data in images])
        self.timing.context += time.monotonic() - t0

    # -- the decision loop

    async def _loop(self) -> TrialEnd:
        budgets = self.plan.budgets
        while True:
            self._update_progress()
            if self.active_time() >= budgets.trial_seconds:
                return self._outcome("time_budget")
            decision = await self._decide(budgets.trial_seconds - self.active_time())
            if decision is None:
                return self._outcome("time_budget")
            op = decision.operation
            name = operation_name(op) if op is not None else "invalid"
            self._update_progress(name)
            seq, self.seq = self.seq, self.seq + 1
            started_wall, step_start = time.time(), self.control_step
            if op is None:
                result = OpResult(text=f"Your reply could not be used as an operation: {decision.invalid} "
                                       "Reply with exactly one tool call.", error=True,
                                  feedback=Refused(error=decision.invalid or ""))
            else:
                result = await self._execute(op, seq)
            arguments = (msgspec.to_builtins(op) if op is not None else
                         {"tool_calls": [msgspec.to_builtins(c) for c in decision.turn.tool_calls()]})
            if isinstance(arguments, dict):
                arguments.pop("op", None)
            await self.rec.record(rec.OperationRecord(
                trial_id=self.trial_id, seq=seq, operation=name, arguments=arguments,
                feedback=feedback_record(result.feedback, is_error=result.error, text=result.text),
                step_start=step_start, step_end=max(step_start, result.step_end if result.step_end is not None else step_start),
                started_at=started_wall, ended_at=time.time(), message_id=self._message_id))
            if isinstance(op, WriteFile) and not result.error:
                await self._checkpoint("after_write", seq)
            elif isinstance(op, Exec) and isinstance(result.feedback, ExecOutcome):
                await self._checkpoint("after_exec", seq)  # the script ran: it may have changed files, even if it failed
            turn = result_turn(decision, id=f"{self.trial_id}/u{self._next_turn()}", text=result.text,
                               images=[part for part, _ in result.images], is_error=result.error, trial=self.index)
            await self._append(turn, result.images)
            self._update_progress()
            if isinstance(op, Finish):
                return self._outcome("finish")
            if result.success:
                return participant_end("success_interval", True)
            if self.control_step >= budgets.trial_steps:
                return self._outcome("step_budget")
            if budgets.decision_calls is not None and self.decisions >= budgets.decision_calls:
                return self._outcome("decision_budget")

    def _outcome(self, cause: rec.ParticipantCause) -> TrialEnd:
        return participant_end(cause, self.success is not None and self.success.achieved)

    async def _decide(self, time_left: float) -> Decision | None:
        """One decision, or None when the active-time budget ran out while waiting for it."""
        context, provider = self.links.context, self.links.provider
        assert context is not None and provider is not None, "a run links the context manager and the provider client"
        t0 = time.monotonic()
        try:
            prepared, images = await context.prepare(self.system, self.index, self.plan.budgets.interface)
        except RemoteError as e:
            if e.error.code == "context_overflow":
                # The evidence (budget, size, the exchanges that could not leave) goes into the records: the
                # series stops on it (series.py), and a reader must see why without the context manager's log.
                raw = (e.error.data or {}).get("evidence")
                self.overflow = msgspec.json.decode(raw) if isinstance(raw, str) else {}
                await self.rec.event("context_overflow", self.trial_id, detail=e.error.detail, **self.overflow)
            cause = context_cause(e.error.code)
            raise TrialIncomplete(cause, e.error.detail if cause == e.error.code else f"{e.error.code}: {e.error.detail}") from None
        self.timing.context += time.monotonic() - t0
        self.offered_search = any(t.name == SEARCH_HISTORY for t in prepared.request.tools)
        if prepared.slide is not None:
            s = prepared.slide
            await self.rec.record(rec.SlideRecord(trial_id=self.trial_id, seq=s.number, at=s.at, removed=s.removed_turn_ids,
                                               before_units=s.before_units, after_units=s.after_units, method=s.method))
            await self.rec.event("context_slide", self.trial_id, **msgspec.to_builtins(s))
        await self.rec.event("request_count", self.trial_id, **msgspec.to_builtins(prepared.count))
        request = msgspec.structs.replace(prepared.request, series=self.plan.series_id)
        n, self.decisions = self.decisions, self.decisions + 1
        t0 = time.monotonic()
        reply = await provider.decide(request, prepared.image_digests, images, within=time_left)
        self.timing.provider += time.monotonic() - t0
        match reply:
            case None:
                await self.rec.event("decision_cut_by_time_budget", self.trial_id, decision=n)
                return None
            case ProviderFailed(detail=detail, reason=reason, attempts=attempts):
                await self._record_attempts(n, attempts, None)
                self.recovery += sum(a.backoff_s for a in attempts)
                raise TrialIncomplete(provider_cause(reason), detail)
            case Decided(decision=decision):
                self.recovery += sum(a.backoff_s for a in decision.attempts)
                self.timing.provider_http += sum(a.latency_s for a in decision.attempts)
                await self._record_attempts(n, decision.attempts, decision)
                await self._append(decision.turn)
                await context.record_usage(decision.usage)
                return decision
        raise AssertionError(f"unreachable: {reply!r}")

    async def _record_attempts(self, n: int, attempts: list, decision: Decision | None) -> None:
        self._message_id = None
        for a in attempts:
            mid = f"{self.trial_id}/d{n}.{a.number}"
            ok = a.outcome == "ok"
            message = rec.MessageRecord(
                message_id=mid, trial_id=self.trial_id, attempt=a.number,
                provider=self._provider_kind(decision), model=(decision.model if decision else "") or "",
                request=a.request, response=a.response if (a.response or ok) else None,
                requested_at=a.started_at, responded_at=a.started_at + a.latency_s, latency=a.latency_s,
                usage=msgspec.to_builtins(decision.usage) if decision is not None and ok else {},
                error="" if ok else f"{a.outcome}: {a.detail}"[:2000])
            await self.rec.record(message)
            self.progress.provider_call(message.provider, message.response, message.usage, message.error)
            if ok:
                self._message_id = mid

    def _provider_kind(self, decision: Decision | None) -> str:
        if decision is not None and decision.turn.provider:
            return decision.turn.provider
        return self.plan.model.split(":", 1)[0]

    # -- operations

    async def _execute(self, op: AnyOperation, seq: int) -> OpResult:
        name, offered = operation_name(op), INTERFACES[self.plan.budgets.interface]
        if name not in offered:  # a local participant can return any operation, offered or not
            msg = (f"{name} is not offered in this series (interface {self.plan.budgets.interface!r}); "
                   f"the operations are: {', '.join(offered)}")
            return OpResult(text=msg, error=True, feedback=Refused(error=msg))
        try:
            match op:
                case WriteFile(path=path, content=content):
                    size = await self.workspace.write(path, content)
                    return OpResult(text=f"Wrote {size} bytes to {path}.", feedback=FileFeedback(bytes=size))
                case ReadFile(path=path):
                    text, size = await self.workspace.read(path)
                    if size > len(text.encode("utf-8", errors="replace")):
                        text += f"\n[... cut: the file has {size} bytes]"
                    return OpResult(text=text, feedback=FileFeedback(bytes=size))
                case ListFiles():
                    return OpResult(text=await self.workspace.listing_text())
                case Exec(path=path):
                    return await self._exec(path)
                case Observe(cameras=cameras, depth=depth):
                    return await self.view.observe(cameras, depth)
                case Wait(steps=steps):
                    return await self._wait(steps)
                case SearchHistory(query=query):
                    return await self._search(query)
                case ActionOperation():
                    return await self._act(op)
                case Finish(reason=reason):
                    return OpResult(text="Trial finished.", feedback=Finished(reason=reason))
        except WorkspaceError as e:
            return OpResult(text=str(e), error=True, feedback=Refused(error=str(e)))
        return OpResult(text=f"unknown operation {type(op).__name__}", error=True, feedback=Refused(error="unknown"))

    async def _after_motion(self) -> simp.SuccessStatus:
        status = await self.links.sim.success()
        self.success = status
        self.control_step, self.sim_time = status.control_step, status.sim_time
        await self._take_states()
        return status

    async def _exec(self, path: str) -> OpResult:
        check_relative(path)
        await self.workspace.read(path, 1)  # exists and is a regular file
        await self._sim_compute_since()
        t0 = time.monotonic()
        # The path was checked above, so a refusal from the bridge (e.g. it lost the trial) is infrastructure.
        fb = await self.links.bridge.exec(self.trial_id, path, self.plan.budgets.script_seconds)
        rtt = time.monotonic() - t0
        self.timing.script_sim += await self._sim_compute_since()  # physics + rendering the script asked for
        self.timing.execution += fb.wall_seconds
        self.timing.transport += max(0.0, rtt - fb.wall_seconds)
        status = await self._after_motion()
        feedback = ExecOutcome.of(fb, success_after=status.achieved)
        lines = [(f"exit status {fb.exit_status}; {fb.steps} control steps (trial total {status.control_step} of "
                  f"{self.plan.budgets.trial_steps}); {fb.wall_seconds:.2f} s")]
        if fb.limit:
            lines.append(f"stopped at the script's {fb.limit} limit")
        if fb.exception:
            lines.append(f"exception: {fb.exception.type}: {fb.exception.message}")
        if fb.refused:
            lines.append(f"{fb.refused} robot request(s) refused by the bridge")
        lines.append("--- stdout" + (" (cut)" if fb.stdout_truncated else "") + "\n" + fb.stdout)
        lines.append("--- stderr" + (" (cut)" if fb.stderr_truncated else "") + "\n" + fb.stderr)
        return OpResult(text="\n".join(lines), error=fb.exit_status != 0 and fb.limit is None, feedback=feedback,
                        step_end=status.control_step, success=status.achieved)

    async def _open(self, previous: dict[str, Any] | None) -> None:
        """The trial's first message: the instruction, the task's goal images, the current camera images
        and sensor readings, after the previous outcome; the interface itself is in the pinned instructions."""
        goal, (obs, images, lines, _) = await self.view.opening()
        text = trial_opening(self.index, self.plan.trials, previous, instruction=self.instruction,
                             cameras=[im.camera for im in obs.images], sensors=lines,
                             interface=self.plan.budgets.interface,
                             goal=[f"{part.camera}, {part.width}x{part.height} PNG" for part, _ in goal])
        parts: list[Any] = [TextPart(text=text), *(part for part, _ in goal), *(part for part, _ in images)]
        await self._append(Turn(id=f"{self.trial_id}/u{self._next_turn()}", role="user", trial=self.index, parts=parts),
                           goal + images)

    async def _wait(self, steps: int) -> OpResult:
        # `steps` is within the tool schema's maximum; the simulator bounds it by the steps left before any work
        # (sim/backend.py ControlLoop.wait) and says "trial_budget" when it asked for more than were left.
        await self._sim_compute_since()
        t0 = time.monotonic()
        result = await self.links.sim.wait(steps)
        self.timing.waits += time.monotonic() - t0
        await self._sim_compute_since()
        status = await self._after_motion()
        text = f"waited {result.applied} control steps (trial total {status.control_step} of {self.plan.budgets.trial_steps})"
        if result.stopped == "trial_budget":
            text += f"; the trial's step budget is used up (asked for {steps}, {result.applied} were left)"
        return OpResult(text=text, feedback=Waited(applied=result.applied, stopped=result.stopped, success_after=status.achieved),
                        step_end=status.control_step, success=status.achieved)

    async def _act(self, op: ActionOperation) -> OpResult:
        """Execute a chunk through the simulator (roboswe/evaluation/actions.py); the result is the observation after it."""
        assert self.spec is not None
        call, step_start, name, one = self.decisions - 1, self.control_step, operation_name(op), type(op).one_action
        await self._sim_compute_since()
        run = await run_chunk(self.links.sim, self.spec, op.chunk(), self.plan.budgets.action_prefix, one_action=one)
        self.timing.script_sim += await self._sim_compute_since()
        if run.refused:
            text = f"{name} refused, nothing executed: {run.problem}"
            if one:  # the harness's own check: the scene never saw it
                text += " (rows are the waypoints as [x, y, z, qx, qy, qz, qw, duration_s]; not sent, not counted as an action)"
            if self.control_step:  # the sim may have rejected a row after none ran; keep the trace current
                await self._after_motion()
            return OpResult(text=text, error=True, feedback=Refused(error=run.problem))
        status = await self._after_motion()
        self.evidence.accepted(run, status, call)
        if one:
            lines = [(f"{name}: one action of {run.requested} rows; {run.controls} control steps ran; stopped: {run.stopped}; "
                      f"control step {status.control_step} of {self.plan.budgets.trial_steps}")]
            lines.append(await self.view.account() or (f"rejected: {run.problem}" if run.problem else ""))
        else:
            lines = [f"executed {run.executed} of {run.requested} actions" +
                     (f" (at most the first {run.executable} run per call)" if run.executable < run.requested else "") +
                     f"; stopped: {run.stopped}; control step {status.control_step} of {self.plan.budgets.trial_steps}"]
            if run.problem:
                lines.append(f"action {run.executed} was rejected: {run.problem}")
        result = await self.view.observe(None, False)
        lines.append(result.text)
        return OpResult(text="\n".join(line for line in lines if line), error=bool(run.problem), images=result.images,
                        feedback=Acted(requested=run.requested, executable=run.executable, executed=run.executed,
                                       stopped=run.stopped, step_start=step_start, success_after=status.achieved,
                                       call=call, controls=run.controls, one_action=one),
                        step_end=status.control_step, success=status.achieved)

    async def _search(self, query: str) -> OpResult:
        if not self.offered_search:
            msg = "search_history is offered only after the first context slide; nothing has been archived yet"
            return OpResult(text=msg, error=True, feedback=Refused(error=msg))
        assert self.links.context is not None
        try:
            found = await self.links.context.search(query)
        except RemoteError as e:
            return OpResult(text=e.error.detail, error=True, feedback=Refused(error=e.error.detail))
        return OpResult(text=found.text, feedback=Searched(hits=len(found.hits)))

    # -- the end

    async def _end(self, end: TrialEnd) -> rec.TrialEnded:
        status = self.success
        try:
            with trio.CancelScope(shield=True):
                if self.control_step or self.seq:
                    # Before the success query: a family may finalize on the end (RoboPaint saves the canvas).
                    await record_task_record(self.links, self.trial_id, self.index, end_argument(end.outcome, end.reason))
                    status = await self.links.sim.success()
                    self.control_step, self.sim_time = status.control_step, status.sim_time
                    await self._take_states()
                    await self._sim_compute_since()
        except INFRA_ERRORS as e:
            log.warning("trial_end_query_failed", trial=self.trial_id, error=str(e))
        if end.outcome == "failure" and status is not None and status.achieved:
            end = TrialEnd("success", end.cause, end.detail)  # the interval was reached during the last operation
        interval = None
        if status is not None and status.achieved and status.achieved_step is not None:
            interval = (status.achieved_step - status.interval + 1, status.achieved_step)
        if self.plan.budgets.interface == "actions":
            with trio.CancelScope(shield=True):
                await self.rec.event("action_evidence", self.trial_id, **self.evidence.figures(
                    self.plan.budgets, policy_calls=self.decisions, controls=self.control_step))
        self.timing.recovery = self.recovery
        self.timing.recording = self.rec.seconds - self._recording_before
        self.timing.wall = time.monotonic() - self.wall_started
        active = self.active_time()
        ended = rec.TrialEnded(
            trial_id=self.trial_id, outcome=end.outcome, reason=end.reason, cause=end.cause, detail=end.detail,
            control_steps=self.control_step, sim_time=self.sim_time, active_time=active, timing=self.timing.record(),
            success_interval=interval if end.outcome != "incomplete" else None, ended_at=time.time())
        with trio.CancelScope(shield=True):
            await self.rec.durable(ended)
        log.info("trial_ended", outcome=end.outcome, cause=end.cause, reason=end.reason, control_steps=self.control_step,
                 operations=self.seq, active_s=round(active, 3), wall_s=round(self.timing.wall, 3), success_interval=interval)
        self.progress.active_clock = None
        self.progress.trial_ended()
        self.progress.update(active_s=active, last_outcome=f"trial {self.index}: {end.outcome} ({end.reason})",
                             last_end=LastEnd(trial=self.index, outcome=end.outcome, cause=end.cause, detail=end.detail))
        return ended
