"""Direct-action operations (``act``) and the two budget tracks, in process on the fake simulator.

The real handlers (tests/evaluation/harness.py) run a series whose interface is ``actions``:
the participant answers each observation with an action chunk, the trial executes it one
control step per action through the simulator, stops mid-chunk at success or at the cap,
refuses a bad chunk whole (naming the component), records the GR1 tabletop protocol's evidence, and the
replay re-steps the executed prefixes and agrees with the recorded control trace.
"""

from __future__ import annotations

import json
import math

import trio

from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series import run_series
from roboswe.evaluation.verify import verify_series
from roboswe.protocol.participant import INTERFACES, Act, DecisionRequest, Exec, Finish, Observe, Wait
from roboswe.records.reader import RunReader
from roboswe.viewer._trace import trace_data
from roboswe.sim.physics_state import states_from_traces

from .agents import _STATE, MAX_MOVE, decided, results
from .harness import (
    admitted_task,
    peers,
    reach_manifest,
    reader_factory,
    record_run,
    series_plan,
)


def _latest_state(request: DecisionRequest) -> dict[str, list[float]]:
    """The newest ``key: [values]`` readings the participant was shown (trial opening or a result)."""
    texts = [p.text for t in request.conversation if t.role == "user" and t.trial == request.trial
             for p in t.parts if hasattr(p, "text")]
    for text in reversed(texts):
        found = {k: [float(x) for x in v.split(",")] for k, v in _STATE.findall(text)}
        if "robot0_eef_pos" in found:
            return found
    raise AssertionError("no robot state was shown")


def reach_chunk(state: dict[str, list[float]], hold: int) -> list[list[float]]:
    """Move onto the target closing the gripper, then ``hold`` steps there."""
    pos, target = state["robot0_eef_pos"], state["target_pos"]
    delta = [t - p for p, t in zip(pos, target)]
    n = max(1, math.ceil(max(abs(d) for d in delta) / MAX_MOVE - 1e-9))
    return [[d / n / MAX_MOVE for d in delta] + [1.0] for _ in range(n)] + [[0.0, 0.0, 0.0, 1.0]] * hold


class ChunkPolicy:
    """A scripted policy: each call answers the latest observation with one chunk; ``first`` answers come first."""

    def __init__(self, *, hold: int = 10, first: tuple = (), tools: list | None = None):
        self.hold = hold
        self.first = list(first)
        self.tools = tools if tools is not None else []

    def decide(self, request: DecisionRequest):
        self.tools.append([t.name for t in request.tools])
        n = decided(request)
        if n < len(self.first):
            return self.first[n]
        return Act(actions=reach_chunk(_latest_state(request), self.hold))


async def _run(tmp_path, agent, *, verify: bool = True, **config):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    manifest = reach_manifest()
    plan = series_plan(run_dir, admitted_task(manifest), trials=1, **config)
    progress = Progress()
    with trio.fail_after(60):
        async with peers(run_dir, agent) as links:
            await record_run(links)
            (end,) = await run_series(links, plan, progress, reader_factory(run_dir))
            await links.recorder.flush()
            record = None
            if verify:
                with RunReader(run_dir) as reader:
                    (record,) = await verify_series(links, reader, progress, run_dir, plan.series_id, manifest,
                                                    plan.reference_fingerprint)
    return run_dir, plan, end, record


def _evidence(reader: RunReader, trial_id: str) -> dict:
    (event,) = [e for _, e in reader.events(trial_id=trial_id) if e.event == "action_evidence"]
    return event.data


async def test_a_policy_completes_the_task_mid_chunk_and_the_replay_verifies_it(tmp_path):
    tools: list = []
    run_dir, plan, end, record = await _run(tmp_path, ChunkPolicy(hold=10, tools=tools), interface="actions",
                                            budget_mode="horizon", control_step_cap=200)
    assert end.outcome == "success" and end.reason == "success_interval", end.reason
    assert record.verdict == "verified" and record.outcome_reproduced, record.first_divergence
    # search_history is offered from the first request (the tool list never changes within a series)
    assert sorted(tools[0]) == sorted(INTERFACES["actions"])  # no exec, no wait
    with RunReader(run_dir) as reader:
        (view,) = reader.trials(plan.series_id)
        (op,) = reader.operations(view.trial_id)
        states = states_from_traces(reader.control_traces(view.trial_id))
        evidence = _evidence(reader, view.trial_id)
        (series,) = reader.series()
        plotted = trace_data(reader, view.trial_id)["chunks"]  # the viewer's action plot marks each chunk
    chunk = op.arguments["actions"]
    fb = op.feedback
    # The success interval (3 steps) completed inside the chunk: the rest of it never ran.
    assert op.operation == "act" and fb["stopped"] == "success" and fb["executed"] < fb["requested"] == len(chunk)
    assert end.control_steps == fb["executed"] == op.step_end - op.step_start
    assert end.success_interval[1] == end.control_steps
    # One native control per action: the recorded commands are the chunk's executed prefix.
    row = {int(s): i for i, s in enumerate(states.step)}  # action k leaves the state labelled k + 1
    assert states.action[[row[k + 1] for k in range(fb["executed"])]].tolist() == chunk[:fb["executed"]]
    assert record.detail["chunks"] == [{"seq": 0, "executed": [fb["executed"], fb["executed"]]}]
    assert evidence == {"identity": "fake/control-200/v2", "track": "horizon", "policy_calls": 1, "action_decisions": 1,
                        "executed_prefixes": [fb["executed"]], "controls": fb["executed"], "decision_calls": None,
                        "action_prefix": None, "first_success_control": end.control_steps, "first_success_call": 0}
    assert series.pins["budgets"]["identity"] == "fake/control-200/v2"
    assert plotted == [{"seq": 0, "start": 0, "end": fb["executed"], "requested": len(chunk), "executed": fb["executed"],
                        "stopped": "success"}]
    assert op.feedback["text"].startswith(f"executed {fb['executed']} of {len(chunk)} actions; stopped: success")


