"""The fleet's pieces without processes: the workers default and its rule, worker actor names and
endpoints, the supervisor's actor list, progress per worker, and the logs' series filter."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from roboswe.actors._endpoints import actor_endpoints

from roboswe.commands.logs import in_series
from roboswe.commands.run import UsageError, _workers, fleet_actors
from roboswe.config import (
    ConfigError,
    RunConfig,
    actor_kind,
    default_workers,
    load_config,
    worker_name,
)
from roboswe.evaluation.progress import LastEnd, Progress


def test_default_workers_is_one_per_two_cores_capped_by_memory():
    assert default_workers(cores=2, memory_gib=8)[0] == 1
    assert default_workers(cores=16, memory_gib=128)[0] == 8
    assert default_workers(cores=16, memory_gib=7)[0] == 2  # 7 GiB // 3 GiB per worker
    assert default_workers(cores=1, memory_gib=1)[0] == 1  # never fewer than one
    _, rule = default_workers(cores=16, memory_gib=128)
    assert "16 cores // 2" in rule and "--workers" in rule


def test_a_single_worker_keeps_the_plain_actor_names():
    assert worker_name("simulator", 1, 1) == "simulator"
    assert worker_name("simulator", 2, 3) == "simulator.2"
    run = ("recorder", "simulator", "sandbox_bridge", "provider_client", "context_manager", "coordinator")
    assert fleet_actors(run, 1) == run
    assert fleet_actors(run, 2) == ("recorder", "simulator.1", "simulator.2", "sandbox_bridge.1", "sandbox_bridge.2",
                                    "provider_client", "context_manager.1", "context_manager.2", "coordinator")


def test_actor_kind_accepts_worker_instances_only_of_worker_kinds():
    assert actor_kind("sandbox_bridge.3") == "sandbox_bridge"
    assert actor_kind("recorder") == "recorder"
    for bad in ("recorder.2", "simulator.x", "simulatr"):
        with pytest.raises(ValueError, match=bad.replace(".", r"\.")):
            actor_kind(bad)


def test_worker_endpoints_are_their_own_sockets_and_configurable(tmp_path):
    config = RunConfig()
    endpoints = actor_endpoints(tmp_path, config)
    assert endpoints["simulator.2"].endswith("/simulator.2.sock")
    assert len({endpoints[n] for n in ("simulator", "simulator.1", "simulator.2")}) == 3
    with pytest.raises(KeyError):
        endpoints["recorder.2"]
    path = tmp_path / "run.toml"
    path.write_text('[transport.endpoints]\n"simulator.2" = "tcp://127.0.0.1:7000"\n[fleet]\nworkers = 2\n')
    configured = load_config(path)
    assert configured.fleet.workers == 2
    assert actor_endpoints(tmp_path, configured)["simulator.2"] == "tcp://127.0.0.1:7000"


def test_config_refuses_a_bad_workers_count_and_an_unknown_instance(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[fleet]\nworkers = 0\n")
    with pytest.raises(ConfigError, match="fleet.workers"):
        load_config(path)
    path.write_text('[supervisor.actors."recorder.2"]\nmax_restarts = 1\n')
    with pytest.raises(ConfigError, match="recorder.2"):
        load_config(path)


def test_worker_restart_policy_falls_back_to_its_kind(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[supervisor.actors.simulator]\nmax_restarts = 7\n")
    assert load_config(path).supervisor.policy_for("simulator.2").max_restarts == 7


def test_workers_come_from_the_flag_then_the_config_then_the_machine(capsys):
    def args(workers):
        return argparse.Namespace(workers=workers)

    assert _workers(args(3), RunConfig(), None) == 3
    assert "3 worker(s) (--workers)" in capsys.readouterr().err
    config = load_config(None)
    import msgspec

    from roboswe.config import FleetConfig

    configured = msgspec.structs.replace(config, fleet=FleetConfig(workers=2))
    assert _workers(args(None), configured, None) == 2
    assert _workers(args(None), configured, "tcp://h:1") == 1  # a remote simulator serves one series
    with pytest.raises(UsageError, match="--workers 2 with --sim"):
        _workers(args(2), RunConfig(), "tcp://h:1")
    with pytest.raises(UsageError, match="--workers 0"):
        _workers(args(0), RunConfig(), None)
    assert _workers(args(None), RunConfig(), None) == default_workers()[0]
    assert "default: " in capsys.readouterr().err


def test_progress_shows_every_running_worker_and_shares_the_log():
    job = Progress()
    one, two = job.for_worker(1), job.for_worker(2)
    one.update(series_id="r/a", task="a", trial=2, trials=5, operation="exec")
    two.update(series_id="r/b", task="b", trial=1, trials=5)
    two.active_clock = lambda: 12.5
    one.say("r/a: trial 2/5 starts")
    message = job.message()
    assert [(w.worker, w.task, w.trial) for w in message.running] == [(1, "a", 2), (2, "b", 1)]
    assert message.running[1].active_s == 12.5 and message.running[0].operation == "exec"
    assert message.line_count == 1 and message.lines[0].endswith("r/a: trial 2/5 starts")
    two.update(last_outcome="trial 1: incomplete (configuration)",  # the front end's configuration stop reads the job's
               last_end=LastEnd(trial=1, outcome="incomplete", cause="configuration", detail="provider: http_401"))
    assert job.message().last_outcome == "trial 1: incomplete (configuration)"
    assert job.message().last_end.cause == "configuration" and job.message().running[-1].last_end.trial == 1
    job.worker_done(1)
    assert [w.worker for w in job.message().running] == [2]


def test_logs_series_filter_takes_the_series_id_or_its_task():
    event = {"event": "x", "series": "run-1/lift-a"}
    assert in_series(event, "run-1/lift-a") and in_series(event, "lift-a")
    assert not in_series(event, "lift-b") and not in_series({"event": "x"}, "lift-a")


def test_logs_series_filter_on_the_command(tmp_path, capsys):
    from roboswe.commands.logs import run_logs

    events = [{"event": "a", "level": "info", "series": "r/lift-a"}, {"event": "b", "level": "info", "series": "r/lift-b"},
              {"event": "c", "level": "info"}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    args = argparse.Namespace(run_dir=Path(tmp_path), follow=False, actor=None, level="debug", json=True, series="lift-b")
    assert run_logs(args) == 0
    assert [json.loads(line)["event"] for line in capsys.readouterr().out.splitlines()] == ["b"]


def test_an_actor_refuses_an_instance_name_of_another_kind(tmp_path, capsys):
    from roboswe.actors._entry import actor_main

    async def main(actor):  # never reached
        raise AssertionError(actor.name)

    for bad in ("recorder.1", "simulator.one"):
        with pytest.raises(SystemExit) as exit_:
            actor_main("simulator", main, ["--run-dir", str(tmp_path), "--name", bad])
        assert exit_.value.code == 2
        assert f"--name {bad!r}: expected simulator or simulator.N" in capsys.readouterr().err


def test_the_live_display_has_a_row_per_running_worker(tmp_path):
    from rich.console import Console

    from roboswe.commands.run import Display

    job = Progress()
    job.update(state="running", series_total=3)
    job.for_worker(1).update(task="lift-a", trial=2, trials=5, operation="exec", steps_used=40, steps_budget=6000)
    job.for_worker(2).update(task="lift-b", trial=1, trials=5)
    display = Display(False, "run", tmp_path)
    display._progress = job.message()
    console = Console(width=120, record=True)
    console.print(display._render())
    text = console.export_text()
    assert "worker 1" in text and "lift-a trial 2/5  exec  40/6000 steps" in text
    assert "worker 2" in text and "lift-b trial 1/5" in text
