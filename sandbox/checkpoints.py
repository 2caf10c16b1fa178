"""Workspace checkpoints: content-addressed blobs plus a manifest, restored only after validation.

Capture walks the workspace through directory file descriptors with O_NOFOLLOW,
so authored code cannot redirect it with a symlink swapped in mid-walk; anything
that is not a regular file or directory (symlink, fifo, device, socket) is
listed in ``refused`` and never followed or read. Blobs live under
RUN_DIR/blobs/<sha[:2]>/<sha>; a blob counts as stored only once its bytes
read back with their sha256.

Restore validates the whole manifest before touching the disk, writes into an
empty directory only, checks every blob's sha256 and restores mode and mtime.
Directories are implied by file paths (empty directories are not kept).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import msgspec
import structlog

log = structlog.get_logger()

MANIFEST_VERSION = 1
_CHUNK = 1 << 20
_HEX = frozenset("0123456789abcdef")

EntryType = Literal["file", "symlink", "fifo", "device", "socket", "other"]


class CheckpointError(Exception):
    """A checkpoint could not be captured or restored; the message says what and why."""


class ManifestInvalid(CheckpointError):
    """A manifest failed validation; ``problems`` lists every bad entry."""

    def __init__(self, problems: list[str]):
        super().__init__(
            "checkpoint manifest refused before restoring anything: " + "; ".join(problems)
            + " (a manifest may list only regular files at relative paths inside the workspace)"
        )
        self.problems = problems


class BlobCorrupt(CheckpointError):
    """A stored blob is missing or its bytes no longer hash to its name."""


class ManifestEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One workspace file: relative POSIX path, content digest, size, permission bits, mtime."""

    path: str
    type: EntryType = "file"
    sha256: str
    size: int
    mode: int  # permission bits (0o777 at most)
    mtime_ns: int


class RefusedEntry(msgspec.Struct, frozen=True, kw_only=True):
    """Something in the workspace that is not a regular file; recorded, never followed."""

    path: str
    type: EntryType
    reason: str


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """The files of one checkpoint, sorted by path; encodes canonically to JSON."""

    version: int = MANIFEST_VERSION
    entries: list[ManifestEntry]
    refused: list[RefusedEntry] = msgspec.field(default_factory=list)

    def encode(self) -> bytes:
        return msgspec.json.encode(self)

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.entries)


class Capture(msgspec.Struct, frozen=True, kw_only=True):
    """Result of capturing a workspace: manifest, its canonical bytes and digest, new blobs."""

    manifest: Manifest
    manifest_bytes: bytes
    manifest_sha256: str
    new_blobs: list[tuple[str, int]]  # (sha256, size) written by this capture

    @property
    def refused(self) -> list[str]:
        return [f"{r.path}: {r.reason}" for r in self.manifest.refused]


_manifest_decoder = msgspec.json.Decoder(Manifest)


def load_manifest(data: bytes) -> Manifest:
    """Decode manifest bytes; raises ManifestInvalid if they are not a manifest."""
    try:
        return _manifest_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ManifestInvalid([f"not a checkpoint manifest: {e}"]) from None


# --- blobs ------------------------------------------------------------------------------------


