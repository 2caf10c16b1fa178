"""An RLE-Bench run through the actors: the coordinator's job when the run config has ``[rle] tasks``.

The second kind of run beside the five-trial series, on the same actors the supervisor starts for a
series (recorder, simulator, sandbox bridge, provider client, context manager, coordinator). Per RLE
task the job runs ONE development session: a ``DevelopmentRunner``, the series' ``TrialRunner`` with
the development scene in place of the series scene (the simulator actor's ``LoadDevelopment``: the
family's scene and the ledger on the simulator's side, roboswe/rle/scene.py), the provider client
actor as the participant (a hosted model or the ``python`` kind), the context manager, and the sandbox
bridge actor, whose doors take ``robot.reset()`` only in an RLE run (its config's ``[rle]``). The
recorder records its operations, turns and provider messages like a series trial's, and its ledger
rows (the ``task_record`` event). Then the coordinator seals the workspace by the artifact contract,
closes the ledger over the sealed digest, writes the RLE run directory (rundir.py) into RUN_DIR with
``development.json``, and runs the verifier process; ``roboswe index RUN_DIR`` and ``roboswe verify
RUN_DIR`` work on it. A family 03 task (Tabletop Physical Reasoning) has no artifact: its session is the
attempt, so the coordinator asks the simulator to end it (``EndAttempt``: release, settle, score and the
ledger sealed there, roboswe/rle/tabletop/runner.py) and writes the run directory it answers instead. A
family 01 task (the speed-run) is scored on trials, not an artifact: after the seal its evaluation phase runs
through the same actors in the hidden kitchens (roboswe/rle/kitchen/runner.py) and every trial is replayed.
A family 02 task (harness transfer) is scored on fresh agents: after the seal each attempts the held-out task
as its own series, a new conversation in a workspace holding only the sealed harness (or nothing, the
control), through the same actors (roboswe/rle/transfer/runner.py).
One RLE task per run: the run directory is that task's RLE run directory.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import msgspec
import structlog
import trio

from roboswe.protocol import recorder as rec

from .development_runner import DevelopmentRunner, OperationRecord
from .ledger import Ledger, LedgerRow, encode_rows, verify_chain
from .manifest import RleTask, load_task

log = structlog.get_logger()

DEVELOPMENT = "development.json"
"""The development record beside the run directory's files: how the phase ended, what it spent, every operation."""
LIVE_LEDGER = "ledger.live.jsonl"
"""The rows as the simulator wrote them during the phase (the sealed ledger is rundir.LEDGER)."""
SCRIPT_SECONDS = 600.0  # one exec at most (the phase's wall time bounds it too)
ENDED = {"finish": "finished", "step_budget": "budget", "time_budget": "wall_time", "decision_budget": "tokens"}
"""A development trial's end cause → how the phase ended (development.json ``ended``)."""


class DevelopmentRecord(msgspec.Struct, frozen=True, kw_only=True):
    participant: str
    trial_id: str
    ended: str  # finished | budget | wall_time | tokens | incomplete: <reason>
    finish_reason: str
    wall_seconds: float
    resets: int
    control_steps: int
    spent: int
    budget: int
    tokens: int  # the provider's recorded usage (input + output) charged to the phase
    token_budget: int | None
    diagnostics: int  # diagnostic calls run (diagnostic.py; at most the manifest's diagnostic_calls)
    ledger_head: str
    operations: list[OperationRecord]


def task_ref(name: str) -> str:
    """``rle/pose-rgbd`` → ``pose-rgbd`` (a shipped task); a TOML path stays as it is."""
    return name.removeprefix("rle/") if not name.endswith(".toml") else name


async def run_rle_job(actor: Any, progress: Any, job: Any) -> None:
    """Link the actors as a one-worker series job does, then develop, seal and verify each RLE task."""
    from roboswe.evaluation.run import JobRun

    async with contextlib.AsyncExitStack() as stack:
        run = JobRun(actor, progress, job, None, stack)  # type: ignore[arg-type] - an RLE run has no admitted file
        await run.link_shared()
        await run.link_local_workers()
        (worker,) = run.pool
        await record_start(run)
        progress.update(series_total=len(job.tasks), state="running")
        for done, name in enumerate(job.tasks, 1):
            await develop_task(run, worker.links, load_task(task_ref(name)))
            progress.update(series_done=done)
        await run.recording.flush()


