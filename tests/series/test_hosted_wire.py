"""A 5-trial Lift series through each hosted-model adapter: the real SDK against a strict loopback fake
of the provider's HTTP API whose replies the demo agent computes from the request (tests/providers/fakes.py).

This checks the whole hosted path of a series: instructions, tool schemas, PNG observations
and tool results travel in each provider's wire format with thinking on (adaptive thinking,
encrypted reasoning, thought signatures, reasoning_details sent back), every request is one
the fake's documented rules accept, the exact bytes are recorded, and the trial succeeds and
replays verified.
"""

from __future__ import annotations

import json
import re

import pytest

from roboswe.records.reader import RunReader

from ..providers.fakes import FakeProvider, agent_reply
from .conftest import roboswe, write_config

pytestmark = pytest.mark.slow

# A model id and reasoning setting per wire that turn thinking on in the provider's own form.
THINKING = {
    "anthropic": ('claude-opus-4-7', 'effort = "high"'),
    "openai": ("gpt-5.2-2026-01-01", 'effort = "high"'),
    "google": ("gemini-3-pro-fake", "include_thoughts = true"),
    "openrouter": ("anthropic/claude-opus-4.7", 'effort = "high"'),
}


_BASE64_RUN = re.compile(rb"[A-Za-z0-9+/_-]{1000,}={0,2}")  # an inline image's data, base64 or its URL-safe form


def count_like_the_service(body: bytes) -> int:
    """The count endpoints' answer: text at about 4 bytes a token, and an image by its pixels, at most
    1600 tokens (Anthropic's vision docs), not by the length of its base64 (the fake's default would
    charge a 256x256 PNG some 40k tokens, so the trial openings' camera images would force slides)."""
    images = len(_BASE64_RUN.findall(body))
    return len(_BASE64_RUN.sub(b"", body)) // 4 + 7 + 1600 * images


# CI runs the whole actor stack through one hosted wire; every adapter's own 5-trial series against
# the strict fakes runs in-process in tests/providers/test_series_wire.py. The other three wires
# through the actors are a pre-release check (`pytest -m exhaustive`): about 2.5 min on 2 cores.
@pytest.mark.parametrize("wire", ["anthropic", *(pytest.param(w, marks=pytest.mark.exhaustive)
                                                 for w in ("openai", "google", "openrouter"))])
def test_a_five_trial_lift_series_through_the_hosted_adapter_wire(wire, work_dir, admitted, monkeypatch):
    from roboswe.agents.lift_demo import LiftDemoAgent

    monkeypatch.setenv("ROBOSWE_FAKE_KEY", "fake-key-not-secret")
    with FakeProvider(wire, count=count_like_the_service) as fake:
        fake.queue(*[agent_reply(LiftDemoAgent(), wire)] * 200)
        model, reasoning = THINKING[wire]
        provider = (f'model = "{model}"\napi_key_env = "ROBOSWE_FAKE_KEY"\nbase_url = "{fake.base_url}"\n'
                    "attempts = 1")
        config = write_config(work_dir, f"wire-{wire}", agent=provider, series="trials = 5",
                              extra=f"[provider.reasoning]\n{reasoning}\n")
        config.write_text(config.read_text().replace('kind = "python"', f'kind = "{wire}"'))
        run_dir = work_dir / f"wire-{wire}"
        proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video", timeout=600)
        generations = fake.generations()
    assert fake.rejected == [], fake.rejected[0][1]  # every request was one the service documents as valid
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        assert series.model == f"{wire}:{model}"
        views = reader.trials(series.series_id)
        assert [v.end.outcome for v in views] == ["success"] * 5, [v.end.reason for v in views]
        assert [v.verification.verdict for v in views] == ["verified"] * 5
        messages = [m for v in views for m in reader.messages(v.trial_id)]
        ops = [o for v in views for o in reader.operations(v.trial_id)]
        first_ops = reader.operations(views[0].trial_id)
    assert len(messages) == len(ops) == len(generations)
    assert [m.request for m in messages] == [g.body for g in generations]  # the exact bytes on the wire
    observe = next(i for i, o in enumerate(first_ops) if o.operation == "observe")
    after = json.dumps(generations[observe + 1].json())
    assert "image/png" in after or "iVBORw0KGgo" in after  # the camera images reached the model
    assert "robot.step" in json.dumps(generations[0].json())  # the generated robot API instructions
    # Trial 2 keeps the conversation: its first request carries trial 1's turns.
    second = generations[len(first_ops)].json()
    assert "Trial 2 of 5 begins" in json.dumps(second) and "Trial 1 of 5 begins" in json.dumps(second)
