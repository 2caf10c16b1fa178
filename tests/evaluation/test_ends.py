"""What ended a trial, typed (roboswe/evaluation/ends.py): each cause given once, where the end is composed.

The readers decide on the cause alone (tests/evaluation/test_retry_incomplete.py for retry
eligibility, tests/commands/test_configuration_stop_reads_cause.py for the front end's stop,
tests/records/test_report_cause.py for the report); these tests pin how each cause is given,
that an end recorded before causes were typed still reads, and that the timing keeps its keys.
"""

from __future__ import annotations

import time

import msgspec
import pytest
from roboswe.actors import PeerDead, RemoteError
from roboswe.protocol.control import Error
from roboswe.protocol.recorder import TRIAL_CAUSES, TrialEnded, TrialTiming

from roboswe.evaluation.ends import (
    TrialEnd,
    TrialIncomplete,
    configured,
    incomplete_end,
    participant_end,
)
from roboswe.records.schema import MAPPINGS


def test_the_participant_ends_are_a_success_only_when_the_interval_was_reached():
    assert participant_end("finish", False) == TrialEnd("failure", "finish")
    assert participant_end("step_budget", True) == TrialEnd("success", "step_budget")
    assert participant_end("finish", False).reason == "finish"  # the line shown, as before causes were typed


@pytest.mark.parametrize(("error", "cause", "detail"), [
    (TrialIncomplete("fingerprint_mismatch", "the fresh scene differs"), "fingerprint_mismatch", "the fresh scene differs"),
    (PeerDead("simulator", "ipc://sim", 0.0, restarted=True), "interrupted",
     "PeerDead: peer 'simulator' at ipc://sim was restarted; requests in flight to it are lost"),
    (RemoteError(Error(code="not_loaded", detail="no task is loaded")), "interrupted",
     "the simulator was restarted under the trial: RemoteError: not_loaded: no task is loaded"),
    (RemoteError(Error(code="refused", detail="trial not open")), "infrastructure", "RemoteError: refused: trial not open"),
    (OSError("connection reset"), "infrastructure", "OSError: connection reset"),
    (KeyError("a harness bug"), "internal", "KeyError: 'a harness bug'"),
])
def test_an_outside_cause_ends_the_trial_incomplete_with_its_typed_cause(error, cause, detail):
    end = incomplete_end(error, "run/s/t1a0")
    assert (end.outcome, end.cause, end.detail) == ("incomplete", cause, detail)
    assert end.reason == f"{cause}: {detail}"


@pytest.mark.parametrize(("cause", "detail"), [
    ("provider", 'anthropic: http_401 after 1 attempt(s): HTTP 401: {"type":"error"}'),
    ("provider", "openai: http_404 after 1 attempt(s): HTTP 404: model not found"),
    ("internal", ("context_manager: provider anthropic unavailable: provider anthropic: environment variable "
                  "ANTHROPIC_API_KEY is empty or unset; export it")),
    ("infrastructure", "RemoteError: config: provider anthropic unavailable: no SDK"),
])
def test_a_problem_every_later_trial_would_repeat_is_a_configuration_cause(cause, detail):
    end = configured(TrialEnd("incomplete", cause, detail))
    assert end.cause == "configuration" and end.detail == f"{cause}: {detail}"  # the detail keeps where it came from


@pytest.mark.parametrize(("cause", "detail"), [
    ("provider", "HTTP 503 after 3 attempt(s)"),
    ("infrastructure", "the sandbox could not be opened: SandboxError: boom"),
    ("infrastructure", "the sandbox could not be opened: APIError: HTTP 404 no such image"),  # not the provider's 404
    ("interrupted", "PeerDead: provider_client"),
])
def test_a_passing_problem_keeps_its_own_cause(cause, detail):
    assert configured(TrialEnd("incomplete", cause, detail)) == TrialEnd("incomplete", cause, detail)


def test_an_end_recorded_without_a_cause_still_decodes_and_stores():
    # A TrialEnded from before causes were typed: no cause, no detail on the wire.
    old = {"trial_id": "run/s/t1a0", "outcome": "incomplete", "reason": "provider: HTTP 503", "ended_at": time.time()}
    decoded = msgspec.json.decode(msgspec.json.encode(old), type=TrialEnded)
    assert (decoded.cause, decoded.detail, decoded.reason) == (None, "", "provider: HTTP 503")
    assert MAPPINGS[TrialEnded].record(MAPPINGS[TrialEnded].row(decoded)) == decoded  # a NULL cause stores


def test_every_cause_is_one_closed_set_the_database_checks():
    from roboswe.records.schema import SCHEMA

    assert len(TRIAL_CAUSES) == len(set(TRIAL_CAUSES)) == 12
    assert "cause TEXT CHECK (cause IN ('success_interval', 'finish'," in SCHEMA
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"trial_id": "x", "outcome": "incomplete", "ended_at": 0.0, "cause": "outage"}, TrialEnded)


def test_trial_timing_records_the_keys_the_timing_dict_always_had():
    timing = TrialTiming()
    timing.provider += 1.2345678
    assert set(timing.record()) == {"provider", "provider_http", "execution", "script_sim", "transport", "physics",
                                    "rendering", "waits", "context", "recording", "load", "recovery", "wall"}
    assert timing.record()["provider"] == 1.234568
    timing.sandbox_open = 0.25  # only once the sandbox opened, as before
    assert timing.record()["sandbox_open"] == 0.25
