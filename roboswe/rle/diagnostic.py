"""The development phase's diagnostic evaluator: the current estimator scored on PUBLIC diagnostic seeds.

During development the participant may `exec` the reserved path ``DIAGNOSE`` (no file) up to the
manifest's ``development.diagnostic_calls`` times; each call seals the workspace by the artifact
contract as it is now, and the verifier process scores that copy exactly as it scores the sealed
artifact, on a smaller battery (at most ``DIAGNOSTIC_GROUPS`` stage-A groups and ``DIAGNOSTIC_EPISODES``
stage-B episodes) drawn from the diagnostic salt: public bytes derived from the task's id and version,
labelled ``diagnostic``, so its seeds are neither the public CI salt's nor a private salt's (the hidden
seeds never reach the development phase). A call past the limit is refused and runs nothing. Every
call, refused or run, is an ``rle_diagnostic`` event of the development trial; each run's evidence is
kept under RUN_DIR/diagnostics/N/.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import trio

from .manifest import RleTask
from .report import RewardReport

DIAGNOSE = "DIAGNOSE"
"""The reserved `exec` path that asks for a diagnostic call instead of running a script."""
DIAGNOSTIC_GROUPS, DIAGNOSTIC_EPISODES = 2, 2
DIAGNOSTIC_LABEL = "diagnostic"  # the salt file's name, so the report's salt label


def diagnostic_salt(task: RleTask) -> bytes:
    """Public by design: the diagnostic seeds are anyone's to know, and differ from every verification salt's."""
    return f"RLE-Bench diagnostic seeds|{task.id}|{task.protocol.version}".encode()


def diagnostic_task(task: RleTask) -> RleTask:
    """The task with the diagnostic battery (the same scene, noise, call limits and scoring)."""
    ev = task.evaluation
    return msgspec.structs.replace(task, evaluation=msgspec.structs.replace(
        ev, stage_a_groups=min(ev.stage_a_groups, DIAGNOSTIC_GROUPS),
        stage_b_episodes=min(ev.stage_b_episodes, DIAGNOSTIC_EPISODES)))


def guide(task: RleTask) -> str:
    """The development guide's sentence on the diagnostic evaluator ('' when the task offers none)."""
    calls = task.development.diagnostic_calls
    if not calls or task.evaluation is None:
        return ""
    return (f" Diagnostic evaluator: exec the path {DIAGNOSE!r} (no such file is needed) to have the estimator as your "
            f"workspace holds it now scored like the final artifact, on a small battery of public diagnostic seeds "
            f"(not the verification's); at most {calls} calls.")


async def diagnose(task: RleTask, workspace: Path, out: Path, *, backend: str | None) -> RewardReport:
    """Seal ``workspace`` as it is now into ``out`` and have the verifier process score it on the diagnostic seeds."""
    from .commands import verifier_command
    from .rundir import read_report, write_submission
    from .seal import seal_directory

    small = diagnostic_task(task)
    sealed, contents = await trio.to_thread.run_sync(seal_directory, workspace, small.artifact)
    await trio.to_thread.run_sync(write_submission, out, small, sealed, contents)
    salt_file = out / DIAGNOSTIC_LABEL
    salt_file.write_bytes(diagnostic_salt(task))
    proc = await trio.run_process(verifier_command(out, "--salt-file", str(salt_file), engine=backend), check=False,
                                  capture_stdout=True, capture_stderr=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the diagnostic verifier failed (exit {proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace')[-1000:]}")
    return await trio.to_thread.run_sync(read_report, out)


def summary(report: RewardReport, n: int, calls: int) -> str:
    """What the participant is told of a diagnostic call: the reward, its components, the gates; no answers."""
    head = (f"diagnostic call {n} of {calls} (public diagnostic seeds, {report.calls} artifact calls): "
            f"{report.status}, reward {report.reward:.4f}")
    parts = [head]
    parts += [f"{c.name} {c.value:.4f}" for c in report.components if c.name.count("_") < 2 or c.name == "rate_hz"]
    parts += [f"gate {g.name}: {g.reason}" for g in report.gates]
    return "; ".join(parts)
