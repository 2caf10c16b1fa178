"""The workspaces a fleet worker's bridge keeps on its own node (`[fleet] workspaces = "node"`).

Without a directory shared by every node, a worker's workspaces cannot live under the head's RUN_DIR:
the sandbox runs here. So they live here, under the node-local ``root``, named as the head names
them (relative: ``workspaces/<series>``, ``replays/<replay>``), and the coordinator's file operations
(roboswe/evaluation/workspace.py ``NodeWorkspace``) are applied here by the one ``Workspace`` the head
uses on its own (sandbox/workspace.py: the same checks, the same error texts). A checkpoint is
captured here and carried to the head's recorder (sandbox/carry.py); a restore arrives the other way.

``answer`` turns one workspace request into its reply; it runs off the bridge's loop (it touches the
disk) and never raises: a bad path or what the sandbox user planted is Error(code="workspace"), whose
detail the participant reads; a capture the blob store cannot take is Error(code="checkpoint").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from roboswe.protocol import Message
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
    WorkspaceRequest,
    WorkspaceWrite,
)
from roboswe.protocol.control import Error, Ok
from roboswe.sandbox.carry import StagingStore, outgoing, unpack
from roboswe.sandbox.checkpoints import CheckpointError, capture, restore
from roboswe.sandbox.walk import remove_tree
from roboswe.sandbox.workspace import Workspace, WorkspaceError, check_relative

log = structlog.get_logger()


class NodeWorkspaces:
    """This node's workspaces under ``root`` (``root/w/<name>``) and the staged blobs of their checkpoints."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._traversable(self.root / "w")
        self.staging = StagingStore(self.root / "blobs")

    def path(self, name: str) -> Path:
        """The directory of workspace ``name``; raises WorkspaceError for a name that is not a plain relative path."""
        return self.root / "w" / check_relative(name)

    def answer(self, message: WorkspaceRequest, blobs: tuple[Any, ...]) -> Message | tuple[Message, list[bytes]]:
        """The reply to one workspace request (blocking: run it on a thread); never raises."""
        try:
            return self._answer(message, blobs)
        except WorkspaceError as e:
            return Error(code="workspace", detail=str(e))
        except CheckpointError as e:
            return Error(code="checkpoint", detail=f"workspace {message.workspace!r}: {e}")
        except (OSError, ValueError) as e:  # the node's own disk, or a malformed name in a receipt
            log.warning("node_workspace_failed", workspace=message.workspace, error=f"{type(e).__name__}: {e}")
            return Error(code="workspace", detail=f"workspace {message.workspace!r} on this node: {type(e).__name__}: {e}")

    def _answer(self, message: WorkspaceRequest, blobs: tuple[Any, ...]) -> Message | tuple[Message, list[bytes]]:
        where = self.path(message.workspace)
        match message:
            case FreshWorkspace():
                remove_tree(where)
                self._traversable(where)
                return Ok()
            case RestoreWorkspace(manifest=manifest, blobs=carried):
                manifest_ = unpack(manifest, carried, _one_frame(blobs), self.staging)
                restore(manifest_, self.staging, where)
                self.staging.carried([b.sha256 for b in carried])  # the head's own blobs: no copy kept here
                return Ok()
            case WorkspaceWrite(path=path, content=content):
                return WorkspaceFile(size=Workspace(where).write(path, content))
            case WorkspaceRead(path=path, max_bytes=max_bytes):
                text, size = Workspace(where).read(path, max_bytes)
                return WorkspaceFile(size=size, text=text)
            case WorkspaceList():
                return WorkspaceListing(text=Workspace(where).listing_text())
            case CaptureWorkspace(trial=trial):
                captured = capture(where, self.staging, trial)
                carried, frame = outgoing(captured.manifest, self.staging)
                return WorkspaceCaptured(manifest=captured.manifest_bytes, manifest_sha256=captured.manifest_sha256,
                                         blobs=carried), [frame]
            case WorkspaceCarried(sha256=shas):
                self.staging.carried(shas)
                return Ok()
            case DropWorkspace():
                remove_tree(where)
                return Ok()
        return Error(code="unsupported", detail=f"not a workspace request: {type(message).__name__}")


    def _traversable(self, path: Path) -> None:
        """``path`` and the directories above it, from the root down, made for the sandbox user to traverse
        (bwrap binds the workspace as that user)."""
        for level in [*reversed(path.relative_to(self.root.parent).parents[:-1]), path.relative_to(self.root.parent)]:
            d = self.root.parent / level
            d.mkdir(exist_ok=True)
            d.chmod(0o755)


def _one_frame(blobs: tuple[Any, ...]) -> bytes | memoryview:
    if len(blobs) > 1:
        raise CheckpointError(f"a restore carries its blobs in one frame, got {len(blobs)}")
    return blobs[0] if blobs else b""