async def record_start(run: Any) -> None:
    from roboswe.cli import installed_version

    job = run.job
    pins = rec.RunPins(run_config=msgspec.to_builtins(run.config, builtin_types=()), config_sha256=job.config_sha256,
                       tasks=list(job.tasks), backend=job.backend, workers=1)
    await run.recording.durable(rec.RunRecord(run_id=job.run_id, created_at=time.time(), admitted_sha256="",
                                              roboswe_version=installed_version(), config=pins))


def development_plan(run: Any, task: RleTask) -> Any:
    """The development session as a one-trial series plan: the task digest is its reference fingerprint."""
    from roboswe.evaluation.admission import AdmittedTask
    from roboswe.evaluation.plan import SeriesPlan
    from roboswe.evaluation.series_config import RLE_IDENTITY, Budgets

    from .manifest import task_digest

    digest, budget = task_digest(task), task.budget
    manifest = {**msgspec.to_builtins(task), "seed": 0}  # the phase starts on public seed 0
    admitted = AdmittedTask(id=task.id, status="admitted", manifest=manifest, manifest_digest=digest,
                            privileged=False, fingerprint={"digest": digest, "seed": 0})
    budgets = Budgets(trial_steps=budget.charged_steps, trial_seconds=budget.wall_seconds,
                      script_steps=budget.charged_steps, script_seconds=min(SCRIPT_SECONDS, budget.wall_seconds),
                      interface="code", track="development", identity=f"{RLE_IDENTITY}{task.protocol.version}")
    return SeriesPlan(run_id=run.job.run_id, series_id=f"{run.job.run_id}/{task.id}", task=admitted, budgets=budgets,
                      trials=1, retain="retain", backend=run.job.backend, model=run.model, run_dir=str(run.actor.run_dir))


async def develop_task(run: Any, links: Any, task: RleTask) -> None:
    """One development session, then the seal, the RLE run directory and the verifier."""
    from roboswe.evaluation.conversation import Conversation
    from roboswe.evaluation.plan import fresh_dir
    from roboswe.evaluation.series import series_record

    plan = development_plan(run, task)
    run_dir = Path(run.actor.run_dir)
    await links.recorder.durable(series_record(plan))
    conversation = Conversation(plan.series_id, links.context, links.recorder, run.reader)
    await conversation.reset([], {})
    workspace = fresh_dir(plan.workspace_dir())
    if task.kitchen is not None:  # family 01 at L2/L3: the client skills and harness manual, before anything runs
        from .kitchen.development import workspace_files

        for name, data in workspace_files(task.kitchen.level).items():
            (workspace / name).write_bytes(data)
    runner = DevelopmentRunner(links, plan, run.progress, index=1, attempt=0, workspace=workspace, recovers=None,
                               conversation=conversation, task=task, ledger_record=run_dir / LIVE_LEDGER,
                               salt_file=run.config.rle.salt_file)
    run.progress.say(f"{plan.series_id}: development starts")
    ended = await runner.run(None)
    if task.tabletop is not None:  # the scene itself is scored: the simulator ends the attempt, nothing is sealed
        await end_attempt(run, links, task, run_dir, runner, ended)
        return
    data, _ = await links.sim.task_record(None)  # the simulator's ledger rows, all of them
    rows = msgspec.convert(data.get("ledger", []), list[LedgerRow])
    record = await trio.to_thread.run_sync(seal_and_write, task, rows, workspace, run_dir, runner, ended)
    await links.recorder.event("rle_sealed", ended.trial_id, ledger_head=record.ledger_head, spent=record.spent,
                               ended=record.ended)
    if task.kitchen is not None:  # family 01: the evaluation phase in the hidden kitchens, then every trial replayed
        from .kitchen.runner import evaluate

        run.progress.say(f"{plan.series_id}: development {record.ended}, {record.spent} of {record.budget} charged")
        await evaluate(run, links, task, plan, workspace, run_dir)
        return
    if task.transfer is not None:  # family 02: each fresh agent's attempt with the sealed harness (and the control's)
        from .transfer.runner import transfer

        run.progress.say(f"{plan.series_id}: development {record.ended}, {record.spent} of {record.budget} charged")
        await transfer(run, links, task, plan, run_dir, ended.trial_id)
        return
    run.progress.say(f"{plan.series_id}: development {record.ended}, {record.spent} of {record.budget} charged; verifying")
    await verify(run, links, run_dir, ended.trial_id)


