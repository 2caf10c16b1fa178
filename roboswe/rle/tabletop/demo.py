"""`roboswe rle demo tabletop [--out RUN_DIR]`: the scripted participants on family 03's four tasks, offline.

Each task is one RLE run through the actors (`roboswe run --config configs/runs/rle-tabletop-demo.toml
--tasks rle/TASK`, roboswe/rle/demo.py run_config: the scripted participant of
configs/agents/rle_tabletop_demo as a sandboxed script, its hidden instance drawn on the simulator's side
with the public CI salt, the attempt ended and scored there) in its own directory under RUN_DIR
(`RUN_DIR/tabletop-tower`, ...); each is then replayed from its revealed plan and must reproduce; the
reward reports and one RLE Index over the four are printed.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from roboswe.configs import CONFIGS_DIR
from roboswe.terminal import echo

DEMO_CONFIG = CONFIGS_DIR / "runs" / "rle-tabletop-demo.toml"
DEMO_TASKS = ("tabletop-tower", "tabletop-cantilever", "tabletop-balance", "tabletop-com")


def run_tabletop_demo(out: Path | None) -> int:
    """Exit 0 all four scored and reproduced, 1 otherwise, 2 the harness failed."""
    from ..demo import run_config
    from ..index import render_index, rle_index
    from ..rundir import read_report
    from .runner import replay_run

    if out is not None and out.exists() and any(out.iterdir()):
        echo(f"roboswe rle demo: {out} is not empty; choose a new run directory", file=sys.stderr)
        return 2
    os.environ.setdefault("MUJOCO_GL", "egl")  # Hidden COM's participant reads camera images
    reports, code = [], 0
    with tempfile.TemporaryDirectory(prefix="rle-tabletop-") as tmp:
        root = (out or Path(tmp)).resolve()
        for task_id in DEMO_TASKS:
            run_dir = root / task_id
            done = run_config(DEMO_CONFIG, run_dir, task_id, index=False)  # one index over the four, at the end
            if done == 2:
                return done
            diffs = replay_run(run_dir)
            echo(f"  replay: {'reproduced bit for bit' if not diffs else 'MISMATCH: ' + '; '.join(diffs)}")
            reports.append(read_report(run_dir))
            code = code or done or (1 if diffs else 0)
        echo(render_index(rle_index(reports)))
        if out is not None:
            echo(f"run directories under {root} (`roboswe verify {root}/<task>` replays one; "
                 f"`roboswe index {root}/*` pools them)")
    return code
