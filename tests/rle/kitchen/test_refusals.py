"""The speed-run's refusals and gates on the trusted side, without building a kitchen.

The development simulator is the real ``DevelopmentSim`` over a stand-in scene that declares
``max_batch``; the evaluation simulator is the real ``EvaluationSim`` over a stand-in kitchen (the
RoboCasa scene is exercised by the end-to-end test); the verifier reads a real run directory whose
trials were never reached, so nothing needs replaying.
"""

from __future__ import annotations

import msgspec
import pytest
from roboswe.protocol import sim as simp
from roboswe.protocol.control import Error

from roboswe.rle import rundir
from roboswe.rle.kitchen import evaluation as ev
from roboswe.rle.kitchen.plan import hidden_plan
from roboswe.rle.kitchen.verify import verify_run
from roboswe.rle.ledger import Ledger, decode_rows, encode_rows
from roboswe.rle.manifest import load_task
from roboswe.rle.scene import DevelopmentSim
from roboswe.rle.seal import seal_directory
from roboswe.rle.seeds import public_salt

TASK = "speedrun-kit-pickplacecountertodrawer"
ACTION = simp.ActionSpec(dim=2, low=[-1.0, -1.0], high=[1.0, 1.0], components=[], hold=[0.0, 0.0], hold_rule="zero holds",
                         doc="a stand-in")


class StandInScene:
    """Two action components, no physics: what the trusted side's bookkeeping needs of a kitchen."""

    control_hz, cameras, privileged = 20, [], False
    action, state_keys = ACTION, ["x"]

    def __init__(self, *_, **__):
        self.moved, self.max_batch = 0, 200

    def load(self, seed: int) -> None:
        self.seed = seed

    def values(self, control_step: int) -> dict[str, list[float]]:
        return {"x": [float(self.moved)]}

    def step(self, row: list[float]) -> None:
        self.moved += 1

    def guide(self) -> str:
        return ""

    def close(self) -> None: ...


def _task(charged_steps: int = 50_000):
    task = load_task(TASK)
    return msgspec.structs.replace(task, budget=msgspec.structs.replace(task.budget, charged_steps=charged_steps))


def test_a_development_batch_beyond_two_hundred_or_the_allowance_is_refused_whole():
    sim = DevelopmentSim(_task(charged_steps=250), scene=StandInScene())
    refused = sim.answer(simp.Step(actions=[[0.0, 0.0]] * 201))[0]
    assert isinstance(refused, Error) and refused.code == "invalid_action" and sim.ledger.rows == []
    assert sim.answer(simp.Step(actions=[[0.0, 0.0]] * 200))[0].applied == 200
    refused = sim.answer(simp.Step(actions=[[0.0, 0.0]] * 51))[0]  # 50 left: not cut to 50, refused
    assert isinstance(refused, Error) and refused.code == "limit_reached" and "exceeds the 50 left" in refused.detail
    assert (sim.ledger.spent, sim.scene.moved, len(sim.ledger.rows)) == (200, 200, 2)
    assert sim.answer(simp.Step(actions=[[0.0, 0.0]] * 50))[0].applied == 50 and sim.ledger.remaining == 0


@pytest.fixture
def evaluation(monkeypatch):
    monkeypatch.setattr(ev, "KitchenScene", StandInScene)
    monkeypatch.setattr(ev, "state_sha256", lambda scene: f"state-{scene.seed}-{scene.moved}")
    monkeypatch.setattr(StandInScene, "succeeded", lambda self: self.moved >= 3, raising=False)
    monkeypatch.setattr(StandInScene, "backend", property(lambda self: _Backend(self)), raising=False)
    task = load_task(TASK)
    return ev.EvaluationSim(task, hidden_plan(task, public_salt()))


class _Backend:
    def __init__(self, scene):
        self.scene, self.control_step, self.sim_time = scene, scene.moved, scene.moved / 20

    def success(self):
        return simp.SuccessStatus(achieved=self.scene.succeeded(), interval=1, achieved_step=None, first_held_step=None,
                                  current_run=0, longest_run=0, control_step=self.control_step, sim_time=self.sim_time)


def test_evaluation_refuses_reset_and_oversized_batches_caps_a_trial_and_counts_unreached_trials(evaluation):
    sim, row = evaluation, [0.0, 0.0]
    assert sim.answer(simp.Reset())[0].code == "reset"
    assert sim.answer(simp.Step(actions=[row] * 201))[0].code == "invalid_action" and sim.actions_left == 1000
    assert "still open" in sim.next_trial()
    for _ in range(5):
        assert sim.answer(simp.Step(actions=[row] * 200))[0].applied == 200
    assert sim.actions_left == 0 and sim.answer(simp.Step(actions=[row]))[0].code == "limit_reached"  # 1,000: ended
    assert "trial 2 of 5 is open" in sim.next_trial()
    sim.answer(simp.Step(actions=[row] * 3))
    assert "finished after 3 actions" in sim.finish_trial()
    record = sim.close()
    assert [(t.ended, len(t.rows), t.success) for t in record.trials] == [
        ("actions", 1000, True), ("finish_trial", 3, True), *[("unreached", 0, False)] * 3]
    assert record.plan_commitment == hidden_plan(sim.task, public_salt()).commitment
    seen = b"\n".join(sim.visible)
    for kitchen in sim.plan.kitchens:  # nothing the participant got names a kitchen
        assert str(kitchen.seed).encode() not in seen
    assert sim.plan.commitment.encode() not in seen


