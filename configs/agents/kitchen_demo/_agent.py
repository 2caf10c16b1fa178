"""The kitchen demo participant: the Lift demo's deterministic policy with the drawer script.

Per trial it lists the workspace, reuses close_drawer.py when a retained copy is intact (else
writes it), resets plan.json to {"phase": "back"} for the new scene, observes once, runs the
script until plan.json says the drawer is shut (or that it gave up), and finishes. The
decision logic is LiftDemoAgent's (configs/agents/lift_demo/_agent.py); only the script,
its fresh plan and the finish reasons differ.
"""

from __future__ import annotations

import json
from importlib import resources

from roboswe.agents.lift_demo import LiftDemoAgent

SCRIPT = "close_drawer.py"


def script_source() -> str:
    """The authored script shipped next to this module (configs/agents/kitchen_demo/scripts/)."""
    return resources.files(__package__).joinpath("scripts", SCRIPT).read_text(encoding="utf-8")


class KitchenDemoAgent(LiftDemoAgent):
    """Deterministic CloseDrawer participant for the `python` provider kind
    (agent = "roboswe.agents.kitchen_demo:KitchenDemoAgent"); options as LiftDemoAgent's."""

    script_name = SCRIPT
    fresh_plan = json.dumps({"phase": "back"}) + "\n"
    done_reason = "plan.json says done: the drawer was pushed shut and held"
    failed_reason = "plan.json says failed: the drawer could not be closed"

    @staticmethod
    def read_script() -> str:
        return script_source()
