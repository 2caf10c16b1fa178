"""The one-line summary of each operation on a trial page's timeline, written into its ops-<n>.js row.

Most operations are summed up from their own arguments and feedback (the path, the exit
status, how much of an action chunk ran). RoboPaint's direct-action tools say what happened
in the scene: a ``move_flange`` names its waypoints (count, duration, the distance between
them, where the flange ends up) and how it ended: refused by the harness's check (never sent),
rejected by the scene (its rule and waypoint; still an action), or run, with the brush's
contact (on the paper, in the pigment, or up) and any protective stop from the scene's report
in the trial's task record. ``submit_painting`` names the saved canvas.

A paint-interface trial's scene actions all come from its move_flange operations, in order, so
the k-th one the scene took (its feedback is no refusal) is the task record's k-th move_flange.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from typing import Any

MOVE_FLANGE, SUBMIT_PAINTING = "move_flange", "submit_painting"


def scene_moves(task_record: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    """The task record's move_flange results, in order (nothing for a family that keeps none)."""
    for action in (task_record or {}).get("actions", []):
        if isinstance(action, dict) and action.get("kind") == MOVE_FLANGE and isinstance(action.get("result"), dict):
            yield action["result"]


def reached_scene(operation: str, feedback: dict[str, Any]) -> bool:
    """A move_flange the scene took as an action (accepted or rejected); a refused one never reached it."""
    return operation == MOVE_FLANGE and "error" not in feedback


def summary(operation: str, arguments: dict[str, Any], feedback: dict[str, Any], *,
            scene: dict[str, Any] | None = None, task_record: dict[str, Any] | None = None) -> str:
    """One line saying what the operation did; ``scene`` is a move_flange's result from the task record,
    ``task_record`` the trial's (for submit_painting's canvas)."""
    a, f = arguments, feedback
    match operation:
        case "write_file" | "read_file":
            return str(a.get("path", ""))
        case "exec":
            return str(a.get("path", "")) + (f" → exit {f['exit_status']}" if f.get("exit_status") is not None else "")
        case "wait":
            return f"{a.get('steps')} steps"
        case "act":
            if f.get("executed") is not None:
                return f"chunk: {f['executed']} of {f.get('requested')} actions run · {f.get('stopped', '')}"
            return f"chunk of {len(a.get('actions') or [])}"
        case "observe":
            return ", ".join(a.get("cameras") or f.get("cameras") or []) or "all cameras"
        case "search_history":
            return json.dumps(a.get("query", ""))
        case "finish":
            return str(a.get("reason", ""))
        case "move_flange":
            return _move_flange(a, f, scene)
        case "submit_painting":
            return _submit(a, task_record)
    return ""


def _xyz(p: Any) -> str:
    return "(" + ", ".join(f"{float(v):.3f}" for v in p) + ")"


def _waypoints(arguments: dict[str, Any]) -> str:
    """Count, total duration, distance between the waypoints (the start pose is not in the operation), the last target."""
    points = [w for w in arguments.get("waypoints") or [] if isinstance(w, dict)]
    if not points:
        return "no waypoints"
    try:
        seconds = sum(float(w.get("duration_s", 0)) for w in points)
        path = sum(math.dist(p["position"], q["position"]) for p, q in itertools.pairwise(points))
        last = _xyz(points[-1]["position"])
    except (KeyError, TypeError, ValueError):  # a recorded refusal may hold a malformed batch
        return f"{len(points)} waypoint{'s' * (len(points) != 1)}"
    between = f", {path:.3f} m between them" if len(points) > 1 else ""
    return f"{len(points)} waypoint{'s' * (len(points) != 1)} over {seconds:.2f} s{between}, to {last}"


def _move_flange(arguments: dict[str, Any], feedback: dict[str, Any], scene: dict[str, Any] | None) -> str:
    parts = [_waypoints(arguments)]
    if "error" in feedback:
        return " · ".join([*parts, f"refused, not sent: {feedback['error']}"])
    if scene is not None and not scene.get("accepted", True):
        where = f" at waypoint {scene['waypoint_index']}" if scene.get("waypoint_index") is not None else ""
        return " · ".join([*parts, f"rejected by the scene ({scene.get('rule') or 'rule'}{where}), counted as an action"])
    if feedback.get("stopped") == "invalid_action":
        return " · ".join([*parts, "rejected by the scene, counted as an action"])
    parts.append(f"{feedback.get('controls', 0)} control steps")
    report = (scene or {}).get("report")
    if isinstance(report, dict):
        paper, pigment = int(report.get("paper_contact_steps", 0)), int(report.get("pigment_contact_steps", 0))
        if paper or pigment:
            touched = [f"on the paper {paper} ticks"] * bool(paper) + [f"in the pigment {pigment} ticks"] * bool(pigment)
            parts.append(f"brush {' and '.join(touched)} (max {float(report.get('max_contact_force_n', 0)):.1f} N)")
        else:
            parts.append("brush up (no contact)")
        stop = report.get("protective_stop")
        if isinstance(stop, dict):
            parts.append(f"protective stop at waypoint {stop.get('waypoint_index')} ({float(stop.get('force_n', 0)):.1f} N)")
    if feedback.get("stopped") not in (None, "done"):
        parts.append(f"stopped: {str(feedback['stopped']).replace('_', ' ')}")
    return " · ".join(parts)


def _submit(arguments: dict[str, Any], task_record: dict[str, Any] | None) -> str:
    parts = ["painting submitted"]
    canvas = (task_record or {}).get("canvas")
    if isinstance(canvas, dict) and canvas.get("ended_by") == "submitted":
        parts.append(f"canvas {str(canvas.get('sha256', ''))[:16]} saved after {canvas.get('actions_used')} of "
                     f"{task_record.get('action_limit')} actions")  # type: ignore[union-attr]
    if arguments.get("reason"):
        parts.append(str(arguments["reason"]))
    return " · ".join(parts)
