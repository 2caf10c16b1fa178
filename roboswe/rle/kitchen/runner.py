"""A speed-run's evaluation phase through the actors: the coordinator's side.

After the development session is sealed (roboswe/rle/run.py), the participant acts in the hidden kitchens
as it developed: the same provider client actor, its scripts in the sandbox bridge actor's sandbox around
the same workspace (RLE-Bench: both steps share /workspace), the simulator actor serving the phase
(protocol.sim.LoadEvaluation: family 01's ``EvaluationSim``, the hidden plan drawn there from the run's salt,
never sent anywhere). The session is one trial of its own one-trial series ``RUN_ID/TASK-evaluation`` with a
fresh conversation, under the ``evaluation`` interface: the coding agent's tools plus ``finish_trial`` and
``next_trial``, which ``EvaluationRunner`` forwards to the simulator (FinishTrial, NextTrial). Its step
budget is trials × trial_actions (the simulator counts each trial's own cap), each exec at most one trial's
actions; ``robot.reset()`` reaches the simulator, which refuses it. Then ``EndAttempt`` ends the phase there
(an open trial ends as it stands, trials never opened are failures) and answers ``evaluation.json``, and the
verifier process (verify.py, with ``PYTHONHASHSEED=0`` as the live trials) replays every trial and writes
the report.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import msgspec
import trio

from roboswe.evaluation.ends import TrialIncomplete
from roboswe.evaluation.feedback import OpResult, TrialMoved
from roboswe.evaluation.peers import INFRA_ERRORS, LOAD_DEADLINE
from roboswe.evaluation.trial import TrialRunner
from roboswe.protocol import participant as pp
from roboswe.protocol import sim as simp

from ..manifest import RleTask
from .evaluation import EVALUATION

INTERFACE = "evaluation"  # protocol.participant.INTERFACES
SCRIPT_SECONDS = 600.0


class EvaluationRunner(TrialRunner):
    """The evaluation session of ``task``: LoadEvaluation in place of a scene, the trial operations forwarded."""

    def __init__(self, *args: Any, task: RleTask, salt_file: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.task, self.salt_file = task, salt_file

    opens = "the evaluation phase"  # what the simulator opens, as an infrastructure failure names it

    def evaluation_load(self) -> simp.LoadEvaluation:
        return simp.LoadEvaluation(task=simp.encode_manifest(self.task), salt_file=self.salt_file)

    async def _load(self) -> simp.Loaded:
        try:
            loaded = (await self.links.sim.ask(self.evaluation_load(), simp.Loaded, LOAD_DEADLINE)).message
        except INFRA_ERRORS as e:
            raise TrialIncomplete("infrastructure", f"the simulator could not open {self.opens}: "
                                                    f"{type(e).__name__}: {e}") from None
        self._sim_compute = await self.links.sim.compute_seconds()
        return loaded

    async def _execute(self, op: pp.AnyOperation, seq: int) -> OpResult:
        if not isinstance(op, pp.FinishTrial | pp.NextTrial):
            return await super()._execute(op, seq)
        message = simp.FinishTrial() if isinstance(op, pp.FinishTrial) else simp.NextTrial()
        moved = (await self.links.sim.ask(message, simp.EvaluationTrial, LOAD_DEADLINE)).message  # NextTrial builds
        return OpResult(text=moved.text, feedback=TrialMoved(trial=moved.trial, open=moved.open))


def evaluation_plan(development: Any, task: RleTask) -> Any:
    """The development's plan as the evaluation's: its own series, the evaluation's tools and budgets."""
    from roboswe.evaluation.series_config import RLE_IDENTITY, Budgets

    k = task.kitchen
    budgets = Budgets(trial_steps=k.trials * k.trial_actions, trial_seconds=k.evaluate_seconds,
                      script_steps=k.trial_actions, script_seconds=min(SCRIPT_SECONDS, k.evaluate_seconds),
                      interface=INTERFACE, track="evaluation", identity=f"{RLE_IDENTITY}{task.protocol.version}")
    return msgspec.structs.replace(development, series_id=f"{development.series_id}-evaluation", budgets=budgets)


async def run_verifier(module: str, label: str, run_dir: Path, salt: str | None) -> Any:
    """A kitchen family's verifier as its own process (``python -m MODULE``, PYTHONHASHSEED=0 as the live trials);
    returns the RewardReport it wrote (raises RuntimeError when it could not verify)."""
    from ..rundir import read_report

    command = [sys.executable, "-m", module, str(run_dir), *(["--salt-file", salt] if salt else [])]
    env = {**os.environ, "PYTHONHASHSEED": "0", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = await trio.run_process(command, check=False, capture_stdout=True, capture_stderr=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"the {label} verifier failed (exit {proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return await trio.to_thread.run_sync(read_report, run_dir)


async def evaluate(run: Any, links: Any, task: RleTask, development: Any, workspace: Path, run_dir: Path) -> None:
    """The evaluation session in the hidden kitchens, its record from the simulator, the verifier's report."""
    from roboswe.evaluation.conversation import Conversation
    from roboswe.evaluation.series import series_record

    plan = evaluation_plan(development, task)
    await links.recorder.durable(series_record(plan))
    conversation = Conversation(plan.series_id, links.context, links.recorder, run.reader)
    await conversation.reset([], {})
    salt = run.config.rle.salt_file
    runner = EvaluationRunner(links, plan, run.progress, index=1, attempt=0, workspace=workspace, recovers=None,
                              conversation=conversation, task=task, salt_file=salt)
    run.progress.say(f"{plan.series_id}: evaluation in {task.kitchen.trials} hidden kitchens starts")
    ended = await runner.run(None)
    reply = await links.sim.ask(simp.EndAttempt(), simp.TaskRecord, LOAD_DEADLINE)
    (run_dir / EVALUATION).write_bytes(bytes(reply.blobs[reply.message.files[EVALUATION]]))
    # The session's own end (the participant finished, a budget ran out), not its score: the trials' results
    # are in evaluation.json, and the reward comes from the verifier's replay of them.
    run.progress.say(f"{plan.series_id}: evaluation session ended ({ended.reason}); replaying every trial")
    report = await run_verifier("roboswe.rle.kitchen.verify", "speed-run", run_dir, salt)
    await links.recorder.event("rle_report", ended.trial_id, **msgspec.to_builtins(report))
    run.progress.say(f"{report.task}: reward {report.reward:.4f} ({report.status})")
