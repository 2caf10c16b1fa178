"""`roboswe logs`: read, filter and follow a run's events.jsonl."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from roboswe.commands.run_dirs import add_run_dir_argument
from roboswe.terminal import echo


def add_arguments_logs(parser: argparse.ArgumentParser) -> None:
    from roboswe.logs import LEVELS

    add_run_dir_argument(parser)
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing new events until interrupted")
    parser.add_argument("--actor", default=None, help="only events of this actor (e.g. simulator, supervisor)")
    parser.add_argument("--series", default=None, metavar="SERIES_ID",
                        help="only events of this series (its id, RUN/TASK, or just the task id)")
    parser.add_argument("--level", default="debug", choices=LEVELS, help="only events at this level or above")
    parser.add_argument("--json", action="store_true", help="print the raw JSON lines (default: one line of text per event, "
                                                            "on a terminal or piped)")


def run_logs(args: argparse.Namespace) -> int:
    from roboswe.commands.run_dirs import chosen_run_dir
    from roboswe.logs import EVENTS_FILE, LEVELS

    try:
        run_dir = chosen_run_dir(args)
    except (FileNotFoundError, ValueError) as e:
        echo(f"roboswe logs: {e}", file=sys.stderr)
        return 2
    path = run_dir / EVENTS_FILE
    if not path.exists() and not args.follow:
        echo(f"roboswe logs: {path} not found; is {run_dir} a run dir?", file=sys.stderr)
        return 2
    threshold = LEVELS.index(args.level)
    pretty = not args.json  # piped or not: JSON is what --json asks for

    def show(line: str) -> None:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            return  # a line still being written; --follow picks it up whole next time
        if not isinstance(event, dict):
            return  # not an event (every line the loggers write is an object)
        if args.actor and event.get("actor") != args.actor:
            return
        if args.series and not in_series(event, args.series):
            return
        if LEVELS.index(event.get("level", "info")) < threshold if event.get("level") in LEVELS else False:
            return
        if pretty:  # one line per event, whatever its fields hold
            echo(_pretty(event), multiline=False, flush=True)
        else:  # the JSON line as written: it parsed, so it holds no raw C0 control (ESC, BEL, CR)
            print(line.rstrip("\n"), flush=True)

    try:
        _read(path, show, follow=args.follow)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        sys.stderr.close()
    return 0


def in_series(event: dict[str, Any], series: str) -> bool:
    """Whether an event was logged while ``series`` (a series id, or the task id in it) was bound."""
    bound = event.get("series")
    if not isinstance(bound, str):
        return False
    return bound == series or bound.split("/")[1:2] == [series]


def _read(path: Path, show, *, follow: bool) -> None:
    while follow and not path.exists():
        time.sleep(0.25)
    with open(path) as events:
        partial = ""
        while True:
            chunk = events.readline()
            if chunk:
                partial += chunk
                if partial.endswith("\n"):
                    show(partial)
                    partial = ""
                continue
            if not follow:
                if partial:
                    show(partial)
                return
            time.sleep(0.25)  # like `tail -f`: a CLI reader may poll a file


def _pretty(event: dict[str, Any]) -> str:
    """The event as one line for people (escaped by the caller); fields of any type are shown with str()."""
    fields = " ".join(f"{k}={v}" for k, v in event.items() if k not in ("time", "level", "actor", "event", "pid"))
    head = {k: str(event.get(k, default)) for k, default in (("time", ""), ("level", ""), ("actor", "-"), ("event", ""))}
    return f"{head['time'][11:23]} {head['level']:7} {head['actor']:16} {head['event']}  {fields}"
