"""`roboswe judge RUN_DIR [--config JUDGE.toml] [--trials ID,...]`: the visual cross-check (roboswe.judge).

An optional, supplementary audit of RoboSWE-ADAPT: a judge looks at views rendered from each trial's
recorded states and gives per condition supported, contradicted or unobservable; only then is that
compared with the mechanical record. It appends its records to the run database (re-judging adds
records) and never changes an outcome or a score. Default judge: configs/judges/scripted.toml.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

import msgspec

from roboswe.terminal import echo, terminal_console


def add_arguments_judge(parser: argparse.ArgumentParser) -> None:
    from roboswe.judge.conditions import SCRIPTED_CONFIG

    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory written by `roboswe run`")
    parser.add_argument("--config", type=Path, default=SCRIPTED_CONFIG,
                        help=f"the judge: [judge] and [provider] (default {SCRIPTED_CONFIG})")
    parser.add_argument("--trials", default="", help="comma-separated trial ids (default: every judgeable trial)")
    parser.add_argument("--run-id", default=None, help="which run, when the database holds several")
    parser.add_argument("--json", action="store_true", help="print the judged trials as JSON")


def run_judge(args: argparse.Namespace) -> int:
    if sys.flags.hash_randomization:
        # Scenes are rebuilt as the simulator builds them, with its fixed hash seed, so fingerprints match.
        os.execve(sys.executable, [sys.executable, "-m", "roboswe.cli", *sys.argv[1:]], {**os.environ, "PYTHONHASHSEED": "0"})
    os.environ.setdefault("MUJOCO_GL", "egl")
    from roboswe.actors.supervisor import run_active
    from roboswe.judge.conditions import JudgeError, load_judge_config
    from roboswe.judge.judging import judge_run
    from roboswe.judge.summary import judge_summary, print_judgements
    from roboswe.logs import configure_logging
    from roboswe.providers import MissingKey, MissingSDK
    from roboswe.records.reader import RunReader
    from roboswe.records.store import StoreError

    configure_logging(run_dir=None, actor="judge", level="warning", console=False)  # stdout is the result
    try:
        config, digest = load_judge_config(args.config)
        if run_active(args.run_dir):
            raise JudgeError(f"{args.run_dir} is still running; judge it after the run stops")
        trials = [t.strip() for t in args.trials.split(",") if t.strip()]
        with contextlib.redirect_stdout(sys.stderr):  # what simulator packages print on import is not the result
            records, skipped = judge_run(args.run_dir, config, digest, trials=trials, run_id=args.run_id)
        with RunReader(args.run_dir) as reader:
            summary = judge_summary(reader, args.run_id)
    except (FileNotFoundError, LookupError, StoreError, JudgeError, ValueError, MissingKey, MissingSDK) as e:
        echo(f"roboswe judge: {e}", file=sys.stderr)
        return 2
    if args.json:
        out = {"judged": [r.judgement_id for r in records], "skipped": skipped, "summary": summary}
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(out), indent=1).decode() + "\n")
        return 0
    console = terminal_console()
    for s in skipped:
        console.print(f"not judged: {s['trial_id'] or s['series_id']}: {s['why']}", soft_wrap=True, markup=False)
    print_judgements(summary, console)
    return 0
