"""`roboswe run --ray` on a real two-node Ray cluster on loopback (tests/fleet/ray_cluster.py).

One run of two series (the Lift scene, bwrap, a scripted participant whose first trial runs to its
step budget) with one worker per node; mid-trial the second node's raylet is killed. The trial on
that node ends interrupted, Ray restarts the worker on the head node, the trial runs again there as
a linked attempt, and both series complete; the other series is untouched. Then `--resume` of the
finished run joins the cluster again and has nothing left to do.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from roboswe.records.reader import RunReader
from tests.fleet.ray_cluster import LocalCluster
from tests.series.conftest import operations_of, roboswe, start_run, write_config

pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[test]' (the ray extra)")
pytestmark = pytest.mark.slow
STEPS = 200


@pytest.fixture(scope="module")
def cluster():
    c = LocalCluster(head_cpus=2, node_cpus=1)
    saved = {k: os.environ.get(k) for k in c.env}
    os.environ.update(c.env)  # the run's coordinator joins with the cluster's token
    try:
        yield c
    finally:
        c.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _placements(reader: RunReader) -> list[dict]:
    return [dict(e.data) for _, e in reader.events(event="worker_placed")]


def test_a_lost_node_costs_one_trial_rerun_on_the_other_node(cluster, work_dir, admitted_three):
    nodes = {n["id"]: n for n in cluster.nodes()}
    head = next(i for i, n in nodes.items() if n["head"])
    other = next(i for i in nodes if i != head)
    path = write_config(work_dir, "ray", agent='agent = "tests.series.restart_agents:SlowWaitAgent"',
                        series=f"trials = 2\ntrial_steps = {STEPS}",
                        extra="[fleet]\nray_cpus = 1\nray_memory_gib = 0.5\n")
    run_dir = work_dir / "ray-run"
    run = start_run(run_dir, admitted_three, path, "--no-verify", "--ray", cluster.address, "--workers", "2",
                    "--tasks", "lift-a,lift-b")
    try:
        deadline = time.monotonic() + 600
        while operations_of(run_dir, "lift-a/t1a0") < 3 or operations_of(run_dir, "lift-b/t1a0") < 3:
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "the trials never got going"
            time.sleep(0.2)
        with RunReader(run_dir) as reader:
            placed = _placements(reader)
        # One worker per node (SPREAD; the second node has room for one).
        assert {p["node"] for p in placed} == {head, other}, placed
        lost_worker = next(p["worker"] for p in placed if p["node"] == other)
        killed_at = time.time()
        os.kill(cluster.raylet_pid("b"), signal.SIGKILL)
        output, _ = run.communicate(timeout=900)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    on_worker = {e["series"].rsplit("/", 1)[1]: e["worker"] for e in events if "worker" in e and "series" in e}
    lost_task = next(t for t, w in on_worker.items() if w == lost_worker)
    kept_task = next(t for t in on_worker if t != lost_task)
    with RunReader(run_dir) as reader:
        placed = _placements(reader)
        series = {s.task: s.series_id for s in reader.series()}
        hit, again, second = reader.trials(series[lost_task])
        kept = reader.trials(series[kept_task])
        lost = [dict(e.data) for _, e in reader.events(event="worker_lost")]
    # The worker came back on the head node (Ray restarted it there), after the kill.
    assert [p["worker"] for p in lost] == [lost_worker]
    relinked = [p for p in placed if p["worker"] == lost_worker and p["at"] > killed_at]
    assert [p["node"] for p in relinked] == [head], placed
    assert (hit.end.outcome, hit.end.reason.split(":")[0]) == ("incomplete", "interrupted")
    assert (again.start.index, again.start.attempt, again.start.recovers) == (1, 1, hit.trial_id)
    assert (again.end.outcome, again.end.reason, again.end.control_steps) == ("failure", "step_budget", STEPS)
    assert again.start.started_at > relinked[0]["at"]
    # The series on the head node ran as it would have: two trials, the first to its budget; the re-run
    # series' second trial ended as the other's did.
    assert (kept[0].start.index, kept[0].start.attempt, kept[0].end.outcome) == (1, 0, "failure")
    assert kept[0].end.control_steps == STEPS and len(kept) == 2
    assert (second.start.index, second.end.outcome, second.end.reason) == (2, kept[1].end.outcome, kept[1].end.reason)
    # No worker process outlived the run (the killed node's included: their host's lifeline closed).
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _runs_worker(p)]
    assert not list(Path("/tmp").glob("roboswe-worker*")), "a worker's directory was left behind"

    resumed = roboswe("run", "--resume", str(run_dir), "--no-verify", timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    with RunReader(run_dir) as reader:
        assert len(reader.trials(series[lost_task])) == 3 and len(reader.trials(series[kept_task])) == 2


def _runs_worker(pid: str) -> bool:
    try:
        return b"roboswe.fleet.node_process" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
