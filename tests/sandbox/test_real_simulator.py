"""Against the real simulator actor (a separate process, robosuite Lift): forged requests sent
directly on the bridge socket change nothing in the scene; allowed calls move the robot."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import trio
from roboswe.actors import Client
from roboswe.protocol import sim as simp
from structlog.testing import capture_logs

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

FORGE = """
import os, socket, msgspec
from roboswe.bridge import wire
from roboswe.protocol._base import envelope
s = socket.socket(socket.AF_UNIX); s.settimeout(5)
s.connect(os.environ["ROBOSWE_BRIDGE"])
env = msgspec.msgpack.encode(envelope("forger"))
token = os.environ["ROBOSWE_TOKEN"]
for body in [{"kind": "Load", "manifest": {}, "seed": 3}, {"kind": "Wait", "steps": 40}, {"kind": "SuccessQuery"},
             {"kind": "TakeStates"}, {"kind": "Reset", "token": token}, {"kind": "SetState", "token": token, "qpos": [0.0] * 9},
             {"kind": "Step", "token": token, "actions": [[0.0] * 7] * 5}, {"kind": "Grade", "token": token}]:
    s.sendall(wire.encode([env, msgspec.msgpack.encode(body)]))
    print(body["kind"], msgspec.msgpack.decode(wire.read_message(lambda n: s.recv(n, socket.MSG_WAITALL))[1])["code"])
"""


@pytest.fixture(scope="module")
def run_dir():
    d = Path(tempfile.mkdtemp(prefix="rs-realsim-", dir="/tmp"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def simulator(run_dir):
    env = {**os.environ, "PYTHONHASHSEED": "0", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.Popen([sys.executable, "-m", "roboswe.actors.simulator", "--run-dir", str(run_dir / "sim")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    sock = run_dir / "sim" / "sock" / "simulator.sock"
    deadline = time.monotonic() + 60
    while not sock.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "simulator did not bind"
        time.sleep(0.05)
    yield f"ipc://{sock}"
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


async def _snapshot(sim) -> tuple:
    state = (await sim.request(simp.GetState())).message
    success = (await sim.request(simp.SuccessQuery())).message
    return state.control_step, json.dumps(state.values, sort_keys=True), success.longest_run


async def test_forged_requests_leave_the_real_scene_unchanged(backend, image, run_dir, simulator):
    from roboswe.actors import robot_endpoint, robot_link
    from roboswe.bridge.trial import open_trial
    from roboswe.sim.manifest import load_manifest

    manifest = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")
    workspace = run_dir / f"ws-{backend}"
    workspace.mkdir()
    (workspace / "forge.py").write_text(FORGE)
    (workspace / "move.py").write_text("import robot, numpy as np\nrobot.step_many(np.zeros((5, 7)))\nprint(robot.steps_left())\n")
    async with Client("coordinator", simulator, simp.SIM_CODEC) as sim:
        with trio.fail_after(120):
            await sim.request(simp.Load(manifest=simp.encode_manifest(manifest), seed=0))
        before = await _snapshot(sim)
        async with robot_link(robot_endpoint(simulator)) as link, \
                open_trial("real", workspace, link, backend=backend, image=image) as sandbox:
            with capture_logs() as events:
                fb = await sandbox.exec("forge.py")
            assert fb.exit_status == 0, fb.stderr
            assert fb.stdout.splitlines() == [f"{k} refused" for k in ("Load", "Wait", "SuccessQuery", "TakeStates", "Reset", "SetState", "Step", "Grade")]
            assert await _snapshot(sim) == before
            kinds = [e["kind"] for e in events if e["event"] == "bridge_refused"]
            assert kinds == ["Load", "Wait", "SuccessQuery", "TakeStates", "Reset", "SetState", "Step", "Grade"]
            # the bridge keeps serving, and allowed calls do move the real robot
            fb = await sandbox.exec("move.py")
            assert fb.exit_status == 0 and fb.steps == 5 and fb.stdout == "45\n", fb.stderr
            after = await _snapshot(sim)
            assert after[0] == before[0] + 5
