"""Series, trial and verify logic in one process, in seconds: real peers' handlers, the fake simulator.

See tests/evaluation/harness.py for what is real (every handler but the bridge's) and what
the stand-in bridge does. The end-to-end tests in tests/series run the same logic with
robosuite and a real sandbox.
"""

from __future__ import annotations

import time

import pytest
import trio

from roboswe.evaluation.feedback import ExecOutcome, Refused, Waited, read_feedback
from roboswe.evaluation.peers import UnexpectedReply
from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series import run_series
from roboswe.evaluation.verify import verify_series
from roboswe.protocol import sim as simp
from roboswe.records.reader import RunReader

from .agents import BadPlanAgent, ReachAgent, SandboxDiesAgent, WanderAgent
from .harness import (
    admitted_task,
    peers,
    reach_manifest,
    reader_factory,
    record_run,
    series_plan,
)


async def _run(tmp_path, agent, *, verify: bool = True, **plan_options):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    manifest = reach_manifest()
    task = admitted_task(manifest)
    plan = series_plan(run_dir, task, **plan_options)
    progress = Progress()
    with trio.fail_after(60):
        async with peers(run_dir, agent) as links:
            await record_run(links)
            ends = await run_series(links, plan, progress, reader_factory(run_dir))
            verdicts = []
            if verify:
                await links.recorder.flush()
                with RunReader(run_dir) as reader:
                    verdicts = await verify_series(links, reader, progress, run_dir, plan.series_id, manifest,
                                                   plan.reference_fingerprint)
            executed = list(links.fake_bridge.executed)
    return run_dir, plan, progress, ends, verdicts, executed


async def test_a_reaching_series_succeeds_every_trial_keeps_the_workspace_and_replays_verified(tmp_path):
    started = time.monotonic()
    run_dir, plan, progress, ends, verdicts, executed = await _run(tmp_path, ReachAgent(), trials=3)
    assert [(e.outcome, e.reason) for e in ends] == [("success", "success_interval")] * 3
    assert all(e.success_interval is not None and e.success_interval[1] - e.success_interval[0] + 1 == 3 for e in ends)
    assert [v.verdict for v in verdicts] == ["verified"] * 3 and all(v.outcome_reproduced for v in verdicts)
    assert executed.count("reach.json") == 6  # three trials, then three replays
    with RunReader(run_dir) as reader:
        trials = reader.trials(plan.series_id)
        assert [t.start.index for t in trials] == [1, 2, 3]
        assert all(t.start.fingerprint == plan.reference_fingerprint for t in trials)
        later = reader.operations(trials[1].trial_id)
        assert later[0].operation == "list_files" and "reach.json" in later[0].feedback["text"]  # retained
        execs = [o for t in trials for o in reader.operations(t.trial_id) if o.operation == "exec"]
        for op in execs:  # trial writes the exec feedback; verify reads the same Struct back
            fb = read_feedback(op.operation, op.feedback)
            assert isinstance(fb, ExecOutcome) and fb.exit_status == 0 and fb.steps == op.step_end - op.step_start
        assert reader.control_traces(trials[0].trial_id)
    assert progress.figures.trials == 3 and progress.figures.last_outcome.startswith("trial 3: success")
    assert progress.message(after=0).line_count == len(progress.lines)
    assert time.monotonic() - started < 30


async def test_trials_that_never_reach_fail_and_the_failure_replays_verified(tmp_path):
    _, _, _, ends, verdicts, _ = await _run(tmp_path, WanderAgent(), trials=2)
    assert [(e.outcome, e.reason) for e in ends] == [("failure", "finish")] * 2
    assert all(e.success_interval is None for e in ends)
    assert [v.verdict for v in verdicts] == ["verified"] * 2


async def test_a_success_whose_script_prints_the_clock_is_verified_with_its_output_difference_recorded(tmp_path):
    # The motion agreed step for step: the success stands; what the program printed is kept beside it.
    _, _, _, ends, verdicts, _ = await _run(tmp_path, ReachAgent(clock=True), trials=1)
    assert ends[0].outcome == "success"
    (record,) = verdicts
    assert record.verdict == "verified" and record.outcome_reproduced and record.replay_outcome == "success"
    (said,) = record.detail["output_differences"]
    assert said["script"] == "reach.json" and said["differs"] == ["stdout_sha256"]


async def test_refused_and_cut_plans_are_recorded_as_such_and_skipped_by_the_replay(tmp_path):
    run_dir, plan, _, ends, verdicts, executed = await _run(tmp_path, BadPlanAgent(), trials=1)
    assert ends[0].outcome == "failure"
    with RunReader(run_dir) as reader:
        ops = reader.operations(reader.trials(plan.series_id)[0].trial_id)
    feedback = {o.seq: read_feedback(o.operation, o.feedback) for o in ops}
    wild, long, outside = feedback[1], feedback[3], feedback[4]
    assert isinstance(wild, ExecOutcome) and wild.exit_status == 1 and wild.steps == 0 and "outside its bound" in wild.stderr
    assert isinstance(long, ExecOutcome) and long.limit == "steps" and long.steps == plan.budgets.script_steps
    assert isinstance(outside, Refused) and ops[4].feedback["is_error"]
    assert "../outside.json" not in executed  # the trial refused it before the bridge
    assert [v.verdict for v in verdicts] == ["verified"]
    assert [e["seq"] for e in verdicts[0].detail["execs"]] == [1, 3]


async def test_fresh_context_control_starts_every_trial_empty(tmp_path):
    run_dir, plan, _, ends, _, _ = await _run(tmp_path, ReachAgent(), trials=2, retain="none", verify=False)
    assert [e.outcome for e in ends] == ["success", "success"]
    with RunReader(run_dir) as reader:
        second = reader.operations(reader.trials(plan.series_id)[1].trial_id)
    assert second[0].operation == "observe"  # nothing carried over: it starts from scratch


async def test_a_trial_cut_by_infrastructure_mid_call_leaves_the_next_trial_running(tmp_path):
    # The context manager answers the cut trial's unanswered call with a turn of its own: the
    # conversation count must not read that as a restarted context manager.
    _, _, _, ends, _, _ = await _run(tmp_path, SandboxDiesAgent(), trials=2, verify=False)
    assert ends[0].outcome == "incomplete" and "sandbox died" in ends[0].reason
    assert (ends[1].outcome, ends[1].reason) == ("failure", "finish")


async def test_a_wait_is_recorded_as_a_typed_feedback(tmp_path):
    run_dir, plan, _, _, _, _ = await _run(tmp_path, ReachAgent(), trials=1, verify=False)
    with RunReader(run_dir) as reader:
        (wait,) = [o for o in reader.operations(reader.trials(plan.series_id)[0].trial_id) if o.operation == "wait"]
    fb = read_feedback("wait", wait.feedback)
    assert isinstance(fb, Waited) and fb.applied == 5 and fb.success_after


async def test_a_peer_reply_of_the_wrong_type_is_a_typed_error(tmp_path):
    from roboswe.actors import Client, Server
    from roboswe.evaluation.peers import Simulator

    async def wrong(decoded):
        return simp.TakeStates()  # a wrong answer to anything

    endpoint = f"ipc://{tmp_path}/wrong.sock"
    async with trio.open_nursery() as nursery:
        await nursery.start(Server("simulator", endpoint, simp.SIM_CODEC, wrong).serve)
        async with Client("coordinator", endpoint, simp.SIM_CODEC) as client:
            with pytest.raises(UnexpectedReply, match="answered SuccessQuery with TakeStates, expected SuccessStatus"):
                await Simulator(client).success()
        nursery.cancel_scope.cancel()
