"""A run whose first trial ends incomplete for a configuration cause stops there, exit 1, cause in full.

End to end with real actors: the participant is a hosted adapter pointed at a loopback fake
of the Anthropic API that refuses the key (401) on every generation. Without the stop, the
run would record five identical `incomplete` trials and exit 0.
"""

from __future__ import annotations

import time

import pytest

from roboswe.records.reader import RunReader

from ..providers.fakes import FakeProvider, error_reply
from ..series.conftest import admitted, roboswe, sandbox_image, work_dir, write_config  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow

REFUSAL = "invalid x-api-key (fake: this key was revoked)"


def test_a_refused_key_stops_the_run_after_the_first_trial_with_the_cause_in_full(work_dir, admitted, monkeypatch):  # noqa: F811
    monkeypatch.setenv("ROBOSWE_FAKE_KEY", "sk-revoked-not-secret")
    with FakeProvider("anthropic") as fake:
        fake.queue(*[error_reply(401, message=REFUSAL)] * 10)
        provider = (f'model = "fake-anthropic-model"\napi_key_env = "ROBOSWE_FAKE_KEY"\nbase_url = "{fake.base_url}"\n'
                    "attempts = 1")
        config = write_config(work_dir, "refused-key", agent=provider, series="trials = 5")
        config.write_text(config.read_text().replace('kind = "python"', 'kind = "anthropic"'))
        run_dir = work_dir / "refused-key"
        t0 = time.monotonic()
        # No preflight: what is under test is the stop after a trial, whatever preflight would have caught
        # (tests/commands/test_preflight.py covers that; a checkout with uncommitted robot-module edits has a stale image).
        proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-preflight",
                       timeout=600)
        seconds = time.monotonic() - t0
        generations = fake.generations()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "stopped after trial 1: it ended incomplete for a configuration problem" in proc.stderr
    assert "http_401" in proc.stderr and REFUSAL in proc.stderr  # the provider's words, not cut off
    assert f"roboswe run --resume {run_dir}" in proc.stderr
    assert ("trial 1 attempt 0: configuration: provider: anthropic: http_401" in proc.stdout  # below the table
            and REFUSAL in proc.stdout)
    assert len(generations) == 1  # one refused call, not one per trial
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        ended = [v for v in reader.trials(series.series_id) if v.end is not None]
    assert [(v.end.outcome, v.end.cause) for v in ended] == [("incomplete", "configuration")]  # the typed cause
    assert ended[0].end.detail.startswith("provider: anthropic: http_401") and REFUSAL in ended[0].end.detail
    assert not list((run_dir / "sock").glob("*.sock"))  # the actors were stopped and their sockets removed
    print(f"stopped after {seconds:.1f} s")


@pytest.mark.exhaustive  # a repeat of the configuration stop above (a refused key), through the same path
def test_a_missing_key_stops_the_run_after_the_first_trial(work_dir, admitted, monkeypatch):  # noqa: F811
    """What the issue saw: no key exported. Preflight refuses it; past preflight, the run still stops at once."""
    monkeypatch.delenv("ROBOSWE_UNSET_KEY", raising=False)
    provider = 'model = "fake-anthropic-model"\napi_key_env = "ROBOSWE_UNSET_KEY"\nbase_url = "http://127.0.0.1:9/"'
    config = write_config(work_dir, "unset-key", agent=provider, series="trials = 5")
    config.write_text(config.read_text().replace('kind = "python"', 'kind = "anthropic"'))
    run_dir = work_dir / "unset-key"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-preflight", timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "stopped after trial 1" in proc.stderr
    assert "environment variable ROBOSWE_UNSET_KEY is empty or unset" in proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        ended = [v for v in reader.trials(series.series_id) if v.end is not None]
    assert [(v.end.outcome, v.end.cause) for v in ended] == [("incomplete", "configuration")]
