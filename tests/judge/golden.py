"""The golden pictures (fixtures/, rendered from the real GR1 close-drawer scene by `python -m tests.judge.scene`)
as a trial's views, and what a request about them must never carry."""

from __future__ import annotations

import numpy as np

from roboswe.judge.conditions import load_conditions
from roboswe.judge.judging import Asked, ask
from roboswe.judge.views import View, make_view

from .scene import FIXTURES, TASK

CONDITIONS, CONDITIONS_SHA = load_conditions(TASK)
INSTRUCTION = "Close the drawer."
# What a request must never hold: the mechanical record's words (outcome, cause, the end's reason) and numbers.
FORBIDDEN = (b"success", b"failure", b"incomplete", b"outcome", b"step_budget", b"success_interval", b"cause",
             b"reward", b"passed", b"failed")


def picture(camera: str, state: str) -> np.ndarray:
    from roboswe.judge.scripted import decode_png

    return decode_png((FIXTURES / f"{camera}-{state}.png").read_bytes())


def views(final: dict[str, np.ndarray] | None = None) -> list[View]:
    """Three moments, both cameras: open, open, then shut (or ``final``'s pictures at the last moment)."""
    out = []
    for moment, state in ((1, "open"), (2, "open"), (3, "shut")):
        for cam in CONDITIONS.cameras:
            rgb = (final or {}).get(cam, picture(cam, state)) if moment == 3 else picture(cam, state)
            out.append(make_view(cam, moment, (moment - 1) * 100, (moment - 1) * 10, rgb))
    return out


def asked(outcome: str, shown: list[View] | None = None) -> Asked:
    return ask("r1", f"r1/{TASK}/t1a0", outcome, INSTRUCTION, CONDITIONS, CONDITIONS_SHA, shown or views())


LIFT_CONDITIONS, LIFT_SHA = load_conditions("lift-panda")


def lift_asked(outcome: str, final: str) -> Asked:
    """Lift in agentview: the cube at rest at t1 and t2, ``final`` ("lift-rest" or "lift-raised") at t3."""
    shown = [make_view("agentview", m, m - 1, m - 1, picture("agentview", "lift-rest" if m < 3 else final))
             for m in (1, 2, 3)]
    return ask("r1", "r1/lift-panda/t1a0", outcome, "Pick the cube up.", LIFT_CONDITIONS, LIFT_SHA, shown)
