"""`roboswe export` and `roboswe view`: a run's static viewer site, written or served (see roboswe.viewer)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from roboswe.terminal import echo


def add_arguments_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory written by `roboswe run`")
    parser.add_argument("--out", type=Path, required=True, metavar="SITE_DIR",
                        help="where to write the site (created; existing viewer files are replaced)")
    parser.add_argument("--chunk", type=int, default=200, help="operations per lazily loaded chunk (default 200)")


def run_export(args: argparse.Namespace) -> int:
    from roboswe.viewer._export import ExportError, export_site

    try:
        index = export_site(args.run_dir, args.out, chunk=args.chunk)
    except (ExportError, FileNotFoundError, LookupError) as e:
        echo(f"roboswe export: {e}", file=sys.stderr)
        return 2
    echo(f"viewer written: open {index.resolve().as_uri()}")
    return 0


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
