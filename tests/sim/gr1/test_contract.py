"""The GR1 contract file against the GR1 tabletop protocol's numbers, and the functions that apply it (no simulator)."""

from __future__ import annotations

import math

import cv2
import msgspec
import numpy as np
import pytest
from roboswe.sim.backend import InvalidAction
from roboswe.sim.gr1.contract import (
    CONTRACT_PATH,
    Contract,
    crop_egoview,
    load_contract,
    policy_image,
    protocol_identity,
    validate_action,
)
from roboswe.sim.manifest import ManifestError

# The GR1 tabletop protocol's numbers, copied here independently of the contract file.
SEED_LOW = [-3, 0, -3, -3, -3, -1.5, -1.5] + [-3, -3, -3, -3, -3, -1.5, -1.5] + [0] * 12 + [-1.05, -0.52, -0.7]
SEED_HIGH = ([3, 3, 3, 0, 3, 1.5, 1.5] + [3, 0, 3, 0, 3, 1.5, 1.5] + [1.57, 1.57, 1.57, 1.57, 1.22, 1.74] * 2
             + [1.05, 1.22, 0.7])


@pytest.fixture(scope="module")
def contract() -> Contract:
    return load_contract()


def test_contract_carries_the_seeds_numbers(contract):
    assert contract.action_dim == 29
    assert contract.low.tolist() == SEED_LOW and contract.high.tolist() == SEED_HIGH
    assert [(s.name, s.start, s.stop) for s in contract.action.slices] == [
        ("left_arm", 0, 7), ("right_arm", 7, 14), ("left_hand", 14, 20), ("right_hand", 20, 26), ("waist", 26, 29)]
    assert contract.robot.body_part_ordering == ["left", "right", "left_gripper", "right_gripper", "torso"]
    assert contract.robot.name == "GR1ArmsAndWaistFourierHands" and contract.robot.composite == "BASIC"
    assert sorted(contract.robot.unactuated) == ["head", "legs"]
    assert contract.action.hand.expansion == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5]
    assert contract.sources.robocasa_gr1.revision == "4840e671596f93ca03651524b9f72ffb1aadfeff"
    assert contract.sources.robosuite.revision == "51cc01785bab80ffeed20da15e67d7dd4140e76a"
    assert contract.default_seed == 20260907 and contract.python_hash_seed == "0" and contract.control_hz == 20
    shoulder = ["shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow_pitch", "wrist_yaw", "wrist_roll", "wrist_pitch"]
    hand = ["pinky_intermediate", "ring_intermediate", "middle_intermediate", "index_intermediate",
            "thumb_proximal_pitch", "thumb_proximal_yaw"]
    assert contract.encoder_names == ([f"robot0_l_{j}" for j in shoulder] + [f"robot0_r_{j}" for j in shoulder]
                                      + [f"gripper0_left_L_{j}_joint" for j in hand]
                                      + [f"gripper0_right_R_{j}_joint" for j in hand]
                                      + ["robot0_torso_waist_yaw", "robot0_torso_waist_pitch", "robot0_torso_waist_roll"])
    p = contract.observation.pipeline
    assert (p.width, p.height, p.crop_rows, p.crop_cols, p.resize, p.output) == (1280, 800, (310, 770), (110, 1130), (720, 480), (256, 256))
    assert contract.observation.image == "ego_view_bg_crop_pad_res256_freq20"
    assert contract.observation.language == "annotation.human.coarse_action"
    assert contract.observation.language_prefix == "unlocked_waist: " and contract.observation.metadata == []
    assert [(t.index, t.task, t.layouts) for t in contract.native.tasks] == [
        (0, "PnPCupToDrawerClose", [4]), (19, "PosttrainPnPNovelFromTrayToCardboardboxSplitA", [0]),
        (1, "PnPPotatoToMicrowaveClose", [2]), (2, "PnPMilkToMicrowaveClose", [2])]


def test_a_contract_whose_slices_do_not_tile_the_action_is_refused(contract):
    data = msgspec.to_builtins(contract)
    data["action"]["slices"][1]["start"] = 8
    with pytest.raises(msgspec.ValidationError, match="right_arm"):
        msgspec.convert(data, Contract)
    data = msgspec.to_builtins(contract)
    data["action"]["slices"][4]["low"][0] = 2.0  # above its high bound
    with pytest.raises(msgspec.ValidationError, match="waist"):
        msgspec.convert(data, Contract)