def seal_and_write(task: RleTask, rows: list[LedgerRow], workspace: Path, run_dir: Path, runner: Any,
                   ended: rec.TrialEnded) -> DevelopmentRecord:
    """Check the simulator's rows, seal the workspace (not read again), close the ledger, write the run directory."""
    from .rundir import write_submission
    from .seal import seal_directory

    verdict = verify_chain(rows, budget=task.budget.charged_steps)
    if not verdict.ok:  # the trusted side's own record: a bad one is a harness failure, not the artifact's
        raise RuntimeError(f"the development simulator's ledger does not verify: {verdict.reason}")
    sealed, contents = seal_directory(workspace, task.artifact)
    ledger = Ledger.resume(rows, task.budget.charged_steps)
    head = ledger.seal(sealed.digest)
    sealed = msgspec.structs.replace(sealed, ledger_head=head)
    write_submission(run_dir, task, sealed, contents, encode_rows(ledger.rows))
    return write_development(run_dir, ledger, head, runner, ended)


def write_development(run_dir: Path, ledger: Ledger, head: str, runner: Any, ended: rec.TrialEnded) -> DevelopmentRecord:
    """development.json: how the phase ended, what the sealed ``ledger`` charged, every operation."""
    task = runner.task
    charged = [r for r in ledger.rows if r.kind == "charge"]
    how = ENDED.get(ended.cause or "", "") if ended.outcome != "incomplete" else ""
    record = DevelopmentRecord(
        participant=runner.plan.model, trial_id=ended.trial_id, ended=how or f"{ended.outcome}: {ended.reason}",
        finish_reason=runner.finish_reason, wall_seconds=round(ended.timing.get("wall", 0.0), 3),
        resets=sum(r.operation == "reset" for r in charged), control_steps=sum(r.cost for r in charged if r.operation == "step"),
        spent=ledger.spent, budget=ledger.budget, tokens=runner.tokens, token_budget=task.budget.tokens,
        diagnostics=runner.diagnostics, ledger_head=head, operations=runner.operations)
    (run_dir / DEVELOPMENT).write_bytes(msgspec.json.encode(record))
    return record


async def end_attempt(run: Any, links: Any, task: RleTask, run_dir: Path, runner: Any, ended: rec.TrialEnded) -> None:
    """Family 03: the simulator ends the attempt on its side (protocol.sim.EndAttempt: release, settle, score, the
    ledger sealed over the attempt record) and gives the RLE run directory's files; they are written as given,
    with development.json beside them, and the report is the development trial's ``rle_report`` event."""
    from roboswe.evaluation.peers import LOAD_DEADLINE
    from roboswe.protocol import sim as simp

    from .ledger import decode_rows
    from .rundir import LEDGER, read_report
    from .tabletop.runner import write_files

    reply = await links.sim.ask(simp.EndAttempt(), simp.TaskRecord, LOAD_DEADLINE)
    files = {name: bytes(reply.blobs[i]) for name, i in reply.message.files.items()}

    def write() -> DevelopmentRecord:
        write_files(run_dir, files)
        ledger = Ledger.resume(decode_rows(files[LEDGER]), task.budget.charged_steps)
        return write_development(run_dir, ledger, ledger.head, runner, ended)

    record = await trio.to_thread.run_sync(write)
    report = await trio.to_thread.run_sync(read_report, run_dir)
    await links.recorder.event("rle_sealed", ended.trial_id, ledger_head=record.ledger_head, spent=record.spent,
                               ended=record.ended)
    await links.recorder.event("rle_report", ended.trial_id, **msgspec.to_builtins(report))
    run.progress.say(f"{report.task}: attempt {record.ended}, {record.spent} of {record.budget} charged; "
                     f"reward {report.reward:.4f} ({report.status})")


