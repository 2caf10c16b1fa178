"""The Lift demo participant's decisions, through the real `python` provider wrapper.

Files are real (a temporary workspace); `exec` is answered by moving plan.json one phase
on, since these tests check the decisions, not the robot (test_lift_demo_real.py does that).
"""

from __future__ import annotations

import json
from pathlib import Path

from roboswe.agents.lift_demo import LiftDemoAgent, script_source
from roboswe.protocol.participant import (
    DecisionRequest,
    Exec,
    Finish,
    ListFiles,
    Observe,
    ReadFile,
    TextPart,
    Turn,
    WriteFile,
    result_turn,
)
from roboswe.providers._config import ProviderConfig
from roboswe.providers.local import PythonParticipant

PHASES = ["locate", "approach", "descend", "grasp", "lift", "check", "hold", "done"]


def participant(**options) -> PythonParticipant:
    config = ProviderConfig(kind="python", agent="roboswe.agents.lift_demo:LiftDemoAgent", options=options)
    return PythonParticipant(config)


class Harness:
    """Answers operations against a real directory; exec advances the plan by `per_exec` phases."""

    def __init__(self, workspace: Path, per_exec: int = 3, final: str = "done"):
        self.ws = workspace
        self.per_exec = per_exec
        self.final = final

    def answer(self, op) -> tuple[str, bool]:
        match op:
            case ListFiles():
                return "\n".join(f"{p.name} ({p.stat().st_size} bytes)" for p in sorted(self.ws.iterdir())) or "(empty)", False
            case ReadFile(path=path):
                f = self.ws / path
                return (f.read_text(), False) if f.exists() else (f"no such file: {path}", True)
            case WriteFile(path=path, content=content):
                (self.ws / path).write_text(content)
                return f"wrote {len(content)} bytes to {path}", False
            case Observe():
                return "agentview, birdview, robot0_eye_in_hand rendered", False
            case Exec(path=path):
                plan = json.loads((self.ws / "plan.json").read_text())
                phases = PHASES[:-1] + [self.final]
                i = min(phases.index(plan["phase"]) + self.per_exec, len(phases) - 1)
                plan["phase"] = phases[i]
                (self.ws / "plan.json").write_text(json.dumps(plan))
                return f"exit status 0\nstdout:\nphase: {plan['phase']}\n", False
        raise AssertionError(f"unexpected operation {op}")


async def run_trial(p: PythonParticipant, harness: Harness, conversation: list[Turn], trial: int, limit: int = 40) -> list:
    """Decide and answer until finish; returns the operations. Extends `conversation` in place."""
    conversation.append(Turn(id=f"start-{trial}", role="user", trial=trial, parts=[TextPart(text=f"Trial {trial} begins.")]))
    ops = []
    for k in range(limit):
        request = DecisionRequest(system="lift", tools=[], conversation=list(conversation), trial=trial)
        decision = await p.decide(request)
        conversation.append(decision.turn)
        ops.append(decision.operation)
        if isinstance(decision.operation, Finish):
            return ops
        text, is_error = harness.answer(decision.operation)
        conversation.append(result_turn(decision, id=f"r{trial}-{k}", text=text, is_error=is_error, trial=trial))
    raise AssertionError(f"no finish within {limit} decisions: {ops}")


def kinds(ops) -> list[str]:
    return [type(o).__name__ + (f":{o.path}" if hasattr(o, "path") else "") for o in ops]


async def test_first_trial_writes_script_resets_plan_observes_and_execs_until_done(tmp_path):
    ops = await run_trial(participant(), Harness(tmp_path), [], trial=1)
    assert kinds(ops) == [
        "ListFiles", "WriteFile:lift_cube.py", "WriteFile:plan.json", "Observe",
        "Exec:lift_cube.py", "ReadFile:plan.json", "Exec:lift_cube.py", "ReadFile:plan.json",
        "Exec:lift_cube.py", "ReadFile:plan.json", "Finish",
    ]
    assert ops[1].content == script_source()
    assert json.loads(ops[2].content) == {"phase": "locate"}
    assert ops[3].depth is True
    assert "done" in ops[-1].reason


async def test_later_trials_reuse_the_retained_script_and_start_a_fresh_plan(tmp_path):
    p, harness, conversation = participant(), Harness(tmp_path), []
    await run_trial(p, harness, conversation, trial=1)
    assert json.loads((tmp_path / "plan.json").read_text())["phase"] == "done"
    for trial in (2, 3):
        ops = await run_trial(p, harness, conversation, trial=trial)
        assert kinds(ops)[:4] == ["ListFiles", "ReadFile:lift_cube.py", "WriteFile:plan.json", "Observe"]
        assert not any(isinstance(o, WriteFile) and o.path == "lift_cube.py" for o in ops)
        assert kinds(ops)[-1] == "Finish" and "done" in ops[-1].reason


async def test_a_changed_retained_script_is_rewritten(tmp_path):
    (tmp_path / "lift_cube.py").write_text(script_source().replace("HOVER = 0.08", "HOVER = 0.5"))
    ops = await run_trial(participant(), Harness(tmp_path), [], trial=2)
    assert kinds(ops)[:3] == ["ListFiles", "ReadFile:lift_cube.py", "WriteFile:lift_cube.py"]
    assert (tmp_path / "lift_cube.py").read_text() == script_source()


async def test_a_trial_ended_by_the_harness_mid_exec_does_not_leak_into_the_next(tmp_path):
    p, harness, conversation = participant(), Harness(tmp_path), []
    # Trial 1 ends after its first exec (the success interval was reached): no finish call.
    conversation.append(Turn(id="s1", role="user", trial=1, parts=[TextPart(text="Trial 1 begins.")]))
    for k in range(5):
        d = await p.decide(DecisionRequest(system="", tools=[], conversation=list(conversation), trial=1))
        conversation.append(d.turn)
        if isinstance(d.operation, Exec):
            break
        text, err = harness.answer(d.operation)
        conversation.append(result_turn(d, id=f"r1-{k}", text=text, is_error=err, trial=1))
    ops = await run_trial(p, harness, conversation, trial=2)
    assert kinds(ops)[:3] == ["ListFiles", "ReadFile:lift_cube.py", "WriteFile:plan.json"]


async def test_gives_up_after_max_execs_and_on_a_failed_plan(tmp_path):
    ops = await run_trial(participant(max_execs=2), Harness(tmp_path, per_exec=1), [], trial=1)
    assert sum(isinstance(o, Exec) for o in ops) == 2 and "without finishing" in ops[-1].reason
    (tmp_path / "plan.json").unlink()
    ops = await run_trial(participant(), Harness(tmp_path, per_exec=10, final="failed"), [], trial=1)
    assert "failed" in ops[-1].reason


async def test_decisions_depend_only_on_the_conversation(tmp_path):
    conversation: list[Turn] = []
    await run_trial(participant(), Harness(tmp_path), conversation, trial=1)
    # Replay every prefix of the recorded conversation to a fresh agent: same operation each time.
    fresh = LiftDemoAgent()
    for i, turn in enumerate(conversation):
        if turn.role == "assistant":
            request = DecisionRequest(system="", tools=[], conversation=conversation[:i], trial=1)
            assert fresh.decide(request) == turn.tool_calls()[0].operation
