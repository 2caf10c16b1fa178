"""Which recorded states the judge sees, and their pictures.

The rule is fixed and stated before any trial is judged: the trial's final recorded state and ``count - 1``
evenly spaced before it, the first recorded state included (rows round(i * (n - 1) / (count - 1))), every
camera at each of those control steps. It reads only how many states were recorded, never the outcome,
the success interval or any predicate, so which moments are shown cannot hint at what the record says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from roboswe.evaluation.observation import encode_png
from roboswe.protocol.participant import image_digest

RULE = "the final recorded state and {spaced} evenly spaced before it (the first included), every camera at each"


def view_rows(recorded: int, count: int) -> list[int]:
    """The rows shown of ``recorded`` state rows, in time order (fewer when fewer were recorded)."""
    if recorded <= 0:
        return []
    k = min(count, recorded)
    if k == 1:
        return [recorded - 1]
    return sorted({round(i * (recorded - 1) / (k - 1)) for i in range(k)})


def rule_text(count: int) -> str:
    return RULE.format(spaced=count - 1)


class View(msgspec.Struct, frozen=True, kw_only=True):
    """One picture the judge is shown: ``label`` names it in the request (``t<moment>/<camera>``)."""

    label: str
    camera: str
    moment: int  # 1 .. the number of moments, in time order (the last is the final recorded state)
    step: int  # the control step it shows (recorded, never sent)
    row: int
    png: bytes
    sha256: str
    width: int
    height: int

    def describe(self) -> dict[str, Any]:
        """The view as the record keeps it (the image itself is in the attempts' exact bytes)."""
        return {"label": self.label, "camera": self.camera, "moment": self.moment, "step": self.step, "row": self.row,
                "sha256": self.sha256, "width": self.width, "height": self.height}


def make_view(camera: str, moment: int, step: int, row: int, rgb: Any) -> View:
    png = encode_png(rgb)
    return View(label=f"t{moment}/{camera}", camera=camera, moment=moment, step=step, row=row, png=png,
                sha256=image_digest(png), width=int(rgb.shape[1]), height=int(rgb.shape[0]))


def render_views(renderer: Any, states: Any, cameras: Sequence[str], count: int, *, seed: int) -> list[View]:
    """Every camera at the rule's rows, time-major, drawn by the video renderer (sim.video.VideoRenderer) from
    the recorded states; raises SimError when the model is not the recording's."""
    rows = view_rows(len(states), count)
    frames = renderer.render(states, seed=seed, cameras=list(cameras), rows=rows)
    steps = states.step.tolist()
    return [make_view(cam, moment, int(steps[row]), row, frames[cam][i])
            for i, (moment, row) in enumerate(zip(range(1, len(rows) + 1), rows)) for cam in cameras]
