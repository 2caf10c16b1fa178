"""The GR1 stand-in backend: contract recheck, reject-not-clip, and the observation allowlist at the simulator boundary."""

from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import numpy as np
import pytest
from roboswe.protocol.sim import CameraInfo, TaskSpec
from roboswe.sim.backend import InvalidAction, NotLoaded, ResetError, SimError
from roboswe.sim.gr1.contract import load_contract
from roboswe.sim.gr1.manifest import ContractMismatch
from roboswe.sim.gr1.standin import Gr1StandinBackend

from ..conftest import sim_env

IMAGE = "ego_view_bg_crop_pad_res256_freq20"
CONTRACT = load_contract()


def mid() -> list[float]:
    return ((CONTRACT.low + CONTRACT.high) / 2).tolist()


def test_the_scene_is_the_contracts_robot_and_records_its_fidelity(cube_session, cube_scene, cube_manifest):
    assert isinstance(cube_scene, Gr1StandinBackend)
    assert cube_scene.contract_problems() == []
    fp = cube_scene.fingerprint
    assert fp.seed == 20260907 == cube_manifest.seed
    assert fp.versions["fidelity"] == "offline-standin" and fp.versions["robocasa_gr1"] == "0.2.0.post1"
    assert cube_manifest.fidelity == "offline-standin"
    cc = cube_scene.env.robots[0].composite_controller
    assert {k: tuple(v) for k, v in cc._action_split_indexes.items()} == {
        "left": (0, 7), "right": (7, 14), "left_gripper": (14, 20), "right_gripper": (20, 26), "torso": (26, 29)}
    assert cube_scene.env.action_dim == 29


def test_the_seeded_reset_is_reproducible(cube_scene, cube_manifest):
    first = cube_scene.fingerprint
    cube_scene.step([mid()] * 3)
    assert cube_scene.reset(cube_manifest.seed) == first
    assert cube_scene.reset(cube_manifest.seed + 1).initial_state_sha256 != first.initial_state_sha256


# ---- the allowlist ------------------------------------------------------------------------------

SPEC_FIELDS = {"task_id", "instruction", "privileged", "action_dim", "action_low", "action_high", "action", "control_hz",
               "control_dt", "cameras", "state_keys", "script_limits", "trial_limits"}


def test_everything_the_simulator_boundary_can_return_is_the_allowlist(cube_session, cube_scene):
    """spec, observe (any request), state and step: one 256x256 uint8 egoview, the language, 29 encoders; nothing else."""
    spec = cube_session.spec()
    assert {f.name for f in msgspec.structs.fields(TaskSpec)} == SPEC_FIELDS  # a new field must be reviewed here
    assert spec.cameras == [CameraInfo(name=IMAGE, width=256, height=256, depth=False, calibration=False)]
    assert spec.state_keys == ["joint_encoders"] and spec.privileged is False
    assert spec.instruction == "unlocked_waist: pick up the red cube and place it in the bin"
    assert spec.action_dim == 29 and spec.action_low == CONTRACT.low.tolist() and spec.action_high == CONTRACT.high.tolist()
    assert [c.name for c in spec.action.components] == CONTRACT.component_names

    for cameras, depth in (([], True), ([IMAGE], True), ([IMAGE, IMAGE], False)):
        obs, blobs = cube_session.observe(cameras, depth)
        assert len(obs.images) == 1 and len(blobs) == 1
        image = obs.images[0]
        assert (image.camera, image.width, image.height, image.depth_blob, image.K, image.T_world_camera) == (
            IMAGE, 256, 256, None, None, None)
        assert len(blobs[0]) == 256 * 256 * 3
        assert set(obs.state.values) == {"joint_encoders"} and len(obs.state.values["joint_encoders"]) == 29

    for other in ("egoview", "frontview", "agentview", "robot0_eye_in_left_hand"):
        with pytest.raises(SimError, match="not allowed"):
            cube_session.observe([other], False)
    state = cube_session.state()
    assert set(state.values) == {"joint_encoders"}
    result = cube_session.step([mid()])
    assert result.error is None and set(result.values) == {"joint_encoders"}
    raw = cube_scene.state()
    assert set(raw) == {"joint_encoders"} and raw["joint_encoders"].shape == (29,)


