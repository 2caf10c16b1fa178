"""`roboswe rle score|image` and `roboswe index`: the RLE-Bench commands (registered in roboswe/cli.py).

`rle score TASK ARTIFACT_DIR` seals the directory by the task's artifact contract, writes an RLE run
directory (rundir.py) and runs the verifier in its own process (`python -m roboswe.rle.verifier`), so
the salt is read only there. Without --out the run directory is a temporary one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec

from roboswe.terminal import echo

BATTERY_CACHE_ENV = "ROBOSWE_RLE_BATTERY_CACHE"
"""A directory where the verifier keeps rendered batteries (calibration, tests); unset: render each time."""


def add_arguments_rle(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="rle_command", metavar="SUBCOMMAND", required=True)
    score = sub.add_parser("score", help="verify an artifact directory against a task's hidden battery")
    score.add_argument("task", metavar="TASK", help="an RLE task id (configs/tasks/rle/: pose-rgb, pose-rgbd) or a TOML path")
    score.add_argument("artifact", metavar="ARTIFACT_DIR", type=Path)
    score.add_argument("--salt-file", type=Path, default=None, help="the hidden salt (default: the public CI salt, labelled public)")
    score.add_argument("--out", type=Path, default=None, metavar="DIR", help="write the RLE run directory here")
    score.add_argument("--json", action="store_true", help="print the reward report as JSON")
    score.add_argument("-e", "--engine", choices=["docker", "bwrap"], default=None, help="sandbox backend")
    demo = sub.add_parser("demo", help="a scripted participant develops and submits the reference estimator; "
                                         "prints the reward report and the index (offline)")
    demo.add_argument("name", choices=["pose", "tabletop", "speedrun", "transfer"],
                      help="which family's demo (tabletop: family 03's four tasks; speedrun: family 01 at L1 and L3 on the kit; transfer: family 02 on the kit)")
    demo.add_argument("--out", type=Path, default=None, metavar="RUN_DIR", help="write the RLE run directory here")
    demo.add_argument("--task", default=None, metavar="TASK", help="which of the family's tasks (pose: pose-rgbd, the default, or pose-rgb)")
    demo.add_argument("-e", "--engine", choices=["docker", "bwrap"], default=None, help="sandbox backend")
    demo.add_argument("--agents", type=int, default=None, metavar="N",
                      help="transfer: N fresh agents and N controls (1..5) in place of the manifest's five, a short run")
    demo.add_argument("--no-practice", action="store_true",
                      help="transfer: the scripted developer observes the practice tasks without practising")
    image = sub.add_parser("image", help="build or show the artifact image (the sandbox image plus SciPy and OpenCV)")
    image.add_argument("action", choices=["build", "show"])


def add_arguments_index(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", metavar="RUN_DIR", type=Path, nargs="+", help="RLE run directories")
    parser.add_argument("--json", action="store_true", help="print the index as JSON")


def run_rle(args: argparse.Namespace) -> int:
    if args.rle_command == "demo" and args.name == "speedrun":
        from .kitchen.demo import run_speedrun_demo

        return run_speedrun_demo(args.out)
    if args.rle_command == "demo" and args.name == "transfer":
        from .transfer.demo import run_transfer_demo

        return run_transfer_demo(args.out, agents=args.agents, practice=not args.no_practice)
    if args.rle_command == "demo" and args.name == "tabletop":
        from .tabletop.demo import run_tabletop_demo

        return run_tabletop_demo(args.out)
    if args.rle_command == "demo":
        from .demo import run_demo

        return run_demo(args.name, args.out, backend=args.engine, task=args.task)
    return _score(args) if args.rle_command == "score" else _image(args)


def verifier_command(run_dir: Path, *extra: str, engine: str | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "roboswe.rle.verifier", str(run_dir), *extra]
    if engine:
        cmd += ["--backend", engine]
    if os.environ.get(BATTERY_CACHE_ENV):
        cmd += ["--battery-cache", os.environ[BATTERY_CACHE_ENV]]
    return cmd


def _score(args: argparse.Namespace) -> int:
    from .manifest import TaskError, load_task
    from .rundir import read_report, write_submission
    from .seal import seal_directory

    try:
        task = load_task(args.task)
    except TaskError as e:
        echo(f"roboswe rle score: {e}", file=sys.stderr)
        return 2
    if task.tabletop is not None:
        echo(f"roboswe rle score: {task.id} scores an attempt's recorded physics, not an artifact "
             "(`roboswe rle demo tabletop`, docs/rle-tabletop.md)", file=sys.stderr)
        return 2
    if task.transfer is not None:
        echo(f"roboswe rle score: {task.id} scores fresh agents' trials with the harness, not the harness alone "
             "(`roboswe rle demo transfer`, docs/rle-transfer.md)", file=sys.stderr)
        return 2
    if task.kitchen is not None:
        echo(f"roboswe rle score: {task.id} scores trials in hidden kitchens, not an artifact "
             "(`roboswe rle demo speedrun`, docs/rle-kitchen.md)", file=sys.stderr)
        return 2
    if not args.artifact.is_dir():
        echo(f"roboswe rle score: {args.artifact} is not a directory", file=sys.stderr)
        return 2
    if args.out is not None and args.out.exists() and any(args.out.iterdir()):
        echo(f"roboswe rle score: {args.out} is not empty; choose a new run directory", file=sys.stderr)
        return 2
    sealed, contents = seal_directory(args.artifact, task.artifact)
    with tempfile.TemporaryDirectory(prefix="rle-run-") as tmp:
        run_dir = (args.out or Path(tmp) / "run").resolve()
        write_submission(run_dir, task, sealed, contents)
        extra = ["--salt-file", str(args.salt_file)] if args.salt_file else []
        env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
        proc = subprocess.run(verifier_command(run_dir, *extra, engine=args.engine), env=env,
                              stdout=subprocess.PIPE, text=True, check=False)
        if proc.returncode != 0:
            echo(f"roboswe rle score: the verifier failed (exit {proc.returncode})", file=sys.stderr)
            return 2
        report = read_report(run_dir)
    for r in sealed.refused:
        echo(f"roboswe rle score: not sealed: {r.path}: {r.reason}", file=sys.stderr)
    if args.json:
        sys.stdout.write(msgspec.json.encode(report, order="sorted").decode() + "\n")
    else:
        echo(render_report(report))
    return 0


def render_report(report) -> str:
    lines = [f"{report.task}  {report.status}  reward {report.reward:.4f}  (score {report.score:.2f})",
             (f"protocol {report.protocol}{'  [public salt]' if report.salt_label == 'public' else ''}"
              f"{'  PLACEHOLDER' if report.placeholder else ''}")]
    lines += [f"  gate {g.name}: {g.reason}" for g in report.gates]
    lines += [f"  {c.name:<12} {c.value:.4f}" for c in report.components if c.name.count("_") < 2 or c.name == "rate_hz"]
    if report.ledger is not None:
        lines.append(f"  ledger {'verified' if report.ledger.ok else 'UNVERIFIABLE: ' + str(report.ledger.reason)}")
    lines.append(f"  plan {report.plan_commitment[:16]}  image {str(report.image_digest)[:16]}  "
                 f"verifier {report.verifier_seconds:.1f} s, {report.calls} calls")
    return "\n".join(lines)


def _image(args: argparse.Namespace) -> int:
    from roboswe.sandbox.images import (
        ImageError,
        artifact_cache_dir,
        artifact_recipe,
        build_image,
        load_image,
    )

    try:
        image = (build_image(artifact_recipe(), artifact_cache_dir()) if args.action == "build"
                 else load_image(artifact_cache_dir()))
    except ImageError as e:
        echo(f"roboswe rle image: {e}", file=sys.stderr)
        return 2
    echo(f"digest      {image.digest}\nrootfs      {image.rootfs}\ndocker tag  {image.docker_tag or '(not imported)'}"
         f"\nbuilt in    {image.build_seconds:.0f} s")
    return 0


def run_index(args: argparse.Namespace) -> int:
    from .index import PoolingError, render_index, rle_index
    from .rundir import is_rle_run, read_report

    reports = []
    for run_dir in args.run_dirs:
        if not is_rle_run(run_dir):
            echo(f"roboswe index: {run_dir} is not an RLE run directory (no rle.json)", file=sys.stderr)
            return 2
        try:
            reports.append(read_report(run_dir))
        except (OSError, msgspec.DecodeError, msgspec.ValidationError) as e:
            echo(f"roboswe index: {run_dir}: no usable report.json ({e})", file=sys.stderr)
            return 2
    try:
        index = rle_index(reports)
    except PoolingError as e:
        echo(f"roboswe index: {e}", file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.write(msgspec.json.encode(index, order="sorted").decode() + "\n")
    else:
        echo(render_index(index))
    return 0


def verify_rle_run(run_dir: Path) -> int:
    """`roboswe verify RUN_DIR` for an RLE run: the verifier re-runs the sealed artifact from the revealed
    seeds (replay evidence in RUN_DIR/verify/); exit 0 only when the reward reproduces bit for bit."""
    from .tabletop.runner import ATTEMPT, verify_attempt

    if (run_dir / ATTEMPT).exists():  # family 03: the attempt is re-simulated from its revealed plan
        return verify_attempt(run_dir)
    if (run_dir / "transfer.json").exists():  # family 02: every fresh agent's trial replayed from the revealed plan
        from .transfer.verify import verify_again as verify_transfer

        return verify_transfer(run_dir)
    if (run_dir / "evaluation.json").exists():  # family 01: every hidden-kitchen trial replayed from the revealed plan
        from .kitchen.verify import verify_again

        return verify_again(run_dir)
    out = run_dir.resolve() / "verify"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.run(verifier_command(run_dir.resolve(), "--replay", str(out)), env=env,
                          stdout=subprocess.PIPE, text=True, check=False)
    try:
        verdict = msgspec.json.decode(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    except msgspec.DecodeError:
        verdict = None
    if verdict is None or proc.returncode not in (0, 1):
        echo(f"roboswe verify: the RLE verifier could not replay {run_dir} (exit {proc.returncode})", file=sys.stderr)
        return 2
    if verdict["reproduced"]:
        echo(f"roboswe verify: {run_dir}: reproduced (reward, components and every answer bit for bit)")
        return 0
    for diff in verdict["differences"]:
        echo(f"roboswe verify: {run_dir}: mismatch: {diff}", file=sys.stderr)
    return 1
