"""The series' conversation as the context manager must hold it, and as the records keep it.

Every turn goes to the recorder (an event, with its images) and to the context manager.
The context manager keeps the conversation in memory: if the supervisor restarts it, its
archive no longer has the turns it acknowledged. The trial under way then ends
``incomplete`` and the next trial starts from the conversation rebuilt from the records.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import msgspec

from roboswe.evaluation.ends import TrialIncomplete
from roboswe.evaluation.peers import INFRA_ERRORS, Context, Recorder
from roboswe.protocol.participant import Turn
from roboswe.records.reader import RunReader


def turn_event_data(turn: Turn) -> dict[str, Any]:
    return {"turn": msgspec.to_builtins(turn)}


def turn_from_event(data: dict[str, Any]) -> Turn:
    return msgspec.convert(data["turn"], Turn)


def recorded_conversation(reader: RunReader, trial_ids: list[str]) -> tuple[list[Turn], dict[str, bytes]]:
    """The turns (in recorded order) and images of these trials, from the run's events."""
    wanted = set(trial_ids)
    turns: list[Turn] = []
    images: dict[str, bytes] = {}
    for _, event in reader.events():
        if event.trial_id not in wanted:
            continue
        if event.event == "turn":
            turns.append(turn_from_event(event.data))
        elif event.event == "image":
            images[event.data["digest"]] = base64.b64decode(event.data["data"])
    return turns, images


class Conversation:
    """What the context manager must hold for this series; rebuilt from the records when it does not."""

    def __init__(self, series_id: str, context: Context | None, recorder: Recorder,
                 reader_factory: Callable[[], RunReader]):
        self.series_id = series_id
        self.context = context  # None: a verification job, which has no conversation
        self.recorder = recorder
        self.reader_factory = reader_factory
        self.trial_ids: list[str] = []  # trials whose turns belong to the conversation
        self.expected = 0
        self.turn_number = 0
        self.lost = False

    def next_turn_number(self) -> int:
        self.turn_number += 1
        return self.turn_number

    async def reset(self, turns: list[Turn], images: dict[str, bytes]) -> None:
        if self.context is None:
            return
        await self.context.reset(self.series_id)
        if turns:
            digests = list(images)
            await self.context.append(turns, digests, [images[d] for d in digests])
        self.expected, self.lost = len(turns), False
        self.turn_number = max(self.turn_number, len(turns))

    async def append(self, turn: Turn, digests: list[str], blobs: list[bytes]) -> None:
        """Hand one turn to the context manager; raises TrialIncomplete if it lost earlier turns (a restart)."""
        if self.context is None:
            return
        state = await self.context.append([turn], digests, blobs)
        self.expected += 1
        # A restarted context manager holds fewer turns than acknowledged. It may hold more: it
        # answers a tool call a trial left unanswered (an incomplete trial) with a turn of its own.
        if state.archived >= self.expected:
            self.expected = state.archived
        else:
            self.lost = True
            await self.recorder.event("context_lost", None, series=self.series_id, expected=self.expected,
                                      archived=state.archived)
            # A restart outside the participant, like a dead peer: the series re-runs this attempt,
            # linked, with the conversation rebuilt from the records (series.py).
            raise TrialIncomplete("interrupted", f"the context manager was restarted under the trial (it holds "
                                  f"{state.archived} turns, expected {self.expected}); re-run with the conversation rebuilt")

    async def in_sync(self) -> bool:
        """Whether the context manager still holds every turn it acknowledged (False after a restart)."""
        if self.context is None:
            return True
        try:
            return await self.context.archived() >= self.expected
        except INFRA_ERRORS:
            return False

    async def rebuild(self) -> None:
        """Reset the context manager to the recorded turns of ``trial_ids``."""
        await self.recorder.flush()  # turns are sent fire-and-forget
        with self.reader_factory() as reader:
            turns, images = recorded_conversation(reader, self.trial_ids)
        await self.reset(turns, images)
        await self.recorder.event("context_rebuilt", None, series=self.series_id, turns=len(turns))
