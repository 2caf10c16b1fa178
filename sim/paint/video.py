"""A RoboPaint round's video: the recorded actions re-executed, drawn with the canvas as it was painted.

The paint lives in the canvas texture, not in the physics state, so redrawing the recorded
per-step states (sim.video) would show the arm over blank paper. Re-executing the round's action
log is deterministic (verification reproduces every canvas hash the same way), so the video
worker replays it on a fresh scene and draws the video cameras at the recorded frame steps;
the replay must end on the recorded canvas, else the video would show another painting.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any

import numpy as np

from ..backend import InvalidAction, SimError
from . import scene as ps
from .backend import PaintBackend


def round_frames(sim: PaintBackend, record: dict[str, Any], steps: Collection[int], cameras: Sequence[str],
                 width: int, height: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """(control step, {camera: RGB}) at each of ``steps``, in order, from re-executing ``record``'s actions.

    ``record`` is the round's task record (evaluation.task_record): its seed and its actions'
    replay forms. Raises SimError when the replay ends on another canvas than the recorded one.
    """
    wanted = set(steps)
    drawn: list[tuple[int, dict[str, np.ndarray]]] = []
    log_state = sim.rig.on_control_step

    def draw(rig: Any) -> None:
        if log_state is not None:
            log_state(rig)
        if rig.control_step in wanted:
            drawn.append((rig.control_step, {c: sim.render_video_frame(c, width, height).rgb for c in cameras}))

    sim.reset(int(record["seed"]))
    sim.rig.on_control_step = draw
    try:
        if 0 in wanted:
            draw(sim.rig)
        for action in record.get("actions", []):
            how = action.get("replay") or {}
            try:
                if "step" in how:
                    sim.step(how["step"])
                elif "wait" in how:
                    sim.wait(int(how["wait"]))
            except InvalidAction:
                pass  # the scene rejected this batch when it ran too; it counted, it moved nothing
            yield from drawn
            drawn.clear()
    finally:
        sim.rig.on_control_step = log_state
    want = (record.get("canvas") or {}).get("sha256")
    got = ps.canvas_sha256(sim.rig.canvas.rgb())
    if want and got != want:
        raise SimError(f"round {record.get('round', '?')}: the replayed canvas hashes {got[:16]}, the record {want[:16]}; "
                       "the video would show another painting")
