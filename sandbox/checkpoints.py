"""Workspace checkpoints: content-addressed blobs plus a manifest, restored only after validation.

Capture walks the workspace with ``sandbox.walk`` (iterative, through directory file
descriptors with O_NOFOLLOW, capped in depth, entries and path length), so authored
code cannot redirect it with a symlink swapped in mid-walk or break it with what it
builds; anything that is not a regular file or directory (symlink, fifo, device,
socket), or that the walk or the byte caps will not take (a name that is not UTF-8,
too deep, a sparse file, beyond the checkpoint's or the trial's byte cap, no disk
space), is listed in ``refused`` with the reason and never followed or read. Blobs
live under RUN_DIR/blobs/<sha[:2]>/<sha>; a blob counts as stored only once its bytes
read back with their sha256.

Restore validates the whole manifest before touching the disk, writes into an
empty directory only (through directory descriptors, so no path length limit
applies), checks every blob's sha256 and restores mode and mtime.
Directories are implied by file paths (empty directories are not kept).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import Literal

import msgspec
import structlog

from .walk import Found, entry_type, walk

log = structlog.get_logger()

MANIFEST_VERSION = 1
_CHUNK = 1 << 20
_HEX = frozenset("0123456789abcdef")

EntryType = Literal["file", "symlink", "fifo", "device", "socket", "other", "directory", "entries"]

MAX_CHECKPOINT_BYTES = 256 << 20
"""File bytes one checkpoint captures; files beyond it are refused entries."""
MAX_TRIAL_NEW_BYTES = 1 << 30
"""New blob bytes the checkpoints of one trial may add (counted per recorder process)."""
MIN_FREE_BYTES = 1 << 30
"""A blob is not written when the run directory's disk would keep less free space than this."""
SPARSE_MIN_BYTES = 1 << 20
"""A file this large whose allocated blocks cover under half its size is refused as sparse:
reading it would turn a few KB of disk into its whole apparent size of blobs."""
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


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


class BlobTooLarge(Exception):
    """A file grew beyond what a blob may take while it was copied."""


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
        self.new_bytes: dict[str, int] = {}  # trial -> new blob bytes its checkpoints wrote here

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
        fd = os.open(tmp, _TMP_FLAGS, 0o444)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            return self._settle(tmp, hashlib.sha256(data).hexdigest())
        except BaseException:
            tmp.unlink(missing_ok=True)  # no partial blob is left behind (e.g. the disk filled up)
            raise

    def put_fd(self, fd: int, max_bytes: int | None = None) -> tuple[str, int, bool]:
        """Copy an open file into the store while hashing it; returns (sha256, size, new).

        Raises OSError (the temporary is removed), and BlobTooLarge past ``max_bytes``.
        """
        tmp = self._tmp_path()
        digest, size = hashlib.sha256(), 0
        out = os.open(tmp, _TMP_FLAGS, 0o444)
        try:
            try:
                while chunk := os.read(fd, _CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
                    if max_bytes is not None and size > max_bytes:
                        raise BlobTooLarge(f"grew past {max_bytes} bytes while it was read")
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(out, view):]
                os.fsync(out)
            finally:
                os.close(out)
            sha, new = self._settle(tmp, digest.hexdigest())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return sha, size, new

    def free_bytes(self) -> int:
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

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


