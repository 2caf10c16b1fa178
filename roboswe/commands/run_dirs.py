"""Run directories: where `up` creates them and how `status`/`logs` find the latest."""

from __future__ import annotations

import time
from pathlib import Path

RUNS_ROOT = Path("runs")


def new_run_dir() -> Path:
    """./runs/<UTC timestamp>, unique even when two runs start in the same second."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    candidate = RUNS_ROOT / stamp
    n = 1
    while candidate.exists():
        n += 1
        candidate = RUNS_ROOT / f"{stamp}-{n}"
    return candidate


def latest_run_dir() -> Path:
    """The most recently started run dir under ./runs; raises FileNotFoundError with a hint."""
    runs = [p for p in RUNS_ROOT.glob("*") if p.is_dir()] if RUNS_ROOT.is_dir() else []
    if not runs:
        raise FileNotFoundError(f"no run dir under {RUNS_ROOT.resolve()}; pass --run-dir DIR or start one with `roboswe up`")
    return max(runs, key=lambda p: (p.stat().st_mtime, p.name))
