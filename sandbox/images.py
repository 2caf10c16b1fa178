"""The sandbox image: one Debian root filesystem shared by the bwrap and docker backends.

`roboswe images build` debootstraps a minimal Debian (python3, numpy, pyzmq from Debian;
msgspec from its wheel), copies in the `robot` module, the protocol it speaks and the bridge
socket's framing, adds a
non-root user, writes a deterministic tarball and names it by the tarball's sha256. When
a Docker daemon answers, the tarball is imported as ``roboswe-sandbox:<digest16>``. No
container registry is involved, so execution and replay see the same interpreter on both
backends.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import time
from importlib import resources
from pathlib import Path

import msgspec
import structlog

log = structlog.get_logger()

IMAGE_REPOSITORY = "roboswe-sandbox"
SOURCE_EPOCH = 1_700_000_000  # fixed mtime for every tar member: same content, same digest
SITE_DIR = "usr/local/lib/python3.11/dist-packages"  # on Debian's python3 sys.path, outside dpkg's


class ImageRecipe(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What goes into the sandbox root filesystem."""

    suite: str = "bookworm"
    mirror: str = "http://deb.debian.org/debian"
    # python3-cffi-backend: python3-zmq needs it through a virtual package debootstrap cannot resolve
    packages: tuple[str, ...] = ("python3", "python3-numpy", "python3-zmq", "python3-cffi-backend")
    wheels: tuple[str, ...] = ()  # extra pip requirements; msgspec is always added at the host's version
    user: str = "robot"
    # Not 1000: that is usually a person's account, whose processes would share RLIMIT_NPROC
    # with the sandbox and whose files the sandbox user would own.
    uid: int = 60123
    gid: int = 60123

    def base_key(self) -> str:
        """Cache key of the debootstrap stage (mirror and package set)."""
        text = f"{self.suite}|{self.mirror}|{','.join(sorted(self.packages))}"
        return hashlib.sha256(text.encode()).hexdigest()[:12]


class SandboxImage(msgspec.Struct, frozen=True, kw_only=True):
    """A built sandbox image: where its rootfs lies and the digest recorded with every run."""

    digest: str  # sha256 of the deterministic tarball
    rootfs: str
    tarball: str
    docker_tag: str | None
    uid: int
    gid: int
    built_at: float
    build_seconds: float

    @property
    def short(self) -> str:
        return self.digest[:16]


class ImageError(Exception):
    """The image is missing or could not be built; the message says what to do."""


def default_cache_dir() -> Path:
    """~/.cache/roboswe/rootfs; for root /var/cache/roboswe/rootfs, since the bwrap backend drops to
    the sandbox uid before binding the rootfs and /root is not traversable by it."""
    if os.geteuid() == 0:
        return Path("/var/cache/roboswe/rootfs")
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "roboswe" / "rootfs"


def load_image(cache_dir: Path | None = None) -> SandboxImage:
    """The most recently built image; raises ImageError when none was built."""
    cache_dir = Path(cache_dir or default_cache_dir())
    current = cache_dir / "current.json"
    if not current.exists():
        raise ImageError(f"no sandbox image in {cache_dir}: run `roboswe images build` first")
    image = msgspec.json.decode(current.read_bytes(), type=SandboxImage)
    if not Path(image.rootfs, "usr/bin/python3").exists():
        raise ImageError(f"sandbox rootfs {image.rootfs} is incomplete: run `roboswe images build`")
    stale = stale_files(image)
    if stale:
        log.warning("sandbox_image_stale", digest=image.digest, files=stale, fix="roboswe images build")
    return image


ROBOT_PROTOCOL = ("__init__.py", "_base.py", "_codec.py", "control.py", "bridge.py")
"""The part of roboswe.protocol the robot module speaks; nothing else of roboswe enters the image."""


def _project_files() -> dict[str, Path]:
    """Image path (under SITE_DIR) -> the installed module it is copied from (a checkout's, or a wheel's)."""
    # importlib.resources, not the repository: `pip install .` has no checkout; the bytes, and so
    # the digest, are the same either way.
    protocol, bridge = Path(str(resources.files("roboswe.protocol"))), Path(str(resources.files("roboswe.bridge")))
    copied = {f"roboswe/protocol/{name}": protocol / name for name in ROBOT_PROTOCOL}
    copied["roboswe/bridge/__init__.py"] = bridge / "__init__.py"
    copied["roboswe/bridge/wire.py"] = bridge / "wire.py"  # the bridge socket's framing
    copied["robot.py"] = bridge / "robot.py"
    copied["roboswe_runner.py"] = bridge / "_runner.py"
    return copied


def stale_files(image: SandboxImage) -> list[str]:
    """Project files (``bridge/robot.py``, ...) whose copy in the image differs (the image predates them): rebuild."""
    site = Path(image.rootfs) / SITE_DIR
    stale = []
    for rel, src in _project_files().items():
        copy = site / rel
        if not copy.exists() or copy.read_bytes() != src.read_bytes():
            stale.append(f"{src.parent.name}/{src.name}")  # bridge/robot.py, as in the checkout
    return stale


