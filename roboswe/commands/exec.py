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
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from roboswe.terminal import did_you_mean, echo, terminal_safe

DEFAULT_DATASET = "robosuite-pilot"


def add_arguments_exec(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", metavar="TASK", help="task id as `roboswe tasks` lists it (e.g. lift-panda)")
    parser.add_argument("scripts", metavar="SCRIPT.py", nargs="+", type=Path, help="programs to run in order")
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help=f"dataset name or .toml (default {DEFAULT_DATASET})")
    parser.add_argument("--workspace", type=Path, default=None, metavar="DIR",
                        help="start from this directory's files (default: an empty workspace). The scripts run on a copy; "
                             "afterwards only the files they created or changed are written back into DIR, as your user "
                             "(files they deleted are listed, not deleted; links and special files they made are not copied)")
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
        echo(f"roboswe exec: task {args.task!r} is not in dataset {args.dataset!r}{did_you_mean(args.task, [m.id for m in manifests])}; tasks: {[m.id for m in manifests]}", file=sys.stderr)
        return 2
    for script in args.scripts:
        if not script.is_file():
            echo(f"roboswe exec: script {script} does not exist or is not a file", file=sys.stderr)
            return 2
    user_dir = args.workspace.resolve() if args.workspace is not None else None
    if user_dir is not None and not user_dir.is_dir():
        echo(f"roboswe exec: --workspace {args.workspace} is not a directory", file=sys.stderr)
        return 2
    run_dir = Path(tempfile.mkdtemp(prefix="roboswe-exec-", dir="/tmp"))
    os.chmod(run_dir, 0o755)  # the bwrap sandbox user must traverse to the workspace
    # The sandbox re-owns and rewrites its workspace, so it never gets the user's directory: a file
    # open there during the run (`> DIR/out.json`) would lose what was written to it.
    workspace = run_dir / "workspace"
    if user_dir is not None:
        shutil.copytree(user_dir, workspace, symlinks=True)
    else:
        workspace.mkdir()
    names = []
    for script in args.scripts:
        src = script.resolve()
        if user_dir is None or src.parent != user_dir:
            shutil.copyfile(src, workspace / src.name)
        names.append(src.name)
    before = _file_digests(workspace)
    try:
        report = trio.run(_exec, manifest, names, workspace, run_dir, args)
    except _ExecFailed as e:
        echo(f"roboswe exec: {e} (events: {run_dir / 'events.jsonl'})", file=sys.stderr)
        return 1
    if user_dir is not None:
        report["workspace"] = str(user_dir)
        report["written_back"] = _write_back(workspace, user_dir, before)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report)
    return 0


class _ExecFailed(Exception):
    pass


def _file_digests(root: Path) -> dict[str, str]:
    """sha256 of every regular file below ``root`` (bounded walk, links never followed)."""
    import hashlib

    from roboswe.sandbox.walk import Found, walk

    digests = {}
    for entry in walk(root):
        if isinstance(entry, Found) and stat.S_ISREG(entry.st.st_mode):
            digests[entry.path] = hashlib.sha256(_read_entry(entry)).hexdigest()
    return digests


def _read_entry(entry) -> bytes:
    fd = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=entry.dir_fd)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _write_back(workspace: Path, user_dir: Path, before: dict[str, str]) -> dict[str, list[str]]:
    """The files the scripts created or changed, copied into the user's directory (as this process's
    user); what they deleted or made that is not a regular file is only reported."""
    import hashlib

    from roboswe.sandbox.walk import Refused, entry_type, walk

    done: dict[str, list[str]] = {"created": [], "changed": [], "deleted": [], "not_copied": []}
    seen = set()
    for entry in walk(workspace):
        if isinstance(entry, Refused):
            done["not_copied"].append(f"{entry.path} ({entry.reason})")
            continue
        if stat.S_ISDIR(entry.st.st_mode):
            continue
        if not stat.S_ISREG(entry.st.st_mode):
            if entry.path not in before:
                done["not_copied"].append(f"{entry.path} (a {entry_type(entry.st.st_mode)}, not a regular file)")
            continue
        seen.add(entry.path)
        data = _read_entry(entry)
        old = before.get(entry.path)
        if old == hashlib.sha256(data).hexdigest():
            continue
        target = user_dir / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        done["changed" if old is not None else "created"].append(entry.path)
    done["deleted"] = sorted(set(before) - seen)
    return done


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
    back = report.get("written_back")
    if back is not None:
        changed = back["created"] + back["changed"]
        echo(f"written back to {terminal_safe(report['workspace'], multiline=False)}: "
             + (", ".join(terminal_safe(p, multiline=False) for p in changed) if changed else "nothing (no file created or changed)"))
        for key, label in (("deleted", "deleted by the scripts, kept in your directory"), ("not_copied", "not copied back")):
            if back[key]:
                echo(f"{label}: " + ", ".join(terminal_safe(p, multiline=False) for p in back[key]))
