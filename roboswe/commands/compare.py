"""`roboswe compare RUN_A RUN_B [...]`: paired differences by task (see roboswe.records.compare).

Each run after the first is compared with the first. Prints rich tables, or JSON with
``--json``; ``--viewer SITE_DIR`` also writes the comparison page (compare.html) there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec

from roboswe.records.compare import PIN_FIELDS
from roboswe.terminal import echo, plain, terminal_console


def add_arguments_compare(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR",
                        help="run directories; each after the first is compared with the first (the baseline)")
    add_allow_differ(parser, "compare")
    parser.add_argument("--json", action="store_true", help="print the comparisons as JSON")
    parser.add_argument("--viewer", type=Path, default=None, metavar="SITE_DIR",
                        help="also write the comparison page SITE_DIR/compare.html (e.g. a run's exported viewer)")


def add_allow_differ(parser: argparse.ArgumentParser, verb: str) -> None:
    """--allow-differ FIELD, as compare and leaderboard take it (``verb``: what it lets them do)."""
    parser.add_argument("--allow-differ", action="append", default=[], choices=PIN_FIELDS, metavar="FIELD",
                        help=f"{verb} even though this pin differs (one of {', '.join(PIN_FIELDS)}); "
                             "the difference is shown. Repeatable")


def run_compare(args: argparse.Namespace) -> int:
    from roboswe.records.compare import ComparisonRefused, compare_runs
    from roboswe.records.store import StoreError

    if len(args.runs) < 2:
        echo("roboswe compare: give at least two RUN_DIRs (a baseline and a run to compare with it)", file=sys.stderr)
        return 2
    baseline, others = args.runs[0], args.runs[1:]
    try:
        comparisons = [compare_runs(baseline, other, allow_differ=args.allow_differ) for other in others]
    except (ComparisonRefused, FileNotFoundError, LookupError, StoreError, ValueError) as e:
        echo(f"roboswe compare: {e}", file=sys.stderr)
        return 2
    if args.viewer is not None:
        from roboswe.viewer._compare import export_comparisons

        page = export_comparisons(comparisons, args.viewer)
        echo(f"comparison page written: open {page.resolve().as_uri()}", file=sys.stderr)
    if args.json:
        data = msgspec.to_builtins(comparisons)
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(data), indent=1).decode() + "\n")
        return 0
    console = terminal_console()
    for c in comparisons:
        print_comparison(msgspec.to_builtins(c), console)
    return 0


def _est(e: dict[str, Any]) -> str:
    if e["mean"] is None:
        return f"- (n={e['n']})"
    return f"{e['mean']:+.2f} [{e['low']:+.2f}, {e['high']:+.2f}]"


def _mean(e: dict[str, Any]) -> str:
    return "-" if e["mean"] is None else f"{e['mean']:.2f} [{e['low']:.2f}, {e['high']:.2f}]"


FIGURE_NAMES = {"A": "A (mean verified success)", "Q": "Q (final streak / T)", "trial1": "trial-1 success",
                "success_by_T": "success by trial T (>= 1)", "gain": "gain (by T - trial 1)"}


def print_comparison(c: dict[str, Any], console: Any) -> None:
    """One comparison as rich tables: what differs, paired figures, task coverage.

    What the runs' records say (run dirs, models, tasks, pins) is printed as text (``plain``): escaped, never markup.
    """
    from rich.table import Table
    from rich.text import Text

    a, b = c["a"], c["b"]
    for side, run in (("A", a), ("B", b)):
        console.print(Text.assemble((side, "bold"), plain(f" {run['run_dir']} (run {run['run_id']}; "
                                                          f"{', '.join(run['models'])}; mode {', '.join(run['modes'])})")),
                      soft_wrap=True)
    for name, (va, vb) in c["factor"].items():
        console.print(plain(f"  compared factor {name}: {va} vs {vb}"), soft_wrap=True)
    for d in c["pin_differences"]:
        console.print(Text.assemble(plain(f"  pin differs (allowed by --allow-differ {d['field']}):", style="yellow"),
                                    plain(f" {d['detail']}")), soft_wrap=True)
    table = Table(title=f"paired by task over {len(c['tasks_both'])} task(s) both completed", title_justify="left")
    for col in ("figure", "A", "B", "B - A (paired 95% CI)"):
        table.add_column(col)
    for f in c["figures"]:
        table.add_row(plain(FIGURE_NAMES.get(f["figure"], f["figure"])), _mean(f["a"]), _mean(f["b"]),
                      f"{_est(f['difference'])} (n={f['difference']['n']})")
    console.print(table)
    console.print(plain(f"  tasks both completed: {', '.join(c['tasks_both']) or 'none'}"), soft_wrap=True)
    console.print(plain(f"  completed by A only: {', '.join(c['only_a']) or 'none'};  by B only: "
                        f"{', '.join(c['only_b']) or 'none'};  by neither: {', '.join(c['neither']) or 'none'}"),
                  soft_wrap=True)
    boot = c["bootstrap"]
    console.print(f"  intervals: {boot['method']}, {boot['resamples']} resamples, seed {boot['seed']} "
                  "(the same task draws on both sides)", soft_wrap=True)
