"""The simulator actor in its own process: control and robot endpoints over ipc."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
import trio
from roboswe.actors import Client, RemoteError, robot_endpoint, stream_path
from roboswe.actors._endpoints import socket_dir
from roboswe.actors._robot_stream import RobotStreamLink
from roboswe.protocol.control import Ok, Shutdown, Statistics, StatisticsRequest
from roboswe.protocol.sim import (
    SIM_CODEC,
    SIM_ROBOT_CODEC,
    GetSpec,
    GetState,
    Load,
    Observe,
    Prepare,
    Step,
    SuccessQuery,
    TakeStates,
    Wait,
    encode_manifest,
)
from roboswe.sim.physics_state import states_from_blobs
from roboswe.sim.render import gpu_present

from .conftest import sim_env


def proc_events(proc) -> str:
    """The actor's last events, for a failure message."""
    path = proc.run_dir / "events.jsonl"
    return "\n".join(path.read_text().splitlines()[-15:]) if path.exists() else "(no events.jsonl)"


@pytest.fixture
def simulator(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "roboswe.actors.simulator", "--run-dir", str(tmp_path)],
                            env=sim_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc.run_dir = tmp_path
    sockets = socket_dir(tmp_path)  # where the actor binds: a short /tmp dir when the run dir's path is long
    control = f"ipc://{sockets / 'simulator.sock'}"
    deadline = time.monotonic() + 30
    while not (sockets / "simulator.sock").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "simulator did not bind"
        time.sleep(0.05)
    yield control, proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


async def test_control_and_robot_endpoints(simulator, lift_manifest):
    control, proc = simulator
    async with Client("coordinator", control, SIM_CODEC) as coord, \
            Client("sandbox_bridge", robot_endpoint(control), SIM_ROBOT_CODEC) as bridge:
        with trio.fail_after(120):
            loaded = (await coord.request(Load(manifest=encode_manifest(lift_manifest), seed=0, trial_steps=100))).message
        assert loaded.spec.action_dim == 7 and loaded.spec.trial_limits.steps == 100
        assert loaded.manifest_digest == lift_manifest.digest()

        with trio.fail_after(90):
            spec = (await bridge.request(GetSpec())).message
            assert spec == loaded.spec and [c.name for c in spec.cameras] == ["agentview", "birdview", "robot0_eye_in_hand"]
            result = (await bridge.request(Step(actions=[[0.2, 0, 0, 0, 0, 0, -1]] * 3))).message
            assert (result.applied, result.control_step, result.stopped) == (3, 3, "done")
            assert set(result.values) == set(spec.state_keys)  # the new state rides on the step reply
            bad = (await bridge.request(Step(actions=[[0.0] * 7, [0, 0, 0, 0, 0, 0, 2.0]]))).message
            assert bad.stopped == "invalid_action" and bad.applied == 0 and bad.control_step == 3
            assert (bad.error.chunk_index, bad.error.component_index, bad.error.value, bad.error.high) == (1, 6, 2.0, 1.0)

            reply = await bridge.request(Observe(cameras=["agentview"], depth=True))
            obs, blobs = reply.message, reply.blobs
            (img,) = obs.images
            rgb = np.frombuffer(blobs[img.rgb_blob], dtype=np.uint8).reshape(img.height, img.width, 3)
            depth = np.frombuffer(blobs[img.depth_blob], dtype="<f4").reshape(img.height, img.width)
            assert rgb.std() > 5 and 0.3 < float(np.median(depth)) < 5.0
            assert np.array(img.K).shape == (3, 3) and np.array(img.T_world_camera).shape == (4, 4)
            assert obs.state.control_step == 3 and set(obs.state.values) == set(spec.state_keys)
            assert obs.renderer and ("llvmpipe" in obs.renderer) != gpu_present()  # which device drew it
            with pytest.raises(RemoteError) as refused:
                await bridge.request(Observe(cameras=["frontview"]))  # a video camera, not an observation camera
            assert "not allowed" in refused.value.error.detail
            state = (await bridge.request(GetState())).message
            assert state.steps_left == 97
            assert state.values == result.values  # nothing moved since that step

            # Admin messages are not in the robot union: they do not even decode there.
            for admin in (Load(manifest=encode_manifest({}), seed=1), SuccessQuery(), Wait(steps=1), TakeStates()):
                with pytest.raises(RemoteError) as failure:
                    await bridge.request(admin)
                assert failure.value.code == "decode"

            # Only the coordinator may stop the simulator: a robot-side Shutdown is refused and the endpoint,
            # never closed, keeps serving this link and a new one.
            with pytest.raises(RemoteError) as refused:
                await bridge.request(Shutdown(reason="not yours"))
            assert refused.value.error.code == "refused"
            assert (await bridge.request(GetState())).message.control_step == 3
            async with Client("sandbox_bridge2", robot_endpoint(control), SIM_ROBOT_CODEC) as bridge2:
                assert (await bridge2.request(GetState())).message.control_step == 3
        # A bridge on this host takes the unix stream beside the robot endpoint: the same door, the same
        # robot subset (an admin request does not decode there either), stepping the same scene.
        stream = RobotStreamLink(stream_path(robot_endpoint(control)))
        try:
            with trio.fail_after(60):
                stepped = (await stream.request(Step(actions=[[0.0] * 7]))).message
                assert (stepped.applied, stepped.control_step) == (1, 4) and set(stepped.values) == set(spec.state_keys)
                assert (await stream.request(GetState())).message.values == stepped.values
                with pytest.raises(RemoteError) as failure:
                    await stream.request(TakeStates())
                assert failure.value.code == "decode"
                assert (await stream.request(GetSpec())).message == spec  # the connection stays usable
                stats = (await coord.request(StatisticsRequest())).message.extra
                assert stats["hop.step1.count"] >= 1 and stats["hop.step1.physics"] > 0
        finally:
            await stream.aclose()
        with trio.fail_after(90):
            waited = (await coord.request(Wait(steps=5))).message
            assert (waited.applied, waited.control_step) == (5, 9)
            status = (await coord.request(SuccessQuery())).message
            assert status.achieved is False and status.control_step == 9 and status.interval == 10
            reply = await coord.request(TakeStates())
            states = states_from_blobs(reply.message, reply.blobs)
            assert states.step.tolist() == list(range(10)) and states.qpos.shape == (10, 16)
            stats = (await coord.request(StatisticsRequest())).message
            assert isinstance(stats, Statistics)
            assert stats.extra["control_steps"] == 9 and stats.extra["render_seconds"] > 0
            assert stats.extra["physics_seconds"] > 0
            # The next trial's Load builds a fresh scene that lands on the same fingerprint.
            again = (await coord.request(Load(manifest=encode_manifest(lift_manifest), seed=0))).message
            assert again.fingerprint == loaded.fingerprint and again.spec.trial_limits.steps == 6000
            assert (await coord.request(SuccessQuery())).message.control_step == 0 and not again.staged

            # Prepare answers at once and builds the next scene in the background while the loaded one keeps
            # stepping; the matching Load waits for the build and takes it, fresh (same fingerprint, step 0),
            # and one with other fields builds its own.
            await coord.request(Wait(steps=2))
            assert isinstance((await coord.request(Prepare(manifest=encode_manifest(lift_manifest), seed=0))).message, Ok)
            during = (await coord.request(Wait(steps=3))).message  # the loaded scene, stepping during the build
            assert (during.applied, during.control_step) == (3, 5)
            staged = (await coord.request(Load(manifest=encode_manifest(lift_manifest), seed=0))).message
            assert staged.staged and staged.fingerprint == loaded.fingerprint
            assert (await coord.request(SuccessQuery())).message.control_step == 0
            await coord.request(Prepare(manifest=encode_manifest(lift_manifest), seed=0))
            other = (await coord.request(Load(manifest=encode_manifest(lift_manifest), seed=1))).message
            assert not other.staged and other.fingerprint.seed == 1 and other.fingerprint.digest != loaded.fingerprint.digest
            # The staged scene outlived that Load (a worker replays its series between two series): asked for, it is taken.
            kept = (await coord.request(Load(manifest=encode_manifest(lift_manifest), seed=0))).message
            assert kept.staged and kept.fingerprint == loaded.fingerprint
            await coord.request(Shutdown(reason="test over"))
    assert proc.wait(30) == 0, proc_events(proc)


