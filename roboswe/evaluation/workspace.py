"""The participant's workspace as the harness touches it: write, read and list files.

The sandbox user owns the workspace and may plant symlinks in it, so every access here
walks the path one component at a time through directory file descriptors with
O_NOFOLLOW: a path can never lead the harness (which runs with the recorder's rights)
outside the workspace. Bad paths raise WorkspaceError with a message the participant reads.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

MAX_READ_BYTES = 256 * 1024
MAX_WRITE_BYTES = 4 * 1024 * 1024
MAX_LIST_ENTRIES = 2000


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
    return p


class Workspace:
    """One trial workspace directory on the host."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def _open_parent(self, p: PurePosixPath, *, create: bool) -> int:
        """An fd of the directory that holds ``p`` (creating directories if asked), never following links."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in p.parts[:-1]:
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise WorkspaceError(f"no such directory in the workspace: {part!r} (in {str(p)!r})") from None
                    os.mkdir(part, 0o777, dir_fd=fd)
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
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
        """Create or replace a UTF-8 text file; returns its size in bytes."""
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
            tmp = f".{name}.roboswe-tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666, dir_fd=parent)
            try:
                os.write(fd, data) if data else None
                os.fchmod(fd, 0o666)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        finally:
            os.close(parent)
        return len(data)

    def read(self, path: str, max_bytes: int = MAX_READ_BYTES) -> tuple[str, int]:
        """(text, total size) of a workspace file, text cut at ``max_bytes``; raises WorkspaceError."""
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

    def list(self) -> list[tuple[str, int]]:
        """(relative path, size) of every regular file, sorted; symlinks and others are shown with size -1."""
        out: list[tuple[str, int]] = []

        def walk(fd: int, prefix: str) -> None:
            for name in sorted(os.listdir(fd)):
                if len(out) >= MAX_LIST_ENTRIES:
                    return
                st = os.lstat(name, dir_fd=fd)
                rel = f"{prefix}{name}"
                if stat.S_ISDIR(st.st_mode):
                    sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                    try:
                        walk(sub, rel + "/")
                    finally:
                        os.close(sub)
                elif stat.S_ISREG(st.st_mode):
                    out.append((rel, st.st_size))
                else:
                    out.append((rel, -1))

        root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            walk(root, "")
        finally:
            os.close(root)
        return out

    def listing_text(self) -> str:
        """The list_files result as the participant reads it."""
        files = self.list()
        if not files:
            return "The workspace is empty."
        lines = [f"{path} ({size} bytes)" if size >= 0 else f"{path} (not a regular file)" for path, size in files]
        if len(files) >= MAX_LIST_ENTRIES:
            lines.append(f"... listing stopped at {MAX_LIST_ENTRIES} entries")
        return "\n".join(lines)
