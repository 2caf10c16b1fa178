"""The provider key never lands on disk: after a hosted series (the real SDK against a loopback fake of
the provider's API) and an export of the viewer, the key's value is in no file of the run directory
or the site, in any of the encodings a record or header could carry it in."""

from __future__ import annotations

import base64
import secrets

import pytest

from ..providers.fakes import FakeProvider, agent_reply
from .conftest import roboswe, write_config

pytestmark = pytest.mark.slow


def _encodings(key: str) -> dict[str, bytes]:
    raw = key.encode()
    return {
        "raw": raw,
        "base64": base64.b64encode(raw).rstrip(b"="),
        "base64_bearer": base64.b64encode(b"Bearer " + raw).rstrip(b"="),
        "hex": raw.hex().encode(),
        "utf16": key.encode("utf-16-le"),
        "json_escaped_slash": key.replace("/", "\\/").encode(),
    }


def test_the_api_key_appears_in_no_record_log_config_or_export(work_dir, admitted, monkeypatch):
    from roboswe.agents.lift_demo import LiftDemoAgent

    wire = "anthropic"
    key = "sk-ant-roboswe-test-" + secrets.token_hex(20)
    monkeypatch.setenv("ROBOSWE_SECRET_TEST_KEY", key)
    with FakeProvider(wire) as fake:
        fake.queue(*[agent_reply(LiftDemoAgent(), wire)] * 100)
        provider = (f'model = "fake-{wire}-model"\napi_key_env = "ROBOSWE_SECRET_TEST_KEY"\n'
                    f'base_url = "{fake.base_url}"\nattempts = 1')
        config = write_config(work_dir, "secrets", agent=provider, series="trials = 2")
        config.write_text(config.read_text().replace('kind = "python"', f'kind = "{wire}"'))
        run_dir = work_dir / "secrets"
        proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video", timeout=600)
        seen = fake.generations()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The key was really used: the fake saw it in each request's header, so its absence below means something.
    assert seen and all(any(key in v for v in s.headers.values()) for s in seen), sorted(seen[0].headers)
    site = work_dir / "secrets-site"
    exported = roboswe("export", str(run_dir), "--out", str(site), timeout=300)
    assert exported.returncode == 0, exported.stdout + exported.stderr

    files = [p for root in (run_dir, site) for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    names = {p.relative_to(run_dir).as_posix() for p in files if p.is_relative_to(run_dir)}
    # the places the issue names must exist for the search to cover them
    assert {"run.sqlite", "events.jsonl", "config.toml"} <= names, sorted(names)[:40]
    assert any(n.startswith("actors/") and n.endswith(".log") for n in names)
    assert any(p.is_relative_to(site) and p.name == "index.html" for p in files)
    assert "ROBOSWE_SECRET_TEST_KEY" in (run_dir / "config.toml").read_text()  # the variable's name is kept, not its value
    found = []
    for path in files:
        data = path.read_bytes()
        for encoding, needle in _encodings(key).items():
            if needle in data:
                found.append(f"{path} ({encoding})")
    assert not found, found
    assert key not in proc.stdout + proc.stderr + exported.stdout + exported.stderr
