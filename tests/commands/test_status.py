"""`roboswe status` with Ray workers: the coordinator's roster file (roboswe/fleet/roster.py) and how
status shows it beside the supervisor's actors, live and stale, without a cluster.

The roster is written by a real RosterFile (as ray_pool does) or by hand; the supervisor's state file
is hand-written with no ready actor, so status asks nobody (the Ray test asks a live run)."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import time

import msgspec
import pytest
from rich.console import Console
from roboswe.actors.supervisor import SupervisorState

from roboswe.commands.status import (
    RAY_NOTE,
    STALE,
    print_report,
    run_status,
    status_report,
)
from roboswe.fleet.node import boot_id
from roboswe.fleet.roster import WORKERS_FILE, RosterFile, read_roster

NODE = "ab" * 28


def _statistics(actor: str, pid: int, handled: int) -> dict:
    return {"actor": actor, "pid": pid, "uptime": 12.5, "idle": 10.0, "handling": {}, "handled": {"Load": 1, "Step": handled - 1},
            "waiting": {}, "errors": 0, "extra": {}}


def _supervisor_state(pid: int) -> SupervisorState:
    actor = {"pid": 4242, "state": "starting", "restarts": 0, "endpoint": "ipc:///nowhere", "started_at": 0.0,
             "last_heartbeat": None, "last_exit": None}
    return msgspec.convert({"supervisor_pid": pid, "state": "running", "failure": None, "actors": {"coordinator": actor}}, SupervisorState)


@pytest.fixture
def roster(tmp_path) -> RosterFile:
    """Three workers as a run's coordinator leaves them mid-run: running with a sample, lost once, released."""
    roster = RosterFile(tmp_path, "run-1", "10.0.0.1:6379", boot_id())
    where = {"node": NODE, "host": "10.0.0.2", "sim": "tcp://10.0.0.2:4001", "bridge": "tcp://10.0.0.2:4002"}
    roster.update(1, state="running", placed_at=time.time(), pids={"host": 11, "simulator": 12, "sandbox_bridge": 13},
                  series="run-1/lift-a", **where)
    row = roster.row(1)
    row.statistics = {"simulator": _statistics("simulator", 12, 40), "sandbox_bridge": _statistics("sandbox_bridge", 13, 7)}
    row.sampled_at = time.time()
    roster.update(2, state="running", **where)
    roster.update(2, state="lost", restarts=1, series="run-1/lift-b")
    roster.update(3, state="released")
    return roster


def test_the_roster_file_is_replaced_whole_and_follows_each_worker(tmp_path, roster):
    assert read_roster(tmp_path / "elsewhere") is None  # a run without --ray has no roster
    on_disk = read_roster(tmp_path)
    assert on_disk == roster.roster  # every field round-trips through the file
    assert (on_disk.run_id, on_disk.writer_pid, on_disk.writer_boot_id) == ("run-1", os.getpid(), boot_id())
    assert [(w.number, w.state, w.restarts, w.series) for w in on_disk.workers] == [
        (1, "running", 0, "run-1/lift-a"), (2, "lost", 1, "run-1/lift-b"), (3, "released", 0, None)]
    assert list((tmp_path / WORKERS_FILE).parent.iterdir()) == [tmp_path / WORKERS_FILE]  # no tmp left behind

    # ``since`` moves with the state, not with other changes.
    since = roster.row(1).since
    time.sleep(0.01)
    roster.update(1, series="run-1/lift-c")
    assert read_roster(tmp_path).workers[0].since == since
    roster.update(1, state="released", series=None)
    assert read_roster(tmp_path).workers[0].since > since

    # A directory the file cannot be written in costs the display, never the run.
    (tmp_path / WORKERS_FILE).unlink()
    (tmp_path / WORKERS_FILE).mkdir()
    roster.update(1, state="running")
    assert (tmp_path / WORKERS_FILE).is_dir()


