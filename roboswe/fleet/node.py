"""What runs on a cluster node for one worker: the Ray actor that holds its simulator and bridge.

``WorkerHost`` is a plain class; ray_pool.py makes it a Ray actor (resources, restarts,
placement are Ray's). Its constructor refuses the node (``NodeRefused``, the node id in the
message) unless the node's sandbox image has the head's digest and the run directory is the
same one at the same path (the coordinator writes workspaces and captures checkpoints there;
the sandbox runs on them). Then it makes this worker's CURVE server key pair (the secret never
leaves the node; only the coordinator's client public key is admitted) and starts the
simulator and the bridge, each its own process (``node_process``), holding the write end of
their lifeline. A thread watches them: if either dies the actor process exits, so Ray counts
a failure and restarts the whole worker (re-running this constructor, possibly on another
node); the coordinator reads the new endpoints from ``endpoints()``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import msgspec

from roboswe.fleet.node_process import LIFELINE_ENV, endpoint_file

WORKER_DIRS = "roboswe-worker"  # /tmp/roboswe-worker<N>-*: one per worker host on this node
WORKSPACE_DIRS = "roboswe-node-workspaces"  # $ROBOSWE_NODE_DIR/roboswe-node-workspaces<N>-*: its workspaces
START_SECONDS = 120.0  # both processes bound (the bridge first sweeps orphaned sandboxes, up to 30 s)
TOKEN_FILE = "fleet/node-check"  # in the run dir: proves a node sees the same directory
NODE_DIR_ENV = "ROBOSWE_NODE_DIR"  # a node's own directory for its workers' workspaces ([fleet] workspaces = "node")


class WorkerSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What a worker host needs to know; the same on every restart."""

    number: int
    run_dir: str  # "" when the node keeps its own workspaces
    run_token: str  # the content of RUN_DIR/fleet/node-check
    node_workspaces: bool = False  # [fleet] workspaces = "node": the bridge keeps them under NODE_DIR_ENV
    image_digest: str  # the head's sandbox image
    client_public_key: str  # the coordinator's CURVE public key (Z85), the only client admitted
    head_boot_id: str  # the coordinator machine's /proc/sys/kernel/random/boot_id: is this node that machine?
    heartbeat_interval: float
    heartbeat_liveness: int
    log_level: str = "info"


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    """Where a worker serves, as its host reports it."""

    node_id: str
    host: str
    pid: int
    sim: str  # control endpoint, tcp with CURVE
    robot: str  # the simulator's robot endpoint, ipc on the node: only the worker's own bridge reaches it
    bridge: str  # tcp with CURVE
    server_public_key: str
    image_digest: str
    started_at: float
    workspaces: str = ""  # this worker's node-local directory for its workspaces ([fleet] workspaces = "node")


class NodeRefused(RuntimeError):
    """This node cannot take the worker; the message names the node and the fix."""


def check_node(spec: WorkerSpec, node_id: str) -> None:
    """Raise NodeRefused unless this node has the head's sandbox image and (shared workspaces) the run directory."""
    from roboswe.sandbox.images import ImageError, load_image

    try:
        digest = load_image().digest
    except ImageError as e:
        raise NodeRefused(f"node {node_id}: no sandbox image ({e}); run `roboswe images build` there") from None
    if digest != spec.image_digest:
        raise NodeRefused(f"node {node_id}: sandbox image {digest[:16]} differs from the head's {spec.image_digest[:16]}; "
                          "run `roboswe images build` there from the same checkout")
    if spec.node_workspaces:
        return  # the workspaces live on this node: RUN_DIR is the head's alone
    token = Path(spec.run_dir) / TOKEN_FILE
    try:
        seen = token.read_text()
    except OSError as e:
        seen = f"unreadable ({e.strerror})"
    if seen != spec.run_token:
        raise NodeRefused(f"node {node_id}: {token} is {seen!r} here, not the head's: the run directory must be the "
                          "same shared directory at the same path on every node (workspaces live there), "
                          "or set [fleet] workspaces = \"node\"")


def _node_dir() -> Path:
    """Where this node keeps its workers' workspaces: $ROBOSWE_NODE_DIR when the node was started with it
    (`ROBOSWE_NODE_DIR=/data/roboswe ray start ...`: a local disk with room), else /tmp."""
    return Path(os.environ.get(NODE_DIR_ENV) or tempfile.gettempdir())


def _workspace_root(number: int) -> Path:
    """A fresh directory for this worker's workspaces on this node, marked with its host's pid (for the sweep)."""
    base = _node_dir()
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=f"{WORKSPACE_DIRS}{number}-", dir=base))
    root.chmod(0o755)  # the sandbox user traverses it (bwrap binds the workspace as that user)
    (root / "host.pid").write_text(str(os.getpid()))
    return root


