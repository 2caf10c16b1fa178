"""The harness's own workspace access: relative paths only, symlinks never followed."""

from __future__ import annotations

import os

import pytest

from roboswe.evaluation.workspace import Workspace, WorkspaceError


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(root)


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.txt", "a/../../b", "", ".", "a//b/.."])
def test_paths_that_leave_the_workspace_are_refused(ws, path):
    with pytest.raises(WorkspaceError):
        ws.write(path, "x")
    with pytest.raises(WorkspaceError):
        ws.read(path)


def test_write_read_list_round_trip_with_subdirectories(ws):
    assert ws.write("lib/util.py", "print('hi')\n") == 12
    ws.write("main.py", "import lib.util\n")
    assert ws.read("lib/util.py") == ("print('hi')\n", 12)
    assert ws.list() == [("lib/util.py", 12), ("main.py", 16)]
    assert oct(os.stat(ws.root / "main.py").st_mode & 0o777) == "0o666"  # the sandbox user may rewrite it
    assert ws.listing_text().splitlines() == ["lib/util.py (12 bytes)", "main.py (16 bytes)"]


def test_symlinks_planted_by_authored_code_are_never_followed(ws, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    os.symlink(secret, ws.root / "link.txt")
    os.symlink(tmp_path, ws.root / "dirlink")
    with pytest.raises(WorkspaceError, match="symlink"):
        ws.read("link.txt")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        ws.write("link.txt", "overwrite")
    with pytest.raises(WorkspaceError, match="not a directory"):
        ws.write("dirlink/secret.txt", "overwrite")
    assert secret.read_text() == "host secret"
    assert ("link.txt", -1) in ws.list() and "not a regular file" in ws.listing_text()


def test_missing_file_error_says_what_to_do(ws):
    with pytest.raises(WorkspaceError, match="list_files"):
        ws.read("nope.py")
