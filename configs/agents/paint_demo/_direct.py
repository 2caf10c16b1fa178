"""The RoboPaint demo participant acting directly (``[series] interface = "paint"``): no code, MoveFlange tool calls.

Each trial is one ICL round. Round 1 observes, then sends two probe batches that show the two
ways a batch can fail: one the harness's bounds check refuses (a waypoint shorter than 0.08 s:
never sent to the scene, not an action) and one the scene rejects by its own rule (too fast
for the linear speed limit: it counts as an action, and the result names the rule and the
waypoint). Later rounds read the notes the earlier ones left. Every round then paints the
scripted painter's three strokes (sim/paint/painter.py, pressing harder each round), one
``move_flange`` each, writes its notes and submits. Each decision is a pure function of the
current round's number and how many operations it has made, so a fresh instance, a resumed
run and the fresh-context control (where the notes are gone) decide the same way.
"""

from __future__ import annotations

from roboswe.agents.lift_demo._agent import trial_steps
from roboswe.protocol.participant import (
    DecisionRequest,
    FlangeWaypoint,
    MoveFlange,
    Observe,
    Operation,
    ReadFile,
    SubmitPainting,
    WriteFile,
)
from roboswe.sim.paint.painter import DOWN, NOMINAL_DISH, TRAVEL_Z, three_strokes

NOTES = "notes.md"


def move(batch) -> MoveFlange:
    """A painter batch (sim/paint/control.Waypoint list) as the move_flange tool call."""
    return MoveFlange(waypoints=[FlangeWaypoint(position=list(w.position), quaternion_xyzw=list(w.quaternion),
                                                duration_s=w.duration_s) for w in batch])


def _probe(duration_s: float) -> MoveFlange:
    return MoveFlange(waypoints=[FlangeWaypoint(position=[NOMINAL_DISH[0], NOMINAL_DISH[1], TRAVEL_Z],
                                                quaternion_xyzw=list(DOWN), duration_s=duration_s)])


REFUSED_PROBE = _probe(0.05)  # below the 0.08 s bound: the harness's check refuses it
REJECTED_PROBE = _probe(0.1)  # to the dish in 0.1 s: over the scene's linear speed limit, a counted action


def notes(round_number: int) -> str:
    return "".join(f"round {r}: three horizontal strokes, pressing {6 + 3 * ((r - 1) % 3)} mm; submitted\n"
                   for r in range(1, round_number + 1))


def round_plan(round_number: int) -> list[Operation]:
    """Every operation of ICL round ``round_number`` (1-based), in order."""
    opening: list[Operation] = [Observe(), REFUSED_PROBE, REJECTED_PROBE] if round_number == 1 else [ReadFile(path=NOTES)]
    return [*opening, *(move(b) for b in three_strokes(round_number - 1)), WriteFile(path=NOTES, content=notes(round_number)),
            SubmitPainting(reason=f"round {round_number}: the three planned strokes are painted")]


class PaintDirectAgent:
    """Deterministic direct painter for the `python` provider kind (agent = "roboswe.agents.paint_demo:PaintDirectAgent")."""

    def decide(self, request: DecisionRequest) -> Operation:
        plan = round_plan(max(1, request.trial))
        done = len(trial_steps(request))
        return plan[done] if done < len(plan) else plan[-1]
