"""Per-actor timing accounts: handling time per message kind, waiting per peer, idle time."""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict

from roboswe.protocol.control import Statistics


class Accounts:
    """Counters for one actor process; ``statistics()`` returns a frozen snapshot.

    Categories may overlap: a handler that waits on a peer counts in both its kind's
    handling time and that peer's waiting time. Idle time is wall time during which
    no message was being handled.
    """

    def __init__(self, actor: str):
        self.actor = actor
        self._started = time.monotonic()
        self._handling: defaultdict[str, float] = defaultdict(float)
        self._handled: defaultdict[str, int] = defaultdict(int)
        self._waiting: defaultdict[str, float] = defaultdict(float)
        self._extra: defaultdict[str, float] = defaultdict(float)
        self._extra_lock = threading.Lock()
        self._errors = 0
        self._busy_depth = 0
        self._busy_since = 0.0
        self._busy_total = 0.0

    def begin_handling(self) -> float:
        """Mark a message as in hand; returns the start time for ``end_handling``."""
        now = time.monotonic()
        if self._busy_depth == 0:
            self._busy_since = now
        self._busy_depth += 1
        return now

    def end_handling(self, kind: str, started: float) -> None:
        now = time.monotonic()
        self._handling[kind] += now - started
        self._handled[kind] += 1
        self._busy_depth -= 1
        if self._busy_depth == 0:
            self._busy_total += now - self._busy_since

    def add_waiting(self, peer: str, seconds: float) -> None:
        self._waiting[peer] += seconds

    def add(self, name: str, amount: float) -> None:
        """Add to a free-form counter reported under ``Statistics.extra``."""
        self.add_all({name: amount})

    def add_all(self, amounts: dict[str, float]) -> None:
        """Add to several ``extra`` counters at once; safe from any thread (the rest of the accounts are the loop's)."""
        with self._extra_lock:
            for name, amount in amounts.items():
                self._extra[name] += amount

    def count_error(self) -> None:
        self._errors += 1

    def _extra_snapshot(self) -> dict[str, float]:
        with self._extra_lock:
            return dict(self._extra)

    def statistics(self) -> Statistics:
        now = time.monotonic()
        busy = self._busy_total + (now - self._busy_since if self._busy_depth else 0.0)
        uptime = now - self._started
        return Statistics(
            actor=self.actor,
            pid=os.getpid(),
            uptime=uptime,
            idle=max(0.0, uptime - busy),
            handling=dict(self._handling),
            handled=dict(self._handled),
            waiting=dict(self._waiting),
            errors=self._errors,
            extra=self._extra_snapshot(),
        )