@pytest.fixture
def unreached_run(tmp_path):
    """A sealed development of 10 charged steps and an evaluation that reached no trial."""
    task = load_task(TASK)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "policy.py").write_text("def main(robot):\n    return {}\n")
    sealed, contents = seal_directory(workspace, task.artifact)
    ledger = Ledger(task.budget.charged_steps)
    ledger.charge("step", 10)
    ledger.confirm("ok")
    ledger.seal(sealed.digest)
    run = tmp_path / "run"
    rundir.write_submission(run, task, sealed, contents, encode_rows(ledger.rows))
    plan = hidden_plan(task, public_salt())
    record = ev.EvaluationRecord(task=task.id, level="L1", plan_commitment=plan.commitment,
                                 trials=[ev.TrialRecord(index=i, ended="unreached") for i in range(5)])
    (run / ev.EVALUATION).write_bytes(msgspec.json.encode(record))
    return run


def test_the_verifier_scores_committed_evidence_and_gates_a_tampered_unsealed_or_missing_ledger(unreached_run):
    report, _ = verify_run(unreached_run, public_salt())
    assert (report.status, report.reward, report.ledger.spent) == ("scored", 0.0, 10)  # unreached trials: failures
    assert {c.name: c.value for c in report.components}["development_steps"] == 10.0
    path = unreached_run / rundir.LEDGER
    rows = decode_rows(path.read_bytes())
    forged = [rows[0].__class__(**{**msgspec.structs.asdict(rows[0]), "cost": 1}), *rows[1:]]  # charged less
    path.write_bytes(encode_rows(forged))
    report, _ = verify_run(unreached_run, public_salt())
    assert report.status == "gated" and report.reward == 0.0
    assert report.gates[0].name == "ledger" and "ledger unverifiable" in report.gates[0].reason
    path.write_bytes(encode_rows(rows[:-1]))  # the seal row dropped
    assert "not sealed" in verify_run(unreached_run, public_salt())[0].gates[0].reason
    path.unlink()
    report, _ = verify_run(unreached_run, public_salt())
    assert report.status == "gated" and report.gates[0].reason == "ledger missing"


def test_the_evaluation_phase_as_the_simulator_actor_serves_it_and_the_sandbox_door_sees_it(evaluation):
    """LoadEvaluation's phase: its Loaded names nothing of the plan; FinishTrial/NextTrial move through the trials;
    through the bridge's door a reset is robot.ResetRefused and a batch of 201 robot.InvalidAction (nothing
    applied); EndAttempt gives evaluation.json once, after which nothing answers."""
    import functools

    import trio
    from roboswe.bridge.door import RobotDoor
    from roboswe.protocol import bridge as pb

    sim = evaluation
    loaded = msgspec.json.encode(sim.loaded())
    assert not any(str(k.seed).encode() in loaded for k in sim.plan.kitchens) and sim.plan.commitment.encode() not in loaded
    door = RobotDoor(functools.partial(DevelopmentSim.link, sim), resets=True)  # as an RLE run's door: resets forwarded
    session = door.begin("probe.py", pb.ScriptLimits(steps=1000))

    class Call:  # what the bridge's allow-list hands the door
        def __init__(self, message):
            self.message = message

    def ask(message):
        return trio.run(door.handle, Call(message))[0]

    assert (ask(pb.Reset(token=session.token)).code, ask(pb.StepMany(token=session.token, actions=[[0.0, 0.0]] * 201)).code) == (
        "reset", "invalid_action")
    assert sim.actions_left == 1000 and ask(pb.StepMany(token=session.token, actions=[[0.0, 0.0]] * 2)).steps == 2
    still = sim.move_trial(simp.NextTrial())
    assert (still.trial, still.open) == (1, True) and "still open" in still.text
    finished = sim.move_trial(simp.FinishTrial())
    assert (finished.trial, finished.open, sim.success().control_step, sim.success().achieved) == (1, False, 2, False)
    opened = sim.move_trial(simp.NextTrial())
    assert (opened.trial, opened.trials, opened.open) == (2, 5, True) and "have not seen" in opened.text
    assert [t["ended"] for t in sim.task_record().data["trials"]] == ["finish_trial"]
    reply, blobs = sim.end_attempt()
    record = msgspec.json.decode(blobs[reply.files[ev.EVALUATION]], type=ev.EvaluationRecord)
    assert [t.ended for t in record.trials] == ["finish_trial", "finish_trial", "unreached", "unreached", "unreached"]
    assert isinstance(sim.end_attempt()[0], Error) and isinstance(sim.move_trial(simp.NextTrial()), Error)
    assert sim.answer(simp.GetState())[0].code == "refused"
