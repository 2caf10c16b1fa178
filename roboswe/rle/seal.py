"""Seal: the development workspace filtered by the artifact contract into a ``SealedArtifact``.

The workspace was written by hostile code. The walk is sandbox/walk.py's (directory fds with
O_NOFOLLOW, bounded depth and entries, no recursion), files are opened relative to their
directory without following links and non-blocking (a fifo cannot hang the seal), and at most
``max_file_bytes + 1`` bytes are read from any file. What the contract names but cannot be sealed
(a link, a fifo, a device, a file too large, a name that is not plain text) is refused with its
reason; what the contract does not name is left out. Nothing reads the workspace after the seal.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import os
import stat
from pathlib import Path, PurePosixPath

import msgspec

from roboswe.sandbox.walk import Found, Refused, entry_type, walk

from .manifest import ArtifactContract

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class SealedFile(msgspec.Struct, frozen=True, kw_only=True):
    path: str  # relative, POSIX separators
    size: int
    sha256: str


class SealRefusal(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    reason: str


class SealedArtifact(msgspec.Struct, frozen=True, kw_only=True):
    """What the verifier may read: these files with these hashes, and the digest over all of them."""

    digest: str  # sha256 over the sorted (path, size, sha256) list
    files: tuple[SealedFile, ...]
    entry_file: str
    entry_function: str
    refused: tuple[SealRefusal, ...] = ()
    ledger_head: str | None = None  # the development ledger's head at the seal; None for a submitted directory

    @property
    def has_entry(self) -> bool:
        return any(f.path == self.entry_file for f in self.files)


class SealError(Exception):
    """The sealed copy on disk does not match its record (a file changed, added or missing)."""


def artifact_digest(files: tuple[SealedFile, ...]) -> str:
    listing = [[f.path, f.size, f.sha256] for f in sorted(files, key=lambda f: f.path)]
    return hashlib.sha256(msgspec.json.encode(listing)).hexdigest()


def _included(path: str, contract: ArtifactContract) -> bool:
    return path == contract.entry_file or any(fnmatch.fnmatchcase(path, pattern) for pattern in contract.include)


def _read_bounded(item: Found, limit: int) -> bytes | str:
    """The file's bytes, or why not (never follows a link, never blocks, never reads past limit+1)."""
    try:
        fd = os.open(item.name, _FILE_FLAGS, dir_fd=item.dir_fd)
    except OSError as e:
        return f"could not be opened without following links: {e.strerror}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return f"is a {entry_type(st.st_mode)}, not a regular file"
        if st.st_size > limit:
            return f"is {st.st_size} bytes, over the contract's {limit} per file"
        chunks, total = [], 0
        while total <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            return f"grew past the contract's {limit} bytes per file while being read"
        return b"".join(chunks)
    finally:
        os.close(fd)


def seal_directory(workspace: str | os.PathLike, contract: ArtifactContract, *,
                   ledger_head: str | None = None) -> tuple[SealedArtifact, dict[str, bytes]]:
    """Seal ``workspace``: the record and the sealed bytes by path. Never raises for what the workspace holds."""
    contents: dict[str, bytes] = {}
    refused: list[SealRefusal] = []
    total = 0
    for item in walk(workspace, max_depth=contract.max_depth, max_entries=4 * contract.max_files + 256):
        if isinstance(item, Refused):
            if _included(item.path, contract) or item.type in ("entries", "directory"):
                refused.append(SealRefusal(path=item.path, reason=f"{item.type}: {item.reason}"))
            continue
        kind = entry_type(item.st.st_mode)
        if kind == "directory" or not _included(item.path, contract):
            continue  # outside the contract: left out, not an error
        if kind != "file":
            refused.append(SealRefusal(path=item.path, reason=f"is a {kind}; only regular files are sealed"))
            continue
        if len(contents) >= contract.max_files:
            refused.append(SealRefusal(path=item.path, reason=f"over the contract's {contract.max_files} files"))
            continue
        data = _read_bounded(item, contract.max_file_bytes)
        if isinstance(data, str):
            refused.append(SealRefusal(path=item.path, reason=data))
            continue
        if total + len(data) > contract.max_total_bytes:
            refused.append(SealRefusal(path=item.path, reason=f"would take the artifact over {contract.max_total_bytes} bytes"))
            continue
        total += len(data)
        contents[item.path] = data
    if contract.entry_file not in contents and not any(r.path == contract.entry_file for r in refused):
        refused.append(SealRefusal(path=contract.entry_file, reason="the entry point is missing"))
    files = tuple(SealedFile(path=p, size=len(b), sha256=hashlib.sha256(b).hexdigest()) for p, b in sorted(contents.items()))
    sealed = SealedArtifact(digest=artifact_digest(files), files=files, entry_file=contract.entry_file,
                            entry_function=contract.entry_function, refused=tuple(refused), ledger_head=ledger_head)
    return sealed, contents


def write_sealed(dest: Path, contents: dict[str, bytes]) -> None:
    """The sealed copy: plain files, read-only (0444 files, 0555 directories)."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel, data in contents.items():
        path = dest / PurePosixPath(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o444)
    for d in sorted((p for p in dest.rglob("*") if p.is_dir()), reverse=True):
        d.chmod(0o555)
    dest.chmod(0o555)


def read_sealed(src: Path, sealed: SealedArtifact) -> dict[str, bytes]:
    """The sealed copy's bytes, checked file by file and as a whole against the record; raises SealError."""
    copy, record = seal_directory(src, _contract_of(sealed))
    if copy.digest != sealed.digest:
        expected = {f.path: f.sha256 for f in sealed.files}
        found = {f.path: f.sha256 for f in copy.files}
        diff = sorted(p for p in expected.keys() | found.keys() if expected.get(p) != found.get(p))
        raise SealError(f"the sealed copy does not match its digest: {', '.join(diff[:10]) or 'listing differs'}")
    if artifact_digest(sealed.files) != sealed.digest:
        raise SealError("the record's digest does not cover its file list")
    return record


def _contract_of(sealed: SealedArtifact) -> ArtifactContract:
    """A contract admitting exactly the sealed files (re-reading a sealed copy, not a workspace)."""
    biggest = max((f.size for f in sealed.files), default=1)
    return ArtifactContract(entry_file=sealed.entry_file, entry_function=sealed.entry_function,
                            include=tuple(glob.escape(f.path) for f in sealed.files), max_files=max(1, len(sealed.files)),
                            max_file_bytes=max(1, biggest), max_total_bytes=max(1, sum(f.size for f in sealed.files)),
                            max_depth=64)