def test_the_egoview_is_rendered_and_not_blank(cube_scene):
    frame = cube_scene.observe()[0]
    assert frame.rgb.dtype == np.uint8 and frame.rgb.shape == (256, 256, 3) and frame.depth is None
    assert (frame.rgb[:42] == 0).all() and frame.rgb[60:200].std() > 10  # black pads, a real scene between


def test_encoders_read_the_contracts_joints_in_order(cube_scene):
    import mujoco

    m, d = cube_scene.model, cube_scene.data
    expected = [d.qpos[m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j)]] for j in CONTRACT.encoder_names]
    assert cube_scene.state()["joint_encoders"].tolist() == expected
    # Close only the left hand's pinky command: encoder 14 (left pinky intermediate) follows, the right hand does not.
    action = cube_scene.hold_action()
    action[14] = 1.2
    cube_scene.step([action.tolist()] * 20)
    enc = cube_scene.state()["joint_encoders"]
    assert enc[14] > 0.5 and abs(enc[20]) < 0.05 and np.all(np.abs(enc[15:18]) < 0.05)


# ---- actions --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("index", "value"), [(3, 0.3), (21, 1.6), (28, -0.71), (0, float("nan"))])
def test_a_bad_component_is_rejected_before_physics(cube_session, cube_scene, index, value):
    qpos, step = cube_scene.data.qpos.copy(), cube_scene.control_step
    action = mid()
    action[index] = value
    with pytest.raises(InvalidAction) as e:
        cube_scene.step([mid(), action])
    assert e.value.index == index and e.value.component == CONTRACT.component_names[index] and e.value.chunk_index == 1
    assert cube_scene.control_step == step and np.array_equal(cube_scene.data.qpos, qpos)  # nothing of the chunk ran
    result = cube_session.step([action])
    assert result.stopped == "invalid_action" and result.applied == 0
    assert result.error.component == CONTRACT.component_names[index] and result.error.component_index == index


def test_a_wrong_length_is_rejected_before_physics(cube_scene):
    step = cube_scene.control_step
    with pytest.raises(InvalidAction, match="takes 29"):
        cube_scene.step([[0.0] * 26])
    assert cube_scene.control_step == step


def test_the_hold_action_is_valid_and_holds(cube_scene):
    hold = cube_scene.hold_action()
    assert np.array_equal(cube_scene.validate(hold), hold)
    before = cube_scene.state()["joint_encoders"]
    assert cube_scene.wait(10).applied == 10
    after = cube_scene.state()["joint_encoders"]
    arms_waist = np.r_[0:14, 26:29]
    assert np.allclose(after[arms_waist], before[arms_waist], atol=1e-3)
    assert np.allclose(after[14:26], before[14:26], atol=0.05)  # fingers settle a little under their P control


# ---- the post-reset contract recheck -----------------------------------------------------------------


def test_a_compiled_joint_range_that_differs_from_the_contract_refuses_the_scene(cube_scene, cube_manifest):
    import mujoco

    m = cube_scene.model
    j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "robot0_l_elbow_pitch")
    saved = m.jnt_range[j].copy()
    m.jnt_range[j] = [-3.0, 0.5]
    try:
        with pytest.raises(ContractMismatch, match="left_arm compiled ranges"):
            cube_scene.reset(cube_manifest.seed)
        with pytest.raises(NotLoaded):
            cube_scene.step([mid()])
    finally:
        m.jnt_range[j] = saved
    cube_scene.reset(cube_manifest.seed)


