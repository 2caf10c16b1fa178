"""Family 01's verifier: the reward report from committed evidence only.

It reads what the trusted side committed to the run directory (task.json, sealed.json, ledger.jsonl,
evaluation.json), never a participant-written score: the development ledger's chain must verify,
be sealed over the sealed workspace and stay within the budget (else the report is ``gated``,
reward 0: "ledger unverifiable"; no ledger at all is gated the same way); the evaluation record's
plan commitment must be the plan the salt draws; each reached trial is replayed in its hidden
kitchen (rebuilt from the plan, every recorded row re-applied) and must start and end in the
recorded physics states, and the replay's own RoboCasa predicate decides it. Then

    reward = success_rate × (outcome_weight + efficiency_weight × (1 − development_steps / budget)),

development_steps being the ledger's charged units (rules.speedrun_reward). The seeds are revealed
into the report after verification.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from .. import rundir
from ..ledger import ChainVerdict, decode_rows, verify_chain
from ..manifest import RleTask, task_digest
from ..report import Component, Gate, RewardReport
from ..seeds import Salt, protocol_id
from .development import KitchenScene
from .evaluation import EVALUATION, EvaluationRecord, TrialRecord, state_sha256
from .plan import HiddenKitchen, HiddenPlan, hidden_plan, plan_from_seeds
from .rules import speedrun_reward


def replay_trial(task: RleTask, kitchen: HiddenKitchen, trial: TrialRecord) -> tuple[bool, list[str]]:
    """Rebuild the trial's kitchen, re-apply its rows: (the predicate's verdict, differences from the record)."""
    scene = KitchenScene(task, steps=task.kitchen.trial_actions, kitchen=kitchen)
    try:
        scene.load(kitchen.seed)
        diffs = [] if state_sha256(scene) == trial.initial_sha256 else [f"trial {trial.index + 1}: another initial state"]
        for row in trial.rows[: task.kitchen.trial_actions]:
            scene.step(row)
        if state_sha256(scene) != trial.final_sha256:
            diffs.append(f"trial {trial.index + 1}: the replayed physics ends elsewhere")
        success = scene.succeeded()
        if success != trial.success:
            diffs.append(f"trial {trial.index + 1}: recorded success {trial.success}, replay {success}")
        return success, diffs
    finally:
        scene.close()


def _ledger(run_dir: Path, task: RleTask) -> tuple[ChainVerdict | None, str | None]:
    """The ledger's verdict, and why it gates (None: it stands)."""
    path = run_dir / rundir.LEDGER
    if not path.is_file():
        return None, "ledger missing"
    try:
        rows = decode_rows(path.read_bytes())
        sealed = rundir.read_sealed_record(run_dir)
    except (OSError, ValueError, msgspec.DecodeError) as e:
        return None, f"ledger unverifiable: {e}"
    verdict = verify_chain(rows, budget=task.budget.charged_steps, artifact_digest=sealed.digest)
    return verdict, None if verdict.ok else f"ledger unverifiable: {verdict.reason}"


def verify_run(run_dir: Path, salt: Salt) -> tuple[RewardReport, list[str]]:
    """The report (not yet written) and the replay's differences from the record (each also a gate)."""
    task = rundir.read_task(run_dir)
    return verify_plan(run_dir, task, hidden_plan(task, salt))


def verify_plan(run_dir: Path, task: RleTask, plan: HiddenPlan) -> tuple[RewardReport, list[str]]:
    started = time.monotonic()
    verdict, ledger_gate = _ledger(run_dir, task)
    gates = [Gate(name="ledger", reason=ledger_gate)] if ledger_gate else []
    try:
        record = msgspec.json.decode((run_dir / EVALUATION).read_bytes(), type=EvaluationRecord)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as e:
        record, gates = None, [*gates, Gate(name="evaluation", reason=f"no evaluation record: {e}")]
    diffs: list[str] = []
    successes = 0
    if record is not None and not gates:  # a gated report is 0 whatever the trials did: nothing to replay
        if record.plan_commitment != plan.commitment:
            gates.append(Gate(name="plan", reason="the evaluation ran on another plan than the salt draws"))
        elif [t.index for t in record.trials] != list(range(task.kitchen.trials)):
            gates.append(Gate(name="evaluation", reason="the evaluation record does not hold one entry per planned trial"))
        else:
            for trial in record.trials:
                if trial.ended == "unreached":
                    continue  # a failure
                success, trial_diffs = replay_trial(task, plan.kitchens[trial.index], trial)
                successes += success
                diffs += trial_diffs
            if diffs:
                gates.append(Gate(name="replay", reason="; ".join(diffs)))
    steps = verdict.spent if verdict is not None else 0
    reward = speedrun_reward(task.kitchen, successes, steps, task.budget.charged_steps) if not gates else 0.0
    components = (
        Component(name="success_rate", value=successes / task.kitchen.trials),
        Component(name="development_steps", value=float(steps), high=None),
        Component(name="budget", value=float(task.budget.charged_steps), high=None),
        Component(name="trials_reached", value=float(sum(t.ended != "unreached" for t in record.trials) if record else 0),
                  high=None))
    sealed = sealed_digest(run_dir)
    report = RewardReport(
        task=task.id, family=task.protocol.family, workflow=task.protocol.workflow,
        protocol=protocol_id(task.protocol.version, plan.salt_sha256, plan.salt_label), placeholder=task.placeholder,
        status="gated" if gates else "scored", reward=reward, components=components, gates=tuple(gates), ledger=verdict,
        artifact_digest=sealed, image_digest=None, task_digest=task_digest(task), salt_sha256=plan.salt_sha256,
        salt_label=plan.salt_label, plan_commitment=plan.commitment, revealed_seeds=tuple(k.seed for k in plan.kitchens),
        calls=sum(len(t.rows) for t in record.trials) if record else 0,
        verifier_seconds=round(time.monotonic() - started, 3),
        privileged=tuple(record.privileged) if record else ())
    return report, diffs


