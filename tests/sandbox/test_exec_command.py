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
    proc = subprocess.run(
        [sys.executable, "-m", "roboswe.cli", "exec", "lift-panda", str(first), str(second), "-e", backend, "--json"],
        capture_output=True, text=True, env=env, timeout=300, cwd=scratch,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
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
