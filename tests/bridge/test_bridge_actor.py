"""The sandbox_bridge actor as a real process: trial control messages, typed errors for bad
requests, and refusals recorded in the run's events.jsonl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import trio
from roboswe.actors import Client, RemoteError
from roboswe.protocol import bridge as bp
from roboswe.protocol.control import Shutdown

from tests.sandbox.stand_in_sim import ToyRobot, serve_toy_robot

pytestmark = pytest.mark.slow


def _start_bridge(run_dir) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "roboswe.actors.sandbox_bridge", "--run-dir", str(run_dir)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    sock = run_dir / "sock" / "sandbox_bridge.sock"
    deadline = time.monotonic() + 30
    while not sock.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "bridge actor did not bind"
        time.sleep(0.05)
    return proc, f"ipc://{sock}"


@pytest.fixture
def bridge_actor(scratch):
    proc, endpoint = _start_bridge(scratch)
    yield endpoint
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


async def test_bridge_actor_runs_trials_and_records_refusals(image, scratch, bridge_actor, nursery):
    robot = ToyRobot()
    await nursery.start(serve_toy_robot, f"ipc://{scratch / 'sock' / 'simulator-robot.sock'}", robot)
    workspace = scratch / "workspace"
    workspace.mkdir()
    (workspace / "forge.py").write_text(
        "import os, socket, msgspec\nfrom roboswe.bridge import wire\nfrom roboswe.protocol._base import envelope\n"
        "s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(os.environ['ROBOSWE_BRIDGE'])\n"
        "s.sendall(wire.encode([msgspec.msgpack.encode(envelope('x')), msgspec.msgpack.encode({'kind': 'SuccessQuery'})]))\n"
        "print(msgspec.msgpack.decode(wire.read_message(lambda n: s.recv(n, socket.MSG_WAITALL))[1])['code'])\n"
        "import robot; robot.step([0.5, 0, 0, 0])\n"
    )
    async with Client("coordinator", bridge_actor, bp.BRIDGE_CODEC) as bridge:
        with trio.fail_after(60):
            opened = (await bridge.request(bp.OpenTrial(trial="t1", workspace=str(workspace), backend="bwrap"))).message
        assert isinstance(opened, bp.TrialOpened) and opened.backend == "bwrap" and opened.image_digest == image.digest
        with pytest.raises(RemoteError, match="already open"):
            await bridge.request(bp.OpenTrial(trial="t1", workspace=str(workspace)))
        with pytest.raises(RemoteError, match="relative to the workspace"):
            await bridge.request(bp.ExecScript(script="../etc/passwd"))
        with trio.fail_after(60):
            fb = (await bridge.request(bp.ExecScript(script="forge.py"))).message
        assert fb.stdout == "refused\n" and fb.steps == 1 and fb.refused == 1, fb.stderr
        assert robot.received.count("Step") == 1 and "SuccessQuery" not in robot.received
        await bridge.request(bp.CloseTrial(trial="t1"))
        with pytest.raises(RemoteError, match="not open"):
            await bridge.request(bp.CloseTrial(trial="t1"))
        await bridge.request(Shutdown(reason="test over"))
    events = [json.loads(line) for line in (scratch / "events.jsonl").read_text().splitlines()]
    refused = [e for e in events if e["event"] == "bridge_refused"]
    assert [(e["actor"], e["kind"], e["trial"], e["script"]) for e in refused] == [("sandbox_bridge", "SuccessQuery", "t1", "forge.py")]
    chosen = [e for e in events if e["event"] == "sandbox_backend_chosen"]
    assert chosen and chosen[0]["backend"] == "bwrap" and chosen[0]["image"] == image.digest


async def test_a_killed_bridge_leaves_no_container_behind(image, scratch, nursery):
    from tests.sandbox.conftest import _docker_skip_reason

    from ..conftest import require_in_ci

    why = _docker_skip_reason(image)
    if why:
        require_in_ci(f"docker backend: {why}")
    from roboswe.sandbox.images import docker_client

    client = docker_client()
    robot = ToyRobot()
    await nursery.start(serve_toy_robot, f"ipc://{scratch / 'sock' / 'simulator-robot.sock'}", robot)
    workspace = scratch / "workspace"
    workspace.mkdir()
    first, endpoint = _start_bridge(scratch)
    label = {"label": "roboswe.trial=leak-probe"}
    try:
        async with Client("coordinator", endpoint, bp.BRIDGE_CODEC) as bridge:
            with trio.fail_after(60):
                await bridge.request(bp.OpenTrial(trial="leak-probe", workspace=str(workspace), backend="docker"))
        (container,) = client.containers.list(all=True, filters=label)
        assert container.labels["roboswe.bridge_pid"] == str(first.pid)
    finally:
        first.kill()
        first.wait(10)
    assert client.containers.list(all=True, filters=label), "the SIGKILLed bridge could not remove its container"
    second_dir = scratch / "second"
    second_dir.mkdir()
    second, _ = _start_bridge(second_dir)
    try:
        deadline = time.monotonic() + 30
        while client.containers.list(all=True, filters=label):
            assert time.monotonic() < deadline, "the next bridge did not remove the orphaned container"
            await trio.sleep(0.2)
    finally:
        second.kill()
        second.wait(10)
