"""`roboswe status`: one row per actor of a run, from the supervisor's state file and live Statistics,
and each worker's state and series from the coordinator's roster (roboswe/fleet/roster.py) with its
processes: a local worker's are the supervisor's actors (simulator.2, ...), grouped under it; a Ray
worker's (`run --ray`) figures are the coordinator's last sample."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roboswe.commands.run_dirs import add_run_dir_argument
from roboswe.fleet.roster import LOCAL, read_roster
from roboswe.sandbox import pid_alive
from roboswe.terminal import echo, plain, terminal_console

if TYPE_CHECKING:
    from roboswe.actors.supervisor import SupervisorState

STALE = "stale (run gone)"
WORKER_PROCESSES = ("simulator", "sandbox_bridge")  # a Ray worker's; a local worker has WORKER_ACTORS
RAY_NOTE = ("Ray workers' figures are sampled by the run's coordinator over its own CURVE links (the client key "
            "stays in its memory); `roboswe status` reads them from fleet/workers.json and contacts no node.")


def add_arguments_status(parser: argparse.ArgumentParser) -> None:
    add_run_dir_argument(parser)
    parser.add_argument("--json", action="store_true",
                        help="print JSON instead of the tables (piped too); an actor's figures are there when it answered")


def run_status(args: argparse.Namespace) -> int:
    from roboswe.actors.supervisor import STATE_FILE, SupervisorStateError, read_state
    from roboswe.commands.run_dirs import chosen_run_dir

    try:
        run_dir = chosen_run_dir(args)
    except (FileNotFoundError, ValueError) as e:
        echo(f"roboswe status: {e}", file=sys.stderr)
        return 2
    try:
        state = read_state(run_dir)
    except FileNotFoundError:
        echo(f"roboswe status: {run_dir / STATE_FILE} not found; was this run started with `roboswe up`?", file=sys.stderr)
        return 2
    except SupervisorStateError as e:
        echo(f"roboswe status: {e}", file=sys.stderr)
        return 2
    report = status_report(run_dir, state)
    if args.json:
        print(json.dumps(report, indent=1))  # ASCII: every control and non-ASCII character as \uXXXX
        return 0
    print_report(report, terminal_console())
    return 0


def status_report(run_dir: Path, state: SupervisorState) -> dict[str, Any]:
    """What `roboswe status` shows: the supervisor's actors (asked for Statistics while the run lives) and the workers."""
    supervisor_alive = pid_alive(state.supervisor_pid)
    shown = state.state
    if not supervisor_alive and shown in ("starting", "running", "stopping"):
        shown = "dead (supervisor gone)"
    statistics = _query_statistics(state) if supervisor_alive and shown == "running" else {}
    now = time.time()
    rows = []
    for name, actor in state.actors.items():
        rows.append({
            "actor": name,
            "pid": actor.pid,
            "state": actor.state,
            "heartbeat_age": None if actor.last_heartbeat is None else round(now - actor.last_heartbeat, 2),
            "restarts": actor.restarts,
            **_figures(statistics.get(name)),
            "last_exit": actor.last_exit,
        })
    report = {"run_dir": str(run_dir), "state": shown, "failure": state.failure, "actors": rows}
    roster = _workers(run_dir, rows, supervisor_alive, now)
    if roster is not None:
        report["workers_address"], report["workers"] = roster
        if report["workers_address"] not in (None, LOCAL):
            report["workers_note"] = RAY_NOTE
    return report


def _figures(stats: dict[str, Any] | None) -> dict[str, Any]:
    """The columns one actor's Statistics give; none when it did not answer (a stopped run's actors)."""
    if stats is None:
        return {}
    return {
        "uptime": round(stats["uptime"], 2),
        "busy": round(stats["uptime"] - stats["idle"], 3),
        "idle": round(stats["idle"], 2),
        "handled": sum(stats["handled"].values()),
        "waiting": round(sum(stats["waiting"].values()), 3),
        "errors": stats["errors"],
    }


def _workers(run_dir: Path, actors: list[dict[str, Any]], supervisor_alive: bool,
             now: float) -> tuple[str | None, list[dict[str, Any]]] | None:
    """The roster's address and one entry per worker with its processes: a local worker's are its rows
    in ``actors``, a Ray worker's are the last sampled figures; None without a roster."""
    import msgspec

    from roboswe.config import WORKER_ACTORS, worker_name
    from roboswe.fleet.node import boot_id

    try:
        roster = read_roster(run_dir)
    except (msgspec.DecodeError, OSError) as e:
        return None, [{"number": None, "state": f"unreadable roster: {e}"}]
    if roster is None:
        return None
    by_name = {row["actor"]: row for row in actors}
    # A pid means something only on the machine that wrote it; elsewhere the supervisor's liveness decides.
    writer_alive = pid_alive(roster.writer_pid) if roster.writer_boot_id == boot_id() else True
    live = supervisor_alive and writer_alive
    workers = []
    for w in roster.workers:
        worker = msgspec.to_builtins(w)
        if not live and w.state != "released":
            worker["state"] = STALE
        worker["state_age"] = round(now - w.since, 2)
        worker["sample_age"] = None if w.sampled_at is None else round(now - w.sampled_at, 2)
        if roster.address == LOCAL:  # its actors, as the supervisor and their own Statistics tell
            names = {kind: worker_name(kind, w.number, len(roster.workers)) for kind in WORKER_ACTORS}
            worker["processes"] = {kind: by_name[name] for kind, name in names.items() if name in by_name}
            worker["pids"] = {kind: p["pid"] for kind, p in worker["processes"].items() if p["pid"] is not None}
        else:
            worker["processes"] = {kind: {"pid": w.pids.get(kind), **_figures(w.statistics.get(kind))}
                                   for kind in WORKER_PROCESSES}
        del worker["statistics"]  # summed into "processes" as the actors' rows are; the raw sample is in the file
        workers.append(worker)
    return roster.address, workers


