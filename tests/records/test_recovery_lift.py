"""Within-trial recovery on the real robosuite Lift scene: scripted programs drop the cube and pick it up
again (recovered), drop it and give up (censored), never drop it (no mishap); their recorded states go
through a run database, `roboswe recovery` and the report section."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from roboswe.protocol.recorder import (
    RunPins,
    RunRecord,
    SeriesRecord,
    TrialEnded,
    TrialStarted,
)
from roboswe.sim.physics_state import control_trace_from_states

from roboswe.records.reader import RunReader
from roboswe.records.recovery import load_rules, stored_recovery
from roboswe.records.store import RunStore

from ..conftest import ROOT

os.environ.setdefault("MUJOCO_GL", "egl")
RULE = load_rules()["lift-panda"].rules[0]


class Script:
    """A scripted controller on privileged cube state (tests may; a participant never can); logs the live rise."""

    def __init__(self, sim):
        self.sim, self.env = sim, sim.env
        self.z0 = self.cube()[2]
        self.rise: dict[int, float] = {0: 0.0}  # control step -> live cube rise, read from the simulator's own data
        self.released: list[int] = []  # the last control step before each release

    def cube(self) -> np.ndarray:
        return self.env.sim.data.body_xpos[self.env.cube_body_id].copy()

    def act(self, action) -> None:
        out = self.sim.step([action])
        self.rise[out.control_step] = self.cube()[2] - self.z0

    def go(self, target, grip: float, max_steps: int, tol: float = 0.01) -> None:
        for _ in range(max_steps):
            err = target() - self.sim.state()["robot0_eef_pos"]
            if np.linalg.norm(err) < tol:
                return
            self.act([*np.clip(10 * err, -1, 1), 0, 0, 0, grip])

    def pick_up(self) -> None:
        above = self.cube() + [0, 0, 0.10]
        self.go(lambda: above, -1, 80)
        self.go(lambda: self.cube() + [0, 0, -0.005], -1, 80, tol=0.008)
        for _ in range(12):
            self.act([0, 0, 0, 0, 0, 0, 1])
        high = self.cube() + [0, 0, 0.15]
        self.go(lambda: high, 1, 60)

    def hold(self, steps: int, grip: float) -> None:
        for _ in range(steps):
            self.act([0, 0, 0, 0, 0, 0, grip])

    def release(self) -> None:
        """Open the gripper over the table and let the cube fall."""
        self.released.append(self.sim.control_step)
        self.hold(20, -1)


PROGRAMS = {
    "picks up again": lambda s: (s.pick_up(), s.hold(5, 1), s.release(), s.pick_up(), s.hold(5, 1)),
    "gives up": lambda s: (s.pick_up(), s.hold(5, 1), s.release(), s.hold(10, -1)),
    "never drops": lambda s: (s.pick_up(), s.hold(25, 1)),
}


@pytest.fixture(scope="module")
def lift_trials():
    """program -> (recorded states, live rise per step, release step, fingerprint digest)."""
    from roboswe.sim.backend import create_backend
    from roboswe.sim.manifest import load_manifest

    manifest = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")
    sim = create_backend("robosuite", manifest)
    out = {}
    try:
        for name, program in PROGRAMS.items():
            fp = sim.reset(manifest.seed).digest
            script = Script(sim)
            program(script)
            out[name] = (sim.take_states(), script.rise, script.released, fp)
    finally:
        sim.close()
    return manifest, out


def expected(rise: dict[int, float], released: int) -> tuple[int, int | None]:
    """From the live data and the rules file's words: the first step after the release below the engaged
    level, then the first later step back at it (None: never)."""
    steps = sorted(rise)
    onset = next(s for s in steps if s > released and rise[s] < RULE.engaged)
    back = next((s for s in steps if s > onset and rise[s] >= RULE.engaged), None)
    return onset, back


def write_run(run_dir, manifest, trials) -> None:
    store = RunStore.open(run_dir, flush_interval=0.01)
    now = time.time()
    records = [RunRecord(run_id="r1", created_at=now, config=RunPins(), admitted_sha256=""),
               SeriesRecord(series_id="r1/lift", run_id="r1", task="lift-panda", model="scripted", mode="retain",
                            created_at=now, pins={"manifest_digest": manifest.digest(), "seed": manifest.seed})]
    rows = [*trials.items(), ("wrong scene", (*trials["never drops"][:3], "e" * 64))]
    for index, (name, (states, _, _, fp)) in enumerate(rows, start=1):
        tid = f"r1/lift/t{index}a0"
        records += [TrialStarted(trial_id=tid, series_id="r1/lift", index=index, fingerprint=fp, started_at=now),
                    control_trace_from_states(tid, 0, states),
                    TrialEnded(trial_id=tid, outcome="failure", cause="finish", reason=name,
                               control_steps=int(states.step[-1]), sim_time=float(states.time[-1]),
                               active_time=1.0, ended_at=now + 1)]
    store.put_durable(*records)
    store.close()


def test_scripted_drops_on_real_lift_are_found_recovered_and_censored_through_a_run(lift_trials, tmp_path, capsys):
    from roboswe.cli import main

    manifest, trials = lift_trials
    run_dir = tmp_path / "run"
    write_run(run_dir, manifest, trials)
    # as a user runs it: its own process, which re-executes itself with the simulator's fixed hash seed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    proc = subprocess.run([sys.executable, "-m", "roboswe.cli", "recovery", str(run_dir), "--json"],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    (series,) = data["series"]
    by_reason = dict(zip([*trials, "wrong scene"], series["trials"]))

    _, rise, (released,), _ = trials["picks up again"]
    (m,) = by_reason["picks up again"]["events"]
    onset, back = expected(rise, released)
    assert back is not None and (m["step"], m["recovered_step"]) == (onset, back)
    assert m["steps_to_recovery"] == back - onset and m["seconds_to_recovery"] == pytest.approx((back - onset) * 0.05)
    # kinematics on the recorded qpos == the live data, up to the one 2 ms substep MuJoCo's xpos lags behind qpos
    assert m["peak"] == pytest.approx(max(rise[s] for s in rise if s <= onset), abs=1e-5)

    _, rise, (released,), _ = trials["gives up"]
    (m,) = by_reason["gives up"]["events"]
    assert (m["step"], m["recovered_step"], m["censored_at"]) == (expected(rise, released)[0], None, max(rise))

    assert by_reason["never drops"]["events"] == [] and max(trials["never drops"][1].values()) > 0.1
    assert "fingerprint" in by_reason["wrong scene"]["error"] and by_reason["wrong scene"]["events"] == []
    assert (series["mishaps"], series["recovered"], series["censored"]) == (2, 1, 1)
    assert series["median_steps_to_recovery"] == back - onset

    # the report's section reads what the command saved, and never enters the run's figures
    with RunReader(run_dir) as reader:
        stored = stored_recovery(reader)
        assert stored["not_covered"] == 0 and stored["series"] == data["series"]
    assert main(["report", str(run_dir)]) == 0
    report = capsys.readouterr().out
    assert "within-trial recovery (diagnostic" in report and "censored at step" in report
