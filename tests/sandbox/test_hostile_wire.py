"""Hostile programs on the bridge's wire: forged and malformed requests are refused and never reach
the simulator, and message and connection floods leave the bridge's memory and descriptors bounded.

The programs' other attempts (network, filesystem, processes, output) are in test_hostile.py.
"""

from __future__ import annotations

import os

import trio
from roboswe.bridge.trial import MAX_CONNECTIONS
from structlog.testing import capture_logs

from .test_hostile import _still_serving

FORGED_KINDS = ["Load", "Reset", "SetState", "SuccessQuery", "Grade", "Wait", "TakeStates", "StepReply", "Bogus"]


FORGER = """
import os, socket, msgspec
from roboswe.bridge import wire
from roboswe.protocol._base import envelope

def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(os.environ["ROBOSWE_BRIDGE"])
    return s

def receive_exactly(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf

def ask(s, frames=None, raw=None):
    try:
        s.sendall(raw if raw is not None else wire.encode(frames))
        return msgspec.msgpack.decode(wire.read_message(lambda n: receive_exactly(s, n))[1]).get("code")
    except (OSError, EOFError) as e:
        return "no reply"

token = os.environ["ROBOSWE_TOKEN"]
env = msgspec.msgpack.encode(envelope("forger"))
"""


async def test_forged_bridge_requests_are_refused_and_never_reach_the_simulator(trial):
    with capture_logs() as events:
        fb = await trial.run(
            FORGER
            + f"""
s = connect()
for kind in {FORGED_KINDS!r}:
    body = {{"kind": kind, "token": token, "steps": 5, "seed": 1, "manifest": {{}}, "qpos": [9.0] * 4}}
    print(kind, ask(s, [env, msgspec.msgpack.encode(body)]))
print("wrong-token", ask(s, [env, msgspec.msgpack.encode({{"kind": "Step", "token": "guess", "action": [1.0, 0, 0, 0]}})]))
print("extra-blob", ask(s, [env, msgspec.msgpack.encode({{"kind": "Step", "token": token, "action": [1.0, 0, 0, 0]}}), b"x"]))
print("garbage", ask(s, [b"\\xff\\x00garbage"]))
print("garbage2", ask(s, [env, b"\\xc1\\xc1"]))
print("oversized", ask(s, [env, msgspec.msgpack.encode({{"kind": "Step", "token": token, "pad": "x" * 600_000}})]))
nested = b"\\x82\\xa4kind\\xa4Step\\xa1x" + b"\\x91" * 200_000 + b"\\xc0"
print("nested", ask(s, [env, nested]))
# announced beyond the hard cap: refused unread, then the connection is closed
print("huge", ask(s, raw=wire.HEADER.pack(8 << 20, 2) + b"x" * 1000))
print("after-huge", ask(s, [env, msgspec.msgpack.encode({{"kind": "GetSteps"}})]))
print("bad-frames", ask(connect(), raw=wire.HEADER.pack(10, 100000)))
"""
        )
    assert fb.exit_status == 0, fb.stderr
    lines = dict(line.split(" ", 1) for line in fb.stdout.splitlines())
    for kind in [*FORGED_KINDS, "wrong-token", "extra-blob", "garbage", "garbage2", "oversized", "nested", "huge", "bad-frames"]:
        assert lines[kind] == "refused", (kind, fb.stdout)
    assert lines["after-huge"] == "no reply"
    # nothing reached the simulator and nothing moved
    assert trial.robot.received == [] and trial.robot.control_step == 0 and trial.robot.qpos == [0.0] * 4
    refused = [e for e in events if e["event"] == "bridge_refused"]
    kinds = {e["kind"] for e in refused}
    assert set(FORGED_KINDS) <= kinds, kinds
    assert {"Step", "garbage", "oversized"} <= kinds, kinds
    assert all(e["trial"] == "test-trial" and e["script"] == "script.py" for e in refused)
    assert fb.refused >= len(FORGED_KINDS) + 8
    await _still_serving(trial)


def _rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS:"))


async def test_message_and_connection_floods_are_bounded(trial):
    # A message that never ends, thousands of connections, and descriptors beyond RLIMIT_NOFILE:
    # the bridge's memory and descriptors stay bounded and it serves the next script.
    rss_before, fds_before = _rss(), len(os.listdir("/proc/self/fd"))  # the bridge runs in this process
    peak = {"rss": 0, "fds": 0}

    async def watch() -> None:
        while True:
            peak["rss"] = max(peak["rss"], _rss())
            peak["fds"] = max(peak["fds"], len(os.listdir("/proc/self/fd")))
            await trio.sleep(0.05)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        fb = await trial.run(
            FORGER
            + """
import resource, time
print("nofile", resource.getrlimit(resource.RLIMIT_NOFILE)[0])
s = connect()
s.sendall(wire.HEADER.pack(900_000, 2))
sent = 0
try:
    while sent < 200 << 20:  # far beyond the announced size: the bridge reads only what was announced
        s.sendall(b"\\0" * (1 << 20))
        sent += 1 << 20
except OSError as e:
    print("stream cut after", sent >> 20, "MiB", type(e).__name__)
held, refused = [], 0
for _ in range(5000):
    try:
        held.append(connect())
    except OSError as e:
        refused += 1
        if e.errno == 24:
            break
print("held", len(held), "stopped by", "EMFILE" if refused else "nothing")
for c in held:
    c.close()
time.sleep(0.3)
print("after", ask(connect(), [env, msgspec.msgpack.encode({"kind": "GetStepsLeft", "token": token})]))
""",
            seconds=30,
        )
        nursery.cancel_scope.cancel()
    print("flood:", fb.stdout.replace("\n", "; "), "bridge rss +", (peak["rss"] - rss_before) >> 20, "MiB, fds +",
          peak["fds"] - fds_before, "in", round(fb.wall_seconds, 2), "s")
    assert fb.exit_status == 0, fb.stderr
    assert "nofile 256" in fb.stdout and "stopped by EMFILE" in fb.stdout, fb.stdout
    assert "after None" in fb.stdout, fb.stdout  # a proper call on a fresh connection is served
    assert peak["rss"] - rss_before < 64 << 20, (peak["rss"] - rss_before) >> 20
    assert peak["fds"] - fds_before <= MAX_CONNECTIONS + 8, peak["fds"] - fds_before
    await _still_serving(trial)
