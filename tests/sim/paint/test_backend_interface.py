"""The paint family through the generic simulator session: loaded by its manifest's family, waypoints as 8-vectors."""

from __future__ import annotations

import numpy as np
from roboswe.sim.physics_state import states_from_blobs
from roboswe.sim.session import SimSession


def test_the_session_loads_the_paint_family_and_steps_one_moveflange_per_chunk(paint_manifest):
    session = SimSession(require_fixed_hash_seed=False)
    try:
        loaded = session.load(paint_manifest.to_builtins(), paint_manifest.seed, None)
        assert loaded.spec.action_dim == 8 and loaded.spec.control_hz == 100
        assert loaded.fingerprint.seed == paint_manifest.seed and loaded.fingerprint.compiled_model_sha256
        down = [1.0, 0.0, 0.0, 0.0]
        ok = session.step([[0.05, 0.5, 0.3, *down, 0.5], [0.05, 0.5, 0.3, *down, 0.2]])
        assert ok.stopped == "done" and ok.applied == 70 and ok.error is None
        assert set(ok.values) == {"flange_pos", "flange_quat_xyzw"}
        bad = session.step([[0.05, 0.5, 0.3, *down, 0.5], [0.05, 0.5, 0.3, 0.0, 0.0, 0.0, 1.0, 0.5]])
        assert bad.stopped == "invalid_action" and bad.applied == 0
        assert bad.error.component == "tilt" and bad.error.chunk_index == 1 and "rejected (tilt)" in bad.error.detail
        held = session.wait(30)
        assert held.applied == 30 and held.control_step == 100
        assert abs(session.state().values["flange_pos"][2] - 0.3) < 3e-3  # the arm holds its last target
        states, blobs = session.take_states()
        assert states.count == 100  # one recorded physics state per control step, none for the rejected batch
        # The commanded vector per control step is the arm's 7 joint targets; a hold keeps them.
        action = states_from_blobs(states, blobs).action
        assert action.shape == (100, 7) and np.isfinite(action).all()
        assert (action[-30:] == action[-31]).all() and not (action[0] == action[69]).all()
    finally:
        session.close()
