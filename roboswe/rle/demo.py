"""`roboswe rle demo pose [--out RUN_DIR]`: the whole RLE-Bench protocol offline.

A scripted participant (configs/agents/rle_pose_demo, the `python` participant kind) develops in a
development session (develop.py: the workspace and the trial sandbox, whose door reaches the
development simulator's own process, development_simulator.py, which holds the ledger), the workspace is sealed by the task's artifact contract and the ledger closed
over the sealed digest, the RLE run directory is written (rundir.py, plus the development record),
the verifier runs in its own process on the sealed artifact, and the reward report and the index are
printed. `roboswe verify RUN_DIR` and `roboswe index RUN_DIR` work on the result.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import msgspec
import trio

from roboswe.terminal import echo

from .develop import DevelopmentResult, OperationRecord, develop
from .ledger import Ledger, decode_rows, encode_rows, verify_chain
from .manifest import RleTask, load_task

DEMO_AGENT = "roboswe.agents.rle_pose_demo:PoseDemoAgent"
DEMO_TASKS = {"pose": ("pose-rgbd", "pose-rgb")}
"""`rle demo NAME` → the RLE tasks its participant develops for (the first by default)."""
DEVELOPMENT = "development.json"
"""The development record beside the run directory's files: every operation, its answer, the budget after it."""


class DevelopmentRecord(msgspec.Struct, frozen=True, kw_only=True):
    participant: str
    ended: str
    finish_reason: str
    wall_seconds: float
    resets: int
    control_steps: int
    spent: int
    budget: int
    ledger_head: str
    operations: list[OperationRecord]


def run_demo(name: str, out: Path | None, *, backend: str | None = None, task: str | None = None) -> int:
    """The demo's exit status: 0 scored, 1 the report is not scored, 2 the harness failed."""
    from .commands import render_report, verifier_command
    from .index import render_index, rle_index
    from .rundir import read_report

    if task is not None and task not in DEMO_TASKS[name]:
        echo(f"roboswe rle demo: the {name} demo develops for {', '.join(DEMO_TASKS[name])}, not {task}", file=sys.stderr)
        return 2
    task = load_task(task or DEMO_TASKS[name][0])
    if out is not None and out.exists() and any(out.iterdir()):
        echo(f"roboswe rle demo: {out} is not empty; choose a new run directory", file=sys.stderr)
        return 2
    os.environ.setdefault("MUJOCO_GL", "egl")
    with tempfile.TemporaryDirectory(prefix="rle-demo-") as tmp:
        run_dir = (out or Path(tmp) / "run").resolve()
        record = develop_and_seal(task, run_dir, backend=backend)
        echo(f"development: {record.ended} after {len(record.operations)} operations, {record.wall_seconds:.1f} s; "
             f"{record.control_steps} control steps and {record.resets} resets charged ({record.spent} of {record.budget}); "
             f"ledger head {record.ledger_head[:16]}")
        if record.finish_reason:
            echo(f"  participant: {record.finish_reason}")
        proc = subprocess.run(verifier_command(run_dir, engine=backend), stdout=subprocess.PIPE, text=True, check=False)
        if proc.returncode != 0:
            echo(f"roboswe rle demo: the verifier failed (exit {proc.returncode})", file=sys.stderr)
            return 2
        report = read_report(run_dir)
        echo(render_report(report))
        echo(render_index(rle_index([report])))
        if out is not None:
            echo(f"run directory {run_dir} (`roboswe verify {run_dir}` replays it)")
    return 0 if report.status == "scored" else 1


def develop_and_seal(task: RleTask, run_dir: Path, *, backend: str | None = None) -> DevelopmentRecord:
    """Develop in a fresh workspace against the development simulator's own process, seal the workspace,
    close the ledger over it, and write the RLE run directory (before verification)."""
    from roboswe.providers._config import ProviderConfig
    from roboswe.providers.local import PythonParticipant

    from .rundir import write_submission
    from .seal import seal_directory

    scratch = Path(tempfile.mkdtemp(prefix="rle-develop-", dir="/tmp"))  # short, traversable by the sandbox user
    os.chmod(scratch, 0o755)
    try:
        workspace = scratch / "workspace"
        workspace.mkdir()
        os.chmod(workspace, 0o777)  # the sandbox user writes into it
        participant = PythonParticipant(ProviderConfig(kind="python", agent=DEMO_AGENT))
        rows_file = scratch / "ledger.jsonl"
        with development_simulator(task, scratch, rows_file) as endpoint:
            result = trio.run(_session, task, participant, endpoint, workspace, backend)
        rows = decode_rows(rows_file.read_bytes()) if rows_file.exists() else []
        verdict = verify_chain(rows, budget=task.budget.charged_steps)
        if not verdict.ok:  # the trusted side's own record: a bad one is a harness failure, not the artifact's
            raise RuntimeError(f"the development simulator's ledger does not verify: {verdict.reason}")
        # The seal: the contract's files, then the ledger's closing row over their digest; the
        # workspace is not read again.
        sealed, contents = seal_directory(workspace, task.artifact)
        ledger = Ledger.resume(rows, task.budget.charged_steps)
        head = ledger.seal(sealed.digest)
        sealed = msgspec.structs.replace(sealed, ledger_head=head)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    write_submission(run_dir, task, sealed, contents, encode_rows(ledger.rows))
    charged = [r for r in ledger.rows if r.kind == "charge"]
    record = DevelopmentRecord(
        participant=DEMO_AGENT, ended=result.ended, finish_reason=result.finish_reason, wall_seconds=result.wall_seconds,
        resets=sum(r.operation == "reset" for r in charged), control_steps=sum(r.cost for r in charged if r.operation == "step"),
        spent=ledger.spent, budget=ledger.budget, ledger_head=head, operations=result.operations)
    (run_dir / DEVELOPMENT).write_bytes(msgspec.json.encode(record))
    return record


async def _session(task: RleTask, participant, endpoint: str, workspace: Path, backend: str | None) -> DevelopmentResult:
    from roboswe.actors import Client, robot_link
    from roboswe.protocol.control import Shutdown
    from roboswe.protocol.sim import SIM_ROBOT_CODEC

    async with robot_link(endpoint, name="rle_develop") as link:
        result = await develop(task, participant, link, workspace, backend=backend)
    async with Client("coordinator", endpoint, SIM_ROBOT_CODEC, peer="rle_development_simulator") as sim:
        await sim.request(Shutdown(reason="development over"))
    return result


@contextmanager
def development_simulator(task: RleTask, scratch: Path, rows_file: Path, *, start_seconds: float = 60.0):
    """The development simulator's process (development_simulator.py); yields its endpoint, ends it on exit."""
    (scratch / "task.json").write_bytes(msgspec.json.encode(task))
    endpoint = f"ipc://{scratch}/sim/development.sock"
    log = scratch / "development_simulator.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "roboswe.rle.development_simulator", str(scratch / "task.json"),
                                 endpoint, str(rows_file)], env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")},
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + start_seconds
        while not (scratch / "sim" / "development.sock").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the development simulator did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)
        yield endpoint
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
