"""`roboswe up` end to end: real supervisor, six real actor processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import actor_env

pytestmark = pytest.mark.slow

READY_TIMEOUT = 90  # six Python processes importing at once on a busy 2-core machine


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def events(run_dir: Path) -> list[dict]:
    path = run_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for_event(run_dir: Path, timeout: float, **fields) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in events(run_dir):
            if all(event.get(k) == v for k, v in fields.items()):
                return event
        time.sleep(0.05)
    raise AssertionError(f"no event {fields} within {timeout} s")


class Up:
    """A `roboswe up` subprocess that is always stopped at teardown."""

    def __init__(self, run_dir: Path, *extra: str):
        self.run_dir = run_dir
        self.stderr = open(run_dir.parent / "up.stderr", "w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "roboswe.cli", "up", "--run-dir", str(run_dir), *extra],
            stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=actor_env(),
        )

    def ready_line(self) -> str:
        return self.process.stdout.readline().strip()

    def actors(self) -> dict[str, dict]:
        return json.loads((self.run_dir / "supervisor.json").read_text())["actors"]

    def error_output(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
        for actor in self.actors().values() if (self.run_dir / "supervisor.json").exists() else ():
            if actor["pid"] and pid_alive(actor["pid"]):
                os.killpg(actor["pid"], signal.SIGKILL)


@pytest.fixture
def up(tmp_path):
    started: list[Up] = []

    def start(*extra: str) -> Up:
        instance = Up(tmp_path / "run", *extra)
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()


def test_up_restarts_dead_actors_and_stops_cleanly_on_sigterm(up):
    run = up()
    started = time.monotonic()
    line = run.ready_line()
    assert line == f"roboswe: ready (6 actors) run-dir={run.run_dir.resolve()}", run.error_output()
    assert time.monotonic() - started < READY_TIMEOUT
    first = run.actors()
    assert set(first) == {"coordinator", "simulator", "sandbox_bridge", "provider_client", "context_manager", "recorder"}
    assert all(a["state"] == "ready" and pid_alive(a["pid"]) for a in first.values())

    # A killed actor is reported (its exit is seen at once; 10 s leaves room for a busy machine) and restarted.
    victim = first["coordinator"]["pid"]
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    died = wait_for_event(run.run_dir, 10.0, event="actor_died", actor="coordinator")
    assert time.monotonic() - killed_at < 10.0
    assert died["pid"] == victim and died["signal"] == "SIGKILL" and died["cause"] == "exit"

    # A hung actor (stopped, so no heartbeats) is declared dead by heartbeat loss.
    hung = first["context_manager"]["pid"]
    os.kill(hung, signal.SIGSTOP)
    stopped_at = time.monotonic()
    died = wait_for_event(run.run_dir, 10.0, event="actor_died", actor="context_manager")
    # liveness 3 x 0.75 s after its last heartbeat (at most 0.75 s before the stop), plus slack on a busy box
    assert 1.4 < time.monotonic() - stopped_at < 10.0
    assert died["cause"] == "heartbeat" and died["pid"] == hung

    for name in ("coordinator", "context_manager"):
        wait_for_event(run.run_dir, 30, event="actor_restarted", actor=name)
    second = run.actors()
    for name, old in (("coordinator", victim), ("context_manager", hung)):
        assert second[name]["pid"] != old and pid_alive(second[name]["pid"]) and second[name]["restarts"] == 1
        assert not pid_alive(old)

    # status reads the state file and queries live Statistics.
    status = subprocess.run(
        [sys.executable, "-m", "roboswe.cli", "status", "--run-dir", str(run.run_dir), "--json"],
        capture_output=True, text=True, timeout=30,
    )
    rows = {row["actor"]: row for row in json.loads(status.stdout)["actors"]}
    assert rows["coordinator"]["restarts"] == 1 and rows["simulator"]["state"] == "ready"
    assert rows["simulator"]["uptime"] is not None and rows["simulator"]["handled"] >= 1

    # SIGTERM: everything stops, nothing survives, sockets are gone, exit 0.
    all_pids = {a["pid"] for a in first.values()} | {a["pid"] for a in second.values()}
    run.process.send_signal(signal.SIGTERM)
    assert run.process.wait(15) == 0, run.error_output()
    assert [pid for pid in all_pids if pid_alive(pid)] == []
    assert not list((run.run_dir / "sock").glob("*.sock")) if (run.run_dir / "sock").exists() else True
    assert json.loads((run.run_dir / "supervisor.json").read_text())["state"] == "stopped"
    lines = (run.run_dir / "events.jsonl").read_text().splitlines()
    assert all({"time", "level", "actor", "pid", "event"} <= json.loads(line).keys() for line in lines)


def test_up_gives_up_after_restart_limit_with_clear_message(up, tmp_path):
    config = tmp_path / "run.toml"
    config.write_text("[supervisor.actors.provider_client]\nmax_restarts = 0\n")
    run = up("--config", str(config))
    assert run.ready_line().startswith("roboswe: ready (6 actors)"), run.error_output()
    pids = {a["pid"] for a in run.actors().values()}
    os.kill(run.actors()["provider_client"]["pid"], signal.SIGKILL)
    assert run.process.wait(20) == 1
    message = run.error_output()
    assert "provider_client died (killed by SIGKILL)" in message and "restart limit 0 reached" in message
    assert [pid for pid in pids if pid_alive(pid)] == []


def test_up_rejects_config_with_unknown_key(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text("[supervisor]\nready_timout = 5\n")
    result = subprocess.run(
        [sys.executable, "-m", "roboswe.cli", "up", "--run-dir", str(tmp_path / "run"), "--config", str(config)],
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2
    assert str(config) in result.stderr and "supervisor.ready_timout" in result.stderr


def test_up_reports_an_actor_that_cannot_start(up, tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('[transport.endpoints]\ncoordinator = "tcp://256.0.0.1:1"\n')  # cannot bind
    run = up("--config", str(config))
    assert run.process.wait(60) == 1
    message = run.error_output()
    assert "actor coordinator did not become ready (exit code 1)" in message and "coordinator.log" in message
    assert "cannot bind tcp://256.0.0.1:1" in (run.run_dir / "actors" / "coordinator.log").read_text()
    assert not any(pid_alive(a["pid"]) for a in run.actors().values() if a["pid"])


def test_actors_exit_when_the_supervisor_is_killed(up):
    run = up()
    assert run.ready_line().startswith("roboswe: ready (6 actors)"), run.error_output()
    pids = [a["pid"] for a in run.actors().values()]
    run.process.kill()  # SIGKILL: no graceful path runs; the lifeline pipe closing is all the actors see
    run.process.wait(5)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(pid_alive(pid) for pid in pids):
        time.sleep(0.1)
    assert [pid for pid in pids if pid_alive(pid)] == []
    assert len([e for e in events(run.run_dir) if e["event"] == "supervisor_gone"]) == 6
