"""Fresh participants: N independent attempts, each by a new participant in a new workspace holding only a sealed artifact.

RLE-Bench's transfer step (family 02): after the development is sealed, each evaluation agent starts
with a fresh context (``retain = none``: a new participant, none of the developer's conversation, none
of another agent's) and an empty workspace into which the sealed copy alone is restored, checked file
by file against its seal record (``seal.read_sealed``) before and after it is written. What an attempt
writes into its workspace is deleted with it, so nothing passes from one attempt to the next. A control
arm is the same step with nothing restored.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from . import rundir
from .seal import read_sealed

Result = TypeVar("Result")


def restore_sealed(run_dir: Path, workspace: Path) -> str:
    """Write the run's sealed copy into the empty ``workspace`` as plain writable files; return its digest,
    re-read from the workspace (raises seal.SealError when the copy or the restored files do not match)."""
    sealed = rundir.read_sealed_record(run_dir)
    contents = read_sealed(Path(run_dir) / rundir.ARTIFACT, sealed)
    if any(workspace.iterdir()):
        raise FileExistsError(f"{workspace} is not empty; a fresh participant starts from the sealed copy alone")
    for rel, data in contents.items():
        path = workspace / PurePosixPath(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    read_sealed(workspace, sealed)
    return sealed.digest


def run_fresh(names: list[str], make_participant: Callable[[], Any],
              attempt: Callable[[str, Any, Path, str], Result], *, root: Path,
              restore_from: Path | None) -> list[Result]:
    """One attempt per name, in order: a new workspace under ``root`` (the sealed copy of ``restore_from`` restored
    into it, or nothing: the control), a new participant from ``make_participant()``, then ``attempt(name,
    participant, workspace, handoff_digest)`` ("" with nothing restored); the workspace is removed afterwards."""
    results, seen = [], []
    for name in names:
        workspace = root / name
        workspace.mkdir(parents=True)
        try:
            handoff = restore_sealed(restore_from, workspace) if restore_from is not None else ""
            participant = make_participant()  # a fresh context: never one object reused across attempts
            if any(participant is p for p in seen):
                raise ValueError(f"{name}: make_participant() gave a participant that already attempted; each needs its own")
            seen.append(participant)
            results.append(attempt(name, participant, workspace, handoff))
        finally:
            shutil.rmtree(workspace, ignore_errors=True)
    return results
