"""The ``[tabletop]`` section of a family 03 manifest: which task, how the attempt ends and is measured,
and the scoring constants. Typed here (the family's own) and named by roboswe/rle/manifest.py."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
TabletopKind = Literal["tower", "cantilever", "balance", "com"]


class Tabletop(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One continuous attempt on the hidden instance; the reward from the recorded physics states.

    tower:      reward = min(1, H / (sum of the instance's cube edges)), H the highest top of a stable cube.
    cantilever: reward = min(1, O / ((L/2)·H_n)), O the largest stable overhang past the table edge, L the block
                length, H_n = 1 + 1/2 + ... + 1/n (the harmonic stack, one block per level).
    balance:    reward = 1 when the beam rests within ``level_deg`` of level with everything at rest, else 0.
    com:        per box max(0, 1 - e / ``com_error_m``), e the distance from the reported to the true centre of
                mass in the box frame; reward = mean over the boxes (an unreported box scores 0).
    A body is stable when it moved less than ``stable_move_m`` and turned less than ``stable_turn_deg`` over the
    ``settle_seconds`` after release and ends slower than ``rest_speed`` m/s.
    """

    kind: TabletopKind
    settle_seconds: PositiveFloat = 3.0
    stable_move_m: PositiveFloat = 0.005
    stable_turn_deg: PositiveFloat = 3.0
    rest_speed: PositiveFloat = 0.01
    level_deg: PositiveFloat = 0.25
    com_error_m: PositiveFloat = 0.01
    box_steps: int = 0  # com: movement steps per box (RLE-Bench: 12,000); beyond them the hand holds still
    box_seconds: float = 0.0  # com: wall time per box (RLE-Bench: 1 hour)
    image_size: int = 256  # rendered square RGB (RLE-Bench renders 512 and resizes on request)
