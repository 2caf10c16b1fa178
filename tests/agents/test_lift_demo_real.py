"""The Lift demo participant solves Lift on the real stack: simulator actor process, bwrap
sandbox, bridge, the `robot` module. Only the series loop is stood in for: this test carries
out the participant's operations itself, on the real workspace, sandbox and simulator, and
asks the simulator for the success record at the end.
"""

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
from roboswe.actors import Client, robot_endpoint, robot_link
from roboswe.protocol.control import Shutdown
from roboswe.protocol.participant import (
    DecisionRequest,
    Exec,
    Finish,
    ListFiles,
    Observe,
    ReadFile,
    TextPart,
    Turn,
    WriteFile,
    result_turn,
)
from roboswe.protocol.sim import SIM_CODEC, Load, SuccessQuery, encode_manifest
from roboswe.protocol.sim import Observe as SimObserve

from roboswe.providers._config import ProviderConfig
from roboswe.providers.local import PythonParticipant

from ..conftest import require_in_ci

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def image():
    from roboswe.sandbox.images import ImageError, load_image

    try:
        return load_image()
    except ImageError as e:
        require_in_ci(f"{e} (setup.sh builds it)")


@pytest.fixture
def run_dir():
    # The sandbox user must traverse it (pytest's tmp_path lives under a 0700 parent).
    d = Path(tempfile.mkdtemp(prefix="rs-liftdemo-", dir="/tmp"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def simulator(run_dir):
    env = {**os.environ, "PYTHONHASHSEED": "0", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
           "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))}
    proc = subprocess.Popen([sys.executable, "-m", "roboswe.actors.simulator", "--run-dir", str(run_dir / "sim")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sock = run_dir / "sim" / "sock" / "simulator.sock"
    deadline = time.monotonic() + 60
    while not sock.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "simulator did not bind"
        time.sleep(0.05)
    yield f"ipc://{sock}"
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


class RealTrial:
    """Carries out participant operations on a real workspace, sandbox and simulator."""

    def __init__(self, workspace: Path, sandbox, sim: Client):
        self.ws, self.sandbox, self.sim = workspace, sandbox, sim
        self.steps = 0
        self.execs = []

    async def answer(self, op) -> tuple[str, bool]:
        match op:
            case ListFiles():
                return "\n".join(f"{p.name} ({p.stat().st_size} bytes)" for p in sorted(self.ws.iterdir())), False
            case ReadFile(path=path):
                f = self.ws / path
                return (f.read_text(), False) if f.exists() else (f"no such file: {path}", True)
            case WriteFile(path=path, content=content):
                (self.ws / path).write_text(content)
                os.chmod(self.ws / path, 0o666)  # the sandbox user rewrites plan.json
                return f"wrote {len(content)} bytes to {path}", False
            case Observe(cameras=cameras, depth=depth):
                obs = (await self.sim.request(SimObserve(cameras=cameras or [], depth=depth))).message
                return "rendered " + ", ".join(f"{im.camera} {im.width}x{im.height}" for im in obs.images), False
            case Exec(path=path):
                fb = await self.sandbox.exec(path)
                self.steps += fb.steps
                self.execs.append(fb)
                return f"exit {fb.exit_status} steps {fb.steps} limit {fb.limit}\n{fb.stdout}\n{fb.stderr}", fb.exit_status != 0
        raise AssertionError(f"unexpected operation {op}")


async def run_trial(participant, real: RealTrial, conversation: list[Turn], trial: int) -> list:
    conversation.append(Turn(id=f"start-{trial}", role="user", trial=trial, parts=[TextPart(text=f"Trial {trial} begins.")]))
    ops = []
    for k in range(40):
        decision = await participant.decide(DecisionRequest(system="", tools=[], conversation=list(conversation), trial=trial))
        conversation.append(decision.turn)
        ops.append(decision.operation)
        if isinstance(decision.operation, Finish):
            return ops
        text, is_error = await real.answer(decision.operation)
        conversation.append(result_turn(decision, id=f"r{trial}-{k}", text=text, is_error=is_error, trial=trial))
    raise AssertionError(f"no finish: {ops}")


# Both seeds are repeats: `roboswe demo` (tests/viewer/test_demo.py) runs this participant through every actor by default.
@pytest.mark.exhaustive
@pytest.mark.parametrize("seed", [0, 7])
async def test_demo_participant_lifts_the_cube_on_the_real_stack(seed, image, run_dir, simulator):
    from roboswe.bridge.trial import open_trial
    from roboswe.sim.manifest import load_manifest

    manifest = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")
    participant = PythonParticipant(ProviderConfig(kind="python", agent="roboswe.agents.lift_demo:LiftDemoAgent"))
    workspace = run_dir / "workspace"
    workspace.mkdir()
    conversation: list[Turn] = []
    # Building a scene can starve the simulator's heartbeats for seconds on a loaded CPU.
    async with Client("coordinator", simulator, SIM_CODEC, liveness=10) as sim:
        for trial in (1, 2):  # trial 2 keeps the workspace: the retained script is reused
            with trio.fail_after(120):
                await sim.request(Load(manifest=encode_manifest(manifest), seed=seed))
            async with robot_link(robot_endpoint(simulator)) as link, \
                    open_trial(f"t{trial}", workspace, link, backend="bwrap", image=image) as sandbox:
                real = RealTrial(workspace, sandbox, sim)
                with trio.fail_after(300):
                    ops = await run_trial(participant, real, conversation, trial)
                status = (await sim.request(SuccessQuery())).message
            plan = json.loads((workspace / "plan.json").read_text())
            assert plan["phase"] == "done", (plan, [type(o).__name__ for o in ops], ops[-1],
                                              [(fb.exit_status, fb.steps, fb.limit, fb.stdout[-500:], fb.stderr[-1500:]) for fb in real.execs])
            assert isinstance(ops[-1], Finish) and "done" in ops[-1].reason
            assert status.achieved, status
            assert real.steps <= 120 and status.control_step == real.steps
            assert all(fb.exception is None or fb.exception.type == "robot.LimitReached" for fb in real.execs)
            wrote_script = any(isinstance(o, WriteFile) and o.path == "lift_cube.py" for o in ops)
            assert wrote_script == (trial == 1)
            print(f"seed {seed} trial {trial}: steps {real.steps}, execs {len(real.execs)}, success at step {status.achieved_step}")
        await sim.request(Shutdown(reason="test over"))


@pytest.mark.exhaustive  # a repeat: tests/sandbox/test_exec_command.py runs `roboswe exec` by default
def test_the_script_alone_lifts_the_cube_through_roboswe_exec(tmp_path):
    """The task author's path: `roboswe exec` with simulator and bridge actors as processes.

    Run twice: the first run ends at the 50-step script limit or at `done`; the second
    continues from plan.json (or does nothing once done).
    """
    script = ROOT / "configs" / "agents" / "lift_demo" / "scripts" / "lift_cube.py"
    env = {**os.environ, "PYTHONHASHSEED": "0", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.run([sys.executable, "-m", "roboswe.cli", "exec", "lift-panda", str(script), str(script),
                           "--seed", "3", "-e", "bwrap", "--json"],
                          capture_output=True, text=True, timeout=400, env=env)
    if proc.returncode != 0 and "image" in proc.stderr and "build" in proc.stderr:
        require_in_ci(f"no sandbox image: {proc.stderr[-300:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    runs = report["scripts"]
    assert [r["exit_status"] for r in runs] == [0, 0], runs
    assert "phase: done" in runs[-1]["stdout"]
    assert report["success"]["achieved"], report["success"]
    assert sum(r["steps"] for r in runs) <= 100
