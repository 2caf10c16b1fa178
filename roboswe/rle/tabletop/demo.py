"""`roboswe rle demo tabletop [--out RUN_DIR]`: the scripted participants on family 03's four tasks, offline.

Each task is one attempt (runner.py) on its hidden instance drawn with the public CI salt, in its own
RLE run directory under RUN_DIR (`RUN_DIR/tabletop-tower`, ...); each is replayed from its revealed
plan and must reproduce; the reward reports and the RLE Index over the four are printed.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from roboswe.terminal import echo

from ..manifest import load_task
from ..seeds import public_salt
from . import participants

DEMO = {
    "tabletop-tower": participants.tower,
    "tabletop-cantilever": participants.cantilever,
    "tabletop-balance": participants.balance,
    "tabletop-com": participants.probe_com,
}
"""Each task and the scripted participant that attempts it in the demo."""


def run_tabletop_demo(out: Path | None) -> int:
    """Exit 0 all four scored and reproduced, 1 otherwise, 2 the harness failed."""
    from ..commands import render_report
    from ..index import render_index, rle_index
    from .runner import replay_run, run_attempt

    if out is not None and out.exists() and any(out.iterdir()):
        echo(f"roboswe rle demo: {out} is not empty; choose a new run directory", file=sys.stderr)
        return 2
    os.environ.setdefault("MUJOCO_GL", "egl")  # Hidden COM's participant reads camera images
    reports, ok = [], True
    with tempfile.TemporaryDirectory(prefix="rle-tabletop-") as tmp:
        root = (out or Path(tmp)).resolve()
        for task_id, participant in DEMO.items():
            run_dir = root / task_id
            report, summary = run_attempt(load_task(task_id), participant, public_salt(), run_dir)
            diffs = replay_run(run_dir)
            echo(render_report(report))
            echo(f"  participant: {summary}")
            echo(f"  replay: {'reproduced bit for bit' if not diffs else 'MISMATCH: ' + '; '.join(diffs)}")
            reports.append(report)
            ok = ok and report.status == "scored" and not diffs
        echo(render_index(rle_index(reports)))
        if out is not None:
            echo(f"run directories under {root} (`roboswe index {root}/*` pools them)")
    return 0 if ok else 1
