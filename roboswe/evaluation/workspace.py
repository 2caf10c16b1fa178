"""The participant's workspace as a trial, a series and a replay touch it: one seam, two places it can be.

Every file operation the coordinator's side does on a workspace goes through ``open_workspace``:
make it fresh, restore a checkpoint into it, write, read, list, capture a checkpoint, drop it. Where
the workspace lives is the run's (``Links.node_workspaces``, from `[fleet] workspaces`):

- ``HostWorkspace``: a directory under RUN_DIR on this machine, as in every local run and a Ray run on
  a RUN_DIR shared by every node: ``roboswe.sandbox.workspace.Workspace`` here, checkpoints captured by
  the recorder from the path.
- ``NodeWorkspace``: kept by the worker's bridge on its own node (a Ray run whose nodes share no
  directory): each operation is a bridge request (bridge/workspaces.py applies it there, with the
  same rules and error texts); a checkpoint is captured there and carried to the recorder, which reads
  every blob back with its sha256 before its receipt; only then is the node told to drop its copies.

Either raises ``WorkspaceError`` with the text the participant reads for what the participant caused.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from roboswe.actors import RemoteError
from roboswe.evaluation.ends import TrialIncomplete
from roboswe.evaluation.plan import fresh_dir
from roboswe.protocol import recorder as rec
from roboswe.protocol.bridge import (
    CaptureWorkspace,
    DropWorkspace,
    FreshWorkspace,
    RestoreWorkspace,
    WorkspaceCaptured,
    WorkspaceCarried,
    WorkspaceFile,
    WorkspaceList,
    WorkspaceListing,
    WorkspaceRead,
    WorkspaceWrite,
)
from roboswe.protocol.control import Ok
from roboswe.sandbox.checkpoints import BlobStore, load_manifest, restore
from roboswe.sandbox.workspace import (  # noqa: F401 - the coordinator's names for them
    MAX_LIST_ENTRIES,
    MAX_LISTING_BYTES,
    MAX_READ_BYTES,
    MAX_WRITE_BYTES,
    Workspace,
    WorkspaceError,
    check_relative,
)

if TYPE_CHECKING:
    from roboswe.evaluation.peers import Links


def open_workspace(links: Links, path: Path) -> TrialWorkspace:
    """The workspace the head names ``path`` (under RUN_DIR), where this run keeps it."""
    if links.node_workspaces is not None:
        return NodeWorkspace(links, path.relative_to(links.node_workspaces).as_posix())
    return HostWorkspace(path, links.recorder)


class HostWorkspace:
    """A workspace directory on this machine (under RUN_DIR)."""

    def __init__(self, path: Path, recorder):
        self.path = path
        self.where = str(path)  # what OpenTrial names
        self.files = Workspace(path)
        self.recorder = recorder

    async def fresh(self) -> None:
        """Empty (earlier content is removed: its checkpoints hold it)."""
        fresh_dir(self.path)

    async def restore(self, manifest: bytes, blobs: BlobStore) -> None:
        """A checkpoint's files into the empty workspace; raises CheckpointError."""
        await trio.to_thread.run_sync(restore, load_manifest(manifest), blobs, self.path)

    async def write(self, path: str, content: str) -> int:
        return await trio.to_thread.run_sync(self.files.write, path, content)

    async def read(self, path: str, max_bytes: int = MAX_READ_BYTES) -> tuple[str, int]:
        return await trio.to_thread.run_sync(self.files.read, path, max_bytes)

    async def listing_text(self) -> str:
        return await trio.to_thread.run_sync(self.files.listing_text)

    async def checkpoint(self, trial: str, checkpoint_id: str, label: str, op_seq: int | None) -> rec.CheckpointCaptured:
        return await self.recorder.checkpoint(trial, checkpoint_id, label, self.path, op_seq)

    async def drop(self) -> None:
        """Remove it (a replay's workspace)."""
        await trio.to_thread.run_sync(lambda: shutil.rmtree(self.path, ignore_errors=True))

    async def release(self) -> None:
        """Its series is over: it stays in RUN_DIR, as the run left it."""


