"""A trial's workspace on a filesystem of fixed size: scripts cannot fill the host's disk.

While a trial is open its workspace directory is covered by a fresh ext4 filesystem (a
sparse image file, loop-mounted ``nosuid,nodev``; the sandbox user owns its root). What
the directory held is copied in when the trial opens and copied back out when it closes,
so between trials (checkpoints, resumes, fresh directories) the workspace is a plain
directory as before. Copies go through ``sandbox.walk``: regular files, directories and
symlinks (never followed) are carried; fifos, devices and sockets are not.

Mounting needs root and a loop device; where either is missing the trial runs on the plain
directory (``available()`` says why) and only the checkpoint caps bound what it stores.
A bridge that dies with a volume mounted leaves it behind: ``sweep()`` (at the next bridge
start) unmounts volumes whose owning process is gone and deletes their images.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import structlog

from ._process import pid_alive
from .walk import Found, clear_dir, remove_tree, walk

log = structlog.get_logger()

WORKSPACE_MB = 1024
"""Size of a trial's workspace filesystem (MiB)."""
VOLUME_DIR = Path("/var/tmp/roboswe-volumes")
_TOOL_SECONDS = 60
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class VolumeError(Exception):
    """The workspace filesystem could not be created, filled or removed; the message says why."""


def available() -> str | None:
    """None when sized workspaces can be mounted here, else why not."""
    if os.geteuid() != 0:
        return "mounting a sized workspace needs root"
    for tool in ("mkfs.ext4", "mount", "umount"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    if not os.path.exists("/dev/loop-control"):
        return "no loop devices (/dev/loop-control is missing)"
    return None


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=_TOOL_SECONDS, check=False)
    if proc.returncode != 0:
        raise VolumeError(f"{' '.join(argv[:3])} ... failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-500:]}")


class WorkspaceVolume:
    """One trial's sized workspace: ``mount()`` when the trial opens, ``unmount()`` when it closes."""

    def __init__(self, workspace: Path, *, size_mb: int = WORKSPACE_MB, uid: int, gid: int):
        self.workspace = Path(workspace)
        self.size_mb, self.uid, self.gid = size_mb, uid, gid
        self.home: Path | None = None  # VOLUME_DIR/<pid>-<random>: the image and the staging mount point
        self._under: int | None = None  # fd of the plain directory the volume covers

    @property
    def mounted(self) -> bool:
        return self._under is not None

    def mount(self) -> None:
        """Create the filesystem, copy the workspace in and cover the workspace with it; raises VolumeError."""
        VOLUME_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.home = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=VOLUME_DIR))
        image, staging = self.home / "fs.img", self.home / "mnt"
        try:
            fd = os.open(image, _NEW_FILE, 0o600)
            try:
                os.ftruncate(fd, self.size_mb << 20)  # sparse: disk is used only as files are written
            finally:
                os.close(fd)
            _run("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
                 "-E", f"root_owner={self.uid}:{self.gid}", str(image))  # fmt: skip
            staging.mkdir()
            _run("mount", "-o", "loop,nosuid,nodev", str(image), str(staging))
            try:
                (staging / "lost+found").rmdir()
                copy_tree(self.workspace, staging)
                under = os.open(self.workspace, _DIR_FLAGS)
                try:
                    _run("mount", "--move", str(staging), str(self.workspace))
                except BaseException:
                    os.close(under)
                    raise
                self._under = under
            except BaseException:
                subprocess.run(["umount", "-l", str(staging)], capture_output=True, timeout=_TOOL_SECONDS, check=False)
                raise
        except (OSError, subprocess.SubprocessError) as e:
            self._remove_home()
            raise VolumeError(f"workspace volume for {self.workspace}: {e}") from None
        except BaseException:
            self._remove_home()
            raise
        log.info("workspace_volume_mounted", workspace=str(self.workspace), size_mb=self.size_mb)

    def unmount(self) -> None:
        """Copy the volume's contents back into the plain directory and remove the volume; raises VolumeError."""
        if self._under is None:
            return
        under, self._under = self._under, None
        try:
            clear_dir(under)
            copy_tree(self.workspace, under)
        except OSError as e:
            log.error("workspace_volume_copy_out_failed", workspace=str(self.workspace), error=str(e))
            raise VolumeError(f"could not copy {self.workspace} out of its volume: {e}") from None
        finally:
            os.close(under)
            subprocess.run(["umount", "-l", str(self.workspace)], capture_output=True, timeout=_TOOL_SECONDS, check=False)
            self._remove_home()
        log.info("workspace_volume_unmounted", workspace=str(self.workspace))

    def _remove_home(self) -> None:
        if self.home is not None:
            try:
                remove_tree(self.home)
            except OSError as e:
                log.warning("workspace_volume_leftover", path=str(self.home), error=str(e))
            self.home = None