async def test_the_decisions_track_runs_k_actions_per_call_and_stops_after_d_calls(tmp_path):
    # A stop-only answer first (finish is offered, but here the policy just observes: a call with no action).
    policy = ChunkPolicy(hold=0, first=(Observe(),))
    run_dir, plan, end, record = await _run(tmp_path, policy, interface="actions", decision_calls=3, action_prefix=2)
    assert plan.budgets.identity == "fake/decision-3-prefix-2/v1" and plan.budgets.trial_steps == 6
    assert end.outcome == "failure" and end.reason == "decision_budget"
    assert end.control_steps == 4  # two act calls x K = 2; the first call moved nothing
    assert record.verdict == "verified", record.first_divergence
    with RunReader(run_dir) as reader:
        (view,) = reader.trials(plan.series_id)
        ops = reader.operations(view.trial_id)
        evidence = _evidence(reader, view.trial_id)
    assert [o.operation for o in ops] == ["observe", "act", "act"]
    assert all(o.feedback["executable"] == 2 < o.feedback["requested"] for o in ops[1:])
    assert evidence["policy_calls"] == 3 and evidence["action_decisions"] == 2
    assert evidence["executed_prefixes"] == [2, 2] and evidence["first_success_control"] is None


async def test_a_bad_chunk_is_refused_whole_naming_the_component(tmp_path):
    good = [0.1, 0.0, 0.0, 1.0]
    first = (Act(actions=[good, [0.0, 2.5, 0.0, 1.0]]), Act(actions=[good, [0.0, float("nan"), 0.0, 1.0]]),
             Act(actions=[good, [0.0, 0.0]]), Finish(reason="done"))
    run_dir, plan, end, _ = await _run(tmp_path, ChunkPolicy(first=first), verify=False, interface="actions")
    assert end.control_steps == 0 and end.reason == "finish"
    with RunReader(run_dir) as reader:
        (view,) = reader.trials(plan.series_id)
        ops = reader.operations(view.trial_id)
        evidence = _evidence(reader, view.trial_id)
    refusals = [o.feedback for o in ops[:3]]
    assert all(f["is_error"] and o.step_end == o.step_start == 0 for f, o in zip(refusals, ops))
    assert "action 1 of the chunk, component 1 (" in refusals[0]["error"] and "2.5 is outside" in refusals[0]["error"]
    assert "component 1 (" in refusals[1]["error"] and "nan is not finite" in refusals[1]["error"]
    assert "has 2 components; expected action_dim = 4" in refusals[2]["error"]
    assert evidence["action_decisions"] == 0 and evidence["policy_calls"] == 4  # refused chunks and a stop decide nothing


async def test_operations_outside_the_interface_are_refused(tmp_path):
    first = (Exec(path="x.json"), Wait(steps=3), Finish())
    run_dir, plan, end, _ = await _run(tmp_path, ChunkPolicy(first=first), verify=False, interface="actions")
    with RunReader(run_dir) as reader:
        ops = reader.operations(reader.trials(plan.series_id)[0].trial_id)
    assert [o.feedback.get("error", "")[:40] for o in ops[:2]] == [
        "exec is not offered in this series (inte", "wait is not offered in this series (inte"]
    assert end.control_steps == 0

    code_dir = tmp_path / "code"
    code_dir.mkdir()
    run_dir, plan, end, _ = await _run(code_dir, ChunkPolicy(first=(Act(actions=[[0.0] * 4]), Finish())), verify=False)
    with RunReader(run_dir) as reader:
        (act, _) = reader.operations(reader.trials(plan.series_id)[0].trial_id)
    assert act.feedback["error"].startswith("act is not offered in this series (interface 'code')")
    assert end.control_steps == 0


def test_track_settings_outside_a_track_are_refused():
    import pytest

    from roboswe.evaluation.series_config import SeriesConfig, TrackRefused, effective_budgets
    from roboswe.sim.manifest import manifest_from_builtins

    m = manifest_from_builtins(reach_manifest())
    for bad in ({"budget_mode": "decisions"}, {"interface": "actions", "control_step_cap": 10, "budget_mode": "decisions"},
                {"control_step_cap": 10, "trial_steps": 20}, {"interface": "actions", "budget_mode": "horizon",
                                                              "action_prefix": 2}):
        with pytest.raises(TrackRefused):
            effective_budgets(SeriesConfig(**bad), m)
    assert json.dumps(effective_budgets(SeriesConfig(), m).identity) == '"fake/control-%d/v2"' % m.budgets.trial.steps
