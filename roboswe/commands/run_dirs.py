"""Run directories: where `up` creates them and how `status`/`logs` find the latest."""

from __future__ import annotations

import argparse
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


def add_run_dir_argument(parser: argparse.ArgumentParser) -> None:
    """RUN_DIR as `report` takes it (positional), or --run-dir; neither: the latest under ./runs."""
    parser.add_argument("run_dir", nargs="?", type=Path, default=None, metavar="RUN_DIR",
                        help="run directory (default: the latest under ./runs)")
    parser.add_argument("--run-dir", dest="run_dir_option", type=Path, default=None, metavar="RUN_DIR",
                        help="the same, as an option")


def chosen_run_dir(args: argparse.Namespace) -> Path:
    """The run directory the arguments name (raises ValueError when they name two, FileNotFoundError as latest_run_dir)."""
    given = [p for p in (args.run_dir, getattr(args, "run_dir_option", None)) if p is not None]
    if len(given) == 2 and given[0].resolve() != given[1].resolve():
        raise ValueError(f"two run directories given ({given[0]} and --run-dir {given[1]}); pass one")
    return (given[0] if given else latest_run_dir()).resolve()
