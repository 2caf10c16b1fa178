"""`roboswe export` and `roboswe view`: a run's static viewer site, written or served (see roboswe.viewer)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from roboswe.terminal import echo


def add_arguments_export(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("example: roboswe export runs/demo --out site --table trials.csv   "
                     "(then pandas.read_csv('trials.csv'): one row per slot)")
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory written by `roboswe run`")
    parser.add_argument("--out", type=Path, default=None, metavar="SITE_DIR",
                        help="where to write the site (created; existing viewer files are replaced)")
    parser.add_argument("--table", type=Path, default=None, metavar="FILE",
                        help="also (or, without --out, only) write one row per slot to FILE: .csv, or .parquet "
                             "with pyarrow (model, task, trial, outcome, verdict, steps, times, tokens, cost)")
    parser.add_argument("--chunk", type=int, default=200, help="operations per lazily loaded chunk (default 200)")


def run_export(args: argparse.Namespace) -> int:
    from roboswe.viewer._export import ExportError, export_site
    from roboswe.viewer._table import TableError

    if args.out is None and args.table is None:
        echo("roboswe export: give --out SITE_DIR (the viewer site), --table FILE (the per-slot table), or both",
             file=sys.stderr)
        return 2
    try:
        if args.table is not None:
            written = export_table(args.run_dir, args.table)
            echo(f"table written: {written} (one row per slot)")
        if args.out is not None:
            index = export_site(args.run_dir, args.out, chunk=args.chunk)
            echo(f"viewer written: open {index.resolve().as_uri()}")
    except (ExportError, TableError, FileNotFoundError, LookupError) as e:
        echo(f"roboswe export: {e}", file=sys.stderr)
        return 2
    return 0


def export_table(run_dir: Path, path: Path) -> Path:
    """RUN_DIR's slots as a table file (roboswe.viewer._table); raises TableError, FileNotFoundError."""
    from roboswe.records.reader import RunReader
    from roboswe.records.report import run_summary
    from roboswe.viewer._table import checked_path, trial_rows, write_table

    checked_path(path)  # before reading the run: a typo costs nothing
    with RunReader(run_dir) as reader:
        return write_table(trial_rows(run_summary(reader)), path)


def add_arguments_view(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory written by `roboswe run`")
    parser.add_argument("--port", type=int, default=8765, help="localhost port (default 8765; 0 picks a free one)")
    parser.add_argument("--out", type=Path, default=None,
                        help="site directory (default RUN_DIR/viewer, re-exported on start)")


def run_view(args: argparse.Namespace) -> int:
    from roboswe.viewer._export import ExportError, export_site
    from roboswe.viewer._serve import serve_site

    out = args.out or Path(args.run_dir) / "viewer"
    try:
        export_site(args.run_dir, out)
    except (ExportError, FileNotFoundError, LookupError) as e:
        echo(f"roboswe view: {e}", file=sys.stderr)
        return 2
    return serve_site(out, args.port)
