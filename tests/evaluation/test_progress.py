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


def test_the_job_totals_count_every_workers_calls_and_trials_as_the_report_prices_them():
    from roboswe.evaluation.progress import job_figures
    from roboswe.records.usage import Price

    job = Progress()
    job.started(10, Price(input=3.0, output=15.0))
    one, two = job.for_worker(1), job.for_worker(2)
    one.provider_call("anthropic", None, {"input_tokens": 1200, "output_tokens": 300}, "")
    two.provider_call("anthropic", None, {"input_tokens": 800, "output_tokens": 100}, "")
    two.provider_call("anthropic", None, {}, "http_5xx: overloaded")  # failed, unbilled: no tokens
    one.trial_ended()
    two.trial_ended()
    m = job.message()
    assert (m.trials_done, m.trials_total, m.input_tokens, m.output_tokens) == (2, 10, 2000, 400)
    assert m.cost == pytest.approx((2000 * 3.0 + 400 * 15.0) / 1e6) and m.currency == "USD"
    assert one.job_message().input_tokens == 2000  # a worker's line reads the job's totals
    assert job_figures(m, now=m.started_at + 120) == "2 min elapsed, about 8 min left; 2.0k in / 400 out tokens, 0.01 USD"


def test_without_a_pinned_price_the_cost_is_not_guessed():
    from roboswe.evaluation.progress import job_figures

    job = Progress()
    assert job_figures(job.message()) == ""  # a job that has not started says nothing
    job.started(5, None)
    job.provider_call("openai", None, {"input_tokens": 5_000_000, "output_tokens": 10}, "")
    m = job.message()
    assert m.cost is None and "no [provider.price]" in m.cost_note
    assert job_figures(m, now=m.started_at + 30) == "30 s elapsed; 5.00M in / 10 out tokens, cost not reported"
