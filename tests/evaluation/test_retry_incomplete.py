"""`roboswe run --resume RUN --retry-incomplete` in one process (tests/evaluation/harness.py).

A trial that ended incomplete for a provider or infrastructure reason is re-run as a linked attempt
(``recovers``) from the state it started in; the record keeps both attempts, scoring scores the
re-run, a failure is never re-run, and after MAX_INCOMPLETE_RETRIES re-runs the slot stays missing.
"""

from __future__ import annotations

import time

import pytest
import trio
from roboswe.protocol.participant import Attempt, DecisionRequest, ProviderFailure
from roboswe.protocol.recorder import INCOMPLETE_CAUSES, PARTICIPANT_CAUSES, TrialEnded

from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series import MAX_INCOMPLETE_RETRIES, retryable, run_series
from roboswe.evaluation.verify import verify_series
from roboswe.records.metrics import series_metrics, series_outcomes
from roboswe.records.reader import RunReader

from .agents import ReachAgent, WanderAgent
from .harness import (
    admitted_task,
    peers,
    reach_manifest,
    reader_factory,
    record_run,
    series_plan,
)


class OutageAgent(ReachAgent):
    """ReachAgent whose provider is down (every attempt answered 503) during the trials in ``down``."""

    def __init__(self, down: set[int]):
        super().__init__()
        self.down = down

    def decide(self, request: DecisionRequest):
        if request.trial in self.down:
            attempt = Attempt(number=1, started_at=time.time(), latency_s=0.01, outcome="http_503", status=503,
                              detail="service unavailable")
            raise ProviderFailure("fake: http_503 after 1 attempt(s): service unavailable", [attempt])
        return super().decide(request)


def ended(outcome: str, cause: str | None, reason: str = "") -> TrialEnded:
    return TrialEnded(trial_id="run/s/t1a0", outcome=outcome, cause=cause, reason=reason, ended_at=time.time())


# What --retry-incomplete re-runs, read from the cause alone: the words never decide.
RETRIED = {"provider": True, "configuration": True, "infrastructure": True, "fingerprint_mismatch": True,
           "internal": True, "interrupted": False, "context_overflow": False}


@pytest.mark.parametrize("cause", INCOMPLETE_CAUSES)
def test_retry_eligibility_reads_the_typed_cause_of_each_incomplete_end(cause):
    assert set(RETRIED) == set(INCOMPLETE_CAUSES)  # a new cause must say whether it is retried
    misleading = "provider: http_503" if not RETRIED[cause] else "interrupted: the words say otherwise"
    assert retryable(ended("incomplete", cause, reason=misleading)) is RETRIED[cause]


def test_participant_ends_and_ends_recorded_without_a_cause_are_never_retried():
    assert not any(retryable(ended("failure", cause)) for cause in PARTICIPANT_CAUSES)
    assert not retryable(ended("incomplete", None, reason="provider: HTTP 503"))  # an old record: no cause, no retry


async def _series(run_dir, plan, agent, *, retry_incomplete: bool, verify: bool = False):
    with trio.fail_after(60):
        async with peers(run_dir, agent) as links:
            with RunReader(run_dir) as reader:
                if not reader.runs():
                    await record_run(links)
            ends = await run_series(links, plan, Progress(), reader_factory(run_dir), retry_incomplete=retry_incomplete)
            if verify:
                await links.recorder.flush()
                with RunReader(run_dir) as reader:
                    await verify_series(links, reader, Progress(), run_dir, plan.series_id, plan.task.manifest,
                                        plan.reference_fingerprint)
    return ends


def _setup(tmp_path, trials: int):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return run_dir, series_plan(run_dir, admitted_task(reach_manifest()), trials=trials)


