"""One family 03 attempt end to end on the trusted side, its run directory, and its replay.

``ScoredAttempt`` draws the hidden plan from the salt and is the ``TabletopScene`` on it inside the generic
``DevelopmentSim`` (roboswe/rle/scene.py: the ledger charges every row and reset before it runs and
records it as written); its ``end_attempt`` submits (release, settle, snapshots), seals the ledger over
the attempt record's digest, scores from the recorded states and gives the run directory's files.
``run_attempt`` lets a participant act through a robot client in-process and writes them; an RLE run
through the actors (roboswe/rle/run.py) has the simulator actor do the same on ``EndAttempt``:

    rle.json  task.json  ledger.jsonl  attempt.json (the record, plan revealed)  report.json

``replay_run`` rebuilds the scene from the revealed plan, re-applies every recorded row, and must
reproduce the recorded snapshots, estimates and reward exactly.

The scripted calibration participants act in-process through ``LocalRobot`` (the robot subset's
messages answered by the ``DevelopmentSim``, as the bridge's door would forward them); ``sandboxed``
makes a participant of a script run in the trial sandbox through the real door.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np

from roboswe.protocol import sim as simp
from roboswe.protocol.control import Error
from roboswe.sim.tabletop_physics import tasks as t
from roboswe.sim.tabletop_physics.scene import build_model

from .. import rundir
from ..ledger import Ledger, LedgerRow, decode_rows, encode_rows, verify_chain
from ..manifest import RleTask, task_digest
from ..report import Component, Gate, RewardReport, encode_report
from ..seeds import Salt, protocol_id, public_salt
from . import scoring
from .attempt import AttemptRecord, Snapshot, TabletopScene, layouts
from .plan import Plan, make_plan, plan_commitment

ATTEMPT = "attempt.json"


class AttemptStopped(RuntimeError):
    """The simulator refused a request or the budget cut a chunk short: the participant's attempt ends there."""


class LocalRobot:
    """The participant's side of the robot subset, answered in this process by the development simulator."""

    def __init__(self, sim, wall_seconds: float):
        self.sim = sim
        self.steps = 0
        self._deadline = time.monotonic() + wall_seconds  # the attempt's wall-time budget (the manifest's)

    def _ask(self, message):
        reply, blobs = self.sim.answer(message)
        if isinstance(reply, Error):
            raise AttemptStopped(f"{reply.code}: {reply.detail}")
        return reply, blobs

    def state(self) -> dict[str, list[float]]:
        return self._ask(simp.GetState())[0].values

    def step(self, rows: list[list[float]]) -> int:
        rows = [[float(v) for v in row] for row in rows]  # as the wire would carry them
        for i in range(0, len(rows), 200):  # a Step carries 1-200 rows
            if time.monotonic() > self._deadline:
                raise AttemptStopped("the attempt's wall time is spent")
            reply, _ = self._ask(simp.Step(actions=rows[i:i + 200]))
            self.steps += reply.applied
            if reply.stopped != "done":
                raise AttemptStopped(f"the attempt's budget ended the chunk ({reply.stopped})")
        return self.steps

    def observe(self) -> dict[str, np.ndarray]:
        obs, blobs = self._ask(simp.Observe())
        return {im.camera: np.frombuffer(blobs[im.rgb_blob], np.uint8).reshape(im.height, im.width, 3) for im in obs.images}


def record_digest(record: AttemptRecord) -> str:
    return hashlib.sha256(msgspec.json.encode(record, order="sorted")).hexdigest()


def body_states(plan: Plan, released: Snapshot, settled: Snapshot) -> tuple[list[scoring.BodyState], object]:
    """Each free body's pose at release and after the settle interval, read from the snapshots through the
    model the plan builds (its qpos addresses); also the model (Balance reads its beam)."""
    (layout,) = layouts(plan)
    model = build_model(layout)
    out = []
    for body in layout.bodies:
        jnt = model.body_jntadr[model.body(body.name).id]
        q, v = model.jnt_qposadr[jnt], model.jnt_dofadr[jnt]
        out.append(scoring.BodyState(
            name=body.name, half=body.geoms[0].half, pos0=tuple(released.qpos[q:q + 3]), quat0=tuple(released.qpos[q + 3:q + 7]),
            pos1=tuple(settled.qpos[q:q + 3]), quat1=tuple(settled.qpos[q + 3:q + 7]),
            speed1=float(np.linalg.norm(settled.qvel[v:v + 3]))))
    return out, model


