"""`roboswe rle demo transfer [--out RUN_DIR]`: the scripted developer and fresh agents on the kit, offline.

The held-out composite is counter to drawer, then close the drawer (placeholder assets); the practice
set the other three composites of configs/tasks/rle/transfer-kit-countertodrawer-close.toml. The scripted
developer writes and seals its harness, five fresh agents use it in the five hidden kitchens the public
CI salt draws, five control agents attempt the same kitchens with an empty workspace (runner.py: the
in-process trusted runner). Prints the reward report (each agent, the control, the reward), the stage
records and the RLE Index. Re-executes itself with PYTHONHASHSEED=0 (RoboCasa's scene follows set and dict
order, and `roboswe verify` replays it).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import msgspec

from roboswe.terminal import echo

DEMO_TASK = "transfer-kit-countertodrawer-close"


def run_transfer_demo(out: Path | None, *, agents: int | None = None, practice: bool = True) -> int:
    """Exit 0 scored, 1 not scored, 2 the harness could not start. ``agents``: fewer fresh agents (and controls)
    than the manifest's, for a short run (another task digest: the report says which rules it ran under);
    ``practice`` False: the developer observes the practice tasks without practising."""
    if agents is not None and not 1 <= agents <= 5:
        echo(f"roboswe rle demo: --agents takes 1..5, not {agents}", file=sys.stderr)
        return 2
    if out is not None and out.exists() and any(out.iterdir()):
        echo(f"roboswe rle demo: {out} is not empty; choose a new run directory", file=sys.stderr)
        return 2
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable, "-m", "roboswe.cli", *sys.argv[1:]],
                  {**os.environ, "PYTHONHASHSEED": "0"})
    os.environ.setdefault("MUJOCO_GL", "egl")  # the agents read depth images
    from roboswe.agents.rle_transfer import FreshAgent, TransferDeveloper

    from ..index import render_index, rle_index
    from ..manifest import load_task
    from ..seeds import public_salt
    from .runner import run_transfer

    with tempfile.TemporaryDirectory(prefix="rle-transfer-") as tmp:
        run_dir = (out or Path(tmp) / "run").resolve()
        task = load_task(DEMO_TASK)
        if agents is not None:
            task = msgspec.structs.replace(task, transfer=msgspec.structs.replace(task.transfer, agents=agents))
        report, figures = run_transfer(task, TransferDeveloper(practice=practice), FreshAgent, public_salt(), run_dir)
        echo(render_transfer(report, figures))
        echo(render_index(rle_index([report])))
        if out is not None:
            echo(f"run directory {run_dir} (`roboswe verify {run_dir}` replays every trial)")
    return 0 if report.status == "scored" else 1


def render_transfer(report, figures: dict | None = None) -> str:
    """The report: the reward, then each fresh agent beside its control (same kitchen), then the figures."""
    from ..commands import render_report

    parts = {c.name: c.value for c in report.components}
    lines = [render_report(report).splitlines()[0] + ("  placeholder" if report.placeholder else ""),
             f"  reward {report.reward:.4f} (mean over the fresh agents with the harness); control {parts['control']:.4f} "
             f"(empty workspace); success rate {parts['success_rate']:.2f} vs control {parts['control_success_rate']:.2f}"]
    lines += [f"  gate {g.name}: {g.reason}" for g in report.gates]
    agents = (figures or {}).get("agents", {})
    for k in range(sum(n.startswith("agent_") for n in parts)):
        a, c = f"agent_{k + 1}", f"control_{k + 1}"
        lines.append(f"  kitchen {k + 1}: {a} {parts[a]:.4f} ({_ended(agents.get(a))})   {c} {parts[c]:.4f} "
                     f"({_ended(agents.get(c))})")
    if figures:
        lines.append("  figures: " + ", ".join(f"{k} {v}" for k, v in figures.items() if k.endswith(("seconds", "steps"))))
    return "\n".join(lines)


def _ended(agent: dict | None) -> str:
    if not agent:
        return "recorded"
    return f"{agent['ended']}, {agent['actions']} actions" + (f", {agent['error']}" if agent.get("error") else "")
