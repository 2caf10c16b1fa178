"""The front end's configuration stop reads the coordinator's typed last end, never its display line."""

from __future__ import annotations

from pathlib import Path

from roboswe.protocol.coordinator import COORDINATOR_CODEC, LastEnd, Progress

from roboswe.commands.run import ConfigurationStop


def progress(line: str, end: LastEnd | None) -> Progress:
    return Progress(state="running", last_outcome=line, last_end=end)


def test_a_configuration_end_stops_the_run_with_its_detail_in_full():
    detail = "provider: anthropic: http_401 after 1 attempt(s): invalid x-api-key (" + "x" * 300 + ")"
    end = LastEnd(trial=2, outcome="incomplete", cause="configuration", detail=detail)
    stop = ConfigurationStop.from_progress(progress(f"trial 2: incomplete (configuration: {detail})", end))
    assert stop is not None and (stop.trial, stop.reason) == (2, detail)
    assert detail in stop.report(Path("/runs/r"))


def test_other_ends_do_not_stop_whatever_their_words_say():
    words = "trial 1: incomplete (provider: anthropic: http_401 after 1 attempt(s))"  # what the old regex stopped on
    assert ConfigurationStop.from_progress(progress(words, None)) is None  # no typed end: no stop
    for cause in ("provider", "infrastructure", "internal", "interrupted"):
        end = LastEnd(trial=1, outcome="incomplete", cause=cause, detail="anthropic: http_401 invalid x-api-key")
        assert ConfigurationStop.from_progress(progress(words, end)) is None


def test_the_typed_end_crosses_the_coordinator_boundary():
    end = LastEnd(trial=3, outcome="incomplete", cause="configuration", detail="internal: provider x unavailable")
    sent = progress("trial 3: incomplete (...)", end)
    _, frames = COORDINATOR_CODEC.encode(sent, sender="coordinator")
    assert COORDINATOR_CODEC.decode(frames).message.last_end == end
    assert Progress(state="running").last_end is None  # a coordinator that sends none: the field's default
