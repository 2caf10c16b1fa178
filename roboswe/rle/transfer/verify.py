"""Family 02's verifier: the reward report from committed evidence only.

It reads what the trusted side committed (task.json, sealed.json, ledger.jsonl, transfer.json), never
an agent-written score. Gates (reward 0): the development ledger missing, not chaining, over the
75,000-step cap or not sealed over the sealed harness (family 01's ledger check); no transfer record;
the record's plan commitment not the salt's plan; a harness agent whose restored workspace was not the
sealed harness, or a control agent whose workspace was not empty (``handoff``); a trial recorded
against other stages than the held-out composite's, or whose success flag its own stage changes do not
bear out (``stages``). Each trial's best vector and success are re-derived from its recorded stage
changes; with ``replay`` each reached trial is also rebuilt from the plan and its rows re-applied, and
must reach the same stage changes and physics states. Then (rules.py)

    reward = mean over the planned agents of trial_score (1 for success, else stage credit; missing 0),

with the control arm's mean reported beside it (``control``), never in it.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import msgspec

from .. import rundir
from ..kitchen.evaluation import state_sha256
from ..kitchen.plan import HiddenKitchen, HiddenPlan
from ..kitchen.verify import _ledger as ledger_verdict
from ..kitchen.verify import reproduce, sealed_digest, verifier_main
from ..manifest import RleTask, task_digest
from ..report import Component, Gate, RewardReport
from ..seeds import Salt, protocol_id
from .plan import hidden_plan, plan_from_seeds
from .rules import trial_score, transfer_reward
from .scene import CompositeScene
from .trial import TRANSFER, StageChange, StageRecord, TransferRecord, best_vector


def read_record(run_dir: Path) -> TransferRecord:
    return msgspec.json.decode((Path(run_dir) / TRANSFER).read_bytes(), type=TransferRecord)


def replay_trial(task: RleTask, kitchen: HiddenKitchen, trial: StageRecord) -> list[str]:
    """Rebuild the trial's kitchen and re-apply its rows: the differences from its record."""
    scene = CompositeScene(task.transfer.heldout, steps=task.transfer.agent_actions, kitchen=kitchen)
    try:
        scene.load(kitchen.seed)
        diffs = [] if state_sha256(scene) == trial.initial_sha256 else [f"{trial.agent}: another initial state"]
        last, changes = scene.stages(), []
        if last != trial.reset:
            diffs.append(f"{trial.agent}: another stage vector at reset")
        for n, row in enumerate(trial.rows[: task.transfer.agent_actions], 1):
            scene.step(list(row))
            if (now := scene.stages()) != last:
                changes.append(StageChange(step=n, stages=now))
                last = now
        if tuple(changes) != trial.changes:
            diffs.append(f"{trial.agent}: the replay's stage changes differ from the record")
        if state_sha256(scene) != trial.final_sha256:
            diffs.append(f"{trial.agent}: the replayed physics ends elsewhere")
        return diffs
    finally:
        scene.close()


def _trial_gate(task: RleTask, trial: StageRecord, sealed: str | None) -> str | None:
    rules = task.transfer
    if trial.stages != rules.heldout.stages or len(trial.reset) != len(rules.heldout.stages):
        return f"{trial.agent}: recorded against stages {list(trial.stages)}, not the held-out composite's"
    if any(len(c.stages) != len(trial.stages) for c in trial.changes):
        return f"{trial.agent}: a stage change of the wrong length"
    confirmed = all(trial.reset) or any(all(c.stages) for c in trial.changes)
    if trial.success != confirmed:
        return f"{trial.agent}: success {trial.success} is not what its stage changes show"
    if not 0 <= trial.kitchen < rules.agents:
        return f"{trial.agent}: kitchen {trial.kitchen} is not in the plan"
    expected = sealed if trial.arm == "harness" else ""
    if trial.handoff_digest != expected:
        what = "the sealed harness" if trial.arm == "harness" else "an empty workspace"
        return f"{trial.agent}: its workspace was not {what} (handoff {trial.handoff_digest[:16] or 'empty'})"
    return None


def _gates(task: RleTask, record: TransferRecord, plan: HiddenPlan, sealed: str | None) -> list[Gate]:
    if record.plan_commitment != plan.commitment:
        return [Gate(name="plan", reason="the trials ran on another plan than the salt draws")]
    names = [t.agent for t in record.trials]
    if len(set(names)) != len(names):
        return [Gate(name="evaluation", reason="an agent is recorded twice")]
    gates = []
    for trial in record.trials:
        if (why := _trial_gate(task, trial, sealed)) is not None:
            gates.append(Gate(name="handoff" if "workspace" in why else "stages", reason=why))
    return gates


