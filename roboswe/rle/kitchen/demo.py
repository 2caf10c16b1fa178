"""`roboswe rle demo speedrun [--out RUN_DIR]`: the scripted participant on one kit speed-run subtask, offline.

PickPlaceCounterToDrawer on the kit (RLE-Bench's 04-pick-place-counter-to-drawer, placeholder assets) at L1
and at L3, each an RLE run through the actors (`roboswe run --config configs/runs/rle-speedrun-demo.toml`,
roboswe/rle/run.py and runner.py) in its own directory under RUN_DIR (``RUN_DIR/<task id>``): development on
public kitchens, seal, evaluation in the five hidden kitchens the public CI salt draws on the simulator's
side, verification by replay. Prints each development summary, reward report and trial, and the RLE Index
over both runs.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import msgspec

from roboswe.configs import CONFIGS_DIR
from roboswe.terminal import echo

DEMO_CONFIG = CONFIGS_DIR / "runs" / "rle-speedrun-demo.toml"
DEMO_TASK = "speedrun-kit-pickplacecountertodrawer"
DEMO_LEVELS = ("L1", "L3")


def run_speedrun_demo(out: Path | None) -> int:
    """Exit 0 both levels scored, 1 otherwise, 2 the harness could not start or ended without a report."""
    if out is not None and out.exists() and any(out.iterdir()):
        echo(f"roboswe rle demo: {out} is not empty; choose a new run directory", file=sys.stderr)
        return 2
    os.environ.setdefault("MUJOCO_GL", "egl")  # the L1 policy reads depth images
    from ..index import render_index, rle_index
    from ..rundir import read_report

    reports, code = [], 0
    with tempfile.TemporaryDirectory(prefix="rle-speedrun-") as tmp:
        root = (out or Path(tmp)).resolve()
        for level in DEMO_LEVELS:
            task_id = DEMO_TASK if level == "L1" else f"{DEMO_TASK}-{level.lower()}"
            run_dir = root / task_id
            done = _run(run_dir, task_id)
            if done == 2:
                return done
            reports.append(read_report(run_dir))
            code = code or done
        echo(render_index(rle_index(reports)))
        if out is not None:
            echo(f"run directories under {root} (`roboswe verify {root}/<task>` replays one; "
                 f"`roboswe index {root}/*` pools them)")
    return code


def _run(run_dir: Path, task_id: str) -> int:
    """One level's run (roboswe/rle/demo.py run_config: `roboswe run` and its outcome), then its trials."""
    from ..demo import run_config
    from .evaluation import EVALUATION, EvaluationRecord

    code = run_config(DEMO_CONFIG, run_dir, task_id, index=False)  # one index over both levels, at the end
    if code == 2:
        return code
    record = msgspec.json.decode((run_dir / EVALUATION).read_bytes(), type=EvaluationRecord)
    echo(f"  privileged keys read: {list(record.privileged) or 'none'}")
    for trial in record.trials:
        echo(f"  trial {trial.index + 1}: {trial.ended}, {len(trial.rows)} actions, "
             f"{'solved' if trial.success else 'not solved'} (the live simulator's word; the replay decided the report)")
    return code
