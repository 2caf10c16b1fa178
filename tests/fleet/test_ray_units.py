"""A node's checks before it takes a worker (roboswe/fleet/node.py), without a cluster.

The node must show the head's sandbox image digest and see the run directory at the same path;
a refusal names the node (the coordinator reads the id back out of Ray's error to exclude it).
"""

from __future__ import annotations

import pytest

from roboswe.fleet.node import TOKEN_FILE, NodeRefused, WorkerSpec, check_node
from roboswe.fleet.ray_pool import NODE_ID

NODE = "ab" * 28  # a Ray node id: 56 hex digits


def _spec(run_dir, digest: str, token: str = "t0k3n") -> WorkerSpec:
    return WorkerSpec(number=1, run_dir=str(run_dir), run_token=token, image_digest=digest, client_public_key="k",
                      head_boot_id="b", heartbeat_interval=1.0, heartbeat_liveness=5)


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / TOKEN_FILE).parent.mkdir(parents=True)
    (tmp_path / TOKEN_FILE).write_text("t0k3n")
    return tmp_path


def test_a_node_takes_a_worker_only_with_the_heads_image_and_run_dir(run_dir, sandbox_image):
    check_node(_spec(run_dir, sandbox_image.digest), NODE)  # the same image, the same directory: accepted

    with pytest.raises(NodeRefused) as other_image:
        check_node(_spec(run_dir, "0" * 64), NODE)
    assert "differs from the head's 0000000000000000" in str(other_image.value)

    with pytest.raises(NodeRefused) as other_dir:
        check_node(_spec(run_dir, sandbox_image.digest, token="another run"), NODE)
    assert "same shared directory at the same path" in str(other_dir.value)

    with pytest.raises(NodeRefused) as no_dir:
        check_node(_spec(run_dir / "elsewhere", sandbox_image.digest), NODE)
    assert "unreadable" in str(no_dir.value)

    # What the coordinator excludes: the node id as Ray's error repeats the refusal.
    for refusal in (other_image, other_dir, no_dir):
        wrapped = f"The actor died because of an error raised in its creation task\nNodeRefused: {refusal.value}"
        assert NODE_ID.search(wrapped).group(1) == NODE


def test_a_ray_address_nothing_answers_on_is_refused_at_once_naming_it():
    import socket
    import time

    from roboswe.fleet.ray_pool import FleetUnavailable, _reachable

    _reachable("auto")  # ray.init finds the local cluster itself
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
    port = listener.getsockname()[1]
    try:
        t0 = time.monotonic()
        with pytest.raises(FleetUnavailable, match=f"--ray 127.0.0.1:{port}: no Ray head answers there"):
            _reachable(f"127.0.0.1:{port}")
        assert time.monotonic() - t0 < 5  # refused, not retried for minutes as ray.init would
        listener.listen()
        _reachable(f"127.0.0.1:{port}")
    finally:
        listener.close()
    with pytest.raises(FleetUnavailable, match="expected HOST:PORT"):
        _reachable("somewhere")


def _node(name: str, cpus: float, memory_gib: float = 8.0, gpus: float = 0.0):
    from roboswe.fleet.capacity import NodeCapacity

    return NodeCapacity(node_id=name * 56, address=f"10.0.0.{name}", cpus=cpus, memory_gib=memory_gib, gpus=gpus)


def test_workers_are_counted_per_node_not_from_the_clusters_totals():
    from roboswe.config import FleetConfig
    from roboswe.fleet.capacity import plan_workers

    fleet = FleetConfig(ray_cpus=2.0, ray_memory_gib=3.0)
    # 2 + 1 + 0 workers: a 5-CPU node holds two 2-CPU workers, a 3-CPU node one, a 1-CPU node none
    # (the totals, 9 CPUs // 2, would say 4 and one would wait forever).
    workers, rule = plan_workers([_node("1", 5), _node("2", 3), _node("3", 1)], fleet, tasks=10)
    assert workers == 3 and "2 on 10.0.0.1 (5 CPU" in rule and "0 on 10.0.0.3" in rule
    assert plan_workers([_node("1", 5)], fleet, tasks=1)[0] == 1  # at most one per task
    # Memory binds too: 16 CPUs but 7 GiB hold two 3-GiB workers.
    assert plan_workers([_node("1", 16, memory_gib=7.0)], fleet, tasks=10)[0] == 2
    # An explicit count above what the nodes hold now is kept (the rest queue) and says what they hold.
    asked, why = plan_workers([_node("1", 5)], fleet, tasks=10, asked=4)
    assert asked == 4 and "holds 2 at once" in why


def test_a_request_no_node_can_hold_is_refused_naming_the_resource_the_largest_node_and_the_fix():
    from roboswe.config import FleetConfig
    from roboswe.fleet.capacity import Infeasible, plan_workers

    two_small = [_node("1", 1), _node("2", 1)]  # the cluster: 2 CPUs in all, 1 per node
    with pytest.raises(Infeasible) as cpus:
        plan_workers(two_small, FleetConfig(ray_cpus=2.0), tasks=2)
    assert "2 CPU ([fleet] ray_cpus)" in str(cpus.value) and "has 1: lower [fleet] ray_cpus to at most 1" in str(cpus.value)
    with pytest.raises(Infeasible, match=r"GiB of memory \(\[fleet\] ray_memory_gib\).*has 8"):
        plan_workers(two_small, FleetConfig(ray_cpus=1.0, ray_memory_gib=12.0), tasks=2, asked=1)
    with pytest.raises(Infeasible, match=r"0.5 GPU \(\[fleet\] ray_gpus\).*has 0"):
        plan_workers(two_small, FleetConfig(ray_cpus=1.0, ray_gpus=0.5), tasks=2)
    with pytest.raises(Infeasible, match="no alive node"):
        plan_workers([], FleetConfig(), tasks=2)
    # Each resource alone fits somewhere but no node has both: still refused, not queued.
    with pytest.raises(Infeasible, match="no node holds all of one worker's request"):
        plan_workers([_node("1", 4, memory_gib=1.0), _node("2", 1, memory_gib=16.0)],
                     FleetConfig(ray_cpus=2.0, ray_memory_gib=3.0), tasks=2)