class NodeWorkspace:
    """A workspace the worker's bridge keeps on its node, named as the head would name it under RUN_DIR."""

    def __init__(self, links: Links, name: str):
        self.links = links  # the current bridge: a Ray worker's is relinked after a node loss
        self.name = name
        self.where = name

    async def _ask(self, message, expected, blobs=()):
        try:
            return await self.links.bridge.ask(message, expected, WORKSPACE_DEADLINE, blobs)
        except RemoteError as e:
            if e.error.code == "workspace":
                raise WorkspaceError(e.error.detail) from None
            raise

    async def fresh(self) -> None:
        await self._ask(FreshWorkspace(workspace=self.name), Ok)

    async def restore(self, manifest: bytes, blobs: BlobStore) -> None:
        """Send the checkpoint's manifest and every blob it names (read back here with its sha256) to the node."""
        shas = list(dict.fromkeys(e.sha256 for e in load_manifest(manifest).entries))
        data = await trio.to_thread.run_sync(lambda: [blobs.get(sha) for sha in shas])
        carried = [rec.CarriedBlob(sha256=sha, size=len(d)) for sha, d in zip(shas, data)]
        await self._ask(RestoreWorkspace(workspace=self.name, manifest=manifest, blobs=carried), Ok, [b"".join(data)])

    async def write(self, path: str, content: str) -> int:
        check_relative(path)  # refused here, as on the host, before anything travels
        return (await self._ask(WorkspaceWrite(workspace=self.name, path=path, content=content), WorkspaceFile)).message.size

    async def read(self, path: str, max_bytes: int = MAX_READ_BYTES) -> tuple[str, int]:
        check_relative(path)
        reply = (await self._ask(WorkspaceRead(workspace=self.name, path=path, max_bytes=max_bytes), WorkspaceFile)).message
        return reply.text[:max_bytes], reply.size  # bounded here too: the node's reply is another machine's

    async def listing_text(self) -> str:
        return (await self._ask(WorkspaceList(workspace=self.name), WorkspaceListing)).message.text[:2 * MAX_LISTING_BYTES]

    async def checkpoint(self, trial: str, checkpoint_id: str, label: str, op_seq: int | None) -> rec.CheckpointCaptured:
        """Captured on the node, carried to the recorder; the node drops its copies only on the recorder's receipt.

        Raises TrialIncomplete when the receipt does not name what was carried, RemoteError when either side refused.
        """
        decoded = await self._ask(CaptureWorkspace(workspace=self.name, trial=trial), WorkspaceCaptured)
        captured: WorkspaceCaptured = decoded.message
        frame = decoded.blobs[0] if decoded.blobs else b""
        receipt = await self.links.recorder.carry_checkpoint(rec.CarryCheckpoint(
            checkpoint_id=checkpoint_id, trial_id=trial, label=label, op_seq=op_seq, manifest=captured.manifest,
            manifest_sha256=captured.manifest_sha256, blobs=captured.blobs), frame)
        sent = sorted(b.sha256 for b in captured.blobs)
        if receipt.manifest_sha256 != captured.manifest_sha256 or sorted(receipt.carried) != sent:
            raise TrialIncomplete("infrastructure", f"checkpoint {checkpoint_id}: the recorder's receipt ({len(receipt.carried)} blob(s), "
                               f"manifest {receipt.manifest_sha256[:16]}) is not what was carried ({len(sent)}, "
                               f"{captured.manifest_sha256[:16]}); the node keeps its copies")
        if receipt.carried:
            await self._ask(WorkspaceCarried(workspace=self.name, sha256=receipt.carried), Ok)
        return receipt

    async def drop(self) -> None:
        await self._ask(DropWorkspace(workspace=self.name), Ok)

    async def release(self) -> None:
        """Its series is over: every checkpoint the head needs is there, so the node's copy goes."""
        await self.drop()


TrialWorkspace = HostWorkspace | NodeWorkspace

WORKSPACE_DEADLINE = 120.0  # one workspace request on the node (a checkpoint carries up to 256 MiB)
