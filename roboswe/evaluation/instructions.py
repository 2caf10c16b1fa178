"""What the participant is told: the standard interface instructions and each trial's opening.

The robot API section is generated from the live TaskSpec the simulator returned for
this trial by ``roboswe.bridge.apidoc`` (action components with bounds and units, cameras,
state keys, limits), so it always says what the running scene accepts.
"""

from __future__ import annotations

from collections.abc import Sequence

from roboswe.bridge.apidoc import render_robot_api
from roboswe.evaluation.series_config import RLE_IDENTITY, Budgets
from roboswe.protocol.participant import INTERFACES, OPERATIONS
from roboswe.protocol.sim import TaskSpec
from roboswe.sim.families import interface_owner


def system_prompt(spec: TaskSpec, budgets: Budgets, trials: int, retain: str) -> str:
    """The pinned instructions of every request of a series, for its interface: code, actions, or a family's own
    (``Family.prompt``, sim/families.py)."""
    ops = "\n".join(f"- {name}: {(cls.__doc__ or '').strip()}" for name, cls in OPERATIONS.items()
                    if name in INTERFACES[budgets.interface])
    keep = ("Between trials the scene resets; your workspace files and this conversation are kept."
            if retain == "retain" else
            "Between trials the scene resets, and your workspace and conversation start empty again.")
    # What the participant learns of success must match trial_opening: in retain mode the next opening
    # reports the previous outcome; in the fresh-context control nothing of an earlier trial is said.
    told = ("While a trial runs you are not told whether the condition holds; the opening of the next trial "
            "says how the previous one ended (succeeded, did not succeed, or could not be completed) and what it used."
            if retain == "retain" else
            "While a trial runs you are not told whether the condition holds, and no trial is told how an earlier one ended.")
    if budgets.interface == "actions":
        return _actions_prompt(spec, budgets, trials, keep, told, ops)
    owner = interface_owner(budgets.interface)  # a family's own interface: the family's words
    if owner is not None:
        return owner.system_prompt(spec, trials=trials, keep=keep, ops=ops, trial_steps=budgets.trial_steps,
                                   trial_seconds=budgets.trial_seconds, protocol=budgets.identity or budgets.track)
    scripts = ("Write scripts into your workspace with write_file and run them with exec; a script drives the robot\n"
               "through `import robot`. observe shows you camera images without moving time")
    if budgets.identity.startswith(RLE_IDENTITY):  # one RLE-Bench session: its task text says what it scores
        waits = "wait" in INTERFACES[budgets.interface]
        how = (f"This is one session of the task's {budgets.track} phase, described under Task. It opens with the "
               "task, the current\ncamera images and the robot's sensor readings. Each reply must be exactly one tool "
               f"call (one operation).\n{scripts}{'; wait advances time holding the current targets' if waits else ''}."
               "\nThe session ends when you call finish or when a budget runs out.")
        per, steps_by = "this session", "exec and wait both use them" if waits else "exec uses them"
    else:
        how, per, steps_by = (f"""You get {trials} trials of this task. {keep} Each trial opens with the task, the current
camera images and the robot's sensor readings. Each reply must be exactly one tool call (one operation).
{scripts}; wait advances time
holding the current targets. A trial ends when the task's success condition has held for its
required number of consecutive control steps, when you call finish, or when a budget runs out.
Success is judged by the simulator. {told}"""), "per trial", "exec and wait both use them"
    return f"""You control a simulated robot by writing Python programs.

## Task
{spec.instruction}

## How this works
{how}

## Operations
{ops}

## Budgets ({per})
- {budgets.trial_steps} control steps ({steps_by}) and {budgets.trial_seconds:g} s of active time.
- Each exec: at most {budgets.script_steps} control steps and {budgets.script_seconds:g} s; the script is stopped at a limit.
- Scripts run isolated: no network; only the workspace (/workspace) is writable and kept.

## The `robot` module (inside `exec` scripts: `import robot`)
{render_robot_api(spec)}"""


