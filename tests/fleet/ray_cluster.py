"""A real two-node Ray cluster on loopback for the fleet tests: `ray start --head` plus `ray start --address`.

Each node is its own `ray start --block` process group with its own temp dir, CPUs and raylet;
``stop()`` kills both groups and anything else started under the cluster's directory (by pid),
so no Ray process outlives the test. Token authentication is on, with a token made here.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"
# Notice a dead raylet within seconds rather than the default ~30 s.
FAST_HEALTH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3",
               "RAY_health_check_initial_delay_ms": "1000"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class LocalCluster:
    """Head (``head_cpus``) and a second node (``node_cpus``), both on 127.0.0.1.

    ``hidden``: directories neither node sees (each node runs in a mount namespace of its own with an empty
    tmpfs over them: the head's RUN_DIR there is not the nodes'). ``node_dirs``: each node's own directory for
    its workers' workspaces (``ROBOSWE_NODE_DIR``), removed by ``stop()``.
    """

    def __init__(self, head_cpus: int = 2, node_cpus: int = 1, *, hidden: tuple[Path, ...] = ()):
        self.dir = Path(tempfile.mkdtemp(prefix="rsray-", dir="/tmp"))  # short: Ray's socket paths
        self.hidden = hidden
        self.node_dirs = {name: Path(tempfile.mkdtemp(prefix=f"rsnode-{name}-", dir="/tmp")) for name in ("a", "b")}
        for d in self.node_dirs.values():
            d.chmod(0o755)  # the sandbox user traverses it to its workspace
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
        self.groups: list[subprocess.Popen] = []
        full = {**os.environ, **self.env, **FAST_HEALTH}
        common = ["--block", "--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
        self._start(["--head", "--port", str(self.port), "--num-cpus", str(head_cpus), "--include-dashboard", "false",
                     "--temp-dir", str(self.dir / "a"), *common], {**full, "ROBOSWE_NODE_DIR": str(self.node_dirs["a"])}, "head")
        self.wait_nodes(1)
        self._start(["--address", self.address, "--num-cpus", str(node_cpus), "--temp-dir", str(self.dir / "b"),
                     *common], {**full, "ROBOSWE_NODE_DIR": str(self.node_dirs["b"])}, "node")
        self.wait_nodes(2)

    def _start(self, args: list[str], env: dict[str, str], name: str) -> None:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - the child holds it
        command = [str(RAY), "start", *args]
        if self.hidden:  # sh execs ray: the group's leader is `ray start`, in the namespace with the tmpfs
            mounts = " && ".join(f"mount -t tmpfs roboswe-hidden {shlex.quote(str(d))}" for d in self.hidden)
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       f"{mounts} && exec {shlex.join(command)}"]
        self.groups.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True))
        log.close()

    def nodes(self) -> list[dict]:
        """ray.nodes() as a short-lived driver in a subprocess (the test process never joins the cluster)."""
        import json

        code = (f"import json, ray; ray.init(address={self.address!r}, logging_level='ERROR', log_to_driver=False); "
                "print(json.dumps([dict(id=n['NodeID'], alive=n['Alive'], head='node:__internal_head__' in n['Resources'])"
                " for n in ray.nodes()]))")
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **self.env}, capture_output=True,
                             text=True, timeout=120, check=False)
        lines = [line for line in out.stdout.splitlines() if line.startswith("[")]
        return json.loads(lines[-1]) if lines else []

    def wait_nodes(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for g in self.groups:
                if g.poll() is not None:
                    raise RuntimeError(f"ray start exited {g.returncode}: see {self.dir}/*.log")
            if sum(n["alive"] for n in self.nodes()) >= count:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the local Ray cluster did not reach {count} node(s); see {self.dir}/*.log")
            time.sleep(1)

    def raylet_pid(self, node: str) -> int:
        """The raylet of node "a" (head) or "b"."""
        marker = f"{self.dir / node}/"
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                cmd = _cmdline(int(entry))
                if cmd.split(" ")[0].endswith("/raylet") and marker in cmd:
                    return int(entry)
        raise LookupError(f"no raylet under {marker}")

    def stop(self) -> None:
        for g in self.groups:
            try:
                os.killpg(g.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            g.wait(10)
        # Workers a raylet started, and anything they started, carry the cluster's directory in their command line.
        for entry in os.listdir("/proc"):
            if entry.isdigit() and str(self.dir) in _cmdline(int(entry)):
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)
        for d in self.node_dirs.values():
            shutil.rmtree(d, ignore_errors=True)
