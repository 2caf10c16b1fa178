"""The job's live figures are the protocol's Progress message: one field list, answered as of now."""

from __future__ import annotations

import pytest

from roboswe.evaluation.progress import Progress
from roboswe.protocol.coordinator import COORDINATOR_CODEC, GetProgress
from roboswe.protocol.coordinator import Progress as ProgressMessage


def test_an_unknown_figure_is_refused_by_name():
    with pytest.raises(TypeError, match="has no field 'stepz'"):
        Progress().update(stepz=3)


def test_the_answer_carries_the_figures_the_lines_after_and_the_active_time_read_live():
    progress = Progress()
    progress.update(state="running", trial=2, steps_used=40)
    for n in range(3):
        progress.say(f"line {n}")
    seconds = iter([1.5, 2.5])
    progress.active_clock = lambda: next(seconds)
    first, second = progress.message(after=1), progress.message(after=3)
    assert (first.state, first.trial, first.steps_used, first.active_s) == ("running", 2, 40, 1.5)
    assert [line.split(" ", 1)[1] for line in first.lines] == ["line 1", "line 2"] and first.line_count == 3
    assert second.lines == [] and second.active_s == 2.5
    progress.active_clock = None
    progress.update(active_s=9.0)
    assert progress.message().active_s == 9.0


def test_the_answer_crosses_the_coordinator_wire_unchanged():
    progress = Progress()
    progress.update(state="videos", detail="rendering", series_done=1, series_total=2)
    progress.say("hello")
    _, frames = COORDINATOR_CODEC.encode(progress.message(), sender="coordinator")
    decoded = COORDINATOR_CODEC.decode(frames).message
    assert isinstance(decoded, ProgressMessage) and decoded == progress.message()
    assert GetProgress().after == 0