class BlobStore:
    """Content-addressed, read-only blobs under one directory (RUN_DIR/blobs)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._tmp = self.root / "tmp"
        self._tmp.mkdir(exist_ok=True)

    def path(self, sha256: str) -> Path:
        if len(sha256) != 64 or not set(sha256) <= _HEX:
            raise ValueError(f"blob name {sha256!r} is not a lowercase hex sha256")
        return self.root / sha256[:2] / sha256

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def get(self, sha256: str) -> bytes:
        """The blob's bytes, checked against its name; raises BlobCorrupt."""
        try:
            data = self.path(sha256).read_bytes()
        except FileNotFoundError:
            raise BlobCorrupt(f"blob {sha256} is missing from {self.root}") from None
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise BlobCorrupt(f"blob {sha256} in {self.root} reads back as {actual}; the stored copy is damaged")
        return data

    def verify(self, sha256: str) -> bool:
        """True when the blob exists and its bytes read back with its sha256."""
        try:
            self.get(sha256)
        except BlobCorrupt:
            return False
        return True

    def put(self, data: bytes) -> tuple[str, bool]:
        """Store bytes; returns (sha256, newly_written). Raises BlobCorrupt on a failed readback."""
        tmp = self._tmp_path()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        return self._settle(tmp, hashlib.sha256(data).hexdigest())

    def put_fd(self, fd: int) -> tuple[str, int, bool]:
        """Copy an open file into the store while hashing it; returns (sha256, size, new)."""
        tmp = self._tmp_path()
        digest, size = hashlib.sha256(), 0
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        try:
            while chunk := os.read(fd, _CHUNK):
                digest.update(chunk)
                size += len(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view):]
            os.fsync(out)
        finally:
            os.close(out)
        sha, new = self._settle(tmp, digest.hexdigest())
        return sha, size, new

    def _tmp_path(self) -> Path:
        return self._tmp / f"{os.getpid()}-{os.urandom(8).hex()}"

    def _settle(self, tmp: Path, sha256: str) -> tuple[str, bool]:
        final = self.path(sha256)
        if final.exists():
            tmp.unlink()
            return sha256, False
        final.parent.mkdir(exist_ok=True)
        os.rename(tmp, final)
        dir_fd = os.open(final.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self.get(sha256)  # stored means: reads back with its digest
        return sha256, True


# --- capture ----------------------------------------------------------------------------------


def _type_of(mode: int) -> EntryType:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "other"


def _walk(dir_fd: int, prefix: str) -> Iterator[tuple[str, int, int]]:
    """Yield (relative path, parent dir fd, st_mode) for every entry below dir_fd, without following links."""
    with os.scandir(dir_fd) as it:
        names = sorted((e.name, e.stat(follow_symlinks=False).st_mode) for e in it)
    for name, mode in names:
        rel = f"{prefix}{name}"
        if stat.S_ISDIR(mode):
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            except OSError as e:  # swapped for a symlink or removed since scandir
                yield rel, -1, stat.S_IFLNK if e.errno == errno.ELOOP else 0
                continue
            try:
                yield from _walk(sub, rel + "/")
            finally:
                os.close(sub)
        else:
            yield rel, dir_fd, mode


def capture(workspace: str | Path, blobs: BlobStore) -> Capture:
    """Snapshot the regular files of a workspace into blobs; raises CheckpointError if unreadable."""
    workspace = Path(workspace)
    try:
        root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        raise CheckpointError(f"workspace {workspace}: cannot open as a directory ({e.strerror}); "
                              "pass the host path of the trial's workspace") from None
    entries: list[ManifestEntry] = []
    refused: list[RefusedEntry] = []
    new_blobs: list[tuple[str, int]] = []
    try:
        for rel, dir_fd, mode in _walk(root, ""):
            if dir_fd < 0 or not stat.S_ISREG(mode):
                kind = _type_of(mode)
                refused.append(RefusedEntry(path=rel, type=kind, reason=f"{kind} is not a regular file; not followed"))
                continue
            name = rel.rsplit("/", 1)[-1]
            try:  # O_NONBLOCK: a fifo swapped in after scandir must not hang the recorder
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError as e:
                refused.append(RefusedEntry(path=rel, type="symlink" if e.errno == errno.ELOOP else "other",
                                            reason=f"could not open without following links: {e.strerror}"))
                continue
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    kind = _type_of(st.st_mode)
                    refused.append(RefusedEntry(path=rel, type=kind, reason=f"became a {kind} during capture"))
                    continue
                sha, size, new = blobs.put_fd(fd)
            finally:
                os.close(fd)
            if new:
                new_blobs.append((sha, size))
            entries.append(ManifestEntry(path=rel, sha256=sha, size=size, mode=stat.S_IMODE(st.st_mode) & 0o777,
                                         mtime_ns=st.st_mtime_ns))
    finally:
        os.close(root)
    manifest = Manifest(entries=entries, refused=refused)
    data = manifest.encode()
    if refused:
        log.warning("checkpoint_refused_entries", workspace=str(workspace), refused=[r.path for r in refused])
    return Capture(manifest=manifest, manifest_bytes=data, manifest_sha256=hashlib.sha256(data).hexdigest(),
                   new_blobs=new_blobs)


# --- validate and restore ---------------------------------------------------------------------


def validate(manifest: Manifest) -> None:
    """Check every entry is a regular file at a clean relative path; raises ManifestInvalid listing all problems."""
    problems: list[str] = []
    if manifest.version != MANIFEST_VERSION:
        problems.append(f"manifest version {manifest.version}, expected {MANIFEST_VERSION}")
    files: set[str] = set()
    for e in manifest.entries:
        where = f"entry {e.path!r}"
        if e.type != "file":
            problems.append(f"{where} is a {e.type}, only regular files are restored")
        if not e.path or "\x00" in e.path:
            problems.append(f"{where}: empty path or NUL byte")
        elif e.path.startswith("/"):
            problems.append(f"{where} is an absolute path")
        else:
            parts = e.path.split("/")
            if ".." in parts:
                problems.append(f"{where} contains '..'")
            elif any(p in ("", ".") for p in parts):
                problems.append(f"{where} is not a normalized path (empty or '.' component)")
        if len(e.sha256) != 64 or not set(e.sha256) <= _HEX:
            problems.append(f"{where}: sha256 {e.sha256!r} is not 64 lowercase hex digits")
        if e.size < 0:
            problems.append(f"{where}: negative size {e.size}")
        if not 0 <= e.mode <= 0o777:
            problems.append(f"{where}: mode {oct(e.mode)} has bits beyond rwxrwxrwx")
        if e.path in files:
            problems.append(f"{where} appears twice")
        files.add(e.path)
    for path in files:  # a file cannot also be a directory of another entry
        parts = path.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in files:
                problems.append(f"entry {path!r} lies under {'/'.join(parts[:i])!r}, which is a file")
    if problems:
        raise ManifestInvalid(problems)


def restore(manifest: Manifest, blobs: BlobStore, dest: str | Path) -> None:
    """Recreate a checkpoint's files in an empty directory; raises ManifestInvalid, BlobCorrupt, CheckpointError."""
    validate(manifest)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink() or any(dest.iterdir()):
        raise CheckpointError(f"restore target {dest} is not an empty directory; restore only into a fresh workspace")
    for e in manifest.entries:  # check every blob before writing anything
        size = len(blobs.get(e.sha256))
        if size != e.size:
            raise BlobCorrupt(f"blob {e.sha256} for {e.path!r} has {size} bytes, manifest says {e.size}")
    for e in manifest.entries:
        data = blobs.get(e.sha256)
        target = dest / e.path
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, e.mode)
            os.utime(fd, ns=(e.mtime_ns, e.mtime_ns))
        finally:
            os.close(fd)
