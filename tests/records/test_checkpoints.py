"""Workspace checkpoints: bit-exact round trips, refused entries, manifest validation."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import msgspec
import pytest

from roboswe.sandbox.checkpoints import (
    BlobCorrupt,
    BlobStore,
    CheckpointError,
    Manifest,
    ManifestEntry,
    ManifestInvalid,
    capture,
    load_manifest,
    restore,
    validate,
)


def _tree(root: Path) -> dict[str, tuple[bytes, int, int]]:
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            st = path.stat()
            out[str(path.relative_to(root))] = (path.read_bytes(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return out


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "ws"
    (ws / "lib" / "deep").mkdir(parents=True)
    (ws / "main.py").write_text("import robot\nprint(robot.state())\n")
    (ws / "run.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    os.chmod(ws / "run.sh", 0o755)
    (ws / "lib" / "deep" / "data.bin").write_bytes(bytes(range(256)) * 100)
    (ws / "empty.txt").write_bytes(b"")
    os.chmod(ws / "empty.txt", 0o400)
    (ws / "same.py").write_text("import robot\nprint(robot.state())\n")  # duplicate content, one blob
    for i, p in enumerate(sorted(ws.rglob("*"))):
        if p.is_file():
            os.utime(p, ns=(1_700_000_000_123_456_789 + i, 1_700_000_000_123_456_789 + i))
    return ws


def test_restore_round_trip_is_bit_exact_with_modes_and_mtimes(workspace, tmp_path):
    blobs = BlobStore(tmp_path / "blobs")
    cap = capture(workspace, blobs)
    assert [e.path for e in cap.manifest.entries] == ["empty.txt", "lib/deep/data.bin", "main.py", "run.sh", "same.py"]
    assert len(cap.new_blobs) == 4  # main.py and same.py share a blob
    again = capture(workspace, blobs)
    assert again.new_blobs == [] and again.manifest_sha256 == cap.manifest_sha256  # canonical, content-addressed

    dest = tmp_path / "restored"
    restore(load_manifest(cap.manifest_bytes), blobs, dest)
    assert _tree(dest) == _tree(workspace)


def test_capture_records_but_never_follows_special_files(workspace, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    (workspace / "link.txt").symlink_to(secret)
    (workspace / "linkdir").symlink_to(tmp_path)
    os.mkfifo(workspace / "pipe")  # reading it would hang a naive capture
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(workspace / "sock"))
    try:
        cap = capture(workspace, BlobStore(tmp_path / "blobs"))
    finally:
        sock.close()
    refused = {r.path: r.type for r in cap.manifest.refused}
    assert refused == {"link.txt": "symlink", "linkdir": "symlink", "pipe": "fifo", "sock": "socket"}
    assert "link.txt" not in {e.path for e in cap.manifest.entries}
    assert all(b"host secret" not in p.read_bytes() for p in (tmp_path / "blobs").rglob("*") if p.is_file())


def test_capture_of_a_missing_workspace_says_what_to_pass(tmp_path):
    with pytest.raises(CheckpointError, match="cannot open as a directory"):
        capture(tmp_path / "nope", BlobStore(tmp_path / "blobs"))


def _entry(**overrides) -> ManifestEntry:
    fields = dict(path="a.py", sha256="0" * 64, size=0, mode=0o644, mtime_ns=0)
    return ManifestEntry(**{**fields, **overrides})


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (_entry(type="symlink"), "is a symlink"),
        (_entry(type="device"), "is a device"),
        (_entry(type="fifo"), "is a fifo"),
        (_entry(type="socket"), "is a socket"),
        (_entry(path="/etc/passwd"), "absolute path"),
        (_entry(path="../outside.py"), "contains '..'"),
        (_entry(path="lib/../../x"), "contains '..'"),
        (_entry(path="a//b"), "not a normalized path"),
        (_entry(path="./a"), "not a normalized path"),
        (_entry(path=""), "empty path"),
        (_entry(sha256="../../etc/passwd"), "not 64 lowercase hex"),
        (_entry(mode=0o4755), "bits beyond rwxrwxrwx"),
        (_entry(size=-1), "negative size"),
    ],
)
def test_bad_manifest_entries_fail_validation_before_restore(entry, problem, tmp_path):
    manifest = Manifest(entries=[entry])
    with pytest.raises(ManifestInvalid, match=problem.replace(".", r"\.").replace("*", r"\*")):
        validate(manifest)
    dest = tmp_path / "dest"
    with pytest.raises(ManifestInvalid):
        restore(manifest, BlobStore(tmp_path / "blobs"), dest)
    assert not dest.exists()  # nothing touched


def test_duplicate_and_file_under_file_entries_fail():
    with pytest.raises(ManifestInvalid, match="appears twice"):
        validate(Manifest(entries=[_entry(), _entry()]))
    with pytest.raises(ManifestInvalid, match="which is a file"):
        validate(Manifest(entries=[_entry(path="a"), _entry(path="a/b")]))


def test_garbage_manifest_bytes_are_refused():
    with pytest.raises(ManifestInvalid, match="not a checkpoint manifest"):
        load_manifest(b'{"entries": "nope"}')


def test_restore_refuses_a_non_empty_target(workspace, tmp_path):
    blobs = BlobStore(tmp_path / "blobs")
    cap = capture(workspace, blobs)
    with pytest.raises(CheckpointError, match="not an empty directory"):
        restore(cap.manifest, blobs, workspace)


def test_damaged_or_missing_blob_fails_restore(workspace, tmp_path):
    blobs = BlobStore(tmp_path / "blobs")
    cap = capture(workspace, blobs)
    victim = blobs.path(cap.manifest.entries[2].sha256)
    os.chmod(victim, 0o644)
    victim.write_bytes(b"tampered")
    assert not blobs.verify(cap.manifest.entries[2].sha256)
    with pytest.raises(BlobCorrupt, match="reads back as"):
        restore(cap.manifest, blobs, tmp_path / "r1")
    assert not any((tmp_path / "r1").iterdir())  # all blobs checked before writing any file
    victim.unlink()
    with pytest.raises(BlobCorrupt, match="missing"):
        restore(cap.manifest, blobs, tmp_path / "r2")
    assert not any((tmp_path / "r2").iterdir())


def test_manifest_encoding_is_canonical(workspace, tmp_path):
    cap = capture(workspace, BlobStore(tmp_path / "blobs"))
    assert msgspec.json.encode(load_manifest(cap.manifest_bytes)) == cap.manifest_bytes
