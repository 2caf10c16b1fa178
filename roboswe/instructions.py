"""What the participant is told: the standard interface instructions and each trial's opening.

The robot API section is generated from the live TaskSpec the simulator returned for
this trial (action components with bounds and units, cameras, state keys, limits), so
it always says what the running scene accepts.
"""

from __future__ import annotations

from roboswe.protocol.participant import OPERATIONS
from roboswe.protocol.sim import TaskSpec
from roboswe.series_config import Budgets

ROBOT_FUNCTIONS = """\
robot.spec() -> dict          task id, instruction, action bounds and units, control rate, cameras, state keys, limits
robot.state() -> dict         {key: numpy array} of the allowed robot sensors
robot.observe(cameras=None, depth=False) -> dict
                              {camera: {"rgb": HxWx3 uint8, "depth": HxW float32 metres, "K": 3x3, "T_world_camera": 4x4}}
robot.step(action) -> dict    apply one action for one control step; returns the new state dict
robot.step_many(actions) -> dict
                              apply an (N, action_dim) chunk, one control step each, in one round trip
robot.steps_left() -> int     control steps this script may still use
Errors: robot.InvalidAction (nothing moved), robot.LimitReached (the script's step limit), robot.BridgeError.
There is no reset, no state setting and no success signal: judge progress from images and sensors."""


def robot_api_doc(spec: TaskSpec) -> str:
    """The `robot` module documentation for this task, generated from the live spec."""
    a = spec.action
    lines = ["## The `robot` module (inside `exec` scripts: `import robot`)", "", ROBOT_FUNCTIONS, "",
             f"### Action vector ({a.dim} components, control at {spec.control_hz} Hz, {spec.control_dt:g} s per step)"]
    for c in a.components:
        lines.append(f"- [{c.index}] {c.name}: {c.low:g} .. {c.high:g} ({c.unit})")
    lines += ["Values outside the bounds are rejected, never clipped.", "", a.doc.strip(), "",
              f"Holding still: {a.hold_rule}", "", "### Cameras"]
    for cam in spec.cameras:
        extras = [x for x, on in (("depth", cam.depth), ("calibration K and T_world_camera", cam.calibration)) if on]
        lines.append(f"- {cam.name}: {cam.width}x{cam.height} RGB" + (f", {', '.join(extras)}" if extras else ""))
    lines += ["Depth is metres along the optical axis; K and T_world_camera use the OpenCV convention "
              "(x right, y down, z forward): p_world = T_world_camera @ [z*(u-cx)/fx, z*(v-cy)/fy, z, 1].",
              "", "### State keys", ", ".join(spec.state_keys)]
    return "\n".join(lines)


def system_prompt(spec: TaskSpec, budgets: Budgets, trials: int, retain: str) -> str:
    """The pinned instructions of every request of a series."""
    ops = "\n".join(f"- {name}: {(cls.__doc__ or '').strip()}" for name, cls in OPERATIONS.items())
    keep = ("Between trials the scene resets; your workspace files and this conversation are kept."
            if retain == "retain" else
            "Between trials the scene resets, and your workspace and conversation start empty again.")
    return f"""You control a simulated robot by writing Python programs.

## Task
{spec.instruction}

## How this works
You get {trials} trials of this task. {keep} Each reply must be exactly one tool call (one operation).
Write scripts into your workspace with write_file and run them with exec; a script drives the robot
through `import robot`. observe shows you camera images without moving time; wait advances time
holding the current targets. A trial ends when the task's success condition has held for its
required number of consecutive control steps, when you call finish, or when a budget runs out.
Success is judged by the simulator; you are not told it directly.

## Operations
{ops}

## Budgets (per trial)
- {budgets.trial_steps} control steps (exec and wait both use them) and {budgets.trial_seconds:g} s of active time.
- Each exec: at most {budgets.script_steps} control steps and {budgets.script_seconds:g} s; the script is stopped at a limit.
- Scripts run isolated: no network; only the workspace (/workspace) is writable and kept.

{robot_api_doc(spec)}
"""


def trial_opening(index: int, trials: int, previous: dict | None) -> str:
    """The first message of trial ``index``: for trials after the first, the previous outcome and figures."""
    head = f"Trial {index} of {trials} begins. The scene has been reset to its initial state."
    if previous is None:
        return head + " Your workspace is empty."
    outcome = previous["outcome"]
    said = {"success": "succeeded", "failure": "did not succeed",
            "incomplete": "could not be completed (an infrastructure or provider failure, not scored)"}.get(outcome, outcome)
    return (f"{head}\nTrial {previous['index']} {said} ({previous['reason']}): it used {previous['control_steps']} "
            f"control steps ({previous['sim_time']:.2f} s simulated) and {previous['active_time']:.1f} s of active time.")
