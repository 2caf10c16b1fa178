"""The `roboswe` command line: one subcommand per job, handlers imported lazily."""

from __future__ import annotations

import argparse
import importlib
import sys

from roboswe.terminal import did_you_mean

# subcommand -> (module, help); the module's `run_<name>(args)` returns an exit code and its
# `add_arguments_<name>(parser)` declares the options. A simulator family adds its own (sim/families.py
# ``Family.commands``, e.g. `roboswe assets robocasa`): this list names no family.
COMMANDS: dict[str, tuple[str, str]] = {
    # name: (module, one-line help); the main commands first, as `--help` lists them (EXAMPLES below)
    "demo": ("roboswe.commands.demo", "admit Lift, run a verified 5-trial demo series, export the viewer, print the report"),
    "run": ("roboswe.commands.run", "run five-trial series of admitted tasks with a participant, then verify by replay"),
    "report": ("roboswe.commands.report", "summarize a run: trial tables per task, metrics with denominators, timing"),
    "view": ("roboswe.commands.view", "serve a run's viewer site on localhost"),
    "compare": ("roboswe.commands.compare", "pair runs by task: paired differences of A, Q, trial-1, success by T, gain"),
    "leaderboard": ("roboswe.commands.leaderboard", "models x tasks across runs: A, Q, trial 1, gain, cost; pin groups as compare"),
    "up": ("roboswe.commands.up", "start all actors under a supervisor (foreground) and wait for Ready"),
    "status": ("roboswe.commands.status", "show each actor of a run: pid, state, heartbeat, restarts, timing"),
    "logs": ("roboswe.commands.logs", "show or follow a run's events.jsonl"),
    "images": ("roboswe.commands.images", "build or show the sandbox image (debootstrapped rootfs, docker import)"),
    "recovery": ("roboswe.commands.recovery", "within-trial mishaps and recoveries from the recorded states (a diagnostic, never scored)"),
    "judge": ("roboswe.commands.judge", "the visual cross-check: a judge's verdicts on views rendered from the recorded states, beside the mechanical outcome (a supplementary audit, never scored)"),
    "export": ("roboswe.commands.view", "write a run's static viewer site (works from file://) or its per-slot table"),
    "pairs": ("roboswe.commands.pairs", "blinded pairwise rating files for the round-3 canvases of painting runs"),
    "tasks": ("roboswe.commands.sim", "list a dataset's tasks: robot, action size, cameras, admission status"),
    "admit": ("roboswe.commands.sim", "check every task of a dataset in fresh simulators and write admitted.json"),
    "keys": ("roboswe.commands.sim", "generate CURVE key pairs for a remote simulator"),
    "sim": ("roboswe.commands.sim", "simulator commands: `sim serve --bind tcp://HOST:PORT --keys DIR`"),
    "exec": ("roboswe.commands.exec", "run authored scripts in the sandbox against one fresh scene of a task"),
    "verify": ("roboswe.commands.run", "replay a run's trials from their checkpoints and record verified/mismatch/error"),
    "rle": ("roboswe.rle.commands", "RLE-Bench: `rle score TASK ARTIFACT_DIR` verifies an artifact on hidden seeds; `rle image build`"),
    "index": ("roboswe.rle.commands", "the RLE Index over RLE run directories: task, family, workflow, overall"),
    "doctor": ("roboswe.commands.doctor", "check this machine (Python, packages, rendering, sandbox, image, keys, assets) and say what to fix"),
}

EXAMPLES = """\
examples:
  roboswe demo                                     a verified 5-trial Lift series, the viewer, the report
  roboswe run admitted.json --config configs/runs/demo.toml --out runs/a
                                                   five-trial series with a participant, then verify by replay
  roboswe report runs/a                            A, Q and intervals per task, the trial table, cost
  roboswe view runs/a                              the run's viewer on localhost (export writes it as a site)
  roboswe compare runs/a runs/b                    paired differences between two runs of the same task set
  roboswe leaderboard runs/*                       models x tasks across runs
  roboswe doctor                                   when something fails: what to fix on this machine
"""


def installed_version() -> str:
    """The installed roboswe distribution's version (what `--version` prints and each run records)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("roboswe")
    except PackageNotFoundError:  # an uninstalled checkout still runs
        return "0+unknown"


def all_commands() -> dict[str, tuple[str, str]]:
    """COMMANDS and the simulator families' own (which never replace one of ours)."""
    from roboswe.sim.families import family_commands

    return {**COMMANDS, **{c.name: (c.module, c.help) for c in family_commands() if c.name not in COMMANDS}}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="roboswe",
        description="Evaluate embodied coding agents: five retained-context trials per robot task, verified by replay.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"roboswe {installed_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, help_text) in all_commands().items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        mod = importlib.import_module(module)
        getattr(mod, "add_arguments_" + name.replace("-", "_"))(p)
        p.set_defaults(_module=module, _handler="run_" + name.replace("-", "_"))
    return parser


def main(argv: list[str] | None = None) -> int:
    # argparse would answer a mistyped command with all of them; the close one is what helps
    names = all_commands()
    first = next((a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")), None)
    if first is not None and first not in names:
        print(f"roboswe: unknown command {first!r}{did_you_mean(first, names)} "
              "(`roboswe --help` lists the commands)", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    handler = getattr(importlib.import_module(args._module), args._handler)
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
