"""The RLE-Bench speed-run demo participant (family 01, PickPlaceCounterToDrawer on the kit), scripted.

Development: it writes its policy (scripts/policy.py) into the workspace as ``policy.py`` (at L1, where
the harness ships no skills, also its own ``geometry.py``: the same geometry and motion code an agent
would have to write), tries it on ``practice`` public kitchens (charged), resetting after each, and
stops. Evaluation: in each hidden kitchen it runs the sealed ``policy.main(robot)`` from its workspace,
then ``finish_trial()`` and ``next_trial()``. At L3 the policy reads the object and drawer from the
``priv_*`` state; at L1 and L2 from the base camera's depth.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib import resources
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKSPACE_MODULES = ("policy", "kitchen_skills", "geometry")


class SpeedrunParticipant:
    def __init__(self, practice: int = 1):
        self.practice = practice

    def develop(self, robot, workspace: Path) -> dict:
        (workspace / "policy.py").write_bytes((HERE / "scripts" / "policy.py").read_bytes())
        if not (workspace / "kitchen_skills.py").exists():
            skills = resources.files("roboswe.rle.kitchen").joinpath("kitchen_skills.py").read_bytes()
            (workspace / "geometry.py").write_bytes(skills)
        policy = load_policy(workspace)
        tries = []
        for _ in range(self.practice):
            tries.append(_attempt(policy, robot))
            robot.reset()
        return {"practice": tries}

    def evaluate(self, robot, workspace: Path) -> dict:
        policy = load_policy(workspace)
        trials = []
        for _ in range(robot.trials):
            trials.append(_attempt(policy, robot))
            robot.finish_trial()
            robot.next_trial()
        return {"trials": trials}


def _attempt(policy, robot) -> dict:
    try:
        return policy.main(robot)
    except Exception as e:  # noqa: BLE001 - a failed attempt is the participant's failure, not the harness's
        return {"error": f"{type(e).__name__}: {e}"}


def load_policy(workspace: Path):
    """``policy`` from the workspace, with its imports resolved there (never a copy from another level's run)."""
    for name in WORKSPACE_MODULES:
        sys.modules.pop(name, None)
    sys.path.insert(0, str(workspace))
    try:
        spec = importlib.util.spec_from_file_location("policy", workspace / "policy.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["policy"] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(workspace))
