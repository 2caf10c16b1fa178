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
    parser.epilog = ("example: roboswe view --live runs/demo   (while `roboswe run` writes runs/demo: the index shows "
                     "the snapshot's time and its running and pending slots, and reloads on each re-export)")
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory written by `roboswe run`")
    parser.add_argument("--port", type=int, default=8765, help="localhost port (default 8765; 0 picks a free one)")
    parser.add_argument("--out", type=Path, default=None,
                        help="site directory (default RUN_DIR/viewer, re-exported on start)")
    parser.add_argument("--live", action="store_true",
                        help="while the run goes, export again whenever its database or events.jsonl change; the "
                             "index reloads itself on a new snapshot; Ctrl-C stops (the last export stays)")
    parser.add_argument("--every", type=float, default=5.0, metavar="SECONDS",
                        help="with --live: the pause after an export before looking for a change, and how often the "
                             "page looks for a new snapshot (default 5: an export of a small run takes 1-3 s of a core)")


def run_view(args: argparse.Namespace) -> int:
    from roboswe.viewer._export import ExportError, export_site
    from roboswe.viewer._serve import serve_site

    out = args.out or Path(args.run_dir) / "viewer"
    if args.live and not 0 < args.every <= 3600:
        echo(f"roboswe view: --every {args.every}: expected a positive number of seconds, at most 3600", file=sys.stderr)
        return 2
    try:
        export_site(args.run_dir, out, refresh=args.every if args.live else None)
    except (ExportError, FileNotFoundError, LookupError) as e:
        echo(f"roboswe view: {e}", file=sys.stderr)
        return 2
    if not args.live:
        return serve_site(out, args.port)
    return _serve_live(Path(args.run_dir), out, args.port, args.every)


def _serve_live(run_dir: Path, site: Path, port: int, every: float) -> int:
    """Serve ``site`` from a thread while this one re-exports it on each change of the run (viewer._live).

    Ctrl-C (or SIGTERM) stops it after the export in progress, if any: the site is never left half-moved."""
    import signal
    import threading

    from roboswe.viewer._live import follow
    from roboswe.viewer._serve import make_server

    try:
        server = make_server(site, port)
    except OSError as e:
        echo(f"roboswe view: cannot listen on 127.0.0.1:{port}: {e.strerror}; pick another --port", file=sys.stderr)
        return 2
    thread = threading.Thread(target=server.serve_forever, name="view-server", daemon=True)
    thread.start()
    echo(f"roboswe view: serving {site} at http://127.0.0.1:{server.server_address[1]}/ live: re-exported within "
         f"{every:g} s of a change to {run_dir}'s database or events (Ctrl-C stops)", flush=True)
    stop = threading.Event()
    # set, not ignored: a shell starts a background job with SIGINT ignored, and --live must still stop on it
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        follow(run_dir, site, every, say=lambda line: echo(line, flush=True), stop=stop)
        echo(f"roboswe view: stopped; the last export stays in {site}", flush=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.shutdown()
        server.server_close()
        thread.join(5)
    return 0
