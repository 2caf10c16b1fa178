"""Fresh participants: N independent attempts, each by a new participant in a new workspace holding only a sealed artifact.

RLE-Bench's transfer step (family 02): after the development is sealed, each evaluation agent starts
with a fresh context (``retain = none``: a new participant, none of the developer's conversation, none
of another agent's) and an empty workspace into which the sealed copy alone is restored, checked file
by file against its seal record (``seal.read_sealed``) before and after it is written. What an attempt
writes into its workspace is deleted with it, so nothing passes from one attempt to the next. A control
arm is the same step with nothing restored. Through the actors (roboswe/rle/transfer/runner.py) each
attempt is its own one-trial series with a new conversation and ``retain = none``; ``restore_sealed`` is
what its workspace is given.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from . import rundir
from .seal import read_sealed


def restore_sealed(run_dir: Path, workspace: Path) -> str:
    """Write the run's sealed copy into the empty ``workspace`` as plain writable files; return its digest,
    re-read from the workspace (raises seal.SealError when the copy or the restored files do not match)."""
    sealed = rundir.read_sealed_record(run_dir)
    contents = read_sealed(Path(run_dir) / rundir.ARTIFACT, sealed)
    if any(workspace.iterdir()):
        raise FileExistsError(f"{workspace} is not empty; a fresh participant starts from the sealed copy alone")
    for rel, data in contents.items():
        path = workspace / PurePosixPath(rel)
        for folder in reversed(path.relative_to(workspace).parents[:-1]):  # the sandbox user traverses them
            (workspace / folder).mkdir(exist_ok=True)
            (workspace / folder).chmod(0o755)
        path.write_bytes(data)
    read_sealed(workspace, sealed)
    return sealed.digest
