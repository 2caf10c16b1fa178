"""The judge through the hosted adapters against the strict local fakes of each wire: the request passes the
service's documented rules, the exact bytes are recorded, tokens and cost come from the response, the
mechanical outcome is nowhere in what was sent, and an answer without the tool is an error."""

from __future__ import annotations

import json

import pytest
import trio

from roboswe.judge.conditions import Judge, JudgeConfig
from roboswe.judge.judging import judge_one
from roboswe.judge.request import TOOL
from roboswe.providers import ProviderConfig, create_participant
from roboswe.records.usage import Price

from ..providers.fakes import REPLY, FakeProvider
from .golden import FORBIDDEN, asked

KEY_ENV = "ROBOSWE_JUDGE_TEST_KEY"
ANSWER = {"conditions": [{"id": "drawer_shut", "verdict": "supported", "evidence": "the drawer front is flush",
                          "views": ["t3/sideview"]}]}
PRICE = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-judge-test")


def judge_config(fake: FakeProvider) -> JudgeConfig:
    return JudgeConfig(judge=Judge(name="hosted"), provider=ProviderConfig(
        kind=fake.wire, model="claude-opus-4-8" if fake.wire == "anthropic" else "fake-model-2026-01-01",
        api_key_env=KEY_ENV, base_url=fake.base_url, timeout_s=10.0, attempts=2, backoff_initial_s=0.01,
        backoff_max_s=0.02, max_output_tokens=2000, price=PRICE))


def judge_through(wire: str, *replies, outcome: str = "success"):
    with FakeProvider(wire) as fake:
        fake.queue(*replies)
        config = judge_config(fake)
        record = trio.run(judge_one, create_participant(config.provider), config, "c" * 64, asked(outcome))
        return record, fake


def check_answered(wire: str) -> None:
    record, fake = judge_through(wire, REPLY[wire](tool=(TOOL, ANSWER), usage=(2100, 90)))
    assert fake.rejected == []  # the service's documented rules hold for the judge's request
    (seen,) = fake.generations()
    assert record.status == "answered", record.error
    assert [(v["id"], v["comparison"]) for v in record.verdicts] == [("drawer_shut", "agree")]
    (attempt,) = record.attempts
    assert attempt.request == seen.body and record.response == attempt.response  # the exact exchange
    for word in FORBIDDEN:
        assert word not in seen.body.lower(), word
    body = json.dumps(seen.json())
    assert body.count(TOOL) >= 1 and all(v["sha256"] for v in record.views)
    output = record.usage["output"]  # reasoning included: Gemini's thoughts come on top of the 90
    assert record.usage["input"] == 2100 and output >= 90
    assert record.cost["amount"] == pytest.approx((2100 * 3.0 + output * 15.0) / 1e6)


def test_the_anthropic_adapter_judges_against_the_strict_fake():
    check_answered("anthropic")


@pytest.mark.exhaustive
@pytest.mark.parametrize("wire", ["openai", "google", "openrouter"])
def test_the_other_adapters_judge_against_their_strict_fakes(wire):
    check_answered(wire)


def test_a_hosted_answer_without_the_tool_is_an_error_with_its_bytes_kept():
    record, _ = judge_through("anthropic", REPLY["anthropic"](text="The drawer looks shut to me."))
    assert record.status == "error" and record.verdicts == []
    assert record.error.startswith("malformed answer: no tool call")
    assert record.response and b"looks shut" in record.response


def test_a_provider_outage_is_an_error_with_every_attempt():
    from ..providers.fakes import error_reply

    record, _ = judge_through("anthropic", error_reply(500), error_reply(500))
    assert record.status == "error" and record.error.startswith("provider:")
    assert [a.status for a in record.attempts] == [500, 500] and record.response is None
