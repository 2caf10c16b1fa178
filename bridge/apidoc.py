"""The robot API as the model reads it, rendered from a live TaskSpec (the coordinator puts it in
the instructions), so units, bounds, cameras and limits are the task's own, never hand-copied."""

from __future__ import annotations

from roboswe.protocol.sim import TaskSpec

_API = """\
Your programs run in a sandbox with no network. They reach the robot only through `import robot`:

    robot.spec()                    -> dict: task_id, instruction, action_dim, action_low/high (arrays),
                                       action (components, units, hold rule), control_hz, cameras,
                                       state_keys, script_limits, trial_limits
    robot.state()                   -> dict[str, np.ndarray] of the allowed state keys (physics does not advance)
    robot.observe(cameras=None, depth=False)
                                    -> {camera: {"rgb": HxWx3 uint8, "depth": HxW float32 metres (if exposed),
                                                 "K": 3x3 intrinsics, "T_world_camera": 4x4 pose (if exposed)}}
                                       (physics does not advance; cameras=None renders every allowed camera)
    robot.step(action)              apply one action for one control step; returns the new state dict
    robot.step_many(actions)        an (N, action_dim) chunk, one row per control step, in one round trip;
                                    returns the state after the last row
    robot.steps_left()              control steps this program may still take

Errors: robot.InvalidAction (wrong shape, not finite, or outside the bounds: nothing moved; actions
are rejected, never clipped), robot.LimitReached (this program's step budget is used up;
`.steps_applied` and `.state` say how far a chunk got), robot.BridgeError (the call was refused or
the bridge was unreachable). There is nothing else: no reset, no state setting, no reward or success.
"""


def render_robot_api(spec: TaskSpec) -> str:
    """Markdown-ish text describing the robot API with this task's action, cameras, state and limits."""
    lines = [_API, f"This task ({spec.task_id}): {spec.instruction}", ""]
    if spec.action.chunk_is_one_action:  # RoboPaint: a chunk is one MoveFlange of timed rows (bridge/door.py)
        lines.append(f"Action: a chunk (robot.step_many, or robot.step for one row) is ONE action of rows of {spec.action_dim} "
                     f"numbers, run over the control steps its durations take at {spec.control_hz} Hz (dt = {spec.control_dt:g} s); "
                     "it is never cut: one that does not fit this program's steps left raises robot.LimitReached, nothing moved.")
    else:
        lines.append(f"Action: {spec.action_dim} numbers per control step at {spec.control_hz} Hz (dt = {spec.control_dt:g} s).")
    for c in spec.action.components:
        lines.append(f"  [{c.index}] {c.name}: [{c.low:g}, {c.high:g}] {c.unit}")
    if spec.action.doc:
        lines += ["", spec.action.doc.strip()]
    if spec.action.hold_rule:
        lines.append(f"Holding still: {spec.action.hold_rule}")
    lines += ["", "Cameras:"]
    for cam in spec.cameras:
        extras = [x for x, on in (("depth", cam.depth), ("K and T_world_camera", cam.calibration)) if on]
        lines.append(f"  {cam.name}: {cam.width}x{cam.height} rgb" + (f", {', '.join(extras)}" if extras else ""))
    if any(cam.depth or cam.calibration for cam in spec.cameras):
        lines.append(
            "Depth is metres along the optical axis; K and T_world_camera use the OpenCV convention "
            "(x right, y down, z forward): p_world = T_world_camera @ [z*(u-cx)/fx, z*(v-cy)/fy, z, 1]."
        )
    lines += ["", f"State keys: {', '.join(spec.state_keys)}", ""]
    s, t = spec.script_limits, spec.trial_limits
    lines.append(
        f"Limits: each program may take {s.steps} control steps and run {s.seconds:g} s (then it is stopped); "
        f"the whole trial has {t.steps} control steps and {t.seconds:g} s of active time."
    )
    return "\n".join(lines) + "\n"