def sealed_digest(run_dir: Path) -> str | None:
    try:
        return rundir.read_sealed_record(run_dir).digest
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def verify_again(run_dir: Path) -> int:
    """`roboswe verify RUN_DIR` for a speed-run: the plan from the report's revealed seeds (no salt needed), every
    trial replayed again; 0 when the report reproduces bit for bit, 1 a difference (each printed)."""
    return reproduce(run_dir, plan_from_seeds, verify_plan,
                     ("status", "reward", "components", "gates", "ledger", "revealed_seeds", "privileged"))


def reproduce(run_dir: Path, plan_from_seeds, verify_plan, fields: tuple[str, ...]) -> int:
    """A kitchen family's `roboswe verify`: its plan rebuilt from the report's revealed seeds by
    ``plan_from_seeds(task, seeds, salt_sha256, salt_label)``, every trial replayed by
    ``verify_plan(run_dir, task, plan) -> (report, differences)``, the report's ``fields`` compared."""
    import os
    import subprocess
    import sys

    from roboswe.terminal import echo

    if os.environ.get("PYTHONHASHSEED") != "0":  # the live trials ran with it: RoboCasa's scene follows set order
        cmd = [sys.executable, "-m", "roboswe.cli", "verify", str(run_dir)]
        return subprocess.run(cmd, env={**os.environ, "PYTHONHASHSEED": "0"}, check=False).returncode
    os.environ.setdefault("MUJOCO_GL", "egl")
    task, recorded = rundir.read_task(run_dir), rundir.read_report(run_dir)
    plan = plan_from_seeds(task, list(recorded.revealed_seeds), recorded.salt_sha256, recorded.salt_label)
    diffs = [] if plan.commitment == recorded.plan_commitment else ["the revealed seeds do not make the committed plan"]
    again, replay = verify_plan(run_dir, task, plan)
    diffs += replay
    diffs += [f"{f}: recorded {getattr(recorded, f)!r}, again {getattr(again, f)!r}" for f in fields
              if getattr(recorded, f) != getattr(again, f)]
    for diff in diffs:
        echo(f"roboswe verify: {run_dir}: mismatch: {diff}", file=sys.stderr)
    if not diffs:
        echo(f"roboswe verify: {run_dir}: reproduced (every trial replayed, the report bit for bit; reward {again.reward})")
    return 1 if diffs else 0


def verifier_main(argv: list[str] | None, *, module: str, label: str, doc: str,
                  verify: Callable[[Path, Salt], RewardReport]) -> int:
    """A kitchen family's verifier process (``python -m MODULE RUN_DIR [--salt-file FILE]``): ``verify(run_dir,
    salt)`` gives the report (seeds revealed), written to RUN_DIR. Exit 0 written, 2 it could not verify."""
    import argparse
    import os
    import sys

    from ..seeds import SaltError, load_salt

    p = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--salt-file", type=Path, default=None, help="the hidden salt (default: the public CI salt)")
    args = p.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0":  # as the live trials: RoboCasa's scene follows set order
        sys.stderr.write(f"{label} verifier: run with PYTHONHASHSEED=0 (the live trials were)\n")
        return 2
    try:
        report = verify(args.run_dir.resolve(), load_salt(args.salt_file))
    except (SaltError, OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError) as e:
        sys.stderr.write(f"{label} verifier: could not verify {args.run_dir}: {e}\n")
        return 2
    rundir.write_report(args.run_dir.resolve(), report)
    sys.stdout.write(f"{report.task}: {report.status} reward {report.reward:.4f}\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m roboswe.rle.kitchen.verify RUN_DIR [--salt-file FILE]``: the verifier process of an RLE run
    through the actors (roboswe/rle/kitchen/runner.py). Only this process and the simulator read the salt; the
    report (seeds revealed) is written to RUN_DIR. Exit 0 written, 2 it could not verify."""
    return verifier_main(argv, module="roboswe.rle.kitchen.verify", label="speed-run", doc=main.__doc__,
                         verify=lambda run_dir, salt: verify_run(run_dir, salt)[0])


if __name__ == "__main__":
    import os

    os.environ.setdefault("MUJOCO_GL", "egl")
    raise SystemExit(main())
