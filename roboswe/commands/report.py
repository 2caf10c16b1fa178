"""`roboswe report RUN_DIR [--json]`: print what a run found (see roboswe.records.report)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec

from roboswe.records.report import print_report, run_summary
from roboswe.terminal import echo, terminal_console


def add_arguments_report(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory written by `roboswe run`")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--run-id", default=None, help="which run, when the database holds several")


def run_report(args: argparse.Namespace) -> int:
    from roboswe.records.reader import RunReader
    from roboswe.records.store import StoreError

    try:
        with RunReader(args.run_dir) as reader:
            summary = run_summary(reader, args.run_id)
    except (FileNotFoundError, LookupError, StoreError) as e:
        echo(f"roboswe report: {e}", file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(summary), indent=1).decode() + "\n")
        return 0
    print_report(summary, terminal_console())
    return 0
