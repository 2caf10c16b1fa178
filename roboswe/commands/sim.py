"""Commands for tasks and the simulator: `tasks`, `admit`, `keys generate`, `sim serve`.

Heavy modules (robosuite, mujoco, zmq) are imported inside the handlers so `roboswe --help` stays fast.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import sys
from pathlib import Path

from roboswe.terminal import echo, terminal_safe

LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}


def _fail(message: str, code: int = 2) -> int:
    echo(f"roboswe: {message}", file=sys.stderr)
    return code


# ---- tasks ------------------------------------------------------------------------------------


def add_arguments_tasks(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", nargs="?", default="robosuite-pilot",
                        help="dataset name or .toml path, or a catalogue name (robocasa365) (default: robosuite-pilot)")
    parser.add_argument("--admitted", type=Path, default=None, help="admitted.json to read action dims and admission status from")
    parser.add_argument("--candidates", action="store_true",
                        help="catalogue only: list just the selected candidates and the task classes a manifest uses")


def _read_admitted_tasks(path: Path | None) -> dict:
    from roboswe.evaluation.admission import read_admitted

    return {t.id: t for t in read_admitted(path).tasks} if path is not None else {}


def run_tasks(args: argparse.Namespace) -> int:
    from roboswe.evaluation.admission import AdmissionError
    from roboswe.sim.families import families
    from roboswe.sim.manifest import ManifestError, load_dataset

    try:
        admitted = _read_admitted_tasks(args.admitted)
    except AdmissionError as e:
        return _fail(str(e))
    for family in families():  # a family's own catalogue (robocasa365) is listed by the family
        if family.list_catalogue is None:
            continue
        try:
            lines = family.list_catalogue(args.dataset, admitted, lambda m: _status(m, admitted),
                                          candidates_only=args.candidates)
        except ManifestError as e:
            return _fail(str(e))
        if lines is not None:
            for line in lines:
                echo(line)
            return 0
    try:
        dataset, manifests = load_dataset(args.dataset)
    except ManifestError as e:
        return _fail(str(e))
    echo(f"dataset {dataset.id}: {len(manifests)} task(s)")
    rows = [("TASK", "ENV", "ROBOT", "ACTION", "CAMERAS (d = depth)", "STATUS")]
    for m in manifests:
        a = admitted.get(m.id)
        dim = str(a.measured.get("action_dim", "?")) if a and a.status == "admitted" else "?"
        cams = ",".join(c.name + ("(d)" if c.depth else "") for c in m.observation.cameras)
        status = _status(m, admitted)
        label = m.id + (" [privileged]" if m.privileged else "")
        rows.append((label, m.upstream.env, m.upstream.robot, dim, cams, status))
    for task_id, why in dataset.excluded.items():
        rows.append((task_id, "-", "-", "-", "-", f"excluded by dataset: {why}"))
    rows = [tuple(terminal_safe(cell, multiline=False) for cell in r) for r in rows]  # measured as shown
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        echo("  ".join(r[i].ljust(widths[i]) for i in range(5)) + "  " + r[5])
    return 0


def _status(manifest, admitted: dict) -> str:
    a = admitted.get(manifest.id)
    if a is None:
        return "not admitted (run `roboswe admit`)"
    if a.manifest_digest != manifest.digest():
        return "manifest changed since admission"
    return a.status if a.status == "admitted" else f"excluded: {a.reason}"


# ---- admit ------------------------------------------------------------------------------------


def add_arguments_admit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="dataset name (e.g. robosuite-pilot) or .toml path")
    parser.add_argument("--config", type=Path, default=None, help="run config TOML (validated and its digest recorded)")
    parser.add_argument("--out", type=Path, required=True, help="where to write admitted.json")
    parser.add_argument("--hold-steps", type=int, default=200, help="hold (zero/keep-target) steps to run per task")


def run_admit(args: argparse.Namespace) -> int:
    from roboswe.config import ConfigError, load_config
    from roboswe.evaluation.admission import admit_dataset, write_admitted
    from roboswe.logs import configure_logging
    from roboswe.sim.manifest import ManifestError

    configure_logging(run_dir=None, actor="admission", level="warning", console=False)
    config = None
    if args.config is not None:
        try:
            config = load_config(args.config)
        except ConfigError as e:
            return _fail(str(e))
    refusal = _admit_preflight(args, config)
    if refusal:
        echo(refusal, file=sys.stderr)
        return 2

    def progress(task) -> None:
        if task.status == "admitted":
            m = task.measured
            echo(f"  admitted  {task.id}: fingerprint {task.fingerprint['digest'][:16]}, action {m['action_dim']}-D, "
                 f"{m['step_ms']:.1f} ms/step, observe {m['observe_ms']} ms", flush=True)
            if task.review:
                echo(f"            predicate {task.review['defined_in'].rsplit('.', 2)[-2]}._check_success "
                     f"{task.review['source_sha256'][:12]} ({task.review['status']}): {task.review['review']}", flush=True)
        else:
            echo(f"  EXCLUDED  {task.id}: {task.reason}", flush=True)

    try:
        admitted = admit_dataset(args.dataset, run_config=args.config, hold_steps=args.hold_steps, progress=progress)
    except ManifestError as e:
        return _fail(str(e))
    sealed = write_admitted(admitted, args.out)
    n = len(sealed.admitted_tasks())
    echo(f"wrote {args.out}: {n} of {len(sealed.tasks)} task(s) admitted, digest {sealed.digest[:16]}")
    for note, ids in _family_exclusions(sealed).items():
        echo(f"{len(ids)} task(s) excluded because {note}")
    return 0 if n else 1


def _family_exclusions(sealed) -> dict[str, list[str]]:
    """Excluded tasks whose family excluded them before any probe, by the family's note on that exclusion."""
    from roboswe.sim.families import family
    from roboswe.sim.manifest import ManifestError

    out: dict[str, list[str]] = {}
    for t in sealed.tasks:
        if t.status != "excluded":
            continue
        try:
            m = t.task_manifest()
            found = family(m.upstream.package)
        except (ManifestError, KeyError, ValueError):
            continue
        if found.exclusion_note and _excluded_by_family(found, m):
            out.setdefault(found.exclusion_note, []).append(t.id)
    return out