def score_record(task: RleTask, record: AttemptRecord) -> tuple[float, tuple[Component, ...]]:
    """The reward from the recorded states (rules.py), and its components."""
    rules, inst = task.tabletop, record.plan.instance
    if rules.kind == "com":
        estimates = [tuple(e) for e in record.estimates[: t.COM_BOXES]]
        estimates += [None] * (t.COM_BOXES - len(estimates))
        return scoring.com_reward(estimates, [tuple(c) for c in record.box_com], rules)
    bodies, model = body_states(record.plan, record.released, record.settled)
    if rules.kind == "tower":
        return scoring.tower_reward(bodies, inst, rules)
    if rules.kind == "cantilever":
        return scoring.cantilever_reward(bodies, inst, rules)
    j = model.joint("beam")
    return scoring.balance_reward(bodies, record.released.qpos[j.qposadr[0]], record.settled.qpos[j.qposadr[0]],
                                  abs(record.settled.qvel[j.dofadr[0]]), rules)


def judge(task: RleTask, record: AttemptRecord) -> tuple[float, tuple[Component, ...], list[Gate]]:
    """The reward, or the gate that withholds it: an attempt in which MuJoCo reset an unstable state is not
    scored (the recorded states are not a physical outcome)."""
    if record.unstable_steps:
        return 0.0, (), [Gate(name="physics", reason=f"the simulation went unstable {record.unstable_steps} times "
                                                      "(MuJoCo reset its state)")]
    return (*score_record(task, record), [])


Participant = Callable[[LocalRobot], dict]


def sandboxed(script: str, *, backend: str | None = None, image=None, seconds: float = 600.0) -> Participant:
    """A participant that is a script run in the trial sandbox (bridge/trial.py: the sandbox image, no network,
    an unprivileged user), driving the attempt through the bridge's door with `import robot`, as a
    participant's exec would; robot.reset() reaches the scene when the task allows resets."""

    def run(robot: LocalRobot) -> dict:
        import os
        import shutil
        import tempfile

        import trio

        from roboswe.bridge.trial import open_trial
        from roboswe.protocol.bridge import ScriptLimits

        task = robot.sim.task
        scratch = Path(tempfile.mkdtemp(prefix="rle-tabletop-", dir="/tmp"))  # short, traversable by the sandbox user
        os.chmod(scratch, 0o755)
        workspace = scratch / "workspace"
        workspace.mkdir()
        os.chmod(workspace, 0o777)
        (workspace / task.artifact.entry_file).write_text(script)
        limits = ScriptLimits(steps=task.budget.charged_steps, seconds=min(seconds, task.budget.wall_seconds))

        async def attempt():
            async with open_trial(f"rle-{task.id}", workspace, robot.sim.link, backend=backend, image=image, limits=limits,
                                  workspace_mb=None, resets=task.budget.resets > 0) as sandbox:
                return await sandbox.exec(task.artifact.entry_file, limits)

        try:
            feedback = trio.run(attempt)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return {"exit": feedback.exit_status, "steps": feedback.steps, "limit": feedback.limit,
                "stdout": feedback.stdout[-2000:], "stderr": feedback.stderr[-2000:]}

    return run


class ScoredAttempt(TabletopScene):
    """The attempt's scene on the trusted side (``DEVELOPMENT_SCENES["tabletop"]``, roboswe/rle/scene.py): the
    hidden plan drawn there from the salt, and ``end_attempt``, which ends and scores the attempt there too.
    ``run_attempt`` (in-process) and the simulator actor (``protocol.sim.EndAttempt``, an RLE run through the
    actors) both end an attempt this way."""

    def __init__(self, task: RleTask, salt: Salt | None = None):
        self.salt = salt if salt is not None else public_salt()
        self.started = time.monotonic()
        super().__init__(task, make_plan(task, self.salt))

    def end_attempt(self, rows: list[LedgerRow]) -> dict[str, bytes]:
        """Release, settle, snapshot (``submit``), seal the ledger ``rows`` over the record's digest, score from
        the recorded states; the run directory's files by name (rundir.py's layout and ``ATTEMPT``)."""
        task = self.task
        record = self.submit()
        ledger = Ledger.resume(rows, task.budget.charged_steps)
        ledger.seal(record_digest(record))
        verdict = verify_chain(ledger.rows, budget=task.budget.charged_steps, artifact_digest=record_digest(record))
        gates = [] if verdict.ok else [Gate(name="ledger", reason=f"ledger unverifiable: {verdict.reason}")]
        reward, components, withheld = judge(task, record) if not gates else (0.0, (), [])
        gates += withheld
        report = make_report(task, self.salt.sha256, self.salt.label, self.plan, record, reward, components, gates,
                             verdict, time.monotonic() - self.started)
        return {rundir.MARKER: msgspec.json.encode(rundir.RunMarker(task=task.id)), rundir.TASK: msgspec.json.encode(task),
                ATTEMPT: msgspec.json.encode(record), rundir.REPORT: encode_report(report),
                rundir.LEDGER: encode_rows(ledger.rows)}


