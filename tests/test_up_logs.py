"""Event logs: JSON lines from several processes into one file, and `roboswe logs` reading them."""

from __future__ import annotations

import json
import subprocess
import sys
import time

SCRIPT = """
import sys, structlog
from roboswe.logs import configure_logging, bind_context
configure_logging(run_dir=sys.argv[1], actor=sys.argv[2], console=False)
bind_context(run="r1", series="s1")
log = structlog.get_logger()
for i in range(200):
    bind_context(trial=i % 5 + 1)
    log.info("step_done", step=i, note="x" * 300)
log.warning("slow_step", step=7)
log.debug("hidden")
"""


def test_processes_share_one_events_file_with_whole_lines(tmp_path):
    writers = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path), name]) for name in ("simulator", "recorder", "coordinator")]
    assert [w.wait(30) for w in writers] == [0, 0, 0]
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]  # every line is whole JSON: no interleaving
    assert len(events) == 3 * 201
    first = events[0]
    assert list(first)[:5] == ["time", "level", "actor", "pid", "event"]
    assert {e["actor"] for e in events} == {"simulator", "recorder", "coordinator"}
    assert all(e["run"] == "r1" and e["series"] == "s1" and 1 <= e["trial"] <= 5 for e in events)
    assert not any(e["event"] == "hidden" for e in events)


def roboswe_logs(*args: str) -> list[str]:
    result = subprocess.run([sys.executable, "-m", "roboswe.cli", "logs", *args], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_logs_filters_by_actor_and_level(tmp_path):
    subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), "simulator"], check=True)
    subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), "recorder"], check=True)
    warnings = [json.loads(line) for line in roboswe_logs("--run-dir", str(tmp_path), "--level", "warning", "--json")]
    assert [(e["actor"], e["event"]) for e in warnings] == [("simulator", "slow_step"), ("recorder", "slow_step")]
    recorder = roboswe_logs("--run-dir", str(tmp_path), "--actor", "recorder", "--json")
    assert len(recorder) == 201 and all(json.loads(line)["actor"] == "recorder" for line in recorder)


def test_logs_follow_prints_events_appended_later(tmp_path):
    (tmp_path / "events.jsonl").write_text("")
    follower = subprocess.Popen(
        [sys.executable, "-m", "roboswe.cli", "logs", "--run-dir", str(tmp_path), "--follow", "--json", "--level", "warning"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        time.sleep(1.0)
        subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), "simulator"], check=True)
        line = follower.stdout.readline()
        assert json.loads(line)["event"] == "slow_step"
    finally:
        follower.terminate()
        follower.wait(5)


def test_logs_without_run_dir_explains_what_to_do(tmp_path):
    result = subprocess.run([sys.executable, "-m", "roboswe.cli", "logs"], capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert result.returncode == 2 and "roboswe up" in result.stderr
