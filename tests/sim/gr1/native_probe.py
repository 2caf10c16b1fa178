"""Run one native GR1 task on the placeholder kit through Gr1NativeBackend and print what the test checks (JSON).

Its own process (``python -m tests.sim.gr1.native_probe KIT_DIR``, PYTHONHASHSEED=0): robocasa_gr1's
asset root is fixed at import, and the other GR1 tests import it with the package's own root.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from roboswe.sim.backend import InvalidAction, create_backend
from roboswe.sim.manifest import load_manifest

from ..conftest import ROOT


def kit_manifest(kit_dir: str) -> dict:
    """The seed's PnPCupToDrawerClose on the generated kit: its own id, labelled placeholder."""
    data = load_manifest(ROOT / "configs" / "tasks" / "gr1-native-pnpcuptodrawerclose.toml").to_builtins()
    data["id"] = "gr1-kit-pnpcuptodrawerclose"
    data["upstream"].update(assets="placeholder", assets_root=kit_dir)
    return data


def main(kit_dir: str) -> dict:
    data = kit_manifest(kit_dir)
    sim = create_backend("gr1", data, require_fixed_hash_seed=True)
    out: dict = {"backend": type(sim).__name__}
    fp = sim.reset(data["seed"])
    out["fingerprint"] = fp.digest
    out["versions"] = fp.versions
    out["contract_problems"] = sim.contract_problems()
    spec = sim.spec()
    out["instruction"], out["cameras"], out["state_keys"] = spec.instruction, [c.name for c in spec.cameras], spec.state_keys
    enc = sim.state()
    out["state"] = {k: len(v) for k, v in enc.items()}
    frame = sim.observe()[0]
    out["image"] = [frame.camera, list(frame.rgb.shape), str(frame.rgb.dtype), frame.depth is None]
    try:
        sim.observe(["egoview"])
        out["raw_egoview"] = "served"
    except Exception as e:  # noqa: BLE001 - the refusal is what is checked
        out["raw_egoview"] = type(e).__name__
    # The contract's order reaches the native slots by part: move one joint per part and read each controller's goal.
    hold = sim.hold_action()
    target = hold.copy()
    target[3] = -1.2  # left elbow pitch
    target[7 + 3] = -1.0  # right elbow pitch
    target[14 + 2] = 0.9  # left hand middle finger
    target[26] = 0.2  # waist yaw
    sim.step([target])
    cc = sim._robot.composite_controller
    out["goals"] = {part: np.asarray(cc.part_controllers[part].goal_qpos).round(6).tolist() for part in ("left", "right", "torso")}
    out["left_hand_command"] = np.asarray(cc.part_controllers["left_gripper"].goal_qvel).round(6).tolist()
    out["target"] = target.round(6).tolist()
    rejected = {}
    for name, bad in (("nan", np.nan), ("elbow", 0.5)):
        a = target.copy()
        a[3] = bad
        before = sim.control_step
        try:
            sim.step([a])
        except InvalidAction as e:
            rejected[name] = [e.component, str(e), sim.control_step == before]
    out["rejected"] = rejected
    out["success_before"] = sim.success().achieved
    # Grade: put the cup inside the closed drawer and hold one control; the native reward must say success.
    env = sim.env
    drawer = env.drawer
    drawer.set_door_state(0.0, 0.0, env, np.random.default_rng(0))  # closed
    env.sim.forward()
    drawer.update_state(env)
    p0, px, py, pz = drawer.get_int_sites(relative=False)
    centre = p0 + ((px - p0) + (py - p0) + (pz - p0)) / 2
    cup = env.objects["obj"]
    env.sim.data.set_joint_qpos(cup.joints[0], np.concatenate([centre, [1, 0, 0, 0]]))
    env.sim.forward()
    out["door_state"] = float(drawer.get_door_state(env=env)["door"])
    sim.step([target])
    out["success_after"] = sim.success().achieved
    record, files = sim.task_record(None)
    out["record"] = record
    out["files"] = sorted(files)
    again = sim.reset(data["seed"])  # a fresh native constructor: the same initial state
    out["fingerprint_again"] = again.digest
    sim.close()
    return out


if __name__ == "__main__":
    print("NATIVE_PROBE " + json.dumps(main(sys.argv[1])))