def _actions_prompt(spec: TaskSpec, budgets: Budgets, trials: int, keep: str, told: str, ops: str) -> str:
    """The instructions of the actions interface: the participant answers each observation with an action chunk."""
    if budgets.track == "decisions":
        limit = (f"- at most {budgets.decision_calls} replies (calls) per trial; each act runs at most the first "
                 f"{budgets.action_prefix} actions of its chunk ({budgets.trial_steps} control steps at most).")
    else:
        limit = f"- {budgets.trial_steps} control steps per trial."
    rows = "\n".join(f"  {c.index}: {c.name} in [{c.low:g}, {c.high:g}] {c.unit}".rstrip() for c in spec.action.components)
    return f"""You control a simulated robot directly with action chunks.

## Task
{spec.instruction}

## How this works
You get {trials} trials of this task. {keep} Each trial opens with the task, the current
camera images and the robot's sensor readings. Each reply must be exactly one tool call (one operation).
act executes a chunk of actions, one control step ({spec.control_dt:g} s) per action, and returns the
camera images and sensor readings after it. A trial ends when the task's success condition has held for
its required number of consecutive control steps (even in the middle of a chunk), when you call finish,
or when a budget runs out. Success is judged by the simulator. {told}

## Operations
{ops}

## Budgets (per trial; protocol {budgets.identity or budgets.track})
{limit}
- {budgets.trial_seconds:g} s of active time.

## Actions
Each action is a list of {spec.action_dim} numbers. An action with a component outside its bound, a
non-finite number or the wrong length rejects the whole chunk (nothing runs, nothing is clipped).
{spec.action.doc}
Components:
{rows}"""


def trial_opening(index: int, trials: int, previous: dict | None, *, instruction: str = "",
                  cameras: Sequence[str] = (), sensors: Sequence[str] = (), interface: str = "code",
                  goal: Sequence[str] = ()) -> str:
    """The text of trial ``index``'s first message (RoboSWE-ADAPT: the instruction, the current camera
    images, the robot's sensor readings and the native interface; the images travel as image parts
    beside this text, one per name in ``cameras``). For trials after the first, in retain mode, it
    starts with the previous outcome and figures. ``sensors`` are lines ``key: [values]``.
    ``goal`` describes the task's goal images (RoboPaint's image goal), attached before the cameras'.

    It always begins ``Trial N of T begins.`` (agents find trial boundaries by it).
    """
    head = f"Trial {index} of {trials} begins. The scene has been reset to its initial state."
    if previous is None:
        lines = [head + " Your workspace is empty."]
    else:
        outcome = previous["outcome"]
        said = {"success": "succeeded", "failure": "did not succeed",
                "incomplete": "could not be completed (an infrastructure or provider failure, not scored)"}.get(outcome, outcome)
        lines = [head, (f"Trial {previous['index']} {said} ({previous['reason']}): it used {previous['control_steps']} "
                        f"control steps ({previous['sim_time']:.2f} s simulated) and {previous['active_time']:.1f} s of active time.")]
    if instruction:
        lines.append(f"Task: {instruction}")
    if goal:
        lines.append("Goal image (attached first): " + ", ".join(goal) + ".")
    if cameras:
        lines.append("Current camera images (attached): " + ", ".join(cameras) + ".")
    if sensors:
        lines.append("Robot sensor readings now:")
        lines += [f"  {line}" for line in sensors]
    owner = interface_owner(interface)
    if (instruction or cameras or sensors) and owner is not None and owner.prompt is not None:
        lines.append(owner.prompt.opening)
    elif (instruction or cameras or sensors) and interface == "actions":
        lines.append("You act with action chunks (act): the actions and their bounds are in your instructions (\"Actions\").")
    elif instruction or cameras or sensors:
        lines.append("You act through the `robot` module in exec scripts: its actions, bounds, cameras and limits are "
                     "in your instructions (\"The `robot` module\").")
    return "\n".join(lines)
