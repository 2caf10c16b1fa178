"""`roboswe status` with local workers (`run --workers N` without --ray, and a plain run's one worker):
the coordinator's ``Worker`` keeps each one's state and series in the roster (roboswe/fleet/roster.py),
and status groups the supervisor's per-worker actors (simulator.2, ...) under their worker.

The roster is written by the job's real ``Worker`` objects; the supervisor's state file is hand-written.
The actors' Statistics request is the one stand-in: it is a ZeroMQ wire to actors these tests do not start
(the e2e `--workers 2` run in tests/fleet/test_fleet_run.py checks the file a real coordinator wrote)."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess

import msgspec
import pytest
import trio
from rich.console import Console
from roboswe.actors.supervisor import SupervisorState

from roboswe.commands import status
from roboswe.commands.status import STALE, print_report, run_status, status_report
from roboswe.evaluation.run import Worker
from roboswe.fleet.node import boot_id
from roboswe.fleet.roster import LOCAL, RosterFile, read_roster

WORKER_ACTORS = ("simulator", "sandbox_bridge", "context_manager")


def _supervisor_state(pid: int, names: list[str]) -> SupervisorState:
    actors = {name: {"pid": 5000 + i, "state": "ready", "restarts": 0, "endpoint": f"ipc:///nowhere/{name}",
                     "started_at": 0.0, "last_heartbeat": None, "last_exit": None} for i, name in enumerate(names)}
    return msgspec.convert({"supervisor_pid": pid, "state": "running", "failure": None, "actors": actors}, SupervisorState)


def _statistics(handled: int) -> dict:
    return {"uptime": 20.0, "idle": 15.0, "handling": {}, "handled": {"Step": handled}, "waiting": {}, "errors": 0,
            "extra": {}}


@pytest.fixture
def answering(monkeypatch):
    """Every ready actor answers StatisticsRequest; actor number i has handled 100 + i messages."""
    def query(state: SupervisorState) -> dict:
        return {name: _statistics(100 + i) for i, name in enumerate(state.actors)}

    monkeypatch.setattr(status, "_query_statistics", query)


@pytest.fixture
def two_workers(tmp_path) -> tuple[RosterFile, Worker, Worker]:
    """Two workers as run_job leaves them mid-run: 1 on its second series, 2 between series."""
    roster = RosterFile(tmp_path, "run-1", LOCAL, boot_id())
    one, two = Worker(1, None, roster), Worker(2, None, roster)  # type: ignore[arg-type]
    one.series = "run-1/lift-a"
    two.series = "run-1/lift-b"
    one.series = None
    one.series = "run-1/lift-c"
    two.series = None
    return roster, one, two


def test_the_job_s_local_workers_keep_their_series_in_the_roster(tmp_path, two_workers):
    _, one, two = two_workers
    on_disk = read_roster(tmp_path)
    assert (on_disk.address, on_disk.writer_pid) == (LOCAL, os.getpid())
    assert [(w.number, w.state, w.series, w.done) for w in on_disk.workers] == [
        (1, "running", "run-1/lift-c", ["run-1/lift-a"]), (2, "idle", None, ["run-1/lift-b"])]
    assert all(w.pids == {} and w.statistics == {} and w.sampled_at is None for w in on_disk.workers)  # nothing sampled
    assert one.series == "run-1/lift-c" and two.series is None

    one.series = None
    trio.run(one.release)  # no series left for it
    trio.run(two.release)
    assert [(w.state, w.series, w.done) for w in read_roster(tmp_path).workers] == [
        ("released", None, ["run-1/lift-a", "run-1/lift-c"]), ("released", None, ["run-1/lift-b"])]


def test_status_groups_each_local_worker_s_actors_under_it(tmp_path, two_workers, answering, capsys):
    names = ["coordinator", "recorder"] + [f"{kind}.{n}" for n in (1, 2) for kind in WORKER_ACTORS]
    (tmp_path / "supervisor.json").write_bytes(msgspec.json.encode(_supervisor_state(os.getpid(), names)))
    assert run_status(argparse.Namespace(run_dir=tmp_path, json=True)) == 0
    report = json.loads(capsys.readouterr().out)
    assert [a["actor"] for a in report["actors"]] == names  # --json keeps every actor's row
    assert report["workers_address"] == LOCAL and "workers_note" not in report
    one, two = report["workers"]
    assert (one["number"], one["state"], one["series"], one["done"]) == (1, "running", "run-1/lift-c", ["run-1/lift-a"])
    assert (two["number"], two["state"], two["series"], two["done"]) == (2, "idle", None, ["run-1/lift-b"])
    assert 0 <= one["state_age"] < 30
    assert {kind: p["actor"] for kind, p in two["processes"].items()} == {
        "simulator": "simulator.2", "sandbox_bridge": "sandbox_bridge.2", "context_manager": "context_manager.2"}
    assert two["processes"]["simulator"] == next(a for a in report["actors"] if a["actor"] == "simulator.2")
    assert (two["processes"]["simulator"]["handled"], two["processes"]["simulator"]["busy"]) == (105, 5.0)
    assert two["pids"] == {"simulator": 5005, "sandbox_bridge": 5006, "context_manager": 5007}

    out = io.StringIO()
    print_report(report, Console(file=out, width=80))
    text = out.getvalue()
    assert max(map(len, text.splitlines())) <= 80
    lines = [line.split() for line in text.splitlines()]
    start = lines.index(["Local", "workers"])
    assert [line[0] for line in lines[:start] if line and line[0] in names] == ["coordinator", "recorder"]
    summary = [line for line in lines[start:] if line[:1] in (["1"], ["2"])]
    assert [line[:2] + line[3:] for line in summary] == [["1", "running", "1", "run-1/lift-c"], ["2", "idle", "1"]]
    processes = [line for line in lines[start:] if line and line[0] in names]
    assert [line[0] for line in processes] == names[2:]  # each worker's actors together, in its order
    assert processes[3][:3] == ["simulator.2", "5005", "ready"] and processes[3][-2:] == ["105", "0"]


def test_a_single_worker_and_a_gone_run(tmp_path, answering):
    gone = subprocess.Popen(["true"])
    gone.wait()
    roster = RosterFile(tmp_path, "run-1", LOCAL, boot_id())
    only = Worker(1, None, roster)  # type: ignore[arg-type]
    only.series = "run-1/lift-a/fresh"
    names = ["coordinator", *WORKER_ACTORS]  # one worker: the actors keep their plain names
    live = status_report(tmp_path, _supervisor_state(os.getpid(), names))
    [worker] = live["workers"]
    assert (worker["state"], worker["series"]) == ("running", "run-1/lift-a/fresh")
    assert [p["actor"] for p in worker["processes"].values()] == list(WORKER_ACTORS)
    out = io.StringIO()
    print_report(live, Console(file=out, width=80))
    assert out.getvalue().count("sandbox_bridge") == 1  # under its worker only

    def states(report: dict) -> list[str]:
        return [w["state"] for w in report["workers"]]

    assert states(status_report(tmp_path, _supervisor_state(gone.pid, names))) == [STALE]
    roster.roster.writer_pid = gone.pid  # the coordinator died
    roster.write()
    assert states(status_report(tmp_path, _supervisor_state(os.getpid(), names))) == [STALE]
    only.series = None
    trio.run(only.release)  # a finished run's workers are released: nothing stale about them
    assert states(status_report(tmp_path, _supervisor_state(gone.pid, names))) == ["released"]
