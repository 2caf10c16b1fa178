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
