"""One bounded walk over a workspace the sandbox user controls, for every host-side walker
(checkpoint capture, handing files to the sandbox user, listing).

The walk is iterative and goes through directory file descriptors opened with O_NOFOLLOW,
so a directory chain thousands deep, a path longer than PATH_MAX or a symlink swapped in
mid-walk cannot raise, recurse or lead outside the workspace. Anything it will not
descend into or cannot name (too deep, too many entries, a name that is not UTF-8, a path
too long) is yielded as a ``Refused`` entry with the reason; a walk never raises for what
it finds.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import NamedTuple

MAX_DEPTH = 64
"""Directory levels below the workspace root that are walked."""
MAX_ENTRIES = 10_000
"""Entries (files, directories, others) one walk looks at; the rest is one refusal."""
MAX_PATH_BYTES = 1024
"""Longest workspace-relative path (UTF-8 bytes) kept; far below PATH_MAX, so restores never hit it."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Found(NamedTuple):
    """An entry the walk can name: its path, the fd of its directory, its name there, its lstat."""

    path: str
    dir_fd: int  # valid only until the walk moves on
    name: str
    st: os.stat_result
    fd: int = -1  # a directory's own fd (valid until the walk moves on); -1 for other entries


class Refused(NamedTuple):
    """An entry the walk will not represent; ``path`` is printable even for a name that is not UTF-8."""

    path: str
    type: str  # "directory" | "file" | "symlink" | "fifo" | "device" | "socket" | "other" | "entries"
    reason: str


def entry_type(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "other"


def printable(name: str) -> str:
    """A name as text: bytes that are not UTF-8 as \\xNN, control characters escaped."""
    raw = os.fsencode(name).decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in raw)


def _names(dir_fd: int, room: int) -> list[str]:
    """Up to ``room`` names of a directory, sorted (a huge directory is not read to its end)."""
    names: list[str] = []
    try:
        with os.scandir(dir_fd) as it:  # scandir reads a dup of dir_fd
            for entry in it:
                if len(names) >= room:
                    break
                names.append(entry.name)
    except OSError:
        pass  # unreadable (mode 0): its entries are simply not seen
    return sorted(names)


def walk(root: str | os.PathLike, *, max_depth: int = MAX_DEPTH, max_entries: int = MAX_ENTRIES) -> Iterator[Found | Refused]:
    """Every entry below ``root`` (directories before their contents), depth first in name order.

    A directory's Found carries its own open ``fd`` (for fchown/fchmod). Raises OSError only
    when ``root`` itself cannot be opened as a directory.
    """
    stack: list[tuple[int, str, int, list[str]]] = []  # (dir fd, path prefix, depth, names left in reverse)
    stack.append((os.open(root, _DIR_FLAGS), "", 0, []))
    seen = 0
    try:
        stack[0] = (stack[0][0], "", 0, _names(stack[0][0], max_entries + 1)[::-1])
        while stack:
            dir_fd, prefix, depth, left = stack[-1]
            if not left:
                os.close(stack.pop()[0])
                continue
            name = left.pop()
            seen += 1
            shown = prefix + printable(name)
            if seen > max_entries:
                yield Refused(shown, "entries", f"the workspace holds more than {max_entries} entries; from here on nothing is walked")
                for entry in stack:
                    entry[3].clear()
                continue
            try:
                st = os.lstat(name, dir_fd=dir_fd)
            except OSError as e:  # removed since it was listed
                yield Refused(shown, "other", f"could not be examined: {e.strerror}")
                continue
            kind = entry_type(st.st_mode)
            path = prefix + name
            try:
                encoded = path.encode("utf-8")
            except UnicodeEncodeError:
                yield Refused(shown, kind, "the name is not valid UTF-8; rename it to plain text")
                continue
            if len(encoded) > MAX_PATH_BYTES:
                yield Refused(shown[:200] + "...", kind, f"the path is longer than {MAX_PATH_BYTES} bytes; use a shorter path")
                continue
            if kind != "directory":
                yield Found(path, dir_fd, name, st)
                continue
            if depth + 1 > max_depth:
                yield Refused(shown, kind, f"more than {max_depth} directory levels deep; its contents are not walked")
                continue
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError as e:  # swapped for a symlink or removed since it was listed
                yield Refused(shown, "other", f"could not be opened without following links: {e.strerror}")
                continue
            stack.append((sub, path + "/", depth + 1, []))
            yield Found(path, dir_fd, name, os.fstat(sub), sub)
            stack[-1][3].extend(_names(sub, max_entries - seen + 1)[::-1])
    finally:
        for fd, *_ in stack:
            os.close(fd)


def remove_tree(path: str | os.PathLike) -> None:
    """Remove a directory tree of any depth without following links (shutil.rmtree recurses per level
    and raises RecursionError on a chain the sandbox user built a few thousand levels deep).

    Raises OSError only when ``path`` exists and cannot be removed.
    """
    try:
        top = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return
    except OSError:  # not a directory (or a symlink to one): remove the entry itself
        os.unlink(path)
        return
    try:
        clear_dir(top)
    finally:
        os.close(top)
    os.rmdir(path)


def clear_dir(top: int) -> None:
    """Remove everything inside the directory open as ``top`` (iteratively, never following links)."""
    stack: list[tuple[int, str | None]] = [(top, None)]  # (dir fd, its name in the directory below it)
    try:
        while stack:
            fd, _ = stack[-1]
            descended = False
            with os.scandir(fd) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        try:
                            sub = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                        except OSError:
                            os.unlink(entry.name, dir_fd=fd)
                            continue
                        stack.append((sub, entry.name))
                        descended = True
                        break
                    os.unlink(entry.name, dir_fd=fd)
            if descended:
                continue
            fd, name = stack.pop()
            if name is not None:
                os.close(fd)
                os.rmdir(name, dir_fd=stack[-1][0])
    finally:
        for fd, name in stack:
            if name is not None:
                os.close(fd)
