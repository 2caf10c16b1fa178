"""`roboswe status`: one row per actor of a run, from the supervisor's state file and live Statistics."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from roboswe.sandbox import pid_alive


def add_arguments_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", type=Path, default=None, help="run directory (default: the latest under ./runs)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run_status(args: argparse.Namespace) -> int:
    from roboswe.actors.supervisor import STATE_FILE
    from roboswe.commands.run_dirs import latest_run_dir

    try:
        run_dir = (args.run_dir or latest_run_dir()).resolve()
    except FileNotFoundError as e:
        print(f"roboswe status: {e}", file=sys.stderr)
        return 2
    try:
        state = json.loads((run_dir / STATE_FILE).read_text())
    except FileNotFoundError:
        print(f"roboswe status: {run_dir / STATE_FILE} not found; was this run started with `roboswe up`?", file=sys.stderr)
        return 2
    supervisor_alive = pid_alive(state.get("supervisor_pid"))
    if not supervisor_alive and state["state"] in ("starting", "running", "stopping"):
        state["state"] = "dead (supervisor gone)"
    statistics = _query_statistics(state) if supervisor_alive and state["state"] == "running" else {}
    now = time.time()
    rows = []
    for name, actor in state["actors"].items():
        stats = statistics.get(name)
        rows.append({
            "actor": name,
            "pid": actor["pid"],
            "state": actor["state"],
            "heartbeat_age": None if actor["last_heartbeat"] is None else round(now - actor["last_heartbeat"], 2),
            "restarts": actor["restarts"],
            "uptime": stats and round(stats["uptime"], 2),
            "busy": stats and round(stats["uptime"] - stats["idle"], 3),
            "idle": stats and round(stats["idle"], 2),
            "handled": stats and sum(stats["handled"].values()),
            "waiting": stats and round(sum(stats["waiting"].values()), 3),
            "errors": stats and stats["errors"],
            "last_exit": actor["last_exit"],
        })
    if args.json or not sys.stdout.isatty():
        print(json.dumps({"run_dir": str(run_dir), "state": state["state"], "failure": state.get("failure"), "actors": rows}, indent=1))
        return 0
    from rich import box
    from rich.console import Console
    from rich.table import Table

    # Fits 80 columns; --json has every figure (idle, waiting).
    headers = {"actor": "actor", "pid": "pid", "state": "state", "heartbeat_age": "hb s", "restarts": "restarts",
               "uptime": "up s", "busy": "busy s", "handled": "msgs", "errors": "errors"}
    if any(row["last_exit"] for row in rows):
        headers["last_exit"] = "last exit"
    table = Table(title=f"{run_dir}  [{state['state']}]", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for key, header in headers.items():
        table.add_column(header, justify="left" if key in ("actor", "state", "last_exit") else "right",
                         no_wrap=key != "last_exit")
    for row in rows:
        table.add_row(*(_cell(row[key]) for key in headers))
    Console().print(table)
    if state.get("failure"):
        print(f"failure: {state['failure']}")
    return 0


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.1f}" if value >= 10 else f"{value:.2f}"
    return str(value)




def _query_statistics(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Ask every ready actor for its Statistics, 2 s in all; silent actors are left out."""
    import msgspec
    import trio

    from roboswe.actors import Client
    from roboswe.logs import configure_logging
    from roboswe.protocol.control import CONTROL_CODEC, StatisticsRequest

    configure_logging(run_dir=None, console=False, level="error")
    results: dict[str, dict[str, Any]] = {}

    async def ask(name: str, endpoint: str) -> None:
        try:
            async with Client("status", endpoint, CONTROL_CODEC, peer=name) as link:
                reply = await link.request(StatisticsRequest())
                results[name] = msgspec.to_builtins(reply.message)
        except Exception:
            pass

    async def main() -> None:
        with trio.move_on_after(2):
            async with trio.open_nursery() as nursery:
                for name, actor in state["actors"].items():
                    if actor["state"] == "ready":
                        nursery.start_soon(ask, name, actor["endpoint"])

    trio.run(main)
    return results
