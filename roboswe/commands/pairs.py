"""`roboswe pairs RUN_DIR... --out DIR [--seed N]`: blinded pairwise rating files for round-3 canvases.

RoboPaint's optional human comparison: every same-goal pair of the runs' round-3 canvases, under
anonymous names, sides and order shuffled with a recorded seed (roboswe/viewer/_gallery.py).
Raters get DIR/pairs.json and the PNGs; DIR/key.json maps the names back and stays with whoever
collects the ratings.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from roboswe.terminal import echo


def add_arguments_pairs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR", help="run directories (typically one model each)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="where pairs.json, key.json and the PNGs go")
    parser.add_argument("--seed", type=int, default=None, help="the shuffle's seed (default: drawn, and recorded in pairs.json)")


def run_pairs(args: argparse.Namespace) -> int:
    from roboswe.records.store import StoreError
    from roboswe.viewer._gallery import export_pairs

    try:
        summary = export_pairs(args.runs, args.out, args.seed)
    except (FileNotFoundError, LookupError, StoreError, OSError) as e:
        echo(f"roboswe pairs: {e}", file=sys.stderr)
        return 2
    echo(f"{summary['pairs']} pairs of {summary['canvases']} round-3 canvases, seed {summary['seed']}: {args.out / 'pairs.json'}")
    return 0
