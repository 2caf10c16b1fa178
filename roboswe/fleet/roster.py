"""RUN_DIR/fleet/workers.json: where each worker of a run is and what it is doing, for `roboswe status`.

The coordinator is the only writer. It rewrites the file (tmp + ``os.replace``, so a reader never
sees half of it) on every change of a worker's state or series, and, for Ray workers (ray_pool),
on every change of placement and after each sample of their Statistics. The sample is taken by
the coordinator over its own CURVE links: the client key never leaves the coordinator's memory,
so `roboswe status` reads this file and does not contact the nodes itself. Local workers
(``address`` LOCAL: `run --workers N` without --ray, and the single worker of a plain run) are
actors of the run's supervisor: status asks them for Statistics itself, so their rows carry no
pids or sample. A reader judges staleness by ``writer_pid`` (``writer_boot_id`` says on which
machine that pid means anything).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Literal

import msgspec
import structlog

log = structlog.get_logger()

WORKERS_FILE = "fleet/workers.json"
LOCAL = "local"  # the roster's ``address`` when the workers are the supervisor's actors on this machine
# A local worker is "idle" between series; "released": the job has no series left for it (a Ray
# worker's resources go back to the cluster; a local worker's actors stop with the run).
WorkerState = Literal["placing", "idle", "running", "lost", "released"]


class WorkerRow(msgspec.Struct, kw_only=True):
    """One worker: its placement (as ``worker_placed`` records it), state, and last sampled Statistics."""

    number: int
    state: WorkerState = "placing"
    since: float  # when ``state`` last changed
    node: str | None = None  # Ray node id
    host: str | None = None  # the node's address, where the worker serves
    sim: str | None = None  # the simulator's control endpoint (tcp, CURVE)
    bridge: str | None = None  # the sandbox bridge's endpoint (tcp, CURVE)
    pids: dict[str, int] = msgspec.field(default_factory=dict)  # on the node: "host" (the Ray actor), "simulator", "sandbox_bridge"
    placed_at: float | None = None  # when the current instance started on its node
    restarts: int = 0  # times the worker was lost and linked again (Ray's restart or a fresh placement)
    series: str | None = None  # the series it runs now
    done: list[str] = msgspec.field(default_factory=list)  # the series it finished, in order
    statistics: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)  # process -> protocol Statistics
    sampled_at: float | None = None
    pending: str | None = None  # why a worker is still unplaced (Ray's queue), once it waited a while


class Roster(msgspec.Struct, kw_only=True):
    run_id: str
    address: str  # the Ray cluster (--ray), or LOCAL
    writer_pid: int
    writer_boot_id: str
    updated_at: float
    workers: list[WorkerRow] = msgspec.field(default_factory=list)


class RosterFile:
    """The coordinator's copy of the roster and the file it keeps in step with it."""

    def __init__(self, run_dir: Path, run_id: str, address: str, boot_id: str):
        self.path = Path(run_dir) / WORKERS_FILE
        self.roster = Roster(run_id=run_id, address=address, writer_pid=os.getpid(), writer_boot_id=boot_id,
                             updated_at=time.time())
        self._rows: dict[int, WorkerRow] = {}

    def row(self, number: int) -> WorkerRow:
        if number not in self._rows:
            self._rows[number] = WorkerRow(number=number, since=time.time())
            self.roster.workers.append(self._rows[number])
            self.roster.workers.sort(key=lambda w: w.number)
        return self._rows[number]

    def update(self, number: int, **changes: Any) -> None:
        """Set fields of worker ``number`` (``since`` follows a change of state) and write the file."""
        row = self.row(number)
        if changes.get("state", row.state) != row.state:
            row.since = time.time()
        for key, value in changes.items():
            setattr(row, key, value)
        self.write()

    def run_series(self, number: int, series_id: str | None, **changes: Any) -> None:
        """Worker ``number`` starts series ``series_id``, or (None) finished the one it ran."""
        row = self.row(number)
        if series_id is None and row.series is not None:
            row.done.append(row.series)
        self.update(number, series=series_id, **changes)

    def write(self) -> None:
        """Replace the file atomically. A failed write is logged, never fatal: the run matters more than its display."""
        self.roster.updated_at = time.time()
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(msgspec.json.format(msgspec.json.encode(self.roster), indent=1))
            os.replace(tmp, self.path)
        except OSError as e:
            log.warning("worker_roster_unwritten", path=str(self.path), error=str(e))


def read_roster(run_dir: Path) -> Roster | None:
    """The run's roster, or None when its coordinator wrote none (no file: a run from before rosters)."""
    try:
        return msgspec.json.decode((Path(run_dir) / WORKERS_FILE).read_bytes(), type=Roster)
    except FileNotFoundError:
        return None