def arm_scores(task: RleTask, record: TransferRecord | None, arm: str) -> list[float | None]:
    """Each planned agent's trial score in this arm, by kitchen (None: no trial recorded)."""
    scores: list[float | None] = [None] * task.transfer.agents
    for t in record.trials if record else ():
        if t.arm == arm and t.ended != "unreached" and 0 <= t.kitchen < len(scores):
            if len(t.reset) != len(task.transfer.heldout.stages):
                raise ValueError(f"{t.agent}: a reset vector of {len(t.reset)} stages")
            scores[t.kitchen] = trial_score(t.reset, best_vector(t), t.success)
    return scores


def verify_run(run_dir: Path, salt: Salt) -> RewardReport:
    task = rundir.read_task(run_dir)
    return verify_plan(run_dir, task, hidden_plan(task, salt))[0]


def verify_plan(run_dir: Path, task: RleTask, plan: HiddenPlan, *, replay: bool = False) -> tuple[RewardReport, list[str]]:
    started = time.monotonic()
    verdict, ledger_gate = ledger_verdict(run_dir, task)
    gates = [Gate(name="ledger", reason=ledger_gate)] if ledger_gate else []
    sealed = sealed_digest(run_dir)
    try:
        record: TransferRecord | None = read_record(run_dir)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as e:
        record, gates = None, [*gates, Gate(name="evaluation", reason=f"no transfer record: {e}")]
    diffs: list[str] = []
    if record is not None and not gates:
        gates += _gates(task, record, plan, sealed)
        if replay and not gates:
            for t in record.trials:
                diffs += replay_trial(task, plan.kitchens[t.kitchen], t) if t.ended != "unreached" else []
            if diffs:
                gates.append(Gate(name="replay", reason="; ".join(diffs)))
    n = task.transfer.agents
    try:
        harness, control = arm_scores(task, record, "harness"), arm_scores(task, record, "control")
    except ValueError as e:  # a record no trial of this task can have written: evidence, not a crash
        harness, control = [None] * n, [None] * n
        gates.append(Gate(name="stages", reason=str(e)))
    reward = transfer_reward(harness, n) if not gates else 0.0
    components = (
        *(Component(name=f"agent_{k + 1}", value=s or 0.0) for k, s in enumerate(harness)),
        *(Component(name=f"control_{k + 1}", value=s or 0.0) for k, s in enumerate(control)),
        Component(name="control", value=transfer_reward(control, n)),
        Component(name="success_rate", value=_successes(record, "harness") / n),
        Component(name="control_success_rate", value=_successes(record, "control") / n),
        Component(name="development_steps", value=float(verdict.spent if verdict else 0), high=None),
        Component(name="budget", value=float(task.budget.charged_steps), high=None))
    report = RewardReport(
        task=task.id, family=task.protocol.family, workflow=task.protocol.workflow,
        protocol=protocol_id(task.protocol.version, plan.salt_sha256, plan.salt_label), placeholder=task.placeholder,
        status="gated" if gates else "scored", reward=reward, components=components, gates=tuple(gates), ledger=verdict,
        artifact_digest=sealed, image_digest=None, task_digest=task_digest(task), salt_sha256=plan.salt_sha256,
        salt_label=plan.salt_label, plan_commitment=plan.commitment, revealed_seeds=tuple(k.seed for k in plan.kitchens),
        calls=sum(len(t.rows) for t in record.trials) if record else 0,
        verifier_seconds=round(time.monotonic() - started, 3))
    return report, diffs


def _successes(record: TransferRecord | None, arm: str) -> int:
    return sum(t.success for t in record.trials if t.arm == arm) if record else 0


def verify_again(run_dir: Path) -> int:
    """`roboswe verify RUN_DIR` for a transfer run: the plan from the report's revealed seeds (no salt), every
    trial replayed; 0 when the report reproduces bit for bit, 1 a difference (each printed)."""
    return reproduce(run_dir, plan_from_seeds, functools.partial(verify_plan, replay=True),
                     ("status", "reward", "components", "gates", "ledger", "revealed_seeds"))


def main(argv: list[str] | None = None) -> int:
    """``python -m roboswe.rle.transfer.verify RUN_DIR [--salt-file FILE]``: the verifier process of a transfer run
    through the actors (runner.py). Only this process and the simulator read the salt; the report (seeds revealed)
    is written to RUN_DIR. Exit 0 written, 2 it could not verify."""
    return verifier_main(argv, module="roboswe.rle.transfer.verify", label="transfer", doc=main.__doc__,
                         verify=verify_run)


if __name__ == "__main__":
    raise SystemExit(main())