def test_a_changed_hand_actuator_range_or_mapping_is_found(cube_scene):
    m = cube_scene.model
    acts = cube_scene.env.robots[0]._ref_actuators_indexes_dict["right_gripper"]
    saved = m.actuator_ctrlrange[acts[9]].copy()  # thumb proximal pitch drive: bounds command 24
    m.actuator_ctrlrange[acts[9]] = [0.0, 1.0]
    try:
        assert any("right_hand.thumb_pitch" in p for p in cube_scene.contract_problems())
    finally:
        m.actuator_ctrlrange[acts[9]] = saved
    gripper = cube_scene.env.robots[0].composite_controller.grippers["left_gripper"]
    original = gripper.format_action
    gripper.format_action = lambda a: np.asarray(a)[[0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]]
    try:
        assert any("expands commands" in p for p in cube_scene.contract_problems())
    finally:
        gripper.format_action = original
    assert cube_scene.contract_problems() == []


def test_reset_time_success_is_an_error_not_a_resample(cube_scene, cube_manifest, monkeypatch):
    calls = []
    monkeypatch.setattr(cube_scene.env, "_check_success", lambda: calls.append(1) or True)
    with pytest.raises(ResetError, match="already satisfies success"):
        cube_scene.reset(cube_manifest.seed)
    assert len(calls) == 1  # one seeded reset, one look: no search for another state
    with pytest.raises(NotLoaded):
        cube_scene.step([mid()])


# ---- PYTHONHASHSEED=0, checked by a sentinel ------------------------------------------------------------

SENTINEL = "from roboswe.sim.gr1.manifest import check_hash_sentinel; check_hash_sentinel(); print('ok')"


@pytest.mark.parametrize(("seed", "ok"), [("0", True), ("1", False), ("random", False)])
def test_the_hash_sentinel_accepts_only_pythonhashseed_0(seed, ok):
    env = {**sim_env(), "PYTHONHASHSEED": seed}
    out = subprocess.run([sys.executable, "-c", SENTINEL], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert (out.returncode == 0 and out.stdout.strip() == "ok") is ok, out.stderr[-400:]
    if not ok:
        assert "PYTHONHASHSEED=0" in out.stderr


def test_manifest_rules_keep_standins_and_native_apart(cube_manifest):
    from roboswe.sim.manifest import ManifestError, manifest_from_builtins

    data = json.loads(json.dumps(cube_manifest.to_builtins()))
    for change, match in [
        ({"fidelity": "native"}, "fidelity"),
        ({"id": "gr1-pnpcuptodrawerclose"}, "fidelity"),
        ({"observation": {**data["observation"], "cameras": [*data["observation"]["cameras"], {"name": "frontview"}]}}, "allowlist"),
        ({"observation": {**data["observation"], "proprio": ["joint_encoders", "robot0_eef_pos"]}}, "allowlist"),
        ({"observation": {**data["observation"], "cameras": [{"name": IMAGE, "depth": True}]}}, "allowlist"),
        ({"control_hz": 10, "video": {**data["video"], "fps": 10}}, "control_hz"),
        ({"controller": {"composite": "BASIC", "parts": {"right": {"type": "OSC_POSE"}}}}, "contract"),
    ]:
        with pytest.raises(ManifestError, match=match):
            manifest_from_builtins({**data, **change})
    missing = {k: v for k, v in data.items() if k != "fidelity"}
    with pytest.raises(ManifestError, match="fidelity"):
        manifest_from_builtins(missing)


def test_video_is_rendered_from_recorded_states_with_the_manifests_cameras(cube_scene, cube_manifest):
    """Evaluator-side video (not the policy image): the manifest's video cameras exist and draw recorded states."""
    cube_scene.take_states()
    cube_scene.wait(4)
    states = cube_scene.take_states()
    assert len(states) == 4
    video = cube_manifest.video
    for name in video.cameras:
        cube_scene._renderer.load_state(states.row(3))
        rgb = cube_scene._renderer.render(name, video.width, video.height, depth=False, calibration=False).rgb
        assert rgb.shape == (video.height, video.width, 3) and rgb.std() > 5
