"""The score is the robot's: whatever a participant's decisions cause is its own failed decision
(an error result that costs no control steps), never an incomplete trial. In-process, as
tests/evaluation/test_inprocess_series.py runs a series: real peers' handlers, the fake simulator."""

from __future__ import annotations

import json

import trio

from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series import run_series
from roboswe.records.reader import RunReader

from .agents import BadDecisionsAgent
from .harness import (
    admitted_task,
    peers,
    reach_manifest,
    reader_factory,
    record_run,
    series_plan,
)

REASONS = [
    "Expected `array` of length >= 1 - at `$.actions`",
    "Expected `array`, got `str` - at `$.actions`",
    "$.content holds a lone surrogate",
    "Expected `array` of length <= 1000 - at `$.actions`",
    "nested too deeply to read",
    "Expected `int` <= 100000 - at `$.steps`",
    "the agent's decide raised RuntimeError: the agent's own bug",
    "BadDecisionsAgent.decide returned dict; expected an Operation or a Decision",
]


async def test_bad_decisions_are_error_results_and_the_trial_ends_by_the_participant(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    task = admitted_task(reach_manifest())
    plan = series_plan(run_dir, task, trials=1)
    with trio.fail_after(60):
        async with peers(run_dir, BadDecisionsAgent()) as links:
            await record_run(links)
            ends = await run_series(links, plan, Progress(), reader_factory(run_dir))
    assert [(e.outcome, e.reason) for e in ends] == [("failure", "finish")]
    with RunReader(run_dir) as reader:
        trial = reader.trials(plan.series_id)[0]
        ops = reader.operations(trial.trial_id)
        messages = reader.messages(trial.trial_id)
    assert [o.operation for o in ops] == ["invalid"] * len(REASONS) + ["finish"]
    for op, reason in zip(ops, REASONS):
        assert reason in op.feedback["text"] and op.feedback["is_error"], (reason, op.feedback)
        assert op.step_start == op.step_end == 0  # no control steps
    # The 100,000-row chunk is in the records as a bounded summary, not as itself.
    (chunk,) = ops[3].arguments["tool_calls"]
    assert len(chunk["arguments"]) < 2000 and json.loads(chunk["arguments"])["bytes"] > 1_000_000
    assert messages  # every decision's evidence was recorded