def _excluded_by_family(found, manifest) -> bool:
    return found.exclusion is not None and found.exclusion(manifest) is not None


def _admit_preflight(args: argparse.Namespace, config) -> str | None:
    """What would make admission fail after minutes of simulation: the refusal to print, else None.

    The run config is sealed into admitted.json by digest, so its model ids must be real now;
    keys are not needed to admit (the run checks them).
    """
    from roboswe.evaluation.preflight import PreflightRefused, Problem, preflight
    from roboswe.sim.families import family
    from roboswe.sim.manifest import ManifestError, load_dataset

    try:
        _, manifests = load_dataset(args.dataset)
    except ManifestError:
        return None  # admit_dataset reports it with its own message
    # A task its family excludes before probing (a kitchen whose downloaded assets are missing) is excluded by
    # admission, naming why, not refused here: the admitted file records the exclusion.
    manifests = [m for m in manifests if not _excluded_by_family(family(m.upstream.package), m)]
    outcome = preflight(provider=config.provider if config else None, source=str(args.config), manifests=manifests,
                        sandbox=False, keys=False)
    parent = Path(args.out).resolve().parent
    if not parent.is_dir():
        outcome.problems.append(Problem(check="output", where=f"--out {args.out}", what=f"directory {parent} does not exist",
                                        fix=f"create it (mkdir -p {parent}) or choose another --out"))
    elif not os.access(parent, os.W_OK):
        outcome.problems.append(Problem(check="output", where=f"--out {args.out}", what=f"directory {parent} is not writable",
                                        fix="choose another --out"))
    return PreflightRefused(outcome.problems).report("admit") if outcome.problems else None