def boot_id() -> str:
    """This machine's boot id: the same for every process of one host, different on another host."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def sweep_worker_dirs() -> None:
    """Remove the directories of worker hosts on this node that are gone (killed with their raylet:
    Ray kills a dead worker's child processes, so nothing of theirs removed the directory)."""
    for d in [*Path("/tmp").glob(f"{WORKER_DIRS}*"), *_node_dir().glob(f"{WORKSPACE_DIRS}*")]:
        try:
            pid = int((d / "host.pid").read_text())
        except (OSError, ValueError):
            continue  # not one of ours, or still being made
        if not _running(pid):
            shutil.rmtree(d, ignore_errors=True)


def _running(pid: int) -> bool:
    # A zombie (a killed host nobody reaped yet) is gone too.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _node_ip() -> str:
    """The address this node joined the cluster with (`ray start --node-ip-address`), where its workers serve."""
    import ray

    try:
        return ray._private.worker.global_worker.node_ip_address  # the raylet's own, not a guess from routes
    except AttributeError:
        return ray.util.get_node_ip_address()


def _write_public_key(path: Path, public: bytes) -> None:
    # zmq.auth's certificate format, public half only (what server_keys() admits).
    path.write_text(f'metadata\ncurve\n    public-key = "{public.decode()}"\n')


class WorkerHost:
    """One worker's simulator and sandbox bridge on this node (made a Ray actor by ray_pool)."""

    def __init__(self, spec_bytes: bytes):
        import ray
        import zmq.auth

        spec = msgspec.msgpack.decode(spec_bytes, type=WorkerSpec)
        node_id = ray.get_runtime_context().get_node_id()
        check_node(spec, node_id)
        host = _node_ip()
        sweep_worker_dirs()
        self.dir = Path(tempfile.mkdtemp(prefix=f"{WORKER_DIRS}{spec.number}-", dir="/tmp"))
        os.chmod(self.dir, 0o755)
        (self.dir / "host.pid").write_text(str(os.getpid()))
        keys = self.dir / "keys"
        keys.mkdir(mode=0o700)
        _public_file, secret_file = zmq.auth.create_certificates(str(keys), "server")
        os.chmod(secret_file, 0o600)
        server_public, _ = zmq.auth.load_certificate(str(keys / "server.key"))
        _write_public_key(keys / "coordinator.key", spec.client_public_key.encode())
        lifeline_read, self._lifeline = os.pipe()
        env = {**os.environ, "PYTHONHASHSEED": "0", LIFELINE_ENV: str(lifeline_read)}
        gpus = ray.get_gpu_ids()
        if gpus and "MUJOCO_EGL_DEVICE_ID" not in env:  # render on the GPU Ray gave this worker ([fleet] ray_gpus)
            env["MUJOCO_EGL_DEVICE_ID"] = str(gpus[0])
        common = ["--dir", str(self.dir), "--keys", str(keys), "--log-level", spec.log_level,
                  "--heartbeat-interval", str(spec.heartbeat_interval),
                  "--heartbeat-liveness", str(spec.heartbeat_liveness)]
        robot = f"ipc://{self.dir}/robot.sock"
        self.processes: dict[str, subprocess.Popen] = {}
        self._stopping = False
        self.workspaces: Path | None = None
        # A sized workspace is a loop mount on this machine: a coordinator elsewhere writing a shared
        # directory would write under it, where the sandbox no longer sees. Workspaces kept on this node
        # are written here, by the bridge itself.
        volumes = [] if spec.node_workspaces or boot_id() == spec.head_boot_id else ["--no-workspace-volume"]
        if spec.node_workspaces:
            self.workspaces = _workspace_root(spec.number)
            volumes += ["--workspace-root", str(self.workspaces)]
        for kind, extra in (("simulator", ["--robot", robot]), ("sandbox_bridge", volumes)):
            log = open(self.dir / f"{kind}.log", "ab")  # noqa: SIM115 - the child holds it
            self.processes[kind] = subprocess.Popen(
                [sys.executable, "-m", "roboswe.fleet.node_process", kind, "--bind", f"tcp://{host}:0", *common, *extra],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                pass_fds=(lifeline_read,), start_new_session=True)
            log.close()
        os.close(lifeline_read)
        bound = self._wait_bound()
        self.placement = Placement(node_id=node_id, host=host, pid=os.getpid(), sim=bound["simulator"], robot=robot,
                                   bridge=bound["sandbox_bridge"], server_public_key=server_public.decode(),
                                   image_digest=spec.image_digest, started_at=time.time(),
                                   workspaces=str(self.workspaces or ""))
        threading.Thread(target=self._watch, name="roboswe-worker-watch", daemon=True).start()

    def _wait_bound(self) -> dict[str, str]:
        deadline = time.monotonic() + START_SECONDS
        bound: dict[str, str] = {}
        while len(bound) < len(self.processes):
            for kind, process in self.processes.items():
                path = endpoint_file(self.dir, kind)
                if path.exists():
                    bound[kind] = path.read_text()
                elif process.poll() is not None:
                    self._stop()
                    tail = (self.dir / f"{kind}.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"the worker's {kind} exited {process.returncode} before binding:\n{tail}")
            if time.monotonic() > deadline:
                self._stop()
                raise RuntimeError(f"the worker's processes did not bind within {START_SECONDS:.0f} s")
            time.sleep(0.1)
        return bound

    def _watch(self) -> None:
        # Either process dying ends the worker: the actor process exits, Ray restarts the worker.
        while all(p.poll() is None for p in self.processes.values()):
            time.sleep(0.5)
        if self._stopping:
            return
        dead = {k: p.returncode for k, p in self.processes.items() if p.returncode is not None}
        print(f"roboswe worker: {dead} exited; ending this worker so Ray restarts it", file=sys.stderr, flush=True)
        self._stop()
        os._exit(1)

    def _stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)  # the bridge removes its sandboxes
        deadline = time.monotonic() + 15
        for process in self.processes.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.workspaces is not None:  # every checkpoint the head needed was carried with its receipt
            shutil.rmtree(self.workspaces, ignore_errors=True)

    def endpoints(self) -> bytes:
        """This worker's placement (msgpack of ``Placement``)."""
        return msgspec.msgpack.encode(self.placement)

    def stop(self) -> None:
        """Stop both processes (the coordinator then kills the actor without restart)."""
        self._stopping = True
        self._stop()
        sweep_worker_dirs()
