"""`roboswe logs` and `roboswe status` print what --help says whether piped or not: JSON only with --json."""

from __future__ import annotations

import argparse
import json

import msgspec
from roboswe.actors.supervisor import SupervisorState

from roboswe.commands.logs import run_logs
from roboswe.commands.status import run_status

EVENT = {"time": "2026-12-01T10:00:00.123456Z", "level": "warning", "actor": "simulator", "pid": 7,
         "event": "slow_step", "step": 7}
ACTORS = ("recorder", "simulator", "sandbox_bridge", "provider_client", "context_manager", "coordinator")


def _logs(run_dir, **flags) -> str:
    args = {"run_dir": run_dir, "follow": False, "actor": None, "series": None, "level": "debug", "json": False, **flags}
    assert run_logs(argparse.Namespace(**args)) == 0
    return args


def test_logs_piped_prints_one_line_of_text_per_event_and_json_only_with_json(tmp_path, capsys):
    (tmp_path / "events.jsonl").write_text(json.dumps(EVENT) + "\n")
    _logs(tmp_path)  # capsys: stdout is not a terminal
    (line,) = capsys.readouterr().out.splitlines()
    assert line.split() == ["10:00:00.123", "warning", "simulator", "slow_step", "step=7"]
    _logs(tmp_path, json=True)
    assert json.loads(capsys.readouterr().out) == EVENT


def _stopped_run(run_dir) -> None:
    """A run whose supervisor stopped: its actors exited, none answers."""
    actor = {"pid": None, "state": "stopped", "restarts": 0, "endpoint": "ipc:///nowhere", "started_at": 0.0,
             "last_heartbeat": None, "last_exit": "exit 0"}
    state = msgspec.convert({"supervisor_pid": 2 ** 22 + 1, "state": "stopped", "failure": None,
                             "actors": {name: actor for name in ACTORS}}, SupervisorState)
    (run_dir / "supervisor.json").write_bytes(msgspec.json.encode(state))


def test_status_of_a_stopped_run_piped_is_the_table_and_its_json_carries_no_unreported_figures(tmp_path, capsys):
    _stopped_run(tmp_path)
    assert run_status(argparse.Namespace(run_dir=tmp_path, json=False)) == 0
    table = capsys.readouterr().out
    assert not table.lstrip().startswith("{") and "[stopped]" in table and "coordinator" in table
    assert run_status(argparse.Namespace(run_dir=tmp_path, json=True)) == 0
    text = capsys.readouterr().out
    report = json.loads(text)
    assert [a["actor"] for a in report["actors"]] == list(ACTORS)
    assert all(set(a) == {"actor", "pid", "state", "heartbeat_age", "restarts", "last_exit"} for a in report["actors"])
    assert text.count("null") <= 2 * len(ACTORS) + 1  # pid and heartbeat age of each, and no failure


def test_logs_and_status_take_the_run_dir_as_report_does_or_as_an_option(tmp_path, capsys):
    import importlib

    from roboswe.cli import build_parser

    def run(args):
        return getattr(importlib.import_module(args._module), args._handler)(args)

    (tmp_path / "events.jsonl").write_text(json.dumps(EVENT) + "\n")
    _stopped_run(tmp_path)
    parser = build_parser()
    for argv in (["logs", str(tmp_path)], ["logs", "--run-dir", str(tmp_path)],
                 ["status", str(tmp_path)], ["status", "--run-dir", str(tmp_path)]):
        args = parser.parse_args(argv)
        assert run(args) == 0, argv
    assert capsys.readouterr().out.count("slow_step") == 2
    other = tmp_path / "other"
    other.mkdir()
    args = parser.parse_args(["logs", str(tmp_path), "--run-dir", str(other)])
    assert run(args) == 2
    assert "two run directories given" in capsys.readouterr().err