async def test_heartbeats_keep_flowing_while_scenes_are_built(simulator, lift_manifest):
    """Load builds a real scene (model compile, GL context with every texture and mesh) several times;
    a client with the default liveness (3 x 1 s) never loses the simulator, and a fast-beating probe
    sees no silence anywhere near a heartbeat window."""
    control, proc = simulator
    async with Client("coordinator", control, SIM_CODEC) as coord, \
            Client("probe", control, SIM_CODEC, heartbeat_interval=0.05, liveness=1000) as probe:
        assert coord.liveness == 3 and coord.heartbeat_interval == 1.0  # the defaults every actor link starts from
        deaths: list[str] = []
        silences: list[float] = []
        loads: list[float] = []

        async def watch(link: Client) -> None:
            await link.wait_peer_dead()
            deaths.append(link.name)

        async def measure() -> None:
            while True:
                silences.append((len(loads), trio.current_time() - probe.last_seen))
                await trio.sleep(0.01)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch, coord)
            nursery.start_soon(watch, probe)
            nursery.start_soon(measure)
            with trio.fail_after(180):
                for seed in (0, 1, 2):
                    t0 = time.monotonic()
                    await coord.request(Load(manifest=encode_manifest(lift_manifest), seed=seed))
                    loads.append(time.monotonic() - t0)
            nursery.cancel_scope.cancel()
        longest = [round(max(s for i, s in silences if i == n), 3) for n in range(len(loads))]
        print(f"loads {[round(s, 2) for s in loads]} s; longest silence per Load seen by the 50 ms probe {longest} s")
        assert deaths == [] and coord.peer_alive
        # Before the render context was built with the GIL released, each Load silenced the
        # simulator for the whole upload (0.55-0.7 s here on a quiet machine, seconds under load).
        assert max(longest) < 0.4, (longest, loads)
        await coord.request(Shutdown(reason="test over"))
    assert proc.wait(30) == 0, proc_events(proc)