def test_an_unreadable_contract_names_the_file(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text(CONTRACT_PATH.read_text().replace('composite = "BASIC"', 'composite = "WHOLE_BODY_IK"'))
    with pytest.raises(ManifestError, match=str(bad)):
        load_contract(bad)


# ---- actions ------------------------------------------------------------------------------------


def test_bounds_themselves_are_valid_and_nothing_is_clipped(contract):
    for edge in (contract.low, contract.high, (contract.low + contract.high) / 2):
        out = validate_action(contract, edge.tolist())
        assert out.dtype == np.float64 and np.array_equal(out, edge)


@pytest.mark.parametrize(("index", "value", "component", "bound"), [
    (3, 0.25, "left_arm.robot0_l_elbow_pitch", (-3.0, 0.0)),
    (8, 0.01, "right_arm.robot0_r_shoulder_roll", (-3.0, 0.0)),
    (18, 1.2300001, "left_hand.thumb_pitch", (0.0, 1.22)),
    (25, -0.001, "right_hand.thumb_yaw", (0.0, 1.74)),
    (27, 1.3, "waist.robot0_torso_waist_pitch", (-0.52, 1.22)),
])
def test_an_out_of_bound_component_is_rejected_naming_it(contract, index, value, component, bound):
    action = ((contract.low + contract.high) / 2).tolist()
    action[index] = value
    with pytest.raises(InvalidAction) as e:
        validate_action(contract, action)
    err = e.value
    assert (err.index, err.component, err.value, (err.low, err.high)) == (index, component, value, bound)
    assert component in str(err) and "never clipped" in str(err)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_component_is_rejected_naming_it(contract, bad):
    action = ((contract.low + contract.high) / 2).tolist()
    action[20] = bad
    with pytest.raises(InvalidAction) as e:
        validate_action(contract, action)
    assert e.value.index == 20 and e.value.component == "right_hand.pinky" and "finite" in str(e.value)


@pytest.mark.parametrize("length", [0, 26, 28, 30])
def test_a_wrong_length_is_rejected_naming_the_components(contract, length):
    with pytest.raises(InvalidAction, match="takes 29") as e:
        validate_action(contract, [0.0] * length)
    assert "waist.robot0_torso_waist_roll" in str(e.value)


def test_a_nested_or_textual_action_is_rejected(contract):
    with pytest.raises(InvalidAction):
        validate_action(contract, [[0.0] * 29])
    with pytest.raises(InvalidAction):
        validate_action(contract, ["a"] * 29)


# ---- the egoview pipeline ------------------------------------------------------------------------


def _coded_frame() -> np.ndarray:
    """A raw OpenGL-order 800x1280 frame whose pixels say where they are: (row % 251, col % 241, row // 251 * 16 + col // 241)."""
    rows, cols = np.mgrid[0:800, 0:1280]
    return np.stack([rows % 251, cols % 241, rows // 251 * 16 + cols // 241], axis=-1).astype(np.uint8)


def _where(pixel) -> tuple[int, int]:
    r, c, hi = (int(v) for v in pixel)
    return hi // 16 * 251 + r, hi % 16 * 241 + c


def test_the_flip_and_crop_are_pixel_exact(contract):
    p = contract.observation.pipeline
    raw = _coded_frame()
    cropped = crop_egoview(np.copy(raw[::-1]), p)
    assert cropped.shape == (460, 1020, 3)
    # Upright row 310 is raw (OpenGL) row 800 - 1 - 310; columns are not mirrored.
    for (i, j) in [(0, 0), (0, 1019), (459, 0), (459, 1019), (123, 456)]:
        assert _where(cropped[i, j]) == (800 - 1 - (310 + i), 110 + j)


def test_the_policy_image_equals_the_native_pipeline(contract):
    p = contract.observation.pipeline
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, (800, 1280, 3), dtype=np.uint8)
    ours = policy_image(raw, p)
    assert ours.dtype == np.uint8 and ours.shape == (256, 256, 3)
    # Native, verbatim: gymnasium_basic flips, gymnasium_groot.process_img_cotrain does the rest.
    from robocasa_gr1.utils.gym_utils.gymnasium_groot import GrootRoboCasaEnv

    native = GrootRoboCasaEnv.process_img_cotrain(np.copy(raw[::-1, :, :]))
    assert np.array_equal(ours, native)
    # The native code's INTER_AREA lands in resize's `dst` slot: an area resize would differ.
    img = np.copy(raw[::-1])[310:770, 110:1130]
    area = cv2.resize(img, (720, 480), interpolation=cv2.INTER_AREA)
    assert not np.array_equal(cv2.resize(img, (720, 480), interpolation=cv2.INTER_LINEAR), area)


def test_the_padding_is_black_rows_above_and_below(contract):
    white = np.full((800, 1280, 3), 255, dtype=np.uint8)
    out = policy_image(white, contract.observation.pipeline)
    # 480 of 720 rows are image: rows [120, 600) of 720 map to about [42.7, 213.3) of 256.
    assert (out[:42] == 0).all() and (out[-42:] == 0).all() and (out[44:212] == 255).all()


def test_a_wrongly_sized_egoview_is_refused(contract):
    with pytest.raises(ValueError, match="800x1280"):
        policy_image(np.zeros((256, 256, 3), dtype=np.uint8), contract.observation.pipeline)


# ---- protocol identities --------------------------------------------------------------------------


def test_each_budget_track_has_its_own_identity(contract):
    assert (protocol_identity(contract, selection="pilot-0-19", track="horizon", control_step_cap=1000)
            == "gr1-tabletop-pilot-0-19/rgb256-qpos29/control-1000/v2")
    assert (protocol_identity(contract, selection="next-pair-1-2", track="horizon", control_step_cap=250)
            == "gr1-tabletop-next-pair-1-2/rgb256-qpos29/control-250/v2")
    assert (protocol_identity(contract, selection="pilot-0-19", track="decisions", calls=200, prefix=5)
            == "gr1-tabletop-pilot-0-19/rgb256-qpos29/decision-200-prefix-5/v1")
    standin = protocol_identity(contract, selection="offline-standin", track="horizon", control_step_cap=1000)
    assert "offline-standin" in standin


@pytest.mark.parametrize("kwargs", [
    {"track": "horizon", "control_step_cap": 1001}, {"track": "horizon", "control_step_cap": 0},
    {"track": "horizon", "control_step_cap": None}, {"track": "horizon", "control_step_cap": 100, "calls": 10},
    {"track": "decisions", "calls": 201, "prefix": 5}, {"track": "decisions", "calls": 1, "prefix": 6},
    {"track": "decisions", "calls": 10, "prefix": 5, "control_step_cap": 50}, {"track": "budget", "control_step_cap": 5},
])
def test_budgets_outside_a_track_are_refused(contract, kwargs):
    with pytest.raises(ValueError):
        protocol_identity(contract, selection="pilot-0-19", **kwargs)


def test_an_unknown_selection_is_refused(contract):
    with pytest.raises(ValueError, match="selection"):
        protocol_identity(contract, selection="full-24", track="horizon", control_step_cap=10)
