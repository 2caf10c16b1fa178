"""`roboswe leaderboard RUN_DIR... [--out SITE_DIR]`: models x tasks across runs (see roboswe.viewer._leaderboard).

Prints one board per pin group (runs pinned alike, as `roboswe compare` checks them), or JSON
with ``--json``; ``--out`` also writes leaderboard.html (with the success-by-trial plot) and
runs.html (the runs it was given) there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec

from roboswe.commands.compare import add_allow_differ
from roboswe.terminal import echo, plain, terminal_console

COLUMNS = (("model", "left"), ("A", "right"), ("Q", "right"), ("trial 1", "right"), ("gain", "right"),
           ("cost/task", "right"), ("missing", "right"))


def add_arguments_leaderboard(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "example: roboswe leaderboard runs/claude runs/gpt --out board   (then open board/leaderboard.html)"
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR", help="run directories written by `roboswe run`")
    add_allow_differ(parser, "pool runs")
    parser.add_argument("--json", action="store_true", help="print the leaderboard as JSON")
    parser.add_argument("--out", type=Path, default=None, metavar="SITE_DIR",
                        help="also write SITE_DIR/leaderboard.html and SITE_DIR/runs.html")


def run_leaderboard(args: argparse.Namespace) -> int:
    from roboswe.records.store import StoreError
    from roboswe.viewer._leaderboard import export_leaderboard, leaderboard

    try:
        board = leaderboard(args.runs, allow_differ=args.allow_differ)
    except (FileNotFoundError, LookupError, StoreError, ValueError) as e:
        echo(f"roboswe leaderboard: {e}", file=sys.stderr)
        return 2
    if args.out is not None:
        page = export_leaderboard(board, args.out)
        echo(f"leaderboard written: open {page.resolve().as_uri()}", file=sys.stderr)
    if args.json:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(board), indent=1).decode() + "\n")
        return 0
    console = terminal_console()
    for n, group in enumerate(board["groups"], 1):
        print_group(n, group, console)
    boot = board["bootstrap"]
    console.print(f"intervals: A, Q, gain {boot['method']} ({boot['resamples']} resamples, seed {boot['seed']}); "
                  f"trial 1 and success by trial {boot['proportions']}", soft_wrap=True)
    return 0


def _interval(e: dict[str, Any]) -> str:
    return "-" if e["mean"] is None else f"{e['mean']:.2f} [{e['low']:.2f},{e['high']:.2f}]"


def _cell(c: dict[str, Any] | None) -> str:
    if c is None:
        return "not run"
    if c["completed"]:
        return f"A {c['A']:.2f} Q {c['Q']:.2f}"
    unscored = sum(s not in ("success", "failure") for s in c["statuses"])
    return f"≥{c['A_lower']:.2f} ({unscored} unscored)"


def print_group(n: int, group: dict[str, Any], console: Any) -> None:
    """One pin group: its runs, the models' figures, the models x tasks grid, success by trial."""
    from roboswe.records.report import _narrow_table

    console.print(plain(f"group {n}: {', '.join(group['runs'])}"), soft_wrap=True)
    for d in group["differs_from_first"]:
        console.print(plain(f"  pinned unlike group 1: {d['field']} ({d['detail']})", style="yellow"), soft_wrap=True)
    for d in group["allowed"]:
        console.print(plain(f"  pooled although {d['field']} differs (--allow-differ): {d['detail']}"), soft_wrap=True)
    table = _narrow_table("", COLUMNS)
    for m in group["models"]:
        cost = m["cost"]
        per_task = "-" if cost["per_task"] is None else f"{cost['per_task']:.4f} {cost['currency']}".strip()
        trial1 = "-" if m["trial1"]["value"] is None else f"{m['trial1']['value']:.2f}"
        gain = "-" if m["gain"]["mean"] is None else f"{m['gain']['mean']:+.2f}"
        table.add_row(plain(f"{m['model']} ({m['mode']})"), _interval(m["A"]), _interval(m["Q"]), trial1, gain,
                      per_task, str(m["missing_slots"]))
    console.print(table)
    grid = _narrow_table("", (("task", "left"), *((m["model"], "left") for m in group["models"])))
    for task in group["tasks"]:
        grid.add_row(plain(task), *(_cell(m["cells"].get(task)) for m in group["models"]))
    console.print(grid)
    for m in group["models"]:
        by_t = " ".join("-" if p["value"] is None else f"{p['value']:.2f}" for p in m["success_by_trial"])
        console.print(plain(f"  {m['model']}: success by trial 1..{m['trials']}: {by_t} "
                            f"(over {m['completed_tasks']} completed of {m['admitted_tasks']} tasks)"), soft_wrap=True)
        if m["cost"]["per_task"] is None:
            console.print(plain(f"  {m['model']}: cost not reported: {m['cost']['reason']}"), soft_wrap=True)
