"""`roboswe rle demo speedrun [--out RUN_DIR]`: the scripted participant on one kit speed-run subtask, offline.

PickPlaceCounterToDrawer on the kit (RLE-Bench's 04-pick-place-counter-to-drawer, placeholder assets)
at L1 and at L3, each its own RLE run directory under RUN_DIR (``RUN_DIR/<task id>``): development on
public kitchens, seal, evaluation in the five hidden kitchens the public CI salt draws, verification by
replay (runner.py: family 01's own in-process trusted runner, not the actors). Prints each reward
report, the trials, the figures and the RLE Index over both runs.

RoboCasa's kitchen depends on set and dict order, so a live trial and its replay must share
PYTHONHASHSEED=0: the command re-executes itself with it when it is not set.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from roboswe.terminal import echo

DEMO_TASK = "speedrun-kit-pickplacecountertodrawer"
DEMO_LEVELS = ("L1", "L3")


def run_speedrun_demo(out: Path | None) -> int:
    """Exit 0 both levels scored and reproduced, 1 otherwise, 2 the harness could not start."""
    if out is not None and out.exists() and any(out.iterdir()):
        echo(f"roboswe rle demo: {out} is not empty; choose a new run directory", file=sys.stderr)
        return 2
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable, "-m", "roboswe.cli", *sys.argv[1:]],
                  {**os.environ, "PYTHONHASHSEED": "0"})
    os.environ.setdefault("MUJOCO_GL", "egl")  # the L1 policy reads depth images
    from roboswe.agents.rle_speedrun import SpeedrunParticipant

    from ..commands import render_report
    from ..index import render_index, rle_index
    from ..manifest import load_task
    from ..seeds import public_salt
    from .plan import at_level
    from .runner import run_speedrun

    reports, ok = [], True
    with tempfile.TemporaryDirectory(prefix="rle-speedrun-") as tmp:
        root = (out or Path(tmp)).resolve()
        for level in DEMO_LEVELS:
            task = at_level(load_task(DEMO_TASK), level)
            report, figures = run_speedrun(task, SpeedrunParticipant(), public_salt(), root / task.id)
            echo(render_report(report))
            echo(f"  level {level}; privileged keys read: {list(report.privileged) or 'none'}")
            for i, trial in enumerate(figures["evaluate"]["trials"], 1):
                echo(f"  trial {i}: {trial}")
            echo("  figures: " + ", ".join(f"{k} {v}" for k, v in figures.items() if k.endswith(("seconds", "steps"))))
            reports.append(report)
            ok = ok and report.status == "scored" and not figures["replay_differences"]
        echo(render_index(rle_index(reports)))
        if out is not None:
            echo(f"run directories under {root} (`roboswe index {root}/*` pools them)")
    return 0 if ok else 1
