"""The RoboCasa backend's contract on a kit kitchen (OpenDrawer): spec, validation, sensing, states, video."""

from __future__ import annotations

import math

import numpy as np
import pytest
from roboswe.sim.backend import InvalidAction, NotLoaded, SimError, create_backend
from roboswe.sim.manifest import ManifestError

from .conftest import fingerprint_in_fresh_process, kitchen, read_fingerprint

ACTION_NAMES = ["right.dx", "right.dy", "right.dz", "right.dax", "right.day", "right.daz", "right_gripper.grip",
                "base.forward", "base.side", "base.yaw", "torso.lift", "mode"]


def test_registered_as_the_robocasa_backend(open_drawer, kit_dir):
    sim = create_backend("robocasa", kitchen("CloseDrawer"), kit_dir=kit_dir)
    try:
        assert type(sim).__name__ == "RobocasaBackend"
    finally:
        sim.close()


def test_action_spec_is_the_mobile_manipulator_in_robocasa_order(open_drawer):
    spec = open_drawer.action_spec()
    assert [c.name for c in spec.components] == ACTION_NAMES
    assert spec.low == [-1.0] * 12 and spec.high == [1.0] * 12
    assert spec.hold == [0.0] * 12
    assert "0.05 m per control step" in spec.components[0].unit
    assert "m/s" in spec.components[7].unit and "rad/s" in spec.components[9].unit
    assert open_drawer.spec().action_dim == 12


def test_fingerprint_says_placeholder_assets_and_pins_robocasa(open_drawer):
    fp = open_drawer.reset(0)
    assert fp.versions["assets"] == "placeholder"
    assert fp.versions["robocasa"] == "1.0.0" and fp.versions["robosuite"] == "1.5.2"
    assert len(fp.versions["assets_sha256"]) == 64
    assert fp.compiled_model_sha256 and fp.model_xml_sha256 and fp.initial_state_sha256


def test_reset_with_the_same_seed_rebuilds_the_same_kitchen(open_drawer):
    a = open_drawer.reset(0)
    open_drawer.wait(5)
    b = open_drawer.reset(0)
    assert a == b
    c = open_drawer.reset(1)
    assert c.digest != a.digest and c.seed == 1


# A repeat: the kit-location test below builds in two fresh processes too, and the kitchen demo's admission checks it.
@pytest.mark.exhaustive
def test_two_fresh_processes_build_the_same_fingerprint(kit_dir):
    manifest = kitchen("OpenDrawer")
    first, second = (fingerprint_in_fresh_process(manifest, kit_dir, 0) for _ in range(2))
    a, b = read_fingerprint(first), read_fingerprint(second)
    assert a == b
    assert a["versions"]["assets"] == "placeholder"


def test_fingerprint_does_not_depend_on_where_the_kit_lives(kit_dir, tmp_path):
    elsewhere = fingerprint_in_fresh_process(kitchen("OpenDrawer"), tmp_path / "another-kit", 0)
    here = fingerprint_in_fresh_process(kitchen("OpenDrawer"), kit_dir, 0)
    assert read_fingerprint(elsewhere) == read_fingerprint(here)


@pytest.mark.parametrize("index,value", [(0, 1.5), (7, -1.01), (11, 2.0), (6, math.nan), (9, math.inf)])
def test_out_of_bound_or_non_finite_actions_are_rejected_not_clipped(open_drawer, index, value):
    open_drawer.reset(0)
    before = np.array(open_drawer.data.qpos)
    action = [0.0] * 12
    action[index] = value
    with pytest.raises(InvalidAction) as caught:
        open_drawer.step([[0.0] * 12, action])  # the whole chunk is checked before any step
    assert caught.value.index == index and caught.value.component == ACTION_NAMES[index]
    assert caught.value.chunk_index == 1
    assert open_drawer.control_step == 0
    assert np.array_equal(before, open_drawer.data.qpos)


def test_wrong_length_action_names_the_expected_components(open_drawer):
    open_drawer.reset(0)
    with pytest.raises(InvalidAction, match="takes 12 numbers"):
        open_drawer.step([[0.0] * 7])


