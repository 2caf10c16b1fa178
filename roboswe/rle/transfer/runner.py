"""A harness-transfer run's fresh agents through the actors: the coordinator's side.

After the development session on the practice composites is sealed (roboswe/rle/run.py: the same
development as every RLE family's, ``DEVELOPMENT_SCENES["transfer"]``), each fresh agent, agent_1..agent_n
with the sealed harness and control_1..control_n with nothing, is its own attempt: its own one-trial
series ``RUN_ID/TASK-<agent>`` with ``retain = none`` and a NEW conversation (the same provider client
actor, a new context: a hosted model starts a fresh conversation, nothing of the developer's or of
another agent's), a new workspace holding only the restored sealed harness or nothing (roboswe/rle/fresh.py),
removed after the attempt, and the held-out composite in its hidden kitchen served by the simulator
actor (protocol.sim.LoadEvaluation naming the attempt: family 02's ``TransferTrialSim``, drawn there from
the run's salt, never sent anywhere), under the ``evaluation`` interface (``finish_trial`` forwarded as
FinishTrial). ``EndAttempt`` ends it there and answers its stage record, written on the simulator's side.
The coordinator gathers the records into transfer.json and runs the verifier process (verify.py, with
``PYTHONHASHSEED=0`` as the live trials), which writes the report. The recorder records each attempt's
operations, turns and provider messages like any trial's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import trio

from roboswe.evaluation.peers import LOAD_DEADLINE
from roboswe.protocol import sim as simp

from ..kitchen.runner import INTERFACE, EvaluationRunner, run_verifier
from ..manifest import RleTask
from .trial import STAGE_RECORD, TRANSFER, StageRecord, TransferRecord, attempt_kitchen

SCRIPT_SECONDS = 600.0


class AttemptRunner(EvaluationRunner):
    """One fresh agent's attempt: LoadEvaluation naming it (its kitchen, its workspace's handoff digest)."""

    def __init__(self, *args: Any, fresh_agent: str, handoff_digest: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fresh_agent, self.handoff_digest = fresh_agent, handoff_digest
        self.opens = f"{fresh_agent}'s trial"

    def evaluation_load(self) -> simp.LoadEvaluation:
        return msgspec.structs.replace(super().evaluation_load(), attempt=self.fresh_agent,
                                       handoff_digest=self.handoff_digest)


def attempt_names(task: RleTask) -> list[str]:
    """agent_1..agent_n (the sealed harness), then control_1..control_n (an empty workspace) when the manifest has a control."""
    n = task.transfer.agents
    return [f"agent_{k}" for k in range(1, n + 1)] + ([f"control_{k}" for k in range(1, n + 1)] if task.transfer.control else [])


def attempt_plan(development: Any, task: RleTask, name: str) -> Any:
    """The development's plan as one fresh agent's: its own series, retain none, the attempt's tools and caps."""
    from roboswe.evaluation.series_config import RLE_IDENTITY, Budgets

    r = task.transfer
    budgets = Budgets(trial_steps=r.agent_actions, trial_seconds=r.agent_seconds, script_steps=r.agent_actions,
                      script_seconds=min(SCRIPT_SECONDS, r.agent_seconds), interface=INTERFACE, track="evaluation",
                      identity=f"{RLE_IDENTITY}{task.protocol.version}")
    return msgspec.structs.replace(development, series_id=f"{development.series_id}-{name}", budgets=budgets,
                                   retain="none")


async def run_attempt(run: Any, links: Any, task: RleTask, development: Any, run_dir: Path, name: str) -> tuple[StageRecord, str]:
    """One fresh agent: a new conversation, a new workspace (the sealed harness or nothing), its trial, its stage
    record from the simulator (and the plan commitment it ran on)."""
    from roboswe.evaluation.conversation import Conversation
    from roboswe.evaluation.plan import fresh_dir
    from roboswe.evaluation.series import series_record
    from roboswe.sandbox.walk import remove_tree

    from ..fresh import restore_sealed

    plan = attempt_plan(development, task, name)
    await links.recorder.durable(series_record(plan))
    conversation = Conversation(plan.series_id, links.context, links.recorder, run.reader)
    await conversation.reset([], {})  # a fresh context: nothing of the developer's, nor of another agent's
    workspace = fresh_dir(plan.workspace_dir())
    try:
        arm, _ = attempt_kitchen(task, name)
        handoff = await trio.to_thread.run_sync(restore_sealed, run_dir, workspace) if arm == "harness" else ""
        runner = AttemptRunner(links, plan, run.progress, index=1, attempt=0, workspace=workspace, recovers=None,
                               conversation=conversation, task=task, salt_file=run.config.rle.salt_file,
                               fresh_agent=name, handoff_digest=handoff)
        ended = await runner.run(None)
        reply = await links.sim.ask(simp.EndAttempt(), simp.TaskRecord, LOAD_DEADLINE)
    finally:
        remove_tree(workspace)  # what the attempt wrote goes with it: nothing passes to the next
    record = msgspec.json.decode(bytes(reply.blobs[reply.message.files[STAGE_RECORD]]), type=StageRecord)
    # the stage record in the run database too (its rows are in transfer.json): how the trusted side graded the trial
    await links.recorder.event("rle_transfer_attempt", ended.trial_id, attempt=name, arm=record.arm, ended=record.ended,
                               actions=len(record.rows), success=record.success, stages=list(record.stages),
                               reset=list(record.reset), changes=msgspec.to_builtins(record.changes),
                               handoff_digest=record.handoff_digest)
    run.progress.say(f"{plan.series_id}: {record.ended} after {len(record.rows)} actions ({ended.reason})")
    return record, reply.message.data["plan_commitment"]


async def transfer(run: Any, links: Any, task: RleTask, development: Any, run_dir: Path, trial_id: str) -> None:
    """Every fresh agent's attempt, transfer.json from their stage records, the verifier's report (also an
    ``rle_report`` event of the development trial ``trial_id``)."""
    trials, commitments = [], set()
    for name in attempt_names(task):
        record, commitment = await run_attempt(run, links, task, development, run_dir, name)
        trials.append(record)
        commitments.add(commitment)
    if len(commitments) != 1:
        raise RuntimeError(f"the fresh agents' trials ran on {len(commitments)} plans")
    record = TransferRecord(task=task.id, heldout=task.transfer.heldout.name, plan_commitment=commitments.pop(),
                            trials=tuple(trials))
    (run_dir / TRANSFER).write_bytes(msgspec.json.encode(record))
    report = await run_verifier("roboswe.rle.transfer.verify", "transfer", run_dir, run.config.rle.salt_file)
    await links.recorder.event("rle_report", trial_id, **msgspec.to_builtins(report))
    control = next(c.value for c in report.components if c.name == "control")
    run.progress.say(f"{report.task}: reward {report.reward:.4f}, control {control:.4f} ({report.status})")
