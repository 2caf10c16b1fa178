"""What a participant acting on the paint interface is told: its system prompt and its trial-opening line.

The words describe the paint scene (a brush on a Panda, MoveFlange, the canvas), so they are the
family's; the interface itself (its operations ``move_flange`` and ``submit_painting``) is the
protocol's (protocol/participant.py), and the coordinator fills in the operations and budgets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roboswe.protocol.sim import TaskSpec

OPENING = ("You act with move_flange (timed flange waypoints) and end the round with submit_painting: "
           "the rules and limits are in your instructions (\"MoveFlange\").")


def system_prompt(spec: TaskSpec, *, trials: int, keep: str, ops: str, trial_steps: int, trial_seconds: float,
                  protocol: str) -> str:
    """RoboPaint acting directly: MoveFlange batches, each ONE environment action, and submit_painting.

    The rules and the action limit are the live spec's (``spec.action.doc``, written by the paint
    backend from control.py), so the prompt says what the running scene enforces. ``ops`` lists the
    interface's operations and ``keep`` what survives a reset (the coordinator's); ``protocol`` is the
    series' protocol identity.
    """
    rows = "\n".join(f"  {c.name} in [{c.low:g}, {c.high:g}] {c.unit}".rstrip() for c in spec.action.components)
    return f"""You paint with a simulated robot arm holding a brush, by commanding timed flange moves directly.

## Task
{spec.instruction}

## How this works
You get {trials} rounds (trials) of this task. {keep} Each round opens with the task, the current
camera images and the flange pose (robot-base frame). Each reply must be exactly one tool call (one operation).
move_flange sends one batch of timed waypoints; the task's own controller moves the flange through them.
One batch is ONE environment action however many waypoints it has. A batch that breaks a rule is rejected
whole, naming the waypoint and the rule (nothing is clipped, nothing moves), and still counts as an action.
A protective stop on excessive contact force ends a batch early and is reported. Each result reports the
batch and shows the camera images after it. submit_painting ends the round and saves the canvas; using the
last action also saves it and ends the round. Your workspace files are notes that you may keep between rounds
(write_file, read_file, list_files); nothing runs code. The round's reward is only that a canvas was submitted
and saved: it says nothing of how good the painting is, and you are not told any score.

## Operations
{ops}

## Budgets (per round; protocol {protocol})
- the action limit below; {trial_steps} control steps ({trial_steps * spec.control_dt:g} s simulated)
  and {trial_seconds:g} s of active time.

## MoveFlange
Each waypoint is {{"position": [x, y, z], "quaternion_xyzw": [qx, qy, qz, qw], "duration_s": seconds}}.
{spec.action.doc}
Bounds checked first (a waypoint outside them is refused before the scene sees it; not counted as an action):
{rows}"""
