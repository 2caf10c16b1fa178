"""Checkpoints carried between hosts: a fleet worker's node captures them, the head keeps what it lacks.

Where a worker's workspace lives on its own node (`[fleet] workspaces = "node"`), its bridge captures
each checkpoint there with the head's own ``capture`` (the same walk, the same refused entries for
the same reasons), into a ``StagingStore`` on the node, and sends the manifest with the blobs the head
has not acknowledged yet, one after another in one frame (``outgoing``; a message has at most 64
frames). The node drops its copy of a blob only on the head's receipt: the sha256 the recorder read
back from its own store (``StagingStore.carried``), never a path or a size alone.

Everything that arrives is checked before anything is stored (``checked``): the manifest as a restore
would validate it and against its sha256, each blob's bytes against its claimed sha256 and the
manifest's size, the totals against the checkpoint and trial caps, and that every blob the manifest
names is either carried or already held. Whatever is wrong raises ``CarryRefused``: the checkpoint is
refused (the trial ends, the run goes on) and nothing is stored under a name its bytes do not have.
The head uses it for checkpoints (``receive``), the node for a restore the head sends (``unpack``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

from roboswe.protocol.bridge import CarriedBlob

from .checkpoints import (
    MAX_CHECKPOINT_BYTES,
    MAX_TRIAL_NEW_BYTES,
    MIN_FREE_BYTES,
    BlobStore,
    Capture,
    CheckpointError,
    Manifest,
    ManifestInvalid,
    load_manifest,
    validate,
)

MAX_MANIFEST_BYTES = 16 << 20
"""A manifest is a few hundred bytes per entry and the walk stops at a few thousand entries."""


class CarryRefused(CheckpointError):
    """A carried checkpoint (or restore) that does not hold together; the message says what is wrong."""


class StagingStore(BlobStore):
    """A node's blob store whose blobs leave once the head acknowledged them.

    A blob the head holds is never kept here again: a later capture of the same content counts
    it as held (not new), so the trial's new-byte cap counts what the head would store.
    """

    def __init__(self, root: str | Path):
        super().__init__(root)
        self.acknowledged: set[str] = set()

    def _settle(self, tmp: Path, sha256: str) -> tuple[str, bool]:
        if sha256 in self.acknowledged:
            tmp.unlink()
            return sha256, False
        return super()._settle(tmp, sha256)

    def carried(self, shas: Sequence[str]) -> None:
        """The head's receipt for ``shas``: drop this node's copies; raises ValueError for a malformed name."""
        for sha in shas:
            path = self.path(sha)
            self.acknowledged.add(sha)
            path.unlink(missing_ok=True)


def outgoing(manifest: Manifest, staging: StagingStore) -> tuple[list[CarriedBlob], bytes]:
    """The manifest's blobs the head has not acknowledged, each once, and their bytes one after another.

    Raises BlobCorrupt when a staged blob no longer reads back with its sha256.
    """
    blobs: list[CarriedBlob] = []
    parts: list[bytes] = []
    seen: set[str] = set()
    for entry in manifest.entries:
        sha = entry.sha256
        if sha in staging.acknowledged or sha in seen:
            continue
        seen.add(sha)
        data = staging.get(sha)
        blobs.append(CarriedBlob(sha256=sha, size=len(data)))
        parts.append(data)
    return blobs, b"".join(parts)


def checked(manifest_bytes: bytes, manifest_sha256: str | None, blobs: Sequence[CarriedBlob], frame: bytes | memoryview,
            held: Callable[[str], bool]) -> tuple[Manifest, list[tuple[CarriedBlob, memoryview]]]:
    """The validated manifest and each carried blob with its bytes; raises CarryRefused naming the first problem.

    ``held``: whether the receiving store already holds a blob the sender did not carry.
    """
    if len(manifest_bytes) > MAX_MANIFEST_BYTES:
        raise CarryRefused(f"the manifest is {len(manifest_bytes)} bytes, over {MAX_MANIFEST_BYTES}")
    digest = hashlib.sha256(manifest_bytes).hexdigest()
    if manifest_sha256 is not None and digest != manifest_sha256:
        raise CarryRefused(f"the manifest hashes to {digest[:16]}, not the claimed {manifest_sha256[:16]}")
    try:
        manifest = load_manifest(manifest_bytes)
        validate(manifest)
    except ManifestInvalid as e:
        raise CarryRefused(str(e)) from None
    sizes: dict[str, int] = {}
    for entry in manifest.entries:
        if sizes.setdefault(entry.sha256, entry.size) != entry.size:
            raise CarryRefused(f"blob {entry.sha256[:16]} is listed with two sizes ({sizes[entry.sha256]}, {entry.size})")
    if manifest.total_bytes > MAX_CHECKPOINT_BYTES:
        raise CarryRefused(f"the manifest lists {manifest.total_bytes} bytes, over the checkpoint cap of {MAX_CHECKPOINT_BYTES}")
    view = memoryview(frame)
    if sum(b.size for b in blobs) != len(view):
        raise CarryRefused(f"the blobs claim {sum(b.size for b in blobs)} bytes, the frame holds {len(view)}")
    pieces: list[tuple[CarriedBlob, memoryview]] = []
    seen: set[str] = set()
    offset = 0
    for blob in blobs:
        if blob.sha256 not in sizes:
            raise CarryRefused(f"carried blob {blob.sha256[:16]!r} is not in the manifest")
        if blob.size != sizes[blob.sha256]:
            raise CarryRefused(f"blob {blob.sha256[:16]} carries {blob.size} bytes, the manifest says {sizes[blob.sha256]}")
        if blob.sha256 in seen:
            raise CarryRefused(f"blob {blob.sha256[:16]} is carried twice")
        seen.add(blob.sha256)
        piece = view[offset:offset + blob.size]
        offset += blob.size
        actual = hashlib.sha256(piece).hexdigest()
        if actual != blob.sha256:
            raise CarryRefused(f"the bytes carried as blob {blob.sha256[:16]} hash to {actual[:16]}")
        pieces.append((blob, piece))
    missing = [e.path for e in manifest.entries if e.sha256 not in seen and not held(e.sha256)]
    if missing:
        raise CarryRefused(f"{len(missing)} file(s) name blobs neither carried nor held here, e.g. {missing[0]!r}")
    return manifest, pieces


def receive(manifest_bytes: bytes, manifest_sha256: str, blobs: Sequence[CarriedBlob], frame: bytes | memoryview,
            store: BlobStore, trial: str | None) -> tuple[Capture, list[str]]:
    """Store a carried checkpoint at the head: (the capture as if taken here, the sha256 of every carried blob
    as read back from ``store``). Raises CarryRefused (nothing stored) or CheckpointError (the store failed)."""
    manifest, pieces = checked(manifest_bytes, manifest_sha256, blobs, frame, store.has)
    new_bytes = sum(b.size for b, _ in pieces if not store.has(b.sha256))
    if trial is not None and store.new_bytes.get(trial, 0) + new_bytes > MAX_TRIAL_NEW_BYTES:
        raise CarryRefused(f"{new_bytes} new bytes would take trial {trial}'s checkpoints past {MAX_TRIAL_NEW_BYTES}")
    try:
        if store.free_bytes() - new_bytes < MIN_FREE_BYTES:
            raise CarryRefused(f"the run directory's disk would keep under {MIN_FREE_BYTES} bytes free")
        new_blobs, read_back = [], []
        for blob, piece in pieces:
            sha, new = store.put(bytes(piece))  # a new blob reads back with its sha256 before put returns
            if not new:
                store.get(sha)  # one already held reads back too: the receipt says the head has these bytes
            if sha != blob.sha256:
                raise CarryRefused(f"blob {blob.sha256[:16]} was stored as {sha[:16]}")
            if new:
                new_blobs.append((sha, blob.size))
                if trial is not None:
                    store.new_bytes[trial] = store.new_bytes.get(trial, 0) + blob.size
            read_back.append(sha)
    except OSError as e:
        raise CheckpointError(f"blob store {store.root}: {e.strerror}") from None
    capture = Capture(manifest=manifest, manifest_bytes=manifest_bytes,
                      manifest_sha256=hashlib.sha256(manifest_bytes).hexdigest(), new_blobs=new_blobs)
    return capture, read_back


def unpack(manifest_bytes: bytes, blobs: Sequence[CarriedBlob], frame: bytes | memoryview,
           staging: StagingStore) -> Manifest:
    """A restore's manifest and blobs, checked and staged on the node (``checkpoints.restore`` reads them from
    ``staging``); the caller drops them with ``staging.carried`` once restored. Raises CarryRefused."""
    manifest, pieces = checked(manifest_bytes, None, blobs, frame, staging.has)
    for blob, piece in pieces:
        staging.acknowledged.discard(blob.sha256)  # staged again until the restore is done
        staging.put(bytes(piece))
    return manifest