def build_image(
    recipe: ImageRecipe = ImageRecipe(),
    cache_dir: Path | None = None,
    *,
    docker: bool = True,
    rebuild_base: bool = False,
) -> SandboxImage:
    """Build (or reuse) the rootfs, tar it deterministically, import into Docker when it answers."""
    cache_dir = Path(cache_dir or default_cache_dir())
    cache_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    base = _base_rootfs(recipe, cache_dir, rebuild=rebuild_base)

    staging = cache_dir / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    subprocess.run(["cp", "-a", "--reflink=auto", str(base), str(staging)], check=True)
    _install_wheels(recipe, staging, cache_dir / "wheels")
    _install_project_modules(staging)
    _add_user(recipe, staging)
    _strip_volatile(staging)
    _compile(staging)

    tmp_tar = cache_dir / "image.tar.tmp"
    digest = write_deterministic_tar(staging, tmp_tar)
    short = digest[:16]
    rootfs = cache_dir / f"rootfs-{short}"
    tarball = cache_dir / f"{IMAGE_REPOSITORY}-{short}.tar"
    if rootfs.exists():
        shutil.rmtree(staging)  # identical content already in place
    else:
        staging.rename(rootfs)
    tmp_tar.replace(tarball)

    previous = _previous(cache_dir)
    if docker:
        tag = _docker_import(tarball, short, recipe)
    else:  # keep a tag imported earlier for the same content
        tag = previous.docker_tag if previous and previous.digest == digest else None
    image = SandboxImage(
        digest=digest,
        rootfs=str(rootfs),
        tarball=str(tarball),
        docker_tag=tag,
        uid=recipe.uid,
        gid=recipe.gid,
        built_at=time.time(),
        build_seconds=round(time.monotonic() - started, 2),
    )
    (cache_dir / "current.json").write_bytes(msgspec.json.encode(image))
    _prune(cache_dir, keep=short)
    log.info("image_built", digest=digest, rootfs=str(rootfs), docker_tag=tag, seconds=image.build_seconds)
    return image


KEEP_IMAGES = 3  # older rootfs dirs may still be bound by a running trial; keep a few


def _prune(cache_dir: Path, keep: str) -> None:
    rootfs = sorted(cache_dir.glob("rootfs-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    client = None
    for old in rootfs[KEEP_IMAGES:]:
        short = old.name.removeprefix("rootfs-")
        if short == keep:
            continue
        shutil.rmtree(old, ignore_errors=True)
        (cache_dir / f"{IMAGE_REPOSITORY}-{short}.tar").unlink(missing_ok=True)
        client = client or docker_client()
        if client is not None:
            try:
                client.images.remove(f"{IMAGE_REPOSITORY}:{short}")
            except Exception as e:  # noqa: BLE001 - absent, or a container still uses it
                log.info("image_prune_skipped", tag=f"{IMAGE_REPOSITORY}:{short}", reason=str(e)[:200])


def _previous(cache_dir: Path) -> SandboxImage | None:
    try:
        return msgspec.json.decode((cache_dir / "current.json").read_bytes(), type=SandboxImage)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def _base_rootfs(recipe: ImageRecipe, cache_dir: Path, *, rebuild: bool) -> Path:
    base = cache_dir / f"base-{recipe.suite}-{recipe.base_key()}"
    if (base / ".complete").exists() and not rebuild:
        return base
    if os.geteuid() != 0:
        raise ImageError("debootstrap needs root: run `roboswe images build` as root (or in CI)")
    if not shutil.which("debootstrap"):
        raise ImageError("debootstrap is not installed: apt-get install debootstrap")
    tmp = cache_dir / "base.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(base, ignore_errors=True)
    cmd = [
        "debootstrap", "--variant=minbase", "--include=" + ",".join(recipe.packages),
        recipe.suite, str(tmp), recipe.mirror,
    ]  # fmt: skip
    log.info("debootstrap_started", cmd=" ".join(cmd))
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageError(f"debootstrap failed ({proc.returncode}): {proc.stderr[-2000:] or proc.stdout[-2000:]}")
    log.info("debootstrap_finished", seconds=round(time.monotonic() - t0, 1))
    (tmp / ".complete").touch()
    tmp.rename(base)
    return base


def _install_wheels(recipe: ImageRecipe, root: Path, wheel_cache: Path) -> None:
    from importlib.metadata import version

    requirements = [f"msgspec=={version('msgspec')}", *recipe.wheels]
    wheel_cache.mkdir(parents=True, exist_ok=True)
    target_args = [
        "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
        "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64", "--no-deps",
    ]  # fmt: skip
    # Download once into the cache, then install offline from it: rebuilds need no network.
    have = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-index", "--find-links", str(wheel_cache),
         "-d", str(wheel_cache), *target_args, *requirements],
        capture_output=True,
    )  # fmt: skip
    if have.returncode != 0:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "-d", str(wheel_cache), *target_args, *requirements],
            check=True,
        )
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheel_cache),
         "--no-compile", "--target", str(root / SITE_DIR), *target_args, *requirements],
        check=True,
    )  # fmt: skip
    for junk in (root / SITE_DIR).glob("*.dist-info"):
        for name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
            (junk / name).unlink(missing_ok=True)  # paths and installer vary; not content


