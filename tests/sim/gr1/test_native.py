"""GR1 tabletop native adapter: robocasa_gr1's own task class on the generated placeholder kit.

The real RoboCasa GR1 assets cannot be downloaded here, so the end-to-end checks run the native
PnPCupToDrawerClose on sim/gr1/kit.py's placeholder assets (labelled ``assets = "placeholder"``):
they prove the adapter (construction, contract recheck, action mapping, validation, allowlist,
grading, fingerprint), not the task's scenes with real assets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import msgspec
import numpy as np
import pytest
from roboswe.sim.gr1.manifest import AssetsMissing, gr1_manifest
from roboswe.sim.gr1.native import check_native
from roboswe.sim.manifest import ManifestError, load_manifest

from ..conftest import ROOT
from .conftest import TASKS


@pytest.fixture(scope="module")
def kit_dir(tmp_path_factory):
    from roboswe.sim.gr1.kit import write_kit

    return write_kit(tmp_path_factory.mktemp("gr1") / "kit")


@pytest.fixture(scope="module")
def cup():
    return load_manifest(TASKS / "gr1-native-pnpcuptodrawerclose.toml")


@pytest.mark.slow
def test_the_native_task_runs_on_the_kit_under_the_contract(kit_dir):
    env = {**os.environ, "PYTHONHASHSEED": "0", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.run([sys.executable, "-m", "tests.sim.gr1.native_probe", str(kit_dir)], check=False, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("NATIVE_PROBE ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[-1].removeprefix("NATIVE_PROBE "))
    assert out["backend"] == "Gr1NativeBackend" and out["contract_problems"] == []
    v = out["versions"]
    assert (v["fidelity"], v["assets"], v["native_layout"]) == ("native", "placeholder", "4")
    assert v["native_env_id"] == "gr1_unified/PnPCupToDrawerClose_GR1ArmsAndWaistFourierHands_Env"
    assert out["instruction"] == "unlocked_waist: pick up the cup, place it into the drawer and close the drawer"
    # the allowlist: one 256x256 uint8 image without depth, 29 encoders; the raw egoview is refused
    assert out["cameras"] == ["ego_view_bg_crop_pad_res256_freq20"] and out["state"] == {"joint_encoders": 29}
    assert out["image"] == ["ego_view_bg_crop_pad_res256_freq20", [256, 256, 3], "uint8", True]
    assert out["raw_egoview"] == "SimError"
    # contract order [left arm, right arm, left hand, right hand, waist] lands in the native part slots
    t = out["target"]
    assert out["goals"] == {"left": t[0:7], "right": t[7:14], "torso": t[26:29]}
    assert out["left_hand_command"] == np.repeat(t[14:20], [2, 2, 2, 2, 2, 1]).tolist()  # expansion [0,0,1,1,...,5]
    # rejected before env.step, naming the component; the control step did not advance
    for name in ("nan", "elbow"):
        component, message, unmoved = out["rejected"][name]
        assert component == "left_arm.robot0_l_elbow_pitch" and unmoved and "[-3, 0]" in message
    # graded by the task's own predicate through the step's reward
    assert out["success_before"] is False and out["door_state"] == 0.0 and out["success_after"] is True
    assert out["record"]["assets"] == "placeholder" and out["record"]["used_assets"] > 0
    assert out["files"] == ["scene.xml", "used_assets.json"]
    assert out["fingerprint_again"] == out["fingerprint"]  # a fresh constructor and one seeded reset, again


@pytest.mark.exhaustive  # a repeat of admission's two-process check; the kit task itself runs above by default
@pytest.mark.slow
def test_the_kit_task_admits_with_one_fingerprint_in_two_fresh_processes(kit_dir, cup):
    from roboswe.evaluation.admission import admit_task

    data = cup.to_builtins()
    data["id"] = "gr1-kit-pnpcuptodrawerclose"
    data["upstream"].update(assets="placeholder", assets_root=str(kit_dir))
    task = admit_task(gr1_manifest(data), hold_steps=10)
    assert task.status == "admitted", task.reason
    assert task.fingerprint["versions"]["assets"] == "placeholder"
    assert task.measured["action_dim"] == 29


def test_the_native_constructor_is_the_gym_factorys():
    from roboswe.sim.gr1.native import native_env_kwargs

    m = load_manifest(TASKS / "gr1-native-pnpmilktomicrowaveclose.toml")
    kw = native_env_kwargs(m, "GR1ArmsAndWaistFourierHands", (1280, 800), m.seed)
    cfg = kw.pop("controller_configs")
    assert (cfg["type"], cfg["composite_controller_specific_configs"], cfg["control_delta"]) == ("BASIC", {}, False)
    assert kw["seed"] == 20260907 and kw["robots"] == ["GR1ArmsAndWaistFourierHands"]
    assert (kw["camera_names"], kw["camera_widths"], kw["camera_heights"]) == (["egoview"], 1280, 800)
    assert not {"layout_ids", "style_ids", "layout_and_style_ids", "horizon"} & set(kw)  # the factory forwards none


def test_a_real_asset_task_refuses_the_kit_and_names_missing_fixture_meshes(kit_dir, cup, tmp_path):
    on_kit = msgspec.structs.replace(cup, upstream=msgspec.structs.replace(cup.upstream, assets_root=str(kit_dir)))
    with pytest.raises(AssetsMissing, match="placeholder kit"):
        check_native(on_kit)
    for folder in ("textures", "fixtures/fixture_registry", "objects/objaverse", "objects/sketchfab", "objects/lightwheel"):
        (tmp_path / folder).mkdir(parents=True)  # every folder, but no fixture meshes
    bare = msgspec.structs.replace(cup, upstream=msgspec.structs.replace(cup.upstream, assets_root=str(tmp_path)))
    with pytest.raises(AssetsMissing, match=r"fixture mesh/texture files under .*fixtures") as e:
        check_native(bare)
    assert "download_tabletop_assets" in str(e.value)


def test_the_asset_root_comes_from_the_manifest_then_the_environment(cup, tmp_path, monkeypatch):
    from roboswe.sim.gr1.native import ENV_VAR, resolve_asset_root

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env"))
    assert resolve_asset_root(cup) == (tmp_path / "env", f"${ENV_VAR}")
    pinned = msgspec.structs.replace(cup, upstream=msgspec.structs.replace(cup.upstream, assets_root=str(tmp_path / "m")))
    assert resolve_asset_root(pinned)[0] == tmp_path / "m"
    monkeypatch.delenv(ENV_VAR)
    assert resolve_asset_root(cup)[0].parts[-3:] == ("robocasa_gr1", "models", "assets")


def test_placeholder_assets_are_for_native_task_classes_only():
    data = load_manifest(TASKS / "gr1-standin-cubetobin.toml").to_builtins()
    data["upstream"]["assets"] = "placeholder"
    with pytest.raises(ManifestError, match="placeholder"):
        gr1_manifest(data)