def print_report(report: dict[str, Any], console: Any) -> None:
    """The report as tables that fit 80 columns (--json has every figure: idle, waiting, endpoints).

    Every string from the run's files is printed as text (``plain``): escaped, never read as markup.
    """
    local = report.get("workers_address") == LOCAL
    # A local worker's actors are listed under it, not twice.
    grouped = {p["actor"] for w in report.get("workers", ()) for p in w["processes"].values()} if local else set()
    rows = [row for row in report["actors"] if row["actor"] not in grouped]
    console.print(_actors_table([rows], plain(f"{report['run_dir']}  [{report['state']}]")))
    if report.get("failure"):
        console.print(plain(f"failure: {report['failure']}"))
    if local:
        console.print(_local_workers_table(report["workers"]))
    elif "workers" in report:
        console.print(_workers_table(report["workers"], "Ray workers" if report["workers_address"] else "Workers"))
        if "workers_note" in report:
            console.print(plain(report["workers_note"]))


def _actors_table(groups: list[list[dict[str, Any]]], title: Any) -> Any:
    """Actors' rows, a line between groups."""
    from rich import box
    from rich.table import Table

    headers = {"actor": "actor", "pid": "pid", "state": "state", "heartbeat_age": "hb s", "restarts": "restarts",
               "uptime": "up s", "busy": "busy s", "handled": "msgs", "errors": "errors"}
    if any(row["last_exit"] for rows in groups for row in rows):
        headers["last_exit"] = "last exit"
    # Two spaces between columns, none at the edges: a worker's actor names (context_manager.12) fit 80 columns.
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1),
                  collapse_padding=True)
    for key, header in headers.items():
        table.add_column(header, justify="left" if key in ("actor", "state", "last_exit") else "right",
                         no_wrap=key != "last_exit")
    for rows in groups:
        for i, row in enumerate(rows):
            table.add_row(*(_cell(row.get(key)) for key in headers), end_section=i == len(rows) - 1)
    return table


def _local_workers_table(workers: list[dict[str, Any]]) -> Any:
    """Each local worker's state and series, then its actors grouped (two tables: 80 columns)."""
    from rich import box
    from rich.console import Group
    from rich.table import Table

    summary = Table(title="\nLocal workers", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1),
                    collapse_padding=True)
    for header in ("worker", "state", "for s", "done", "series"):
        summary.add_column(header, justify="right" if header in ("for s", "done") else "left",
                           no_wrap=header != "series", overflow="fold")
    for w in workers:
        summary.add_row(str(w["number"]), _cell(w["state"]), _cell(w["state_age"]), str(len(w["done"])),
                        _cell(w["series"]))
    return Group(summary, "", _actors_table([list(w["processes"].values()) for w in workers], None))


def _workers_table(workers: list[dict[str, Any]], title: str) -> Any:
    """Where each worker is and what it runs, then its processes' figures (two tables: 80 columns)."""
    from rich import box
    from rich.console import Group
    from rich.table import Table

    placement = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for header in ("worker", "host", "state", "restarts", "sample s", "series"):
        placement.add_column(header, justify="right" if header in ("restarts", "sample s") else "left",
                             no_wrap=header != "series", overflow="fold")
    processes = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for header in ("process", "pid", "up s", "busy s", "msgs", "errors"):
        processes.add_column(header, justify="left" if header == "process" else "right", no_wrap=True)
    for w in workers:
        if w.get("number") is None:  # the roster could not be read
            placement.add_row("?", "", _cell(w["state"]))
            continue
        placement.add_row(str(w["number"]), _cell(w["host"]), _cell(w["state"]), str(w["restarts"]),
                          _cell(w["sample_age"]), _cell(w["series"]))
        processes.add_row(f"host.{w['number']}", _cell(w["pids"].get("host")))
        for kind, p in w["processes"].items():
            processes.add_row(_cell(f"{kind}.{w['number']}"),
                              *(_cell(p.get(key)) for key in ("pid", "uptime", "busy", "handled", "errors")))
    waiting = [plain(f"worker {w['number']} {w['pending']}") for w in workers if w.get("pending")]
    return Group(placement, *waiting, processes)


def _cell(value: Any) -> Any:
    """A table cell as text (``plain``): figures formatted, strings from the run's files escaped and never markup."""
    if value is None:
        return plain("")
    if isinstance(value, float):
        return plain(f"{value:.1f}" if value >= 10 else f"{value:.2f}")
    return plain(str(value))


def _query_statistics(state: SupervisorState) -> dict[str, dict[str, Any]]:
    """Ask every ready actor for its Statistics, 2 s in all; silent actors are left out."""
    import msgspec
    import trio

    from roboswe.actors import Client
    from roboswe.logs import configure_logging
    from roboswe.protocol.control import CONTROL_CODEC, StatisticsRequest

    ready = {name: actor.endpoint for name, actor in state.actors.items() if actor.state == "ready"}
    if not ready:
        return {}
    configure_logging(run_dir=None, console=False, level="error")
    results: dict[str, dict[str, Any]] = {}

    async def ask(name: str, endpoint: str) -> None:
        with contextlib.suppress(Exception):  # a silent or dying actor is left out
            async with Client("status", endpoint, CONTROL_CODEC, peer=name) as link:
                reply = await link.request(StatisticsRequest())
                results[name] = msgspec.to_builtins(reply.message)

    async def main() -> None:
        with trio.move_on_after(2):
            async with trio.open_nursery() as nursery:
                for name, endpoint in ready.items():
                    nursery.start_soon(ask, name, endpoint)

    trio.run(main)
    return results
