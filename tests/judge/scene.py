"""The GR1 close-drawer stand-in's real scene, with recorded states that close its drawer or leave it open.

The states are the scene's own reset state with the drawer's slide joint set along a path (a drawer moved
by hand, the rest of the scene still): enough for the renderer, which draws any recorded qpos. Also
writes them as a run database, and (``python -m tests.judge.scene``) the golden pictures in fixtures/.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import msgspec
import numpy as np
from roboswe.protocol.recorder import (
    RunPins,
    RunRecord,
    SeriesRecord,
    TrialEnded,
    TrialStarted,
)
from roboswe.sim.physics_state import control_trace_from_states

from ..conftest import ROOT

os.environ.setdefault("MUJOCO_GL", "egl")
TASK = "gr1-standin-closedrawer"
FIXTURES = Path(__file__).parent / "fixtures"
OPEN, SHUT = -0.14, 0.0  # the slide joint: the task's initial opening, and shut
ROWS = 21


def drawer_states(sim, slide: np.ndarray):
    """The reset state repeated, the slide joint following ``slide`` (one row per control step)."""
    st = sim.take_states()
    n = len(slide)

    def rep(a):
        return np.repeat(a[:1], n, axis=0)

    qpos = rep(st.qpos).copy()
    qpos[:, sim.env.slide_qpos_addr] = slide
    return msgspec.structs.replace(st, step=np.arange(n), time=np.arange(n) * 0.05, qpos=qpos, qvel=rep(st.qvel),
                                   act=rep(st.act), mocap_pos=rep(st.mocap_pos), mocap_quat=rep(st.mocap_quat),
                                   action=np.full((n, st.action.shape[1]), np.nan))


def scene_trials():
    """(manifest, fingerprint, {"closes": states, "stays open": states}) from one build of the real scene."""
    from roboswe.sim.backend import create_backend
    from roboswe.sim.manifest import load_manifest

    manifest = load_manifest(ROOT / "configs" / "tasks" / f"{TASK}.toml")
    sim = create_backend(manifest.upstream.package, manifest)
    try:
        fp = sim.reset(manifest.seed).digest
        closes = drawer_states(sim, np.linspace(OPEN, SHUT, ROWS))
        sim.reset(manifest.seed)
        stays = drawer_states(sim, np.full(ROWS, OPEN))
    finally:
        sim.close()
    return manifest, fp, {"closes": closes, "stays open": stays}


def write_run(run_dir: Path, manifest, fp: str, trials: dict[str, tuple[object, str]]) -> list[str]:
    """A run database with one series of ``trials`` (name -> (states, outcome)); returns the trial ids."""
    from roboswe.records.store import RunStore

    now = time.time()
    sid = f"r1/{TASK}"
    records = [RunRecord(run_id="r1", created_at=now, config=RunPins(), admitted_sha256=""),
               SeriesRecord(series_id=sid, run_id="r1", task=TASK, model="scripted", mode="retain", created_at=now,
                            pins={"manifest_digest": manifest.digest(), "seed": manifest.seed})]
    ids = []
    for index, (name, (states, outcome)) in enumerate(trials.items(), start=1):
        tid = f"{sid}/t{index}a0"
        ids.append(tid)
        cause = "success_interval" if outcome == "success" else "step_budget"
        records += [TrialStarted(trial_id=tid, series_id=sid, index=index, fingerprint=fp, started_at=now),
                    control_trace_from_states(tid, 0, states),
                    TrialEnded(trial_id=tid, outcome=outcome, cause=cause, reason=f"{cause}: {name}",
                               detail=name, control_steps=int(states.step[-1]), sim_time=float(states.time[-1]),
                               active_time=1.0, ended_at=now + 1)]
    with RunStore.open(run_dir, flush_interval=0.01) as store:
        store.put_durable(*records)
    return ids


def make_fixtures() -> None:
    """The golden pictures: both cameras the conditions name, drawer open and shut."""
    from roboswe.sim.video import VideoRenderer

    from roboswe.judge.conditions import load_conditions

    manifest, _, trials = scene_trials()
    cameras = load_conditions(TASK)[0].cameras
    renderer = VideoRenderer(manifest)
    try:
        frames = renderer.render(trials["closes"], seed=manifest.seed, cameras=cameras, rows=[0, ROWS - 1])
    finally:
        renderer.close()
    from roboswe.judge.views import make_view

    FIXTURES.mkdir(exist_ok=True)
    for cam in cameras:
        for i, state in enumerate(("open", "shut")):
            (FIXTURES / f"{cam}-{state}.png").write_bytes(make_view(cam, 1, 0, 0, frames[cam][i]).png)


def lift_fixtures() -> None:
    """Lift (Panda) in agentview: the cube resting on the table, and raised 8 cm by its free joint."""
    import mujoco
    from roboswe.judge.views import make_view
    from roboswe.sim.manifest import load_manifest
    from roboswe.sim.video import VideoRenderer

    manifest = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")
    renderer = VideoRenderer(manifest)
    try:
        sim = renderer._sim
        sim.reset(manifest.seed)
        states = sim.take_states()
        joint = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_JOINT, sim.env.cube.joints[0])
        qpos = np.repeat(states.qpos, 2, axis=0)
        qpos[1, sim.model.jnt_qposadr[joint] + 2] += 0.08
        two = msgspec.structs.replace(states, step=np.arange(2), time=np.arange(2) * 0.05, qpos=qpos,
                                      **{f: np.repeat(getattr(states, f), 2, axis=0)
                                         for f in ("qvel", "act", "mocap_pos", "mocap_quat", "action")})
        frames = renderer.render(two, seed=manifest.seed, cameras=["agentview"], rows=[0, 1])["agentview"]
    finally:
        renderer.close()
    for state, rgb in zip(("lift-rest", "lift-raised"), frames):
        (FIXTURES / f"agentview-{state}.png").write_bytes(make_view("agentview", 1, 0, 0, rgb).png)


if __name__ == "__main__":
    make_fixtures()
    lift_fixtures()
