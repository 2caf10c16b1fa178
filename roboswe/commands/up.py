"""`roboswe up`: start the supervisor in the foreground with all six actors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from roboswe.terminal import echo


def add_arguments_up(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", type=Path, default=None, help="run directory (default: ./runs/<timestamp>)")
    parser.add_argument("--config", type=Path, default=None, help="run config TOML (default: built-in defaults)")


def run_up(args: argparse.Namespace) -> int:
    import trio

    from roboswe.actors.supervisor import Supervisor
    from roboswe.commands.run_dirs import new_run_dir
    from roboswe.config import ConfigError, load_config
    from roboswe.logs import bind_context, configure_logging

    try:
        config = load_config(args.config)
    except ConfigError as e:
        echo(f"roboswe up: {e}", file=sys.stderr)
        return 2
    run_dir = (args.run_dir or new_run_dir()).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    configure_logging(run_dir=run_dir, actor="supervisor", level=config.logging.level)
    bind_context(run=run_dir.name)
    supervisor = Supervisor(run_dir, config, args.config)

    def announce(sup: Supervisor) -> None:
        echo(f"roboswe: ready ({len(sup.slots)} actors) run-dir={run_dir}", flush=True)

    code = trio.run(supervisor.run, announce)
    if supervisor.failure:
        echo(f"roboswe: stopped: {supervisor.failure}", file=sys.stderr)
    return code
