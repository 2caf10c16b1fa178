"""The fake simulator backend keeps the backend contract, and the registry picks it by the manifest's family."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from roboswe.sim.backend import InvalidAction, create_backend
from roboswe.sim.manifest import manifest_from_builtins
from roboswe.sim.session import SimSession

from tests.evaluation.harness import ROOT, reach_manifest


def test_a_session_loads_the_backend_named_by_the_manifest_family_without_importing_mujoco():
    code = (
        "import sys\n"
        "from roboswe.sim.session import SimSession\n"
        "from tests.evaluation.harness import reach_manifest\n"
        "loaded = SimSession(require_fixed_hash_seed=False).load(reach_manifest(), 0, 100)\n"
        "print(loaded.spec.action_dim, 'mujoco' in sys.modules, 'robosuite' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["4", "False", "False"]


def test_an_unknown_backend_name_lists_the_registered_ones():
    with pytest.raises(KeyError, match=r"known: \[.*'fake'.*'robosuite'"):
        create_backend("nope", manifest_from_builtins(reach_manifest()))


def test_same_seed_same_fingerprint_and_states():
    def run() -> tuple[str, np.ndarray]:
        sim = create_backend("fake", manifest_from_builtins(reach_manifest()))
        fp = sim.reset(3)
        sim.step([[0.5, -0.5, 0.2, 1.0]] * 4)
        sim.wait(2)
        return fp.digest, sim.take_states().qpos

    (a, qa), (b, qb) = run(), run()
    assert a == b and np.array_equal(qa, qb) and qa.shape == (6, 4)


def test_out_of_bound_actions_are_rejected_whole_chunk_never_clipped():
    sim = create_backend("fake", manifest_from_builtins(reach_manifest()))
    sim.reset(0)
    with pytest.raises(InvalidAction, match=r"action\[0\] \(dx\) = 1.5 is outside its bound") as caught:
        sim.step([[0.1, 0, 0, 0], [1.5, 0, 0, 0]])
    assert caught.value.chunk_index == 1 and sim.control_step == 0  # nothing of the chunk was applied


def test_the_trial_step_budget_stops_motion_and_success_needs_the_interval():
    session = SimSession(require_fixed_hash_seed=False)
    session.load(reach_manifest(), 0, 10)
    out = session.wait(25)
    assert (out.applied, out.stopped, out.steps_left) == (10, "trial_budget", 0)
    assert not session.success().achieved
