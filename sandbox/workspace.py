"""A workspace directory as the harness touches it: write, read and list files, on the host it is on.

The coordinator uses it on a workspace under RUN_DIR (roboswe/evaluation/workspace.py), a fleet
worker's bridge on one it keeps on its own node (bridge/workspaces.py): the same rules either way.

The sandbox user owns the workspace and may plant symlinks in it, so every access here
walks the path one component at a time through directory file descriptors with
O_NOFOLLOW: a path can never lead the harness (which runs with the recorder's rights)
outside the workspace. Bad paths raise WorkspaceError with a message the participant reads.
Nothing here blocks on what the sandbox user planted: every open is O_NONBLOCK, a write's
temporary is created O_EXCL under a random name and removed on error, and listings use
the bounded walk of ``sandbox.walk``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

# the write_file schema states the write limit too: one constant
from roboswe.protocol.participant import MAX_WRITE_BYTES
from .walk import MAX_DEPTH, MAX_PATH_BYTES, Refused, walk

MAX_READ_BYTES = 256 * 1024
MAX_LIST_ENTRIES = 2000
MAX_LISTING_BYTES = 32 * 1024  # the list_files text (~8k tokens): a crafted layout must not fill the context


class WorkspaceError(ValueError):
    """A workspace operation that cannot be done; the message is the participant's error result."""


def check_relative(path: str) -> PurePosixPath:
    """A workspace-relative path without '..', '.' or empty parts; raises WorkspaceError."""
    if not path or "\x00" in path:
        raise WorkspaceError(f"path {path!r} is empty or contains NUL; give a workspace-relative path like 'lift.py'")
    p = PurePosixPath(path)
    if p.is_absolute():
        raise WorkspaceError(f"path {path!r} is absolute; give a path relative to the workspace, e.g. 'lift.py'")
    if any(part in ("..", ".") for part in p.parts) or not p.parts:
        raise WorkspaceError(f"path {path!r} leaves or names the workspace itself; use a plain relative path without '..'")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES or len(p.parts) > MAX_DEPTH:
        raise WorkspaceError(f"path {path[:80]!r}... is longer than {MAX_PATH_BYTES} bytes or {MAX_DEPTH} levels; use a shorter path")
    return p


class Workspace:
    """One trial workspace directory on the host."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def _open_parent(self, p: PurePosixPath, *, create: bool) -> int:
        """An fd of the directory that holds ``p`` (creating directories if asked), never following links."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK)
        try:
            for part in p.parts[:-1]:
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise WorkspaceError(f"no such directory in the workspace: {part!r} (in {str(p)!r})") from None
                    os.mkdir(part, 0o777, dir_fd=fd)
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise WorkspaceError(f"{part!r} in {str(p)!r} is not a directory (symlinks are not followed)") from None
                    raise
                os.close(fd)
                fd = nxt
            return fd
        except BaseException:
            os.close(fd)
            raise

    def write(self, path: str, content: str) -> int:
        """Create or replace a UTF-8 text file; returns its size in bytes. Raises WorkspaceError, also for
        what the workspace's contents cause (a name too long, no space left)."""
        try:
            return self._write(path, content)
        except OSError as e:
            raise WorkspaceError(f"could not write {path!r}: {e.strerror}; check the path and the workspace's size") from None

    def _write(self, path: str, content: str) -> int:
        p = check_relative(path)
        data = content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise WorkspaceError(f"content of {path!r} is {len(data)} bytes; the limit is {MAX_WRITE_BYTES}")
        parent = self._open_parent(p, create=True)
        try:
            name = p.parts[-1]
            try:
                st = os.lstat(name, dir_fd=parent)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise WorkspaceError(f"{path!r} exists and is not a regular file; write to another path")
            # 0o666: the sandbox user (the workspace's owner after chown) may rewrite it; replace atomically.
            # A random name created O_EXCL: nothing the sandbox user planted can be opened instead.
            tmp = f".roboswe-tmp-{os.urandom(8).hex()}"
            fd = os.open(tmp, _TMP_FLAGS, 0o666, dir_fd=parent)
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fchmod(fd, 0o666)
                finally:
                    os.close(fd)
                os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=parent)
                except OSError:
                    pass
                raise
        finally:
            os.close(parent)
        return len(data)

    def read(self, path: str, max_bytes: int = MAX_READ_BYTES) -> tuple[str, int]:
        """(text, total size) of a workspace file, text cut at ``max_bytes``; raises WorkspaceError."""
        try:
            return self._read(path, max_bytes)
        except OSError as e:
            raise WorkspaceError(f"could not read {path!r}: {e.strerror}") from None

    def _read(self, path: str, max_bytes: int) -> tuple[str, int]:
        p = check_relative(path)
        parent = self._open_parent(p, create=False)
        try:
            try:
                fd = os.open(p.parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
            except FileNotFoundError:
                raise WorkspaceError(f"no such file in the workspace: {path!r}; list_files shows what exists") from None
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise WorkspaceError(f"{path!r} is a symlink; only regular files can be read") from None
                raise
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise WorkspaceError(f"{path!r} is not a regular file")
                data = os.read(fd, max_bytes)
            finally:
                os.close(fd)
        finally:
            os.close(parent)
        return data.decode("utf-8", errors="replace"), st.st_size

    def scan(self) -> tuple[list[tuple[str, int]], list[Refused]]:
        """(relative path, size) of every entry, in walk order (size -1: not a regular file), and the
        entries the bounded walk would not represent; stops at MAX_LIST_ENTRIES."""
        out: list[tuple[str, int]] = []
        refused: list[Refused] = []
        try:
            os.close(os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK))
        except OSError as e:
            raise WorkspaceError(f"the workspace cannot be listed: {e.strerror}") from None
        for item in walk(self.root, max_entries=MAX_LIST_ENTRIES):
            if isinstance(item, Refused):
                refused.append(item)
            elif stat.S_ISREG(item.st.st_mode):
                out.append((item.path, item.st.st_size))
            elif not stat.S_ISDIR(item.st.st_mode):
                out.append((item.path, -1))
        return out, refused

    def list(self) -> list[tuple[str, int]]:
        """(relative path, size) of every regular file, sorted; symlinks and others are shown with size -1."""
        return sorted(self.scan()[0])

    def listing_text(self) -> str:
        """The list_files result as the participant reads it."""
        files, refused = self.scan()
        files.sort()
        if not files and not refused:
            return "The workspace is empty."
        lines = [f"{path} ({size} bytes)" if size >= 0 else f"{path} (not a regular file)" for path, size in files]
        lines += [f"{r.path} (not listed: {r.reason})" for r in refused]
        shown, used = 0, 0
        for line in lines:
            used += len(line.encode("utf-8", "replace")) + 1
            if used > MAX_LISTING_BYTES:
                break
            shown += 1
        if shown == len(lines):
            return "\n".join(lines)
        rest = lines[shown:]
        return "\n".join([*lines[:shown], (
            f"[... {len(rest)} more entries not shown ({sum(len(x.encode('utf-8', 'replace')) + 1 for x in rest)} bytes "
            f"of listing past the {MAX_LISTING_BYTES}-byte limit); list them from a script if you need them]")])


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
