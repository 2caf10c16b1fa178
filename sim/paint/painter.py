"""A deterministic scripted painter: MoveFlange batches that dip the brush and pull horizontal strokes.

It stands in for a participant in tests and demos, so it knows only what a participant could
learn by looking: the nominal paper centre and dish position, not the seed's layout (a few
centimetres off). Each stroke is one MoveFlange: dip in the dish, lift, travel, lower onto the
paper, pull, lift. ``round_index`` changes the pressure a little, so later rounds differ the way
a participant's revisions would.
"""

from __future__ import annotations

from .control import Waypoint

DOWN = (1.0, 0.0, 0.0, 0.0)  # xyzw: 180 deg about x, the brush points straight down
NOMINAL_PAPER = (0.0, 0.50)
NOMINAL_DISH = (0.27, 0.42)
TRAVEL_Z = 0.26
DIP_Z = 0.163  # the tip sinks into the pigment
PAPER_CONTACT_Z = 0.176  # flange height at which the tip first touches the paper


def stroke_batch(y_offset: float, x_from: float, x_to: float, press: float) -> list[Waypoint]:
    """One stroke at paper-relative height ``y_offset`` from ``x_from`` to ``x_to`` (m), pressing ``press`` metres."""
    px, py = NOMINAL_PAPER
    dx, dy = NOMINAL_DISH
    z = PAPER_CONTACT_Z - press

    def w(x: float, y: float, zz: float, d: float) -> Waypoint:
        return Waypoint(position=(round(x, 6), round(y, 6), round(zz, 6)), quaternion=DOWN, duration_s=d)

    return [
        w(dx, dy, TRAVEL_Z, 1.0), w(dx, dy, DIP_Z, 0.5), w(dx, dy, DIP_Z, 0.3), w(dx, dy, TRAVEL_Z, 0.4),
        w(px + x_from, py + y_offset, TRAVEL_Z, 0.9), w(px + x_from, py + y_offset, z, 0.4),
        w(px + x_to, py + y_offset, z, max(0.08, abs(x_to - x_from) / 0.12)), w(px + x_to, py + y_offset, TRAVEL_Z, 0.4),
    ]


def three_strokes(round_index: int = 0) -> list[list[Waypoint]]:
    """Three horizontal strokes (the ``three-strokes`` goal), one MoveFlange each; pressure grows with the round."""
    press = 0.006 + 0.003 * (round_index % 3)
    return [stroke_batch(y, -0.09, 0.09, press) for y in (0.07, 0.0, -0.07)]


def batch_rows(batch: list[Waypoint]) -> list[list[float]]:
    """A batch in the generic vector form (one 8-vector [x, y, z, qx, qy, qz, qw, duration_s] per waypoint)."""
    return [[*w.position, *w.quaternion, w.duration_s] for w in batch]


def scripted_session(backend, seed: int, rounds: int = 3) -> list[dict]:
    """Run ``rounds`` rounds of the scripted painter on one backend, resetting to ``seed`` before each.

    Returns per round: the seed, the action log, the saved canvas hash and how the round ended.
    """
    out = []
    for r in range(rounds):
        fingerprint = backend.reset(seed)
        for batch in three_strokes(r):
            backend.move_flange(batch)
        saved = backend.submit_painting()
        out.append({"round": r + 1, "seed": seed, "action_log": list(backend.action_log), "canvas_sha256": saved.sha256, "fingerprint": fingerprint.digest,
                    "ended_by": saved.ended_by, "actions_used": saved.actions_used})
    return out
