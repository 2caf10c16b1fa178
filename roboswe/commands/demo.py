"""`roboswe demo`: the whole pipeline in one command, offline.

Admits the robosuite pilot's Lift task (two fresh simulators must agree on its fingerprint),
runs a 5-trial series with the deterministic demo participant on the best available sandbox
(docker when a daemon answers and the image is imported, else bubblewrap), verifies every
trial by replay, renders the trial videos, exports the viewer and prints the report and the
page to open. Everything lands in ./runs/<timestamp> unless --out says otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from roboswe.terminal import echo, terminal_console

DEMO_TASK = "lift-panda"
DEMO_DATASET = "robosuite-pilot"


def add_arguments_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=None, metavar="RUN_DIR", help="run directory (default ./runs/<timestamp>)")
    parser.add_argument("-e", "--engine", choices=["docker", "bwrap"], default=None,
                        help="sandbox backend (default: docker when available, else bwrap)")


def _say(message: str) -> None:
    echo(f"roboswe demo: {time.strftime('%H:%M:%S')} {message}", flush=True)


def admit_lift(run_dir: Path) -> Path:
    """Admit only the pilot's Lift task (a one-task dataset next to a copy of its manifest); returns admitted.json."""
    from roboswe.evaluation.admission import admit_dataset, write_admitted
    from roboswe.sim.manifest import CONFIGS_DIR, load_dataset

    pilot, _ = load_dataset(DEMO_DATASET)
    if DEMO_TASK not in pilot.tasks:
        raise RuntimeError(f"dataset {DEMO_DATASET!r} no longer lists {DEMO_TASK!r}; the demo needs it")
    root = run_dir / "admission"
    (root / "datasets").mkdir(parents=True, exist_ok=True)
    (root / "tasks").mkdir(exist_ok=True)
    shutil.copyfile(CONFIGS_DIR / "tasks" / f"{DEMO_TASK}.toml", root / "tasks" / f"{DEMO_TASK}.toml")
    (root / "datasets" / "demo-lift.toml").write_text(
        f'id = "demo-lift"\ndescription = "{DEMO_TASK} from {DEMO_DATASET}, for roboswe demo"\ntasks = ["{DEMO_TASK}"]\n')
    admitted = admit_dataset(root / "datasets" / "demo-lift.toml")
    task = admitted.task(DEMO_TASK)
    if task.status != "admitted":
        raise RuntimeError(f"{DEMO_TASK} was not admitted on this machine: {task.reason}")
    path = run_dir / "admitted.json"
    write_admitted(admitted, path)
    return path


def demo_preflight(engine: str | None, run_dir: Path) -> str | None:
    """The refusal to print when the demo could not work here (before minutes of admission), else None."""
    from roboswe.config import load_config
    from roboswe.evaluation.preflight import preflight
    from roboswe.sim.manifest import CONFIGS_DIR, load_manifest

    config_path = CONFIGS_DIR / "runs" / "demo.toml"
    config = load_config(config_path)
    outcome = preflight(provider=config.provider, source=str(config_path),
                        manifests=[load_manifest(CONFIGS_DIR / "tasks" / f"{DEMO_TASK}.toml")],
                        backend=engine or config.series.backend, run_dir=run_dir)
    if not outcome.problems:
        return None
    from roboswe.evaluation.preflight import PreflightRefused

    return PreflightRefused(outcome.problems).report("demo")


def run_demo(args: argparse.Namespace) -> int:
    from roboswe.commands.run import add_arguments_run, run_run
    from roboswe.commands.run_dirs import new_run_dir
    from roboswe.sim.manifest import CONFIGS_DIR

    t0 = time.monotonic()
    run_dir = (args.out or new_run_dir()).resolve()
    if (run_dir / "run.sqlite").exists():
        echo(f"roboswe demo: {run_dir} already holds a run; choose another --out", file=sys.stderr)
        return 2
    refusal = demo_preflight(args.engine, run_dir)
    if refusal:
        echo(refusal, file=sys.stderr)
        return 2
    run_dir.mkdir(parents=True, exist_ok=True)
    from roboswe.logs import configure_logging

    # The admission's log lines go to the run's events.jsonl (`roboswe logs`), not into the demo's own lines.
    configure_logging(run_dir=run_dir, actor="demo", console=False)
    _say(f"run dir {run_dir}")
    _say(f"1/4 admitting {DEMO_TASK}: building it in two fresh simulators, fingerprints must agree")
    try:
        admitted = admit_lift(run_dir)
    except Exception as e:  # noqa: BLE001 - any admission failure ends the demo with its reason
        echo(f"roboswe demo: admission failed: {e}", file=sys.stderr)
        return 1
    _say(f"   admitted ({time.monotonic() - t0:.0f} s)")
    _say("2/4 running a 5-trial series with the demo participant, then replaying each trial and rendering videos")
    # Parsed by `roboswe run`'s own parser, so every option it has gets its default.
    run_parser = argparse.ArgumentParser(prog="roboswe run")
    add_arguments_run(run_parser)
    run_args = run_parser.parse_args([str(admitted), "--config", str(CONFIGS_DIR / "runs" / "demo.toml"),
                                      "--out", str(run_dir), "--tasks", DEMO_TASK, "--preflight", "offline",
                                      *(["--engine", args.engine] if args.engine else [])])
    code = run_run(run_args, outcome=False)  # the report (4/4) shows the trial table, once
    if not (run_dir / "run.sqlite").exists():
        echo("roboswe demo: the run recorded nothing; see the messages above and "
             f"{run_dir / 'actors'} for each actor's log", file=sys.stderr)
        return code or 1
    _say("3/4 exporting the viewer")
    from roboswe.viewer import export_site

    index = export_site(run_dir, run_dir / "viewer")
    _say("4/4 report")
    from roboswe.records.reader import RunReader
    from roboswe.records.report import print_report, run_summary

    with RunReader(run_dir) as reader:
        summary = run_summary(reader)
    print_report(summary, terminal_console())
    minutes, seconds = divmod(int(time.monotonic() - t0), 60)
    echo(f"\nroboswe demo: done in {minutes} min {seconds} s. Open the viewer: {index.resolve().as_uri()}")
    echo(f"  (or serve it: roboswe view {run_dir}; terminal summary: roboswe report {run_dir})")
    return code
