"""`roboswe exec TASK SCRIPT.py ...`: run authored programs against one fresh scene, as in a trial.

Starts a simulator actor and a sandbox bridge actor as real processes, loads TASK, opens one
sandbox around the workspace and runs each script in order (each with its own per-script
limits; scene and workspace carry over), then prints each feedback and the success flag.
This is a task author's tool, so it shows success; the model never learns it from the bridge.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from roboswe.terminal import echo, terminal_safe

DEFAULT_DATASET = "robosuite-pilot"


def add_arguments_exec(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", metavar="TASK", help="task id as `roboswe tasks` lists it (e.g. lift-panda)")
    parser.add_argument("scripts", metavar="SCRIPT.py", nargs="+", type=Path, help="programs to run in order")
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help=f"dataset name or .toml (default {DEFAULT_DATASET})")
    parser.add_argument("--workspace", type=Path, default=None, help="workspace directory (default: a fresh one); scripts are copied in")
    parser.add_argument("-e", "--engine", choices=["docker", "bwrap"], default=None, help="sandbox backend (default: docker when a daemon answers, else bwrap)")
    parser.add_argument("--seed", type=int, default=None, help="scene seed (default: the manifest's)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run_exec(args: argparse.Namespace) -> int:
    import trio

    from roboswe.sim.manifest import ManifestError, load_dataset

    try:
        _dataset, manifests = load_dataset(args.dataset)
    except ManifestError as e:
        echo(f"roboswe exec: {e}", file=sys.stderr)
        return 2
    manifest = next((m for m in manifests if m.id == args.task), None)
    if manifest is None:
        echo(f"roboswe exec: task {args.task!r} is not in dataset {args.dataset!r}; tasks: {[m.id for m in manifests]}", file=sys.stderr)
        return 2
    for script in args.scripts:
        if not script.is_file():
            echo(f"roboswe exec: script {script} does not exist or is not a file", file=sys.stderr)
            return 2
    run_dir = Path(tempfile.mkdtemp(prefix="roboswe-exec-", dir="/tmp"))
    os.chmod(run_dir, 0o755)  # the bwrap sandbox user must traverse to the workspace
    workspace = (args.workspace or run_dir / "workspace").resolve()
    workspace.mkdir(parents=True, exist_ok=True)
    names = []
    for script in args.scripts:
        src = script.resolve()
        if src.parent == workspace:
            names.append(src.name)
        else:
            shutil.copyfile(src, workspace / src.name)
            names.append(src.name)
    try:
        report = trio.run(_exec, manifest, names, workspace, run_dir, args)
    except _ExecFailed as e:
        echo(f"roboswe exec: {e} (events: {run_dir / 'events.jsonl'})", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report)
    return 0


class _ExecFailed(Exception):
    pass


def _start_actor(name: str, run_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONHASHSEED": "0", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    log = open(run_dir / f"{name}.log", "w")
    return subprocess.Popen([sys.executable, "-m", f"roboswe.actors.{name}", "--run-dir", str(run_dir)], env=env, stdout=log,
                            stderr=log, preexec_fn=_stop_with_parent)


def _stop_with_parent() -> None:
    # A killed `roboswe exec` must not leave its actors (and the bridge's container and workspace
    # volume) running: they get SIGTERM, which stops them cleanly.
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


async def _wait_bound(path: Path, proc: subprocess.Popen, name: str, seconds: float = 120) -> None:
    import trio

    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            raise _ExecFailed(f"the {name} actor exited with {proc.returncode} before binding")
        if time.monotonic() > deadline:
            raise _ExecFailed(f"the {name} actor did not bind {path} within {seconds:.0f} s")
        await trio.sleep(0.05)


async def _exec(manifest, names: list[str], workspace: Path, run_dir: Path, args) -> dict:
    import msgspec
    import trio

    from roboswe.actors import Client, RemoteError, socket_dir
    from roboswe.protocol import bridge as bp
    from roboswe.protocol import sim as simp
    from roboswe.protocol.control import Shutdown

    sockets = socket_dir(run_dir)
    procs = {name: _start_actor(name, run_dir) for name in ("simulator", "sandbox_bridge")}
    try:
        await _wait_bound(sockets / "simulator.sock", procs["simulator"], "simulator")
        await _wait_bound(sockets / "sandbox_bridge.sock", procs["sandbox_bridge"], "sandbox_bridge")
        # A tool, not a supervisor: tolerate actors that are slow to answer on a loaded machine
        # (building a robosuite scene can starve heartbeats for seconds).
        patient = {"heartbeat_interval": 1.0, "liveness": 30}
        async with (
            Client("coordinator", f"ipc://{sockets / 'simulator.sock'}", simp.SIM_CODEC, peer="simulator", **patient) as sim,
            Client("coordinator", f"ipc://{sockets / 'sandbox_bridge.sock'}", bp.BRIDGE_CODEC, peer="sandbox_bridge", **patient) as bridge,
        ):
            seed = manifest.seed if args.seed is None else args.seed
            try:
                with trio.fail_after(300):
                    loaded = (await sim.request(simp.Load(manifest=simp.encode_manifest(manifest), seed=seed))).message
                limits = bp.ScriptLimits(steps=manifest.budgets.script.steps, seconds=manifest.budgets.script.seconds)
                with trio.fail_after(120):
                    opened = (await bridge.request(bp.OpenTrial(trial="exec", workspace=str(workspace), backend=args.engine, limits=limits))).message
            except RemoteError as e:
                raise _ExecFailed(f"{e.error.code}: {e.error.detail}") from None
            if not args.json:
                echo(f"roboswe exec: task {manifest.id} seed {seed}, sandbox {opened.backend} (image sha256:{opened.image_digest[:16]}), workspace {workspace}", flush=True)
            feedbacks = []
            for name in names:
                with trio.fail_after(limits.seconds + 60):
                    fb = (await bridge.request(bp.ExecScript(script=name))).message
                feedbacks.append(msgspec.to_builtins(fb))
                if not args.json:
                    _print_feedback(msgspec.to_builtins(fb))
            status = (await sim.request(simp.SuccessQuery())).message
            await bridge.request(bp.CloseTrial(trial="exec"))
            for client in (bridge, sim):
                with trio.move_on_after(5):
                    await client.request(Shutdown(reason="exec done"))
        return {
            "task": manifest.id,
            "seed": seed,
            "fingerprint": loaded.fingerprint.digest,
            "backend": opened.backend,
            "image_digest": opened.image_digest,
            "workspace": str(workspace),
            "run_dir": str(run_dir),
            "scripts": feedbacks,
            "success": msgspec.to_builtins(status),
        }
    finally:
        for proc in procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # A bridge that was killed (or failed) leaves its trial container: remove what no live process owns.
        from roboswe.sandbox import remove_orphan_containers

        await trio.to_thread.run_sync(remove_orphan_containers)


def _print_feedback(fb: dict) -> None:
    # Everything the program wrote is escaped: an ANSI sequence in its output must not draw over the result.
    echo(f"\n== {terminal_safe(fb['script'], multiline=False)}: exit {fb['exit_status']}, {fb['steps']} control steps, {fb['wall_seconds']:.2f} s, limit: {fb['limit'] or 'none'}")
    for stream in ("stdout", "stderr"):
        if fb[stream]:
            extra = f" (truncated, {fb[stream + '_bytes']} bytes total)" if fb[stream + "_truncated"] else ""
            echo(f"-- {stream}{extra}:\n{fb[stream].rstrip()}")
    if fb["exception"]:
        echo(f"-- uncaught {terminal_safe(fb['exception']['type'], multiline=False)}: {fb['exception']['message']}")
    if fb["refused"]:
        echo(f"-- {fb['refused']} bridge request(s) refused")


def _print_report(report: dict) -> None:
    s = report["success"]
    echo(f"\nsuccess: {s['achieved']} (control step {s['control_step']}, predicate held {s['current_run']} consecutive steps now, longest {s['longest_run']}/{s['interval']})")