def copy_tree(src: str | os.PathLike, dst: str | os.PathLike | int) -> None:
    """Copy regular files (mode, mtime), directories and symlinks of ``src`` into the directory ``dst``
    (a path or an fd), never following a link; other entries and what the bounded walk refuses are skipped."""
    root = dst if isinstance(dst, int) else os.open(dst, _DIR_FLAGS)
    dirs: dict[str, int] = {"": root}
    try:
        for item in walk(src):
            if not isinstance(item, Found):
                continue
            parent_path, _, name = item.path.rpartition("/")
            parent = dirs.get(parent_path)
            if parent is None:
                continue  # its directory was skipped
            mode = item.st.st_mode
            if stat.S_ISDIR(mode):
                os.mkdir(name, 0o700, dir_fd=parent)
                os.chmod(name, stat.S_IMODE(mode) & 0o777, dir_fd=parent)
                dirs[item.path] = os.open(name, _DIR_FLAGS, dir_fd=parent)
            elif stat.S_ISLNK(mode):
                os.symlink(os.readlink(name, dir_fd=item.dir_fd), name, dir_fd=parent)
            elif stat.S_ISREG(mode):
                _copy_file(item, parent, name)
            else:
                continue
            if os.geteuid() == 0:
                os.chown(name, item.st.st_uid, item.st.st_gid, dir_fd=parent, follow_symlinks=False)
    finally:
        for path, fd in dirs.items():
            if path or not isinstance(dst, int):
                os.close(fd)


def _copy_file(item: Found, parent: int, name: str) -> None:
    """Copy one regular file, its holes kept as holes: a sparse file must not become real bytes on disk."""
    src = os.open(item.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=item.dir_fd)
    try:
        out = os.open(name, _NEW_FILE, 0o600, dir_fd=parent)
        try:
            size = os.fstat(src).st_size
            at = 0
            while at < size:
                try:
                    start = os.lseek(src, at, os.SEEK_DATA)
                except OSError as e:
                    if e.errno == errno.ENXIO:
                        break  # only a hole is left
                    raise
                end = os.lseek(src, start, os.SEEK_HOLE)
                while start < end:
                    chunk = os.pread(src, min(end - start, 1 << 20), start)
                    if not chunk:
                        break
                    view = memoryview(chunk)
                    written = start
                    while view:
                        n = os.pwrite(out, view, written)
                        view, written = view[n:], written + n
                    start += len(chunk)
                at = end
            os.ftruncate(out, size)
            os.fchmod(out, stat.S_IMODE(item.st.st_mode) & 0o777)
            os.utime(out, ns=(item.st.st_atime_ns, item.st.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(src)


def sweep() -> int:
    """Unmount and delete volumes whose owning process is gone (a bridge that died); returns how many."""
    removed = 0
    try:
        homes = list(VOLUME_DIR.iterdir())
    except OSError:
        return 0
    mounts = _loop_mounts()
    for home in homes:
        pid = home.name.split("-", 1)[0]
        if pid.isdigit() and pid_alive(int(pid)):
            continue
        image = str(home / "fs.img")
        for mount_point in mounts.get(image, []):
            subprocess.run(["umount", "-l", mount_point], capture_output=True, timeout=_TOOL_SECONDS, check=False)
        try:
            remove_tree(home)
            removed += 1
            log.warning("workspace_volume_swept", home=str(home), unmounted=mounts.get(image, []))
        except OSError as e:
            log.warning("workspace_volume_leftover", path=str(home), error=str(e))
    return removed


def _loop_mounts() -> dict[str, list[str]]:
    """backing image file -> mount points, for loop-mounted filesystems."""
    backing: dict[str, str] = {}
    for dev in Path("/sys/block").glob("loop*"):
        try:
            backing[f"/dev/{dev.name}"] = (dev / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
    out: dict[str, list[str]] = {}
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        source, point, *_ = line.split()
        if source in backing:
            out.setdefault(backing[source], []).append(point.replace("\\040", " "))
    return out