def test_status_lists_ray_workers_beside_the_actors_with_their_sampled_figures(tmp_path, roster, capsys):
    (tmp_path / "supervisor.json").write_bytes(msgspec.json.encode(_supervisor_state(os.getpid())))
    assert run_status(argparse.Namespace(run_dir=tmp_path, json=True)) == 0
    report = json.loads(capsys.readouterr().out)
    assert [a["actor"] for a in report["actors"]] == ["coordinator"]
    assert report["workers_note"] == RAY_NOTE
    one, two, three = report["workers"]
    assert (one["state"], one["host"], one["node"], one["series"], one["pids"]["host"]) == (
        "running", "10.0.0.2", NODE, "run-1/lift-a", 11)
    assert one["processes"]["simulator"] == {"pid": 12, "uptime": 12.5, "busy": 2.5, "idle": 10.0, "handled": 40,
                                             "waiting": 0, "errors": 0}
    assert one["processes"]["sandbox_bridge"]["handled"] == 7 and 0 <= one["sample_age"] < 30
    assert (two["state"], two["restarts"], two["sample_age"], two["processes"]["simulator"]) == (
        "lost", 1, None, {"pid": None})  # never sampled: no figures
    assert three["state"] == "released"

    # The tables: a row per worker, one per process, the note, 80 columns.
    out = io.StringIO()
    print_report(report, Console(file=out, width=120))
    lines = [line.split() for line in out.getvalue().splitlines()]
    workers = [line for line in lines[lines.index(["Ray", "workers"]):] if line[:1] in (["1"], ["2"], ["3"])]
    assert [line[:4] for line in workers] == [["1", "10.0.0.2", "running", "0"], ["2", "10.0.0.2", "lost", "1"],
                                              ["3", "released", "0"]]
    assert workers[0][-1] == "run-1/lift-a"
    assert ["simulator.1", "12", "12.5", "2.50", "40", "0"] in lines and ["sandbox_bridge.1", "13"] == next(
        line[:2] for line in lines if line[:1] == ["sandbox_bridge.1"])
    assert ["simulator.2"] in lines  # a lost worker's processes: no figures
    narrow = io.StringIO()
    print_report(report, Console(file=narrow, width=80))
    assert "contacts no node" in narrow.getvalue() and max(map(len, narrow.getvalue().splitlines())) <= 80


def test_workers_of_a_run_whose_coordinator_or_supervisor_is_gone_show_stale(tmp_path, roster):
    gone = subprocess.Popen(["true"])
    gone.wait()

    def states(report: dict) -> list[str]:
        return [w["state"] for w in report["workers"]]

    live = _supervisor_state(os.getpid())
    assert states(status_report(tmp_path, live)) == ["running", "lost", "released"]
    dead_supervisor = status_report(tmp_path, _supervisor_state(gone.pid))
    assert dead_supervisor["state"] == "dead (supervisor gone)"
    assert states(dead_supervisor) == [STALE, STALE, "released"]

    roster.roster.writer_pid = gone.pid  # the coordinator died (a restarted one writes its own roster)
    roster.write()
    assert states(status_report(tmp_path, live)) == [STALE, STALE, "released"]
    roster.roster.writer_boot_id = "another machine"  # its pid means nothing here: the supervisor decides
    roster.write()
    assert states(status_report(tmp_path, live)) == ["running", "lost", "released"]

    (tmp_path / WORKERS_FILE).write_text('{"run_id": 3}')
    [unreadable] = status_report(tmp_path, live)["workers"]
    assert unreadable["state"].startswith("unreadable roster:")
    (tmp_path / WORKERS_FILE).unlink()
    assert "workers" not in status_report(tmp_path, live)  # no --ray: actors only, as before


def test_a_malformed_supervisor_state_file_is_refused_with_what_is_wrong(tmp_path, capsys):
    (tmp_path / "supervisor.json").write_text('{"supervisor_pid": "4242", "state": "running", "failure": null, "actors": {}}')
    assert run_status(argparse.Namespace(run_dir=tmp_path, json=True)) == 2
    err = capsys.readouterr().err
    assert "supervisor.json is not a supervisor state file" in err and "$.supervisor_pid" in err