def _install_project_modules(root: Path) -> None:
    """Copy the robot module, its runner and the protocol package (the digest covers them)."""
    site = root / SITE_DIR
    pkg = site / "roboswe"
    shutil.rmtree(pkg, ignore_errors=True)
    (pkg / "protocol").mkdir(parents=True)
    (pkg / "bridge").mkdir()
    (pkg / "__init__.py").write_text('"""roboswe inside the sandbox: only the wire protocol."""\n')
    for rel, src in _project_files().items():
        shutil.copyfile(src, site / rel)


def _add_user(recipe: ImageRecipe, root: Path) -> None:
    for d in ("workspace", "bridge"):
        (root / d).mkdir(exist_ok=True)
    passwd, group = root / "etc/passwd", root / "etc/group"
    if f":{recipe.uid}:" not in passwd.read_text():
        with passwd.open("a") as f:
            f.write(f"{recipe.user}:x:{recipe.uid}:{recipe.gid}:roboswe sandbox:/workspace:/usr/sbin/nologin\n")
    if f":{recipe.gid}:" not in group.read_text():
        with group.open("a") as f:
            f.write(f"{recipe.user}:x:{recipe.gid}:\n")


def _strip_volatile(root: Path) -> None:
    """Remove caches, logs and device nodes: they vary between builds and are not needed."""
    for pattern in (
        "var/cache/apt/*", "var/lib/apt/lists/*", "var/log/*", "var/cache/debconf/*-old",
        "var/lib/dpkg/*-old", "dev/*", "etc/machine-id", "var/cache/ldconfig/aux-cache",
    ):  # fmt: skip
        for p in root.glob(pattern):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()


def _compile(root: Path) -> None:
    # Hash-checked .pyc (no mtimes): imports stay fast on the read-only root, on both backends.
    subprocess.run(
        ["chroot", str(root), "python3", "-m", "compileall", "-q", "-j", "1",
         "--invalidation-mode", "unchecked-hash", "/" + SITE_DIR],
        check=True,
    )  # fmt: skip


def write_deterministic_tar(root: Path, out: Path) -> str:
    """Tar ``root`` in sorted order with fixed mtimes and numeric owners; returns the sha256."""
    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, root)
            for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
                _add(tar, root, os.path.normpath(os.path.join(rel_dir, name)))
            for d in list(dirnames):
                if os.path.islink(os.path.join(dirpath, d)):
                    dirnames.remove(d)  # walked as a link above, never followed
                else:
                    _add(tar, root, os.path.normpath(os.path.join(rel_dir, d)))
    h = hashlib.sha256()
    with out.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _add(tar: tarfile.TarFile, root: Path, rel: str) -> None:
    if rel == ".marker" or rel == ".complete":
        return
    info = tar.gettarinfo(os.path.join(root, rel), arcname=rel)
    info.mtime = SOURCE_EPOCH
    info.uname = info.gname = ""
    if info.isfile():
        with open(os.path.join(root, rel), "rb") as f:
            tar.addfile(info, f)
    else:
        tar.addfile(info)


def docker_client():
    """A docker SDK client when a daemon answers, else None."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
        return client
    except Exception:  # no SDK, no socket, daemon down: all mean "no docker here"
        return None


def _docker_import(tarball: Path, short: str, recipe: ImageRecipe) -> str | None:
    client = docker_client()
    if client is None:
        log.info("docker_unavailable", detail="image not imported; the bwrap backend uses the rootfs directly")
        return None
    tag = f"{IMAGE_REPOSITORY}:{short}"
    try:
        client.images.get(tag)
        return tag
    except Exception:
        pass
    client.api.import_image(
        src=str(tarball),
        repository=IMAGE_REPOSITORY,
        tag=short,
        changes=[f"USER {recipe.uid}:{recipe.gid}", "WORKDIR /workspace", 'CMD ["sleep", "infinity"]'],
    )
    client.images.get(tag)  # raises when the import silently failed
    return tag


ARTIFACT_PACKAGES = ("python3-scipy", "python3-opencv")
"""What an RLE-Bench artifact may import beyond the trial image (numpy, msgspec): Debian's SciPy and OpenCV."""


def artifact_recipe() -> ImageRecipe:
    """The artifact image: the trial image's recipe plus ARTIFACT_PACKAGES (the trial image, and its digest, unchanged)."""
    base = ImageRecipe()
    return msgspec.structs.replace(base, packages=(*base.packages, *ARTIFACT_PACKAGES))


def artifact_cache_dir() -> Path:
    """Where the artifact image lives: beside the trial image, in its own cache (its own current.json)."""
    return default_cache_dir() / "artifact"
