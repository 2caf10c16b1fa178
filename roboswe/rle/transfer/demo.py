"""`roboswe rle demo transfer [--out RUN_DIR]`: the scripted developer and fresh agents on the kit, offline.

An RLE run through the actors (`roboswe run --config configs/runs/rle-transfer-demo.toml`, roboswe/rle/run.py
and runner.py): the held-out composite is counter to drawer, then close the drawer (placeholder assets); the
practice set the other three composites of configs/tasks/rle/transfer-kit-countertodrawer-close.toml. The
scripted developer writes and seals its harness, five fresh agents (each a new conversation, the sealed
harness alone restored into its workspace) use it in the five hidden kitchens the public CI salt draws on
the simulator's side, five control agents attempt the same kitchens with an empty workspace. Prints the
development summary, the reward report (each agent beside its control, the reward) and the RLE Index.
``--agents N`` runs the task with N fresh agents and N controls (another task digest: the report says
which rules it ran under); ``--no-practice`` has the developer observe the practice tasks without practising.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from roboswe.configs import CONFIGS_DIR
from roboswe.terminal import echo

DEMO_CONFIG = CONFIGS_DIR / "runs" / "rle-transfer-demo.toml"
DEMO_TASK = "transfer-kit-countertodrawer-close"
AGENT_LINE = 'agent = "roboswe.agents.rle_transfer:TransferAgent"\n'


def demo_inputs(tmp: Path, agents: int | None, practice: bool) -> tuple[Path, str]:
    """The run config and the task `roboswe run` takes: the shipped ones, or copies under ``tmp`` with the
    participant's ``practice = false`` and the task's ``agents = N``."""
    config, task = DEMO_CONFIG, f"rle/{DEMO_TASK}"
    if not practice:
        text = DEMO_CONFIG.read_text()
        if AGENT_LINE not in text:
            raise RuntimeError(f"{DEMO_CONFIG.name} no longer names the participant as {AGENT_LINE.strip()}")
        config = tmp / DEMO_CONFIG.name
        config.write_text(text.replace(AGENT_LINE, AGENT_LINE + "options = { practice = false }\n", 1))
    if agents is not None:
        from ..manifest import TASKS_DIR

        text = (TASKS_DIR / f"{DEMO_TASK}.toml").read_text()
        path = tmp / f"{DEMO_TASK}.toml"
        shorter = text.replace("[transfer]\nagents = 5\n", f"[transfer]\nagents = {agents}\n", 1)
        if shorter == text:
            raise RuntimeError(f"{DEMO_TASK}.toml no longer says [transfer] agents = 5")
        path.write_text(shorter)
        task = str(path)
    return config, task


def run_transfer_demo(out: Path | None, *, agents: int | None = None, practice: bool = True) -> int:
    """Exit 0 scored, 1 not scored, 2 the harness could not start or ended without a report."""
    if agents is not None and not 1 <= agents <= 5:
        echo(f"roboswe rle demo: --agents takes 1..5, not {agents}", file=sys.stderr)
        return 2
    if out is not None and out.exists() and any(out.iterdir()):
        echo(f"roboswe rle demo: {out} is not empty; choose a new run directory", file=sys.stderr)
        return 2
    os.environ.setdefault("MUJOCO_GL", "egl")  # the agents read depth images
    from roboswe.commands.run import add_arguments_run, run_run

    from ..index import render_index, rle_index
    from ..run import print_rle_outcome
    from ..rundir import REPORT, read_report
    from .verify import read_record

    with tempfile.TemporaryDirectory(prefix="rle-transfer-") as tmp:
        run_dir = (out or Path(tmp) / "run").resolve()
        config, task = demo_inputs(Path(tmp), agents, practice)
        parser = argparse.ArgumentParser(prog="roboswe run")  # `roboswe run`'s own parser: every option its default
        add_arguments_run(parser)
        code = run_run(parser.parse_args(["--config", str(config), "--out", str(run_dir), "--tasks", task,
                                          "--preflight", "offline"]), outcome=False)
        if not (run_dir / REPORT).exists():
            echo(f"roboswe rle demo: the run ended without a reward report (exit {code}); each actor's log is under "
                 f"{run_dir / 'actors'}", file=sys.stderr)
            return 2
        print_rle_outcome(run_dir, index=False)
        report = read_report(run_dir)
        echo(render_transfer(report, read_record(run_dir)))  # the stage records the simulator wrote
        echo(render_index(rle_index([report])))
        if out is not None:
            echo(f"run directory {run_dir} (`roboswe verify {run_dir}` replays every trial)")
    return 0 if report.status == "scored" else 1


def render_transfer(report, record=None) -> str:
    """The reward beside the control's, then each fresh agent beside its control (same kitchen), with how each
    trial ended (after the report itself, which run.print_rle_outcome prints)."""
    parts = {c.name: c.value for c in report.components}
    trials = {t.agent: t for t in record.trials} if record is not None else {}
    lines = [f"harness transfer{' (placeholder assets)' if report.placeholder else ''}: reward {report.reward:.4f} "
             f"(mean over the fresh agents with the harness); control {parts['control']:.4f} (empty workspace); "
             f"success rate {parts['success_rate']:.2f} vs control {parts['control_success_rate']:.2f}"]
    lines += [f"  gate {g.name}: {g.reason}" for g in report.gates]
    for k in range(sum(n.startswith("agent_") for n in parts)):
        a, c = f"agent_{k + 1}", f"control_{k + 1}"
        lines.append(f"  kitchen {k + 1}: {a} {parts[a]:.4f} ({_ended(trials.get(a))})   {c} {parts[c]:.4f} "
                     f"({_ended(trials.get(c))})")
    return "\n".join(lines)


def _ended(trial) -> str:
    if trial is None:
        return "no trial"
    return f"{trial.ended}, {len(trial.rows)} actions{', success' if trial.success else ''}"
