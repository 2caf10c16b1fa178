"""`roboswe exec` end to end: real simulator and bridge actor processes, scripts run in order
in one workspace and one scene, feedback per script and the success flag at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_exec_runs_scripts_in_order_against_one_scene(backend, scratch):
    first = scratch / "first.py"
    first.write_text(
        "import robot, numpy as np\n"
        "s = robot.spec()\n"
        "robot.step_many(np.tile(s['action']['hold'], (3, 1)))\n"
        "open('/workspace/note.txt', 'w').write('from first')\n"
        "print(s['task_id'], robot.steps_left())\n"
    )
    second = scratch / "second.py"
    second.write_text("import robot\nprint(open('note.txt').read(), robot.state()['robot0_eef_pos'].shape)\nrobot.reset()\n")
    env = {**os.environ, "PYTHONHASHSEED": "0", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    # --workspace DIR with the report redirected into DIR: the sandbox works on a copy, so the open
    # file keeps what is written to it and only the scripts' own file comes back, as this user.
    mine = scratch / "mine"
    mine.mkdir()
    (mine / "kept.txt").write_text("mine")
    with open(mine / "out.json", "w") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "roboswe.cli", "exec", "lift-panda", str(first), str(second), "-e", backend, "--json",
             "--workspace", str(mine)],
            stdout=out, stderr=subprocess.PIPE, text=True, env=env, timeout=300, cwd=scratch,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((mine / "out.json").read_text())
    assert report["workspace"] == str(mine.resolve())
    assert report["written_back"] == {"created": ["note.txt"], "changed": [], "deleted": [], "not_copied": []}
    assert (mine / "note.txt").read_text() == "from first" and (mine / "kept.txt").read_text() == "mine"
    assert {f.stat().st_uid for f in mine.iterdir()} == {os.getuid()}
    assert sorted(f.name for f in mine.iterdir()) == ["kept.txt", "note.txt", "out.json"]  # the scripts stayed outside
    assert report["backend"] == backend and len(report["image_digest"]) == 64
    one, two = report["scripts"]
    assert one["exit_status"] == 0 and one["steps"] == 3 and one["stdout"] == "lift-panda 47\n", one["stderr"]
    assert two["stdout"] == "from first (3,)\n"  # the workspace carries over
    # a series trial has no reset: the bridge refuses it, typed (robot.reset() exists only in RLE-Bench development)
    assert two["exception"]["type"] == "robot.ResetRefused" and "development phase" in two["exception"]["message"]
    assert report["success"]["achieved"] is False and report["success"]["control_step"] == 3


def test_text_mode_escapes_what_the_program_printed(capsys):
    from roboswe.commands.exec import _print_feedback

    forged = "moving\n\x1b[2K\x1b[1A\rsuccess: True (control step 9)\u202e\n"
    _print_feedback({"script": "a\x1b[31m.py", "exit_status": 0, "steps": 1, "wall_seconds": 0.5, "limit": None,
                     "stdout": forged, "stdout_bytes": len(forged), "stdout_truncated": False,
                     "stderr": "\x07bell", "stderr_bytes": 5, "stderr_truncated": False, "exception": None, "refused": 0})
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\r\x07\u202e"), repr(out)
    assert "\\x1b[2K\\x1b[1A\\rsuccess: True" in out
    assert not any(line.startswith("success:") for line in out.splitlines())


def test_write_back_copies_only_what_the_scripts_created_or_changed(tmp_path):
    from roboswe.commands.exec import _file_digests, _write_back

    user, copy = tmp_path / "user", tmp_path / "copy"
    user.mkdir()
    for name, text in (("same.txt", "a"), ("edited.txt", "b"), ("gone.txt", "c")):
        (user / name).write_text(text)
    import shutil

    shutil.copytree(user, copy, symlinks=True)
    before = _file_digests(copy)
    # what the scripts did in the copy
    (copy / "edited.txt").write_text("b2")
    (copy / "gone.txt").unlink()
    (copy / "sub").mkdir()
    (copy / "sub" / "new.bin").write_bytes(b"\x00\xff")
    (copy / "escape").symlink_to("/etc/passwd")
    os.mkfifo(copy / "pipe")
    done = _write_back(copy, user, before)
    assert done["created"] == ["sub/new.bin"] and done["changed"] == ["edited.txt"] and done["deleted"] == ["gone.txt"]
    assert sorted(done["not_copied"]) == ["escape (a symlink, not a regular file)", "pipe (a fifo, not a regular file)"]
    assert (user / "edited.txt").read_text() == "b2" and (user / "gone.txt").read_text() == "c"
    assert (user / "sub" / "new.bin").read_bytes() == b"\x00\xff"
    assert not (user / "escape").exists() and not (user / "pipe").exists()