# ---- keys -------------------------------------------------------------------------------------


def add_arguments_keys(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    gen = sub.add_parser("generate", help="make CURVE key pairs (server and client) in DIR")
    gen.add_argument("dir", type=Path)
    gen.add_argument("--force", action="store_true", help="replace existing keys")


def run_keys(args: argparse.Namespace) -> int:
    from roboswe.actors import KeyDirError, generate_key_dir

    try:
        paths = generate_key_dir(args.dir, force=args.force)
    except KeyDirError as e:
        return _fail(str(e))
    echo(f"wrote CURVE keys in {args.dir}: server ({paths['server'].name}, server.key) and client ({paths['client'].name}, client.key)")
    echo("simulator host: keep the whole directory; coordinator host: copy server.key, client.key and client.key_secret")
    return 0


# ---- sim serve --------------------------------------------------------------------------------


def add_arguments_sim(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sim_command", metavar="ACTION", required=True)
    serve = sub.add_parser("serve", help="run a simulator actor on its own (e.g. on another machine)")
    serve.add_argument("--bind", required=True, help="control endpoint, e.g. tcp://0.0.0.0:5555 (robot endpoint: port+1)")
    serve.add_argument("--keys", type=Path, default=None, help="CURVE key directory from `roboswe keys generate`")
    serve.add_argument("--log-level", default="info")


def _is_loopback(endpoint: str) -> bool:
    if endpoint.startswith("ipc://"):
        return True
    host = endpoint[len("tcp://"):].rpartition(":")[0].strip("[]")
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run_sim(args: argparse.Namespace) -> int:
    if sys.flags.hash_randomization:
        # Simulator processes run with a fixed hash seed; re-exec this command with it.
        os.execve(sys.executable, [sys.executable, "-m", "roboswe.cli", *sys.argv[1:]], {**os.environ, "PYTHONHASHSEED": "0"})
    os.environ.setdefault("MUJOCO_GL", "egl")
    import structlog
    import trio

    from roboswe.actors import KeyDirError, server_keys
    from roboswe.actors.simulator import serve_simulator
    from roboswe.logs import configure_logging

    configure_logging(run_dir=None, actor="simulator", level=args.log_level, console=None)
    log = structlog.get_logger()
    if not args.bind.startswith(("tcp://", "ipc://")):
        return _fail(f"--bind {args.bind!r}: expected tcp://HOST:PORT or ipc://PATH")
    curve = None
    if args.keys is not None:
        try:
            curve = server_keys(args.keys)
        except KeyDirError as e:
            return _fail(str(e))
    elif not _is_loopback(args.bind):
        return _fail(f"refusing to serve {args.bind} without CURVE keys: plain tcp is allowed only on loopback. "
                     "Run `roboswe keys generate DIR` and pass --keys DIR")
    else:
        log.warning("simulator_unauthenticated", endpoint=args.bind,
                    detail="serving plain tcp without CURVE keys; allowed on loopback only")
        echo(f"warning: serving {args.bind} without CURVE keys (loopback only)", file=sys.stderr, flush=True)

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            async def simulator(task_status=trio.TASK_STATUS_IGNORED) -> None:
                await serve_simulator("simulator", args.bind, curve=curve, task_status=task_status)
                nursery.cancel_scope.cancel()  # Shutdown arrived on the control endpoint

            async def stop_on_signal() -> None:
                with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for signum in signals:
                        log.info("stop_signal", signal=signal.Signals(signum).name)
                        nursery.cancel_scope.cancel()
                        return

            nursery.start_soon(stop_on_signal)
            control, robot = await nursery.start(simulator)
            echo(f"simulator control={control} robot={robot} curve={'on' if curve else 'off'}", flush=True)

    try:
        trio.run(serve)
    except KeyboardInterrupt:
        return 130
    except OSError as e:
        return _fail(str(e), 1)
    return 0
