"""`roboswe run --ray` on a real two-node Ray cluster on loopback (tests/fleet/ray_cluster.py).

One run of two series (the Lift scene, bwrap, a scripted participant whose first trial runs to its
step budget) with one worker per node; mid-trial the second node's raylet is killed. The trial on
that node ends interrupted, Ray restarts the worker on the head node, the trial runs again there as
a linked attempt, and both series complete; the other series is untouched. Then `--resume` of the
finished run joins the cluster again and has nothing left to do. `roboswe status` lists both
workers while they run (node, series, their processes' pids and sampled Statistics) and after the run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from roboswe.records.reader import RunReader
from roboswe.sandbox.checkpoints import BlobStore, load_manifest
from tests.fleet.ray_cluster import LocalCluster
from tests.series.conftest import operations_of, roboswe, start_run, write_config

pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[test]' (the ray extra)")
pytestmark = pytest.mark.slow
STEPS = 200


@pytest.fixture(scope="module")
def cluster(work_dir):
    # Neither node sees the test's directory (the runs' RUN_DIRs): an empty tmpfs over it in each node's own
    # mount namespace. Each node keeps its workers' workspaces in a directory of its own.
    c = LocalCluster(head_cpus=2, node_cpus=1, hidden=(work_dir,))
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


def test_a_worker_no_node_can_hold_is_refused_at_once_before_any_actor_starts(cluster, work_dir, admitted_three):
    # The cluster has 3 CPUs in all but 2 on its largest node: a 3-CPU worker would wait in Ray's queue forever.
    path = write_config(work_dir, "ray-infeasible", extra="[fleet]\nray_cpus = 3\n")
    run_dir = work_dir / "ray-infeasible-run"
    t0 = time.monotonic()
    out = roboswe("run", str(admitted_three), "--config", str(path), "--out", str(run_dir), "--no-video",
                  "--ray", cluster.address, "--tasks", "lift-a", timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "each worker asks for 3 CPU ([fleet] ray_cpus) and the largest node" in out.stderr, out.stderr
    assert "(2 CPU," in out.stderr and "lower [fleet] ray_cpus to at most 2" in out.stderr, out.stderr
    assert time.monotonic() - t0 < 120  # a refusal, not a wait
    assert not (run_dir / "run.sqlite").exists() and not (run_dir / "supervisor.json").exists()


@pytest.mark.exhaustive  # a whole two-series run (~1 min); the refusal above is the default fleet-planning case
def test_a_worker_the_cluster_has_no_room_for_now_is_reported_pending_then_released(cluster, work_dir, admitted_three):
    # 2-CPU workers: the head holds one, the 1-CPU node none. Two are asked for: one waits in Ray's queue
    # while the other runs both series, is reported as pending (event and roster), and is released at the end.
    path = write_config(work_dir, "ray-pending", series="trials = 1\ntrial_steps = 60",
                        extra="[fleet]\nray_cpus = 2\nray_memory_gib = 0.5\nray_pending_notice = 1\n")
    run_dir = work_dir / "ray-pending-run"
    out = roboswe("run", str(admitted_three), "--config", str(path), "--out", str(run_dir), "--no-video", "--no-verify",
                  "--ray", cluster.address, "--workers", "2", "--tasks", "lift-a,lift-b", timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "the cluster holds 1 at once" in out.stderr, out.stderr
    with RunReader(run_dir) as reader:
        pending = [dict(e.data) for _, e in reader.events(event="worker_pending")]
        placed = _placements(reader)
        assert len(reader.series()) == 2
    # One worker was placed (Ray picks which); the other never was. (The placed one may be reported too:
    # starting its processes on a busy machine takes longer than the 1 s notice.)
    (ran,) = {p["worker"] for p in placed}
    queued = 3 - ran
    assert queued in [p["worker"] for p in pending] and all(p["waited_s"] == 1.0 for p in pending), pending
    final = {w["number"]: w for w in _status(run_dir)["workers"]}
    assert final[ran]["pending"] is None and final[queued]["state"] == "released", final
    assert "waits in Ray's queue" in (final[queued]["pending"] or ""), final[queued]


def test_two_series_on_nodes_that_share_no_run_dir_end_verified_with_checkpoints_and_videos_at_the_head(
        cluster, work_dir, admitted_three):
    # [fleet] workspaces = "node" (the default): each worker's workspaces live on its node, in that node's
    # own directory; every checkpoint is carried to the recorder and read back there.
    path = write_config(work_dir, "ray-local-disks", series="trials = 2\ntrial_steps = 60",
                        extra="[fleet]\nray_cpus = 1\nray_memory_gib = 0.5\n")
    run_dir = work_dir / "ray-local-disks-run"
    out = roboswe("run", str(admitted_three), "--config", str(path), "--out", str(run_dir), "--ray", cluster.address,
                  "--workers", "2", "--tasks", "lift-a,lift-b", timeout=1500)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    nodes = {n["id"]: ("a" if n["head"] else "b") for n in cluster.nodes()}
    with RunReader(run_dir) as reader:
        placed = _placements(reader)
        views = [v for s in reader.series() for v in reader.trials(s.series_id)]
        points = [c for v in views for c in reader.checkpoints(v.trial_id)]
        videos = {a.trial_id: a for a in reader.artifacts() if a.artifact == "video"}
    # One worker per node, each keeping its workspaces in its node's own directory, none under RUN_DIR.
    assert sorted(nodes[p["node"]] for p in placed) == ["a", "b"], placed
    for p in placed:
        assert Path(p["workspaces"]).parent == cluster.node_dirs[nodes[p["node"]]], p
    assert not (run_dir / "workspaces").exists() and not (run_dir / "replays").exists()
    assert len(views) == 4 and all(v.verification is not None and v.verification.verdict == "verified" for v in views), \
        [(v.trial_id, v.end and v.end.reason, v.verification and v.verification.detail.get("cause")) for v in views]
    # Checkpoints at the head: every file of every manifest is a blob here that reads back with its sha256.
    head = BlobStore(run_dir / "blobs")
    assert {c.label for c in points} >= {"trial_start", "after_write", "after_exec"}
    files = [e for c in points for e in load_manifest(c.manifest).entries]
    assert files and all(head.verify(e.sha256) for e in files)
    for v in views:  # and a video of each trial, rendered at the head from the recorded states
        assert hashlib.sha256((run_dir / videos[v.trial_id].path).read_bytes()).hexdigest() == videos[v.trial_id].sha256
    # The nodes dropped their copies once the series were over.
    assert not [d for base in cluster.node_dirs.values() for d in base.glob("roboswe-node-workspaces*")]


@pytest.mark.exhaustive  # the shared-directory mode, kept as an option; the default case above is node workspaces
def test_shared_workspaces_live_under_a_run_dir_every_node_sees(cluster, work_dir, admitted_three):
    # A RUN_DIR outside the hidden directory: both nodes see it (one machine), as an NFS mount would be seen.
    shared = Path(tempfile.mkdtemp(prefix="rs-shared-", dir="/tmp"))
    shared.chmod(0o755)
    try:
        path = write_config(shared, "ray-shared", series="trials = 1\ntrial_steps = 60",
                            extra='[fleet]\nray_cpus = 1\nray_memory_gib = 0.5\nworkspaces = "shared"\n')
        run_dir = shared / "run"
        out = roboswe("run", str(admitted_three), "--config", str(path), "--out", str(run_dir), "--no-video",
                      "--ray", cluster.address, "--tasks", "lift-a", timeout=1200)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        with RunReader(run_dir) as reader:
            (view,) = reader.trials(reader.series()[0].series_id)
            (placed,) = _placements(reader)
        assert view.verification.verdict == "verified" and placed["workspaces"] is None
        assert [p.name for p in (run_dir / "workspaces").iterdir()] and (run_dir / "fleet" / "node-check").exists()
    finally:
        shutil.rmtree(shared, ignore_errors=True)


# Last in the module: it kills node b's raylet, and the module's cluster does not bring it back, so a
# test after it would find one node (both workers placed on the head).
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
        live = _status_when(run, run_dir, deadline, lambda ws: len(ws) == 2 and all(
            w["state"] == "running" and w["series"] and w["sample_age"] is not None for w in ws))
        while operations_of(run_dir, "lift-a/t1a0") < 3 or operations_of(run_dir, "lift-b/t1a0") < 3:
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "the trials never got going"
            time.sleep(0.2)
        with RunReader(run_dir) as reader:
            placed = _placements(reader)
        # One worker per node (SPREAD; the second node has room for one).
        assert {p["node"] for p in placed} == {head, other}, placed
        _check_live_status(live, placed)
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
    assert (hit.end.outcome, hit.end.cause) == ("incomplete", "interrupted")
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

    # After the run: every worker released; the lost one linked again once, on the head node.
    final = {w["number"]: w for w in _status(run_dir)["workers"]}
    assert {n: w["state"] for n, w in final.items()} == {1: "released", 2: "released"}
    assert (final[lost_worker]["restarts"], final[lost_worker]["node"]) == (1, head)
    assert final[3 - lost_worker]["restarts"] == 0

    resumed = roboswe("run", "--resume", str(run_dir), "--no-verify", timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    with RunReader(run_dir) as reader:
        assert len(reader.trials(series[lost_task])) == 3 and len(reader.trials(series[kept_task])) == 2


def _status(run_dir: Path) -> dict:
    out = roboswe("status", "--run-dir", str(run_dir), "--json", timeout=120, check=True)
    return json.loads(out.stdout)


def _status_when(run, run_dir: Path, deadline: float, ready) -> dict:
    """`roboswe status --json` of the running run once its workers satisfy ``ready``."""
    while True:
        assert run.poll() is None, run.stdout.read()
        out = roboswe("status", "--run-dir", str(run_dir), "--json", timeout=120)
        report = json.loads(out.stdout) if out.returncode == 0 else {}  # 2: the supervisor has not written its state yet
        if ready(report.get("workers", [])):
            return report
        assert time.monotonic() < deadline, (out.stdout, out.stderr)
        time.sleep(0.5)


def _check_live_status(report: dict, placed: list[dict]) -> None:
    """Each worker as its ``worker_placed`` event says, running a series, its processes live on their node."""
    assert {a["actor"] for a in report["actors"]} >= {"coordinator", "recorder"}
    assert report["state"] == "running"
    for worker in report["workers"]:
        event = [p for p in placed if p["worker"] == worker["number"]][-1]
        assert {k: worker[k] for k in ("node", "host", "sim", "bridge")} == {k: event[k] for k in ("node", "host", "sim", "bridge")}
        assert worker["series"].rsplit("/", 1)[1] in ("lift-a", "lift-b") and worker["restarts"] == 0
        for kind, process in worker["processes"].items():
            # The loopback cluster's nodes are this machine: the pid is the worker's process of that kind.
            assert _runs_worker(str(process["pid"]), kind), (kind, process)
            assert process["uptime"] > 0 and process["handled"] >= 1
    assert len({w["series"] for w in report["workers"]}) == 2


def _runs_worker(pid: str, kind: str = "") -> bool:
    try:
        return f"roboswe.fleet.node_process\0{kind}".encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
