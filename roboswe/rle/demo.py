"""`roboswe rle demo pose [--out RUN_DIR]`: the whole RLE-Bench protocol offline, through the actors.

It is `roboswe run --config configs/runs/rle-pose-demo.toml` (run.py: the supervisor's actors, one
development session of the task with the scripted participant, configs/agents/rle_pose_demo, as the
provider client actor's `python` participant; the seal, the RLE run directory, the verifier process),
then the development summary, the reward report and the index. `roboswe verify RUN_DIR` and
`roboswe index RUN_DIR` work on the result.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from roboswe.configs import CONFIGS_DIR
from roboswe.terminal import echo

DEMO_CONFIG = CONFIGS_DIR / "runs" / "rle-pose-demo.toml"
DEMO_TASKS = {"pose": ("pose-rgbd", "pose-rgb")}
"""`rle demo NAME` → the RLE tasks its participant develops for (the first by default)."""


def run_demo(name: str, out: Path | None, *, backend: str | None = None, task: str | None = None) -> int:
    """The demo's exit status: 0 scored, 1 the report is not scored, 2 the harness failed."""
    if task is not None and task not in DEMO_TASKS[name]:
        echo(f"roboswe rle demo: the {name} demo develops for {', '.join(DEMO_TASKS[name])}, not {task}", file=sys.stderr)
        return 2
    if out is not None and out.exists() and any(out.iterdir()):
        echo(f"roboswe rle demo: {out} is not empty; choose a new run directory", file=sys.stderr)
        return 2
    os.environ.setdefault("MUJOCO_GL", "egl")
    with tempfile.TemporaryDirectory(prefix="rle-demo-") as tmp:
        run_dir = (out or Path(tmp) / "run").resolve()
        code = run_config(DEMO_CONFIG, run_dir, task or DEMO_TASKS[name][0], backend)
        if out is not None:
            echo(f"run directory {run_dir} (`roboswe verify {run_dir}` replays it)")
    return code


def run_config(config: Path, run_dir: Path, task: str, backend: str | None = None, *, index: bool = True) -> int:
    """`roboswe run --config CONFIG --tasks rle/TASK --out RUN_DIR`, then its outcome printed (its own index
    only with ``index``): 0 scored, 1 the report is not scored, 2 the run ended without one."""
    from roboswe.commands.run import add_arguments_run, run_run

    from .run import print_rle_outcome
    from .rundir import REPORT, read_report

    parser = argparse.ArgumentParser(prog="roboswe run")  # `roboswe run`'s own parser: every option gets its default
    add_arguments_run(parser)
    args = parser.parse_args(["--config", str(config), "--out", str(run_dir), "--tasks", f"rle/{task}",
                              "--preflight", "offline", *(["--engine", backend] if backend else [])])
    code = run_run(args, outcome=False)
    if not (run_dir / REPORT).exists():
        echo(f"roboswe rle demo: the run ended without a reward report (exit {code}); each actor's log is under "
             f"{run_dir / 'actors'}", file=sys.stderr)
        return 2
    print_rle_outcome(run_dir, index=index)
    return 0 if read_report(run_dir).status == "scored" else 1
