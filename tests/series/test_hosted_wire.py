"""A Lift trial through each hosted-model adapter: the real SDK against a loopback fake of the
provider's HTTP API whose replies the demo agent computes from the request (tests/providers/fakes.py).

This checks the whole hosted path of a series: instructions, tool schemas, PNG observations
and tool results travel in each provider's wire format, the exact bytes are recorded, and the
trial succeeds and replays verified.
"""

from __future__ import annotations

import json

import pytest

from roboswe.records import RunReader

from ..providers.fakes import FakeProvider, agent_reply
from .conftest import roboswe, write_config

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("wire", ["anthropic", "openai", "google", "openrouter"])
def test_a_lift_trial_through_the_hosted_adapter_wire(wire, work_dir, admitted, monkeypatch):
    from roboswe.agents.lift_demo import LiftDemoAgent

    monkeypatch.setenv("ROBOSWE_FAKE_KEY", "fake-key-not-secret")
    with FakeProvider(wire) as fake:
        fake.queue(*[agent_reply(LiftDemoAgent(), wire)] * 40)
        provider = (f'model = "fake-{wire}-model"\napi_key_env = "ROBOSWE_FAKE_KEY"\nbase_url = "{fake.base_url}"\n'
                    "attempts = 1")
        config = write_config(work_dir, f"wire-{wire}", agent=provider, series="trials = 1")
        config.write_text(config.read_text().replace('kind = "python"', f'kind = "{wire}"'))
        run_dir = work_dir / f"wire-{wire}"
        proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), timeout=600)
        generations = fake.generations()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        assert series.model == f"{wire}:fake-{wire}-model"
        (v,) = reader.trials(series.series_id)
        assert v.end.outcome == "success", v.end.reason
        assert v.verification.verdict == "verified"
        messages = reader.messages(v.trial_id)
        ops = reader.operations(v.trial_id)
        assert len(messages) == len(ops) == len(generations)
        assert [m.request for m in messages] == [g.body for g in generations]  # the exact bytes on the wire
        observe = ops.index(next(o for o in ops if o.operation == "observe"))
        after = json.dumps(generations[observe + 1].json())
        assert "image/png" in after or "iVBORw0KGgo" in after  # the camera images reached the model
        assert "robot.step" in json.dumps(generations[0].json())  # the generated robot API instructions
