"""What the participant is told: the standard interface instructions and each trial's opening.

The robot API section is generated from the live TaskSpec the simulator returned for
this trial by ``roboswe.bridge.apidoc`` (action components with bounds and units, cameras,
state keys, limits), so it always says what the running scene accepts.
"""

from __future__ import annotations

from roboswe.bridge.apidoc import render_robot_api
from roboswe.evaluation.series_config import Budgets
from roboswe.protocol.participant import OPERATIONS
from roboswe.protocol.sim import TaskSpec


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

## The `robot` module (inside `exec` scripts: `import robot`)
{render_robot_api(spec)}"""


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
