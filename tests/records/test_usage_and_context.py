"""Tokens and cost from the stored provider responses; the context policy and its slides in the evidence."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from roboswe.protocol.recorder import (
    EventRecord,
    MessageRecord,
    RunPins,
    RunRecord,
    SeriesRecord,
    SlideRecord,
)

from roboswe.records.artifacts import build_results
from roboswe.records.reader import RunReader
from roboswe.records.report import run_summary
from roboswe.records.usage import Price, TokenUsage, call_usage, cost

from .conftest import trial_records

ANTHROPIC = {"usage": {"input_tokens": 200, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 300,
                       "output_tokens": 150}}
OPENAI = {"usage": {"input_tokens": 5000, "input_tokens_details": {"cached_tokens": 4096}, "output_tokens": 900,
                    "output_tokens_details": {"reasoning_tokens": 700}}}
GOOGLE = {"usageMetadata": {"promptTokenCount": 3000, "cachedContentTokenCount": 1024, "candidatesTokenCount": 100,
                            "thoughtsTokenCount": 400}}
OPENROUTER = {"usage": {"prompt_tokens": 800, "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens": 60,
                        "completion_tokens_details": {"reasoning_tokens": 20}}}


@pytest.mark.parametrize(("provider", "body", "expected"), [
    ("anthropic", ANTHROPIC, dict(input=1500, cached_input=1000, cache_write=300, output=150, reasoning=None)),
    ("openai", OPENAI, dict(input=5000, cached_input=4096, cache_write=0, output=900, reasoning=700)),
    ("google", GOOGLE, dict(input=3000, cached_input=1024, cache_write=0, output=500, reasoning=400)),
    ("openrouter", OPENROUTER, dict(input=800, cached_input=0, cache_write=0, output=60, reasoning=20)),
])
def test_each_providers_usage_fields_are_read_from_the_response(provider, body, expected):
    u = call_usage(provider, json.dumps(body).encode(), {})
    assert {k: getattr(u, k) for k in expected} == expected and u.calls == 1 and u.unreported_calls == 0


def test_unparsed_responses_fall_back_to_the_recorded_usage_and_failures_are_not_billed():
    recorded = {"input_tokens": 10, "output_tokens": 2, "reasoning_tokens": 0, "cached_input_tokens": 0}
    assert call_usage("python", b'{"id": "turn-1", "parts": []}', recorded) == TokenUsage(calls=1, input=10, output=2)
    assert call_usage("anthropic", b'{"type": "error"}', {}, "http_500: overloaded") == TokenUsage(failed_calls=1)
    assert call_usage("anthropic", None, {}) == TokenUsage(calls=1, unreported_calls=1)


def test_cost_uses_the_pinned_price_and_is_never_guessed():
    u = call_usage("anthropic", json.dumps(ANTHROPIC).encode(), {})
    assert cost(u, None).amount is None and "no [provider.price]" in cost(u, None).reason
    partial = Price(input=3.0, output=15.0, cached_input=0.3)
    assert cost(u, partial).amount is None and "cache_write" in cost(u, partial).reason
    full = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    assert cost(u, full).amount == pytest.approx((200 * 3 + 1000 * 0.3 + 300 * 3.75 + 150 * 15) / 1e6)
    unreported = u + TokenUsage(calls=1, unreported_calls=1)
    assert cost(unreported, full).amount is None and "1 call(s) without reported usage" in cost(unreported, full).reason


@pytest.fixture
def priced_run(store, tmp_path):
    now = time.time()
    price = {"input": 1.25, "output": 10.0, "cached_input": 0.125, "currency": "USD"}
    records: list = [
        RunRecord(run_id="r1", created_at=now, config=RunPins(run_config={"provider": {
            "kind": "openai", "model": "gpt-test", "context_window": 400_000, "max_output_tokens": 32_000,
            "price": price}})),
        SeriesRecord(series_id="r1/lift", run_id="r1", task="Lift", model="openai:gpt-test", mode="retain",
                     created_at=now),
    ]
    for t in (1, 2):
        records += trial_records("r1/lift", t, "failure")
        trial = f"r1/lift/t{t}a0"
        records.append(MessageRecord(message_id=f"{trial}/d0.1", trial_id=trial, provider="openai", request=b"{}",
                                     response=json.dumps(OPENAI).encode(), requested_at=now + t))
        records.append(MessageRecord(message_id=f"{trial}/d1.1", trial_id=trial, attempt=1, provider="openai",
                                     request=b"{}", response=b'{"error": {"message": "overloaded"}}',
                                     requested_at=now + t + 0.5, error="http_500: overloaded"))
        records.append(EventRecord(run_id="r1", event="request_count", at=now, trial_id=trial,
                                   data={"trial": t, "method": "openai.local_estimate", "units": 5000,
                                         "estimated_units": 5000}))
    records.append(SlideRecord(trial_id="r1/lift/t2a0", seq=0, at=now + 5, removed=["m1", "m2", "m3"],
                               before_units=380_000, after_units=120_000, method="openai.local_estimate"))
    store.put_durable(*records)
    return tmp_path / "run"


def test_tokens_and_cost_per_trial_series_and_run_and_the_context_policy(priced_run):
    with RunReader(priced_run) as reader:
        results = build_results(reader, "r1")
    usage = results.usage
    trial = usage.trials["r1/lift/t1a0"]
    assert (trial.calls, trial.failed_calls, trial.input, trial.cached_input, trial.output, trial.reasoning) == (
        1, 1, 5000, 4096, 900, 700)
    assert usage.series["r1/lift"].input == 10_000 and usage.run.output == 1800 and usage.run.reasoning == 1400
    one = (904 * 1.25 + 4096 * 0.125 + 900 * 10.0) / 1e6
    assert usage.trial_cost["r1/lift/t1a0"].amount == pytest.approx(one)
    assert usage.run_cost.amount == pytest.approx(2 * one) and usage.run_cost.currency == "USD"

    ctx = results.context
    p = ctx.policy
    # B as the run used it: an unknown OpenAI model gets the profile default's 272k input cap (configs/models.toml)
    assert (p.C, p.O, p.S, p.B) == (400_000, 32_000, 4096, min(400_000 - 32_000, 272_000) - 4096)
    assert p.counting == {"openai.local_estimate": 2} and p.estimated_requests == 2 and p.exact_requests == 0
    (slide,) = ctx.slides
    assert (slide.trial, slide.removed, slide.units_removed, slide.method) == (2, 3, 260_000, "openai.local_estimate")


def test_report_prints_usage_cost_policy_and_slides_and_json_matches_results(priced_run):
    out = subprocess.run([sys.executable, "-m", "roboswe.cli", "report", str(priced_run)], check=False,
                         capture_output=True, text=True, timeout=120, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "10,000" in text and "1,400" in text and "USD" in text  # input, reasoning, cost
    assert "C = 400,000, O = 32,000, S = 4,096, B = min(C - O, the model's input cap) - S = 267,904" in text
    assert "context slides" in text and "260,000" in text
    with RunReader(priced_run) as reader:
        summary = run_summary(reader)
        results = build_results(reader, "r1")
    import msgspec

    assert summary["usage"] == msgspec.to_builtins(results.usage)
    assert summary["context"] == msgspec.to_builtins(results.context)
