"""`roboswe sim serve` over loopback tcp: CURVE admits the right key, refuses wrong or none."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import trio
from roboswe.actors import (
    Client,
    CurveClientKeys,
    PeerDead,
    RemoteError,
    client_keys,
    new_key_pair,
)
from roboswe.protocol.sim import SIM_CODEC, SIM_ROBOT_CODEC, GetSpec

from roboswe.cli import main as cli_main

from .conftest import sim_env


def start_serve(*args: str) -> tuple[subprocess.Popen, str]:
    """Start `roboswe sim serve`; returns it and its first stdout line (the endpoints it bound)."""
    proc = subprocess.Popen([sys.executable, "-m", "roboswe.cli", "sim", "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sim_env())
    line = proc.stdout.readline()
    return proc, line


def bound(line: str) -> tuple[str, str]:
    """(control, robot) endpoints from serve's line ``simulator control=... robot=... curve=...``."""
    fields = dict(part.split("=", 1) for part in line.split()[1:])
    return fields["control"], fields["robot"]


def serve_on_a_port_pair(*args: str, attempts: int = 20) -> tuple[subprocess.Popen, int]:
    """Serve on tcp://127.0.0.1:P with its robot endpoint on P+1, the pair `roboswe run --sim` derives.

    Port 0 cannot express a pair, so a candidate is tried and, if either port is taken by the
    time serve binds it (serve exits), the next one: no probe socket that is closed and re-bound.
    """
    base = 20000 + (os.getpid() * 7) % 20000
    for n in range(attempts):
        port = base + 2 * n
        proc, line = start_serve("--bind", f"tcp://127.0.0.1:{port}", *args)
        if line.startswith("simulator control="):
            return proc, port
        proc.wait(30)
    raise RuntimeError(f"no free port pair in {attempts} tries from {base}")


@pytest.fixture
def curve_server(tmp_path):
    assert cli_main(["keys", "generate", str(tmp_path / "keys")]) == 0
    proc, line = start_serve("--bind", "tcp://127.0.0.1:0", "--keys", str(tmp_path / "keys"))
    assert line.startswith("simulator control="), line + proc.stderr.read() if proc.poll() is not None else line
    yield bound(line), tmp_path / "keys", proc
    if proc.poll() is None:
        proc.terminate()
    proc.wait(10)


async def test_right_key_is_served_on_both_endpoints(curve_server):
    (control, robot), keys, _ = curve_server
    right = client_keys(keys)
    for endpoint, codec in ((control, SIM_CODEC), (robot, SIM_ROBOT_CODEC)):
        async with Client("coordinator", endpoint, codec, curve=right) as client:
            with trio.fail_after(10), pytest.raises(RemoteError) as answered:
                await client.request(GetSpec())
            assert answered.value.code == "not_loaded"  # authenticated and answered by the simulator


async def test_wrong_key_and_no_key_are_refused(curve_server):
    (control, _), keys, proc = curve_server
    server_public = (keys / "server.key").read_text().split('public-key = "')[1].split('"')[0].encode()
    stranger_pub, stranger_sec = new_key_pair()
    stranger = CurveClientKeys(public_key=stranger_pub, secret_key=stranger_sec, server_key=server_public)
    with trio.fail_after(10), pytest.raises(PeerDead):
        async with Client("stranger", control, SIM_CODEC, curve=stranger, heartbeat_interval=0.2):
            pass
    with trio.fail_after(10), pytest.raises(PeerDead):
        async with Client("plain", control, SIM_CODEC, heartbeat_interval=0.2):
            pass
    proc.terminate()
    out, err = proc.communicate(timeout=10)
    assert "curve_client_refused" in out + err  # the refusal is logged with the stranger's key
    assert stranger_pub.decode() in out + err


def test_plain_tcp_is_refused_off_loopback_and_warned_on_it():
    proc, line = start_serve("--bind", "tcp://0.0.0.0:0")
    assert proc.wait(30) == 2 and "without CURVE keys" in proc.stderr.read()
    proc, line = start_serve("--bind", "tcp://127.0.0.1:0")
    try:
        assert line.startswith("simulator control=") and "curve=off" in line
        control, robot = bound(line)
        assert control != "tcp://127.0.0.1:0" and robot != "tcp://127.0.0.1:0"  # the ports the OS picked
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
        assert "without CURVE keys" in proc.stderr.read()


async def test_shutdown_message_stops_the_served_simulator():
    from roboswe.protocol.control import Shutdown

    proc, line = start_serve("--bind", "tcp://127.0.0.1:0")
    try:
        async with Client("coordinator", bound(line)[0], SIM_CODEC) as client:
            with trio.fail_after(10):
                await client.request(Shutdown(reason="done"))
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