async def verify(run: Any, links: Any, run_dir: Path, trial_id: str) -> None:
    """The verifier in its own process on the sealed artifact; its report (RUN_DIR/report.json) is also an
    ``rle_report`` event of the development trial."""
    from .commands import verifier_command
    from .rundir import read_report

    salt = run.config.rle.salt_file
    command = verifier_command(run_dir, *(["--salt-file", salt] if salt else []), engine=run.job.backend)
    proc = await trio.run_process(command, check=False, capture_stdout=True, capture_stderr=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the verifier failed (exit {proc.returncode}): {proc.stderr.decode(errors='replace')[-2000:]}")
    report = await trio.to_thread.run_sync(read_report, run_dir)
    await links.recorder.event("rle_report", trial_id, **msgspec.to_builtins(report))
    run.progress.say(f"{report.task}: reward {report.reward:.4f} ({report.status})")


def read_development(run_dir: Path) -> DevelopmentRecord:
    return msgspec.json.decode((Path(run_dir) / DEVELOPMENT).read_bytes(), type=DevelopmentRecord)


# --- the command side: `roboswe run --config RLE.toml` --------------------------------------------


def prepare_rle_run(args: Any, config: Any) -> Path:
    """Check an RLE run config's tasks and provider, run preflight, write RUN_DIR/job.json; returns RUN_DIR.

    Raises commands.run.UsageError (bad input) or PreflightRefused, both before anything is written.
    """
    import hashlib

    from roboswe.commands.run import UsageError, _preflight
    from roboswe.commands.run_dirs import new_run_dir
    from roboswe.evaluation.job import CONFIG_COPY, Job, write_job

    from .manifest import TaskError
    from .seeds import SaltError, load_salt

    if config.provider is None:
        raise UsageError(f"{args.config}: an RLE run needs a [provider] section: who develops the artifact")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if getattr(args, "tasks", None) else config.rle.tasks
    if len(tasks) != 1:
        raise UsageError(f"an RLE run develops one task (its run directory is that task's RLE run directory); got {tasks}")
    try:
        load_task(task_ref(tasks[0]))
    except TaskError as e:
        raise UsageError(str(e)) from None
    if salt_file := config.rle.salt_file:  # read here only to refuse a bad one before anything starts
        if not Path(salt_file).is_absolute():
            raise UsageError(f"[rle] salt_file must be an absolute path (the actors read it from their own "
                             f"directories), got {salt_file!r}")
        try:
            load_salt(Path(salt_file))
        except SaltError as e:
            raise UsageError(f"[rle] salt_file: {e}") from None
    if getattr(args, "sim", None) or getattr(args, "ray", None) or getattr(args, "resume", None):
        raise UsageError("an RLE run takes neither --sim, --ray nor --resume: its development simulator is the run's own")
    run_dir = (args.out or new_run_dir()).resolve()
    if (run_dir / "run.sqlite").exists():
        raise UsageError(f"{run_dir} already holds a run; choose another --out")
    backend = args.engine or config.series.backend
    _preflight(args, config, args.config, [], backend, run_dir, remote_sim=False)
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir.chmod(0o755)  # the bwrap sandbox user traverses it to reach the workspace
    config_bytes = args.config.read_bytes()
    (run_dir / CONFIG_COPY).write_bytes(config_bytes)
    write_job(run_dir, Job(kind="run", run_id=run_dir.name, admitted_path="", admitted_sha256="", tasks=tasks,
                           backend=backend, verify=False, videos=False, workers=1, rle=True,
                           config_sha256=hashlib.sha256(config_bytes).hexdigest()))
    return run_dir


def print_rle_outcome(run_dir: Path, *, index: bool = True) -> None:
    """The development summary, the reward report and, unless a demo prints one over all its runs, the index
    (`roboswe run` and `rle demo` alike)."""
    from roboswe.terminal import echo

    from .commands import render_report
    from .index import render_index, rle_index
    from .rundir import read_report

    if not (run_dir / DEVELOPMENT).exists():
        echo(f"{run_dir}: no development record (the run stopped before the seal)")
        return
    record = read_development(run_dir)
    echo(f"development: {record.ended} after {len(record.operations)} operations, {record.wall_seconds:.1f} s; "
         f"{record.control_steps} control steps and {record.resets} resets charged ({record.spent} of {record.budget}"
         + (f"; {record.tokens} of {record.token_budget} tokens" if record.token_budget is not None else "")
         + f"); {record.diagnostics} diagnostic call(s); ledger head {record.ledger_head[:16]}")
    if record.finish_reason:
        echo(f"  participant: {record.finish_reason}")
    if (run_dir / "report.json").exists():
        report = read_report(run_dir)
        echo(render_report(report))
        if index:
            echo(render_index(rle_index([report])))