async def test_a_provider_outage_slot_is_rerun_linked_on_resume_and_the_rerun_is_scored(tmp_path):
    run_dir, plan = _setup(tmp_path, trials=3)
    agent = OutageAgent(down={2})
    ends = await _series(run_dir, plan, agent, retry_incomplete=False)
    assert [e.outcome for e in ends] == ["success", "incomplete", "success"]
    assert ends[1].cause == "provider" and ends[1].reason.startswith("provider: ") and retryable(ends[1])

    agent.down = set()  # the provider is back
    resumed = await _series(run_dir, plan, agent, retry_incomplete=True, verify=True)
    assert [(e.outcome, e.reason) for e in resumed] == [("success", "success_interval")]  # trial 2 only, once

    with RunReader(run_dir) as reader:
        views = reader.trials(plan.series_id)
        assert [(v.start.index, v.start.attempt) for v in views] == [(1, 0), (2, 0), (2, 1), (3, 0)]
        old, new = views[1], views[2]
        assert new.start.recovers == old.trial_id and old.end.outcome == "incomplete"  # both attempts kept, linked
        (retried,) = [e for _, e in reader.events(event="trial_retried")]
        assert retried.trial_id == old.trial_id and retried.data["attempt"] == 1 and retried.data["later_slots_kept"]
        # The re-run started from trial 2's own start: trial 1's conversation and workspace (reach.json kept),
        # not the incomplete attempt's nor trial 3's.
        first_op = reader.operations(new.trial_id)[0]
        assert first_op.operation == "list_files" and "reach.json" in first_op.feedback["text"]
        (outcome,) = series_outcomes(reader, "run")
    slot = outcome.slots[1]
    assert (slot.status, slot.trial_id, slot.attempts, slot.recovered_from) == ("success", new.trial_id, 2, old.trial_id)
    metrics = series_metrics(outcome)
    assert metrics.completed and metrics.y == [1, 1, 1] and metrics.A == 1.0


async def test_retries_stop_after_the_stated_limit_and_the_slot_stays_missing(tmp_path):
    run_dir, plan = _setup(tmp_path, trials=2)
    agent = OutageAgent(down={2})  # the outage outlasts every retry
    ends = await _series(run_dir, plan, agent, retry_incomplete=True)
    assert [e.outcome for e in ends] == ["success"] + ["incomplete"] * (1 + MAX_INCOMPLETE_RETRIES)
    agent.down = set()
    assert await _series(run_dir, plan, agent, retry_incomplete=True) == []  # exhausted: not re-run again
    with RunReader(run_dir) as reader:
        views = [v for v in reader.trials(plan.series_id) if v.start.index == 2]
        assert [v.start.attempt for v in views] == [0, 1, 2]
        assert [v.start.recovers for v in views] == [None, views[0].trial_id, views[1].trial_id]
        (outcome,) = series_outcomes(reader, "run")
    assert outcome.slots[1].status == "incomplete" and not series_metrics(outcome).completed


async def test_a_failure_is_never_retried_nor_an_incomplete_slot_without_the_flag(tmp_path):
    run_dir, plan = _setup(tmp_path, trials=1)
    ends = await _series(run_dir, plan, WanderAgent(), retry_incomplete=False)
    assert [e.outcome for e in ends] == ["failure"]
    assert await _series(run_dir, plan, WanderAgent(), retry_incomplete=True) == []
    assert not retryable(ended("incomplete", "context_overflow")) and retryable(ended("incomplete", "infrastructure"))

    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = series_plan(other_dir, admitted_task(reach_manifest()), trials=1)
    agent = OutageAgent(down={1})
    assert [e.outcome for e in await _series(other_dir, other, agent, retry_incomplete=False)] == ["incomplete"]
    agent.down = set()
    assert await _series(other_dir, other, agent, retry_incomplete=False) == []  # a plain resume leaves it


# ---- the flag on the command line and in job.json ------------------------------------------------------


def _admitted(tmp_path):
    from roboswe.evaluation.admission import (
        FORMAT,
        Admitted,
        read_admitted,
        write_admitted,
    )

    path = tmp_path / "admitted.json"
    write_admitted(Admitted(format=FORMAT, dataset={"id": "t", "tasks": ["fake-reach"]}, created_at="test", host={},
                            run_config_sha256=None, tasks=[admitted_task(reach_manifest())]), path)
    return path, read_admitted(path)


def _args(*argv: str):
    import argparse

    from roboswe.commands.run import add_arguments_run

    parser = argparse.ArgumentParser()
    add_arguments_run(parser)
    return parser.parse_args(list(argv))


