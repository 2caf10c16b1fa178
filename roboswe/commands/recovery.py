"""`roboswe recovery RUN_DIR [--json]`: within-trial mishaps and recoveries (see roboswe.records.recovery).

A diagnostic of RoboSWE-ADAPT: never a penalty, never part of A or Q. It rebuilds each task's scene
(seconds for a robosuite task), reads the recorded states through it, prints the result and saves
it as RUN_DIR/recovery.json, which `roboswe report` shows.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import msgspec

from roboswe.terminal import echo, terminal_console


def add_arguments_recovery(parser: argparse.ArgumentParser) -> None:
    from roboswe.records.recovery import RULES_PATH

    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory written by `roboswe run`")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--run-id", default=None, help="which run, when the database holds several")
    parser.add_argument("--rules", type=Path, default=RULES_PATH, help=f"rules per task (default {RULES_PATH})")


def run_recovery(args: argparse.Namespace) -> int:
    if sys.flags.hash_randomization:
        # The scenes are rebuilt as the simulator builds them, with a fixed hash seed (set iteration
        # order can shape a scene); without it a fingerprint could differ and a trial go unmeasured.
        os.execve(sys.executable, [sys.executable, "-m", "roboswe.cli", *sys.argv[1:]], {**os.environ, "PYTHONHASHSEED": "0"})
    from roboswe.logs import configure_logging
    from roboswe.records.reader import RunReader
    from roboswe.records.recovery import (
        RecoveryError,
        print_recovery,
        run_recovery,
        save_recovery,
    )
    from roboswe.records.store import StoreError

    configure_logging(run_dir=None, actor="recovery", level="warning", console=False)  # stdout is the result
    try:
        with RunReader(args.run_dir) as reader:
            data = run_recovery(reader, args.run_id, rules_path=args.rules)
    except (FileNotFoundError, LookupError, StoreError, RecoveryError) as e:
        echo(f"roboswe recovery: {e}", file=sys.stderr)
        return 2
    save_recovery(args.run_dir, data)
    if args.json:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(data), indent=1).decode() + "\n")
    else:
        print_recovery(data, terminal_console())
    return 0