def tabletop_development(task: RleTask, salt: Salt) -> ScoredAttempt:
    """The ``DEVELOPMENT_SCENES`` factory: the hidden plan drawn with the run's salt."""
    return ScoredAttempt(task, salt)


def write_files(run_dir: Path, files: dict[str, bytes]) -> None:
    """An attempt's run directory from ``end_attempt``'s files (bare names only: nothing lands outside it)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if Path(name).name != name or name in ("", ".", ".."):
            raise ValueError(f"an attempt's file name must be a bare name, got {name!r}")
        (run_dir / name).write_bytes(data)


def run_attempt(task: RleTask, participant: Participant, salt: Salt, run_dir: Path) -> tuple[RewardReport, dict]:
    """The attempt, scored; the run directory written. Returns the report and the participant's own summary."""
    from ..scene import DevelopmentSim

    run_dir.mkdir(parents=True, exist_ok=True)
    scene = ScoredAttempt(task, salt)
    sim = DevelopmentSim(task, record=run_dir / rundir.LEDGER, scene=scene)
    robot = LocalRobot(sim, task.budget.wall_seconds)
    try:
        summary = participant(robot)
    except AttemptStopped as e:  # the budget ended the attempt mid-move: what was built is still scored
        summary = {"ended": str(e)}
    write_files(run_dir, scene.end_attempt(sim.ledger.rows))
    return rundir.read_report(run_dir), {"steps": robot.steps, **summary,
                                         "wall_seconds": round(time.monotonic() - scene.started, 2)}


def make_report(task, salt_sha256, salt_label, plan, record, reward, components, gates, verdict, seconds) -> RewardReport:
    return RewardReport(
        task=task.id, family=task.protocol.family, workflow=task.protocol.workflow,
        protocol=protocol_id(task.protocol.version, salt_sha256, salt_label), placeholder=task.placeholder,
        status="gated" if gates else "scored", reward=0.0 if gates else reward, components=components, gates=tuple(gates),
        ledger=verdict, artifact_digest=record_digest(record), image_digest=None, task_digest=task_digest(task),
        salt_sha256=salt_sha256, salt_label=salt_label, plan_commitment=plan_commitment(plan),
        revealed_seeds=(plan.seed,), calls=len(record.events), verifier_seconds=round(seconds, 3))


def replay_record(task: RleTask, record: AttemptRecord) -> AttemptRecord:
    """Rebuild the scene from the revealed plan and re-apply every recorded row (held rows stay held)."""
    scene = TabletopScene(task, make_plan(task, seed=record.plan.seed))
    for event in record.events:
        if not event:
            scene.load(0)
        else:
            scene.record.events.append(event)
            if event[0]:
                scene._apply(event[1:], live=False)
    return scene.submit()


def replay_run(run_dir: Path) -> list[str]:
    """The differences between the recorded attempt and its replay (none: reproduced bit for bit)."""
    task = rundir.read_task(run_dir)
    record = msgspec.json.decode((run_dir / ATTEMPT).read_bytes(), type=AttemptRecord)
    recorded = rundir.read_report(run_dir)
    diffs = []
    if plan_commitment(make_plan(task, seed=record.plan.seed)) != recorded.plan_commitment:
        diffs.append("the revealed seed does not produce the committed plan")
    rows = decode_rows((run_dir / rundir.LEDGER).read_bytes())
    verdict = verify_chain(rows, budget=task.budget.charged_steps, artifact_digest=record_digest(record))
    if not verdict.ok:
        diffs.append(f"ledger: {verdict.reason}")
    again = replay_record(task, record)
    for field in ("released", "settled", "estimates", "box_com", "unstable_steps"):
        if getattr(again, field) != getattr(record, field):
            diffs.append(f"{field}: the replayed physics differs from the record")
    reward, components, gates = judge(task, again)
    if (reward, components, tuple(gates)) != (recorded.reward, recorded.components, recorded.gates):
        diffs.append(f"reward: recorded {recorded.reward}, replay {reward}")
    return diffs


def verify_attempt(run_dir: Path) -> int:
    """`roboswe verify RUN_DIR` for a family 03 run: 0 reproduced, 1 a difference (each printed)."""
    from roboswe.terminal import echo

    diffs = replay_run(run_dir)
    for diff in diffs:
        echo(f"roboswe verify: {run_dir}: mismatch: {diff}", file=sys.stderr)
    if not diffs:
        echo(f"roboswe verify: {run_dir}: reproduced (the replayed physics, the estimates and the reward bit for bit)")
    return 1 if diffs else 0