def test_retry_incomplete_goes_into_job_json_on_resume_and_is_refused_without_resume(tmp_path):
    import pytest

    from roboswe.commands.run import UsageError, prepare_run
    from roboswe.evaluation.job import CONFIG_COPY, Job, read_job, write_job

    admitted_path, admitted = _admitted(tmp_path)
    with pytest.raises(UsageError, match="--retry-incomplete .* use it with --resume RUN_DIR"):
        prepare_run(_args(str(admitted_path), "--retry-incomplete", "--out", str(tmp_path / "new"), "--no-preflight"))
    assert not (tmp_path / "new").exists()

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / CONFIG_COPY).write_text('[provider]\nkind = "python"\nagent = "tests.evaluation.agents:ReachAgent"\n')
    write_job(run_dir, Job(kind="run", run_id="run", admitted_path=str(admitted_path), admitted_sha256=admitted.digest,
                           tasks=["fake-reach"], workers=1))
    import json

    older = json.loads((run_dir / "job.json").read_text())
    del older["retry_incomplete"]  # a job.json written before the flag existed reads as off
    (run_dir / "job.json").write_text(json.dumps(older))
    assert read_job(run_dir).retry_incomplete is False
    prepare_run(_args("--resume", str(run_dir), "--no-preflight"))
    assert read_job(run_dir).retry_incomplete is False
    prepare_run(_args("--resume", str(run_dir), "--retry-incomplete", "--no-preflight"))
    assert read_job(run_dir).retry_incomplete is True


async def test_a_simulator_that_lost_its_scene_mid_trial_interrupts_it_and_the_trial_is_rerun_at_once(tmp_path):
    # A supervisor can restart a killed simulator before its death reaches the coordinator's link: the next
    # request then meets a fresh simulator answering not_loaded. That is the same lost scene as a dead peer.
    from roboswe.actors import RemoteError
    from roboswe.protocol.control import Error

    run_dir, plan = _setup(tmp_path, trials=1)
    with trio.fail_after(60):
        async with peers(run_dir, ReachAgent()) as links:
            await record_run(links)
            real_wait, failed = links.sim.wait, []

            async def wait(steps):
                if not failed:  # the first wait of the series meets the restarted simulator
                    failed.append(steps)
                    raise RemoteError(Error(code="not_loaded", detail="no task is loaded; the coordinator sends Load first"))
                return await real_wait(steps)

            links.sim.wait = wait
            ends = await run_series(links, plan, Progress(), reader_factory(run_dir))
    assert "the simulator was restarted under the trial" in ends[0].reason
    assert failed and [(e.outcome, e.cause) for e in ends] == [("incomplete", "interrupted"),
                                                              ("success", "success_interval")]
    with RunReader(run_dir) as reader:
        old, new = reader.trials(plan.series_id)
    assert new.start.recovers == old.trial_id and new.start.index == old.start.index == 1


class RefusedKeyAgent(OutageAgent):
    """ReachAgent whose key is refused (401) during the trials in ``down``: a configuration problem."""

    def decide(self, request: DecisionRequest):
        if request.trial in self.down:
            attempt = Attempt(number=1, started_at=time.time(), latency_s=0.01, outcome="http_401", status=401,
                              detail="invalid x-api-key")
            raise ProviderFailure("fake: http_401 after 1 attempt(s): invalid x-api-key", [attempt])
        return ReachAgent.decide(self, request)


async def test_a_refused_key_starts_no_further_trial_and_resume_continues_the_series(tmp_path):
    """Every later trial would be refused the same way: the series starts none itself (the front end's stop
    looks only every 0.5 s, and a staged scene starts the next trial within milliseconds). Nothing is
    recorded as stopped, so --resume with the key fixed runs the rest."""
    run_dir, plan = _setup(tmp_path, trials=3)
    agent = RefusedKeyAgent(down={1, 2, 3})
    ends = await _series(run_dir, plan, agent, retry_incomplete=False)
    assert [(e.outcome, e.cause) for e in ends] == [("incomplete", "configuration")]
    assert "http_401" in ends[0].detail and ends[0].reason.startswith("configuration: provider: fake: http_401")

    agent.down = set()  # the key is fixed
    resumed = await _series(run_dir, plan, agent, retry_incomplete=False)
    assert [e.outcome for e in resumed] == ["success", "success"]  # trials 2 and 3