def test_base_velocity_moves_the_base_and_zero_stops_it(open_drawer):
    open_drawer.reset(0)
    start = open_drawer.state()["robot0_base_pos"].copy()
    forward = [0.0] * 12
    forward[7], forward[11] = 0.5, 1.0  # base mode, half speed forward
    open_drawer.step([forward] * 10)
    moved = open_drawer.state()["robot0_base_pos"]
    assert np.linalg.norm(moved[:2] - start[:2]) > 0.02
    open_drawer.wait(10)
    settled = open_drawer.state()["robot0_base_pos"].copy()
    open_drawer.wait(10)
    assert np.linalg.norm(open_drawer.state()["robot0_base_pos"][:2] - settled[:2]) < 0.01


def test_state_returns_only_the_allowlisted_keys(open_drawer):
    open_drawer.reset(0)
    state = open_drawer.state()
    assert sorted(state) == sorted(open_drawer.manifest.observation.proprio)
    assert all(np.all(np.isfinite(v)) for v in state.values())


def test_observe_gives_rgbd_with_calibration_and_refuses_other_cameras(open_drawer):
    open_drawer.reset(0)
    frames = open_drawer.observe()
    assert [f.camera for f in frames] == ["robot0_agentview_center", "robot0_eye_in_hand"]
    for f in frames:
        assert f.rgb.shape == (128, 128, 3) and f.rgb.std() > 5
        assert f.depth.shape == (128, 128) and np.all(np.isfinite(f.depth)) and f.depth.min() > 0
        assert f.K.shape == (3, 3) and f.T_world_camera.shape == (4, 4)
    with pytest.raises(SimError, match="not allowed"):
        open_drawer.observe(["robot0_frontview"])


def test_video_frames_from_recorded_states_match_the_live_view(open_drawer, kit_dir):
    from roboswe.sim.video import VideoRenderer

    open_drawer.reset(0)
    arm = [0.0] * 12
    arm[2] = 0.5
    open_drawer.step([arm] * 6)
    live = open_drawer.observe(["robot0_agentview_center"], depth=False)[0].rgb
    states = open_drawer.take_states()
    assert len(states) == 7 and list(states.step) == list(range(7))
    video = VideoRenderer(open_drawer.manifest, backend="robocasa")
    try:
        frames = video.render(states, seed=0, model_xml_sha256=open_drawer.fingerprint.model_xml_sha256, rows=[6])
    finally:
        video.close()
    assert np.array_equal(frames["robot0_agentview_center"][0], live)


def test_a_kit_manifest_must_say_placeholder_assets():
    from roboswe.sim.robocasa.backend import RobocasaUpstream

    with pytest.raises(ManifestError, match="placeholder"):
        RobocasaUpstream(version="1.0.0", mujoco="3.3", env="OpenDrawer", layout="kit", style="kit",
                         assets="robocasa", registry_horizon=500)


def test_missing_real_assets_are_named_not_crashed_on(tmp_path):
    import msgspec
    from roboswe.sim.robocasa.backend import AssetsMissing, RobocasaBackend

    manifest = kitchen("OpenDrawer")
    real = msgspec.structs.replace(manifest, upstream=msgspec.structs.replace(
        manifest.upstream, layout=11, style=11, assets="robocasa"))
    with pytest.raises(AssetsMissing) as caught:
        RobocasaBackend(real, assets_root=tmp_path / "no-assets")
    assert f"missing under {tmp_path / 'no-assets'} (given path): " in str(caught.value)  # the root, then folders relative to it
    assert "textures, " in str(caught.value) and "objects/objaverse" in str(caught.value)


def test_methods_before_a_successful_reset_say_so(kit_dir):
    from roboswe.sim.robocasa.backend import RobocasaBackend

    sim = RobocasaBackend(kitchen("CloseDrawer"), kit_dir=kit_dir)
    try:
        with pytest.raises(NotLoaded):
            sim.wait(1)
    finally:
        sim.close()
