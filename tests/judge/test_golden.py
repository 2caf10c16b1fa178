"""The scripted judge on the golden pictures of the real close-drawer scene, through the `python` provider
adapter: a closed drawer agrees, a swapped picture is one contradiction, a black frame is unobservable,
a broken schema is an error; and no request carries the mechanical outcome."""

from __future__ import annotations

import numpy as np
import pytest
import trio

from roboswe.judge.conditions import load_judge_config
from roboswe.judge.judging import judge_one
from roboswe.providers import ProviderConfig, create_participant

from .golden import FORBIDDEN, asked, lift_asked, picture, views

CONFIG, CONFIG_SHA = load_judge_config()


def judged(a, **options):
    provider = CONFIG.provider if not options else ProviderConfig(
        **{**__import__("msgspec").structs.asdict(CONFIG.provider), "options": {**CONFIG.provider.options, **options}})
    participant = create_participant(provider)
    return trio.run(judge_one, participant, CONFIG, CONFIG_SHA, a)


def comparisons(record) -> list[tuple[str, str, str]]:
    return [(v["id"], v["verdict"], v["comparison"]) for v in record.verdicts]


def test_a_closed_drawer_agrees_with_a_mechanical_success():
    record = judged(asked("success"))
    assert record.status == "answered" and record.error == ""
    assert comparisons(record) == [("drawer_shut", "supported", "agree")]
    assert record.verdicts[0]["views"] == ["t3/sideview"]
    # the record: pictures by camera and step, the prompt's and conditions' digests, the exact exchange
    assert [(v["camera"], v["step"]) for v in record.views] == [
        (c, s) for s in (0, 100, 200) for c in ("frontview", "sideview")]
    assert record.prompt_sha256 and record.conditions_sha256 and record.judge_sha256 == CONFIG_SHA
    assert record.provider == "python" and record.attempts and record.attempts[0].outcome == "ok"


def test_a_swapped_final_picture_is_one_contradiction():
    record = judged(asked("success", views(final={"sideview": picture("sideview", "open")})))
    assert comparisons(record) == [("drawer_shut", "contradicted", "contradiction")]


def test_an_open_drawer_agrees_with_a_mechanical_failure():
    record = judged(asked("failure", views(final={"sideview": picture("sideview", "open")})))
    assert comparisons(record) == [("drawer_shut", "contradicted", "agree")]


def test_a_black_frame_is_unobservable_and_unresolved():
    black = np.zeros_like(picture("sideview", "shut"))
    record = judged(asked("success", views(final={"sideview": black})))
    assert comparisons(record) == [("drawer_shut", "unobservable", "unresolved")]
    assert "dark" in record.verdicts[0]["evidence"]


def test_a_broken_schema_is_an_error_not_a_verdict():
    record = judged(asked("success"), answer="broken")
    assert record.status == "error" and record.verdicts == []
    assert record.error.startswith("malformed answer:") and "probably" in record.error


@pytest.mark.parametrize("outcome", ["success", "failure"])
def test_the_mechanical_outcome_is_never_in_the_recorded_request(outcome):
    record = judged(asked(outcome))
    sent = [record.request, *(a.request for a in record.attempts)]
    assert all(sent)
    for data in sent:
        for word in FORBIDDEN:
            assert word not in data.lower(), word
    # nor the control steps the pictures show (the record keeps them; the judge sees moments)
    assert b"200" not in record.request and b"step" not in record.request.lower()


@pytest.mark.parametrize(("outcome", "final", "expected"), [
    ("success", "lift-raised", ("supported", "agree")),
    ("success", "lift-rest", ("contradicted", "contradiction")),
    ("failure", "lift-rest", ("contradicted", "agree")),
])
def test_the_lift_rule_sees_a_raised_cube(outcome, final, expected):
    (row,) = comparisons(judged(lift_asked(outcome, final)))
    assert row == ("cube_raised", *expected)
