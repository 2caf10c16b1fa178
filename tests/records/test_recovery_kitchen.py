"""Within-trial recovery's opening measure on a real RoboCasa kit scene: the drawer the task chose at
reset, read as RoboCasa's own predicate reads it, opened, closed again and reopened."""

from __future__ import annotations

import os

import numpy as np
import pytest
from roboswe.sim.physics_state import PhysicsStates

from roboswe.records.recovery import SceneMeasures, load_rules, trial_mishaps

from ..conftest import ROOT

os.environ.setdefault("MUJOCO_GL", "egl")
pytestmark = pytest.mark.exhaustive  # a kitchen scene costs ~20 s to build; the Lift case runs by default


def _position_for(env, joint: str, adr: int, fraction: float) -> float:
    """Bisect the joint's position until the fixture's get_joint_state (what the success predicate reads) says ``fraction``."""
    lo, hi = env.sim.model.jnt_range[env.sim.model.joint_name2id(joint)]
    reading = lambda q: (env.sim.data.qpos.__setitem__(adr, q), env.drawer.get_joint_state(env, [joint])[joint])[1]
    rising = reading(hi) > reading(lo)
    for _ in range(60):
        mid = (lo + hi) / 2
        if (reading(mid) < fraction) == rising:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def test_a_kit_drawer_closed_again_and_reopened_is_one_recovered_mishap():
    from roboswe.sim.backend import create_backend
    from roboswe.sim.manifest import load_manifest

    manifest = load_manifest(ROOT / "configs" / "tasks" / "kit-opendrawer.toml")
    sim = create_backend(manifest.upstream.package, manifest)
    try:
        sim.reset(manifest.seed)
        measures = SceneMeasures(sim)
        env, start = sim.env, sim.take_states()
        (joint,) = env.drawer.door_joint_names
        rows = 40
        qpos = np.repeat(start.qpos[:1], rows, axis=0)
        adr = sim.model.jnt_qposadr[sim.model.joint(joint).id]
        # open fraction per row, by the live scene's own reading: open to 60 %, pushed back to 5 %, reopened to 50 %
        wanted = np.concatenate([np.linspace(0, 0.6, 15), np.linspace(0.6, 0.05, 10), np.linspace(0.05, 0.5, 15)])
        for i, f in enumerate(wanted):  # the joint position RoboCasa reads as fraction f (a 1-D search on the live scene)
            qpos[i, adr] = _position_for(env, joint, adr, f)
        states = PhysicsStates(step=np.arange(rows), time=np.arange(rows) * 0.05, qpos=qpos,
                               qvel=np.repeat(start.qvel[:1], rows, axis=0), act=np.repeat(start.act[:1], rows, axis=0),
                               mocap_pos=np.repeat(start.mocap_pos[:1], rows, axis=0),
                               mocap_quat=np.repeat(start.mocap_quat[:1], rows, axis=0), action=np.zeros((rows, 0)))
        assert measures.opening(qpos, "drawer") == pytest.approx(wanted, abs=1e-6)  # RoboCasa's own normalisation
        (m,) = trial_mishaps(measures, states, load_rules()["kit-opendrawer"].rules)
    finally:
        sim.close()
    onset = next(i for i in range(15, rows) if wanted[i] < 0.3)
    back = next(i for i in range(onset, rows) if wanted[i] >= 0.3)
    assert (m.rule, m.step, m.recovered_step) == ("drawer closed again", onset, back)
    assert m.peak == pytest.approx(0.6)


@pytest.mark.parametrize("task", ["stack-panda", "pickplacecan-panda", "nutassemblyround-panda", "door-panda",
                                  "kit-opencabinet-single", "kit-opencabinet-double", "kit-openmicrowave"])
def test_every_shipped_rule_measures_its_scene(task):
    """Each rule's body, joint or fixture is in its task's scene; at rest nothing is engaged, so nothing is lost."""
    from roboswe.sim.backend import create_backend
    from roboswe.sim.manifest import load_manifest

    manifest = load_manifest(ROOT / "configs" / "tasks" / f"{task}.toml")
    sim = create_backend(manifest.upstream.package, manifest)
    try:
        sim.reset(manifest.seed)
        sim.wait(5)
        assert trial_mishaps(SceneMeasures(sim), sim.take_states(), load_rules()[task].rules) == []
    finally:
        sim.close()
