"""The robosuite backend on real scenes: determinism, strict actions, success, rendering."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from roboswe.sim.backend import InvalidAction, create_backend
from roboswe.sim.manifest import load_manifest
from roboswe.sim.physics_state import snapshot
from roboswe.sim.video import VideoRenderer

from ..conftest import ROOT, sim_env

FINGERPRINT_SCRIPT = """
import json, sys
from roboswe.sim.manifest import load_manifest
from roboswe.sim.backend import create_backend
sim = create_backend("robosuite", load_manifest(sys.argv[1]), require_fixed_hash_seed=True)
print(json.dumps({s: sim.reset(s).digest for s in map(int, sys.argv[2:])}))
"""


def fresh_process_fingerprints(manifest_path, *seeds: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", FINGERPRINT_SCRIPT, str(manifest_path), *map(str, seeds)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=sim_env(),
    )


def test_fingerprint_is_equal_across_fresh_processes_and_differs_by_seed(lift_panda):
    path = ROOT / "configs" / "tasks" / "lift-panda.toml"
    procs = [fresh_process_fingerprints(path, 0, 1) for _ in range(2)]
    results = [json.loads(p.communicate(timeout=180)[0].strip().splitlines()[-1]) for p in procs]
    assert results[0] == results[1]
    assert results[0]["0"] != results[0]["1"]
    # An in-process reset after other use lands on the same state as a fresh construction.
    lift_panda.reset(3)
    lift_panda.wait(5)
    assert lift_panda.reset(0).digest == results[0]["0"]


def test_fresh_process_refuses_hash_randomization(lift_manifest):
    path = ROOT / "configs" / "tasks" / "lift-panda.toml"
    env = {**sim_env(), "PYTHONHASHSEED": "random"}
    proc = subprocess.run([sys.executable, "-c", FINGERPRINT_SCRIPT, str(path), "0"],
                          capture_output=True, text=True, env=env, timeout=180, check=False)
    assert proc.returncode != 0 and "PYTHONHASHSEED=0" in proc.stderr


@pytest.mark.parametrize(
    "action, index, needle",
    [
        ([0.0] * 6, None, "takes 7 numbers"),
        ([0.0, 0.0, float("nan"), 0.0, 0.0, 0.0, 0.0], 2, "nan"),
        ([0.0, 0.0, 0.0, float("inf"), 0.0, 0.0, 0.0], 3, "inf"),
        ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5], 6, "outside its bound [-1, 1]"),
        ([0.0, -1.0001, 0.0, 0.0, 0.0, 0.0, 0.0], 1, "-1.0001"),
    ],
)
def test_invalid_action_is_rejected_and_physics_untouched(lift_panda, action, index, needle):
    lift_panda.reset(0)
    lift_panda.step([[0.1, 0, 0, 0, 0, 0, -1]] * 3)
    before, step = snapshot(lift_panda.data), lift_panda.control_step
    with pytest.raises(InvalidAction) as caught:
        # A valid action ahead of the bad one in the same chunk is not applied either.
        lift_panda.step([[0.0] * 7, action])
    e = caught.value
    assert e.chunk_index == 1 and e.index == index and needle in str(e)
    if index is not None:
        assert e.low == -1.0 and e.high == 1.0
    after = snapshot(lift_panda.data)
    assert lift_panda.control_step == step
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])


def test_trial_budget_stops_a_chunk_and_reports_applied(lift_manifest):
    sim = create_backend("robosuite", lift_manifest, trial_steps=4)
    try:
        sim.reset(0)
        out = sim.step([[0.0] * 7] * 6)
        assert (out.applied, out.stopped, out.steps_left, out.control_step) == (4, "trial_budget", 0, 4)
        assert sim.wait(3).applied == 0
    finally:
        sim.close()


def _solve_lift(sim, record):
    """Scripted grasp using privileged cube state (tests may; the model never can)."""
    env = sim.env
    cube = env.cube_body_id

    def go(target, grip, max_steps, tol=0.01):
        for _ in range(max_steps):
            eef = sim.state()["robot0_eef_pos"]
            err = target() - eef
            if np.linalg.norm(err) < tol:
                return
            sim.step([[*np.clip(10 * err, -1, 1), 0, 0, 0, grip]])
            record()

    cube_pos = lambda: env.sim.data.body_xpos[cube].copy()
    above = cube_pos() + [0, 0, 0.10]
    go(lambda: above, -1, 80)
    go(lambda: cube_pos() + [0, 0, -0.005], -1, 80, tol=0.008)
    for _ in range(12):
        sim.step([[0, 0, 0, 0, 0, 0, 1]])
        record()
    high = cube_pos() + [0, 0, 0.15]
    go(lambda: high, 1, 60)
    for _ in range(15):
        sim.step([[0, 0, 0, 0, 0, 0, 1]])
        record()


def test_success_matches_upstream_check_success_on_scripted_lift(lift_panda):
    sim = lift_panda
    sim.reset(0)
    interval = sim.manifest.success.interval
    upstream: list[bool] = []
    table_z = sim.env.model.mujoco_arena.table_offset[2]

    def record():
        holds = bool(sim.env._check_success())
        upstream.append(holds)
        # the predicate is the upstream geometry: cube centre more than 4 cm above the table top
        assert holds == (sim.env.sim.data.body_xpos[sim.env.cube_body_id][2] > table_z + 0.04)

    _solve_lift(sim, record)
    run, achieved, first = 0, None, None
    for step, holds in enumerate(upstream, start=1):
        run = run + 1 if holds else 0
        first = step if holds and first is None else first
        if achieved is None and run >= interval:
            achieved = step
    rec = sim.success()
    assert achieved is not None, "the scripted lift should succeed"
    assert (rec.achieved, rec.achieved_step, rec.first_held_step, rec.current_run) == (True, achieved, first, run)
    assert rec.achieved_step - rec.first_held_step >= interval - 1


def test_observe_leaves_state_and_trajectory_unchanged(lift_panda):
    actions = [[0.3, -0.2, -0.4, 0.0, 0.1, 0.0, 1.0]] * 6
    lift_panda.reset(2)
    for a in actions:
        lift_panda.step([a])
    plain = snapshot(lift_panda.data)

    lift_panda.reset(2)
    for a in actions:
        before = snapshot(lift_panda.data)
        lift_panda.observe(["agentview"], depth=True)
        lift_panda.state()
        for k, v in snapshot(lift_panda.data).items():
            np.testing.assert_array_equal(v, before[k])
        lift_panda.step([a])
    for k, v in snapshot(lift_panda.data).items():
        np.testing.assert_array_equal(v, plain[k])


def test_depth_is_metres_in_the_world_frame(lift_panda):
    """Back-projected agentview depth puts the visible table top at the arena's table height."""
    lift_panda.reset(0)
    (frame,) = lift_panda.observe(["agentview"], depth=True)
    h, w = frame.depth.shape
    assert frame.rgb.shape == (h, w, 3) and frame.rgb.dtype == np.uint8
    u, v = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    K, T = frame.K, frame.T_world_camera
    z = frame.depth.astype(np.float64)
    cam = np.stack([(u - K[0, 2]) * z / K[0, 0], (v - K[1, 2]) * z / K[1, 1], z, np.ones_like(z)], axis=-1)
    world = cam.reshape(-1, 4) @ T.T
    table_z = float(lift_panda.env.model.mujoco_arena.table_offset[2])
    half = np.asarray(lift_panda.env.model.mujoco_arena.table_full_size[:2]) / 2
    on_table = (np.abs(world[:, 0]) < half[0] - 0.05) & (np.abs(world[:, 1]) < half[1] - 0.05)
    near_top = np.abs(world[on_table, 2] - table_z) < 0.003
    assert on_table.mean() > 0.2 and near_top.mean() > 0.8
    # The camera sits where the compiled model puts it, and the image is the right way up:
    # the table (near the camera's bottom edge) is closer than the far wall at the top.
    assert frame.depth[-10:, w // 2].mean() < frame.depth[10:20, w // 2].mean()


def test_wait_holds_the_current_pose(lift_panda):
    lift_panda.reset(0)
    lift_panda.step([[0, 0, 0, 0, 0, 0, -1]] * 6)  # open fully, then hold
    start = lift_panda.state()["robot0_eef_pos"]
    out = lift_panda.wait(20)
    assert out.applied == 20 and lift_panda.control_step == 26
    assert np.linalg.norm(lift_panda.state()["robot0_eef_pos"] - start) < 0.005
    assert lift_panda.sim_time == pytest.approx(26 * 0.05)


def test_frame_from_recorded_state_equals_live_frame(lift_panda, lift_manifest):
    lift_panda.reset(1)
    lift_panda.take_states()
    lift_panda.step([[0.5, 0.2, -0.3, 0.1, 0, 0, 1]] * 4)
    (live,) = lift_panda.observe(["agentview"], depth=False)
    states = lift_panda.take_states()
    assert states.step.tolist() == [1, 2, 3, 4] and states.qpos.shape == (4, lift_panda.model.nq)
    video = VideoRenderer(lift_manifest)
    try:
        frames = video.render(states, model_xml_sha256=lift_panda.fingerprint.model_xml_sha256,
                              cameras=["agentview"], rows=[3])
        np.testing.assert_array_equal(frames["agentview"][0], live.rgb)
        assert not np.array_equal(video.render(states, cameras=["agentview"], rows=[0])["agentview"][0], live.rgb)
    finally:
        video.close()


def test_gr1_absolute_joint_targets_are_bounded_by_the_compiled_joint_ranges():
    manifest = load_manifest(ROOT / "configs" / "tasks" / "lift-gr1armsonly.toml")
    sim = create_backend("robosuite", manifest)
    try:
        sim.reset(0)
        spec = sim.action_spec()
        assert spec.dim == 26
        elbow = next(c for c in spec.components if c.name == "right.r_elbow_pitch")
        assert (elbow.low, elbow.high) == (-3.0, 0.0)
        hold = np.array(spec.hold)
        bad = hold.copy()
        bad[elbow.index] = 0.2  # robosuite itself would pass this beyond-range target through
        before = snapshot(sim.data)
        with pytest.raises(InvalidAction, match=r"action\[3\] \(right.r_elbow_pitch\) = 0.2 is outside its bound \[-3, 0\]"):
            sim.step([bad])
        np.testing.assert_array_equal(snapshot(sim.data)["qpos"], before["qpos"])
        hand = hold.copy()
        hand[14] = 1.6  # pinky drive range is [0, 1.57]
        with pytest.raises(InvalidAction, match="1.57"):
            sim.step([hand])
        assert sim.wait(5).applied == 5  # holding the reset joint targets is valid
    finally:
        sim.close()


def test_reset_that_already_satisfies_success_is_an_error(lift_panda, monkeypatch):
    from roboswe.sim.backend import NotLoaded, ResetError

    monkeypatch.setattr(lift_panda.env, "_check_success", lambda: True)  # a scene whose predicate holds at reset
    with pytest.raises(ResetError, match="already satisfies success"):
        lift_panda.reset(0)
    with pytest.raises(NotLoaded):  # nothing may run on a refused reset
        lift_panda.step([[0.0] * 7])
    monkeypatch.undo()
    assert lift_panda.reset(0).digest


def test_recorded_frames_encode_to_mp4(lift_panda, lift_manifest, tmp_path):
    from roboswe.sim.video import write_mp4

    lift_panda.reset(0)
    lift_panda.take_states()
    lift_panda.wait(4)
    states = lift_panda.take_states()
    video = VideoRenderer(lift_manifest)
    try:
        frames = video.render(states, cameras=["frontview"])  # steps 2 and 4 fall on the 10 fps clock at 20 Hz
    finally:
        video.close()
    assert len(frames["frontview"]) == 2 and frames["frontview"][0].shape == (256, 256, 3)
    path = write_mp4(frames["frontview"], tmp_path / "front.mp4", fps=lift_manifest.video.fps)
    assert path.stat().st_size > 1000


def test_diverging_physics_is_a_recorded_failure_not_a_silent_reset(lift_panda, tmp_path, monkeypatch):
    from roboswe.sim.backend import NotLoaded, PhysicsFailure

    monkeypatch.chdir(tmp_path)  # MuJoCo appends its warning to MUJOCO_LOG.TXT in the working directory
    lift_panda.reset(0)
    lift_panda.data.qvel[:] = 1e30  # blow the state up (a test may touch physics directly)
    with pytest.raises(PhysicsFailure, match="unstable at control step 1"):
        lift_panda.step([[0.0] * 7])
    with pytest.raises(NotLoaded):
        lift_panda.wait(1)
    assert lift_panda.reset(0).digest  # a fresh reset recovers the scene