def capture(workspace: str | Path, blobs: BlobStore, trial: str | None = None) -> Capture:
    """Snapshot the regular files of a workspace into blobs; raises CheckpointError if the workspace
    cannot be opened or the blob store fails (never for what the workspace holds)."""
    workspace = Path(workspace)
    entries: list[ManifestEntry] = []
    refused: list[RefusedEntry] = []
    new_blobs: list[tuple[str, int]] = []
    captured = 0
    by_inode: dict[tuple[int, int], ManifestEntry] = {}  # hard links: one read per inode

    def refuse(path: str, kind: str, reason: str) -> None:
        refused.append(RefusedEntry(path=path, type=kind, reason=reason))

    try:
        os.close(os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW))
    except OSError as e:
        raise CheckpointError(f"workspace {workspace}: cannot open as a directory ({e.strerror}); "
                              "pass the host path of the trial's workspace") from None
    for found in walk(workspace):
        if not isinstance(found, Found):
            refuse(found.path, found.type, found.reason)
            continue
        kind = entry_type(found.st.st_mode)
        if kind == "directory":
            continue
        if kind != "file":
            refuse(found.path, kind, f"{kind} is not a regular file; not followed")
            continue
        st = found.st
        if (st.st_dev, st.st_ino) in by_inode:
            # Another name of a file already captured: read once, but counted per name, since a
            # restore writes every name as its own file.
            same = by_inode[(st.st_dev, st.st_ino)]
            if captured + same.size > MAX_CHECKPOINT_BYTES:
                refuse(found.path, kind, f"a hard link that would take this checkpoint past {MAX_CHECKPOINT_BYTES} bytes")
                continue
            captured += same.size
            entries.append(msgspec.structs.replace(same, path=found.path))
            continue
        why = _refusal(st, captured, blobs, trial)
        if why:
            refuse(found.path, kind, why)
            continue
        stored = _store(found, blobs, MAX_CHECKPOINT_BYTES - captured, refuse)
        if stored is None:
            continue
        entry, new = stored
        captured += entry.size
        if new:
            new_blobs.append((entry.sha256, entry.size))
            if trial is not None:
                blobs.new_bytes[trial] = blobs.new_bytes.get(trial, 0) + entry.size
        if st.st_nlink > 1:
            by_inode[(st.st_dev, st.st_ino)] = entry
        entries.append(entry)
    manifest = Manifest(entries=entries, refused=refused)
    data = manifest.encode()
    if refused:
        log.warning("checkpoint_refused_entries", workspace=str(workspace), refused=[r.path for r in refused][:50],
                    count=len(refused))
    return Capture(manifest=manifest, manifest_bytes=data, manifest_sha256=hashlib.sha256(data).hexdigest(),
                   new_blobs=new_blobs)


def _refusal(st: os.stat_result, captured: int, blobs: BlobStore, trial: str | None) -> str | None:
    """Why a regular file is not captured, or None."""
    if captured + st.st_size > MAX_CHECKPOINT_BYTES:
        return (f"{st.st_size} bytes would take this checkpoint past its cap of {MAX_CHECKPOINT_BYTES} bytes; "
                "keep large outputs out of the workspace")
    if st.st_size >= SPARSE_MIN_BYTES and st.st_blocks * 512 < st.st_size // 2:
        return f"sparse file ({st.st_size} bytes, {st.st_blocks * 512} on disk); not captured"
    if trial is not None and blobs.new_bytes.get(trial, 0) + st.st_size > MAX_TRIAL_NEW_BYTES:
        return f"this trial's checkpoints already stored their cap of {MAX_TRIAL_NEW_BYTES} new bytes"
    try:
        free = blobs.free_bytes()
    except OSError:
        free = MIN_FREE_BYTES + st.st_size
    if free - st.st_size < MIN_FREE_BYTES:
        return f"not stored: the run directory's disk has {free} bytes free and keeps at least {MIN_FREE_BYTES}"
    return None


def _store(found: Found, blobs: BlobStore, max_bytes: int, refuse) -> tuple[ManifestEntry, bool] | None:
    """Copy one regular file into blobs: (entry, newly stored); a problem the file causes is a refusal (None)."""
    try:  # O_NONBLOCK: a fifo swapped in after the walk looked must not hang the recorder
        fd = os.open(found.name, _OPEN_FLAGS, dir_fd=found.dir_fd)
    except OSError as e:
        refuse(found.path, "symlink" if e.errno == errno.ELOOP else "other",
               f"could not open without following links: {e.strerror}")
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_ino != found.st.st_ino:
            refuse(found.path, entry_type(st.st_mode), "changed during capture; not captured")
            return None
        try:
            sha, size, new = blobs.put_fd(fd, max_bytes)
        except BlobTooLarge as e:
            refuse(found.path, "file", f"{e}; not captured")
            return None
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise CheckpointError(f"blob store {blobs.root}: {e.strerror}") from None
            refuse(found.path, "file", f"not stored: {e.strerror}")
            return None
    finally:
        os.close(fd)
    entry = ManifestEntry(path=found.path, sha256=sha, size=size, mode=stat.S_IMODE(st.st_mode) & 0o777,
                          mtime_ns=st.st_mtime_ns)
    return entry, new


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
    root = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for e in manifest.entries:
            data = blobs.get(e.sha256)
            *dirs, name = e.path.split("/")
            parent = _open_dirs(root, dirs)
            try:
                fd = os.open(name, _TMP_FLAGS, 0o600, dir_fd=parent)
            finally:
                if parent != root:
                    os.close(parent)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fchmod(fd, e.mode)
                os.utime(fd, ns=(e.mtime_ns, e.mtime_ns))
            finally:
                os.close(fd)
    finally:
        os.close(root)


def _open_dirs(root: int, parts: list[str]) -> int:
    """The fd of root/parts..., creating directories; never follows a link (no path length limit)."""
    fd = root
    try:
        for part in parts:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            if fd != root:
                os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        if fd != root:
            os.close(fd)
        raise
