"""Participant text reaches a terminal escaped (issue 26): a script named with escape sequences cannot
retitle the window, clear the screen, draw a fake result line or reorder a line through any command.

One run directory carries the hostile name everywhere a participant's string lands: trial reasons and
a replay's first divergence in the records, event fields in events.jsonl, the supervisor's failure and
an actor's last exit in supervisor.json, a worker's series in the roster. The real commands read it on
a pseudo-terminal (``logs`` and ``status`` print for people only on one), with TERM=dumb so that rich
writes no styles of its own: every ESC in the output would be the participant's.
"""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
import time
import tty
from pathlib import Path

import msgspec
import pytest
from roboswe.protocol.recorder import TrialEnded, VerificationRecord

from roboswe.records.store import RunStore
from roboswe.terminal import plain, terminal_console, terminal_safe
from tests.records.conftest import run_records, trial_records

# OSC (window title, BEL-terminated), CSI clear screen, a green fake verdict, a C1 CSI, a bidi override, markup.
SCRIPT = "\x1b]0;pwned\x07\x1b[2J\x1b[32mall trials success\x1b[0m\x9b1m\u202e[red]fake[/red] [link=https://x.example]x[/link].py"
SHOWN = r"\x1b]0;pwned\x07\x1b[2J\x1b[32mall trials success\x1b[0m\x9b1m\u202e[red]fake[/red] [link=https://x.example]x[/link].py"
# A field with a newline must not start a line of its own that looks like another event.
FORGED_LINE = "12:00:00.000 info    coordinator      trial_end  outcome=success"
RAW = ("\x1b", "\x07", "\x9b", "\x7f", "\r", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
       "\u2066", "\u2067", "\u2068", "\u2069")
RUN_ID = "hostile-run"
SERIES = f"{RUN_ID}/lift-panda"


def assert_escaped(out: str, *, shown: str = SHOWN) -> None:
    raw = sorted({repr(c) for c in RAW if c in out})
    assert not raw, f"raw {raw} in the output:\n{out!r}"
    assert shown in out, f"the escaped name is not shown:\n{out}"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from roboswe.fleet.node import boot_id
    from roboswe.fleet.roster import RosterFile

    run_dir = tmp_path_factory.mktemp("hostile") / RUN_ID
    store = RunStore.open(run_dir, flush_interval=0.01)
    records = run_records(RUN_ID, SERIES)
    failed, succeeded = trial_records(SERIES, 1, "failure"), trial_records(SERIES, 2, "success")
    failed[-1] = msgspec.structs.replace(failed[-1], reason=f"{SCRIPT} raised")
    records += failed + succeeded
    ended: TrialEnded = succeeded[-1]
    records.append(VerificationRecord(verification_id=f"{ended.trial_id}/v0", trial_id=ended.trial_id,
                                      verdict="mismatch", outcome_reproduced=False, replay_outcome="failure",
                                      first_divergence=f"exec {SCRIPT}: steps 20 vs 19",
                                      started_at=ended.ended_at + 1, ended_at=ended.ended_at + 2))
    for record in records:
        store.put(record)
    store.close()

    now = time.time()
    events = [  # as the loggers write them (msgspec, the first keys in this order)
        {"time": "2026-12-01T12:00:00.000000Z", "level": "info", "actor": "sandbox_bridge", "pid": 7,
         "event": "exec_done", "series": SERIES, "script": SCRIPT, "arguments": {"path": SCRIPT},
         "stdout": f"moving\n{FORGED_LINE}"},
        {"time": "2026-12-01T12:00:01.000000Z", "level": "info", "actor": "coordinator", "pid": 8,
         "event": "trial_verified", "series": SERIES, "divergence": f"exec {SCRIPT}: steps 20 vs 19"},
    ]
    (run_dir / "events.jsonl").write_bytes(b"".join(msgspec.json.encode(e) + b"\n" for e in events))

    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    actor = {"pid": None, "state": "dead", "restarts": 3, "endpoint": "ipc:///nowhere", "started_at": now,
             "last_heartbeat": None, "last_exit": f"exit 1 running {SCRIPT}"}
    (run_dir / "supervisor.json").write_text(json.dumps(
        {"supervisor_pid": dead.pid, "state": "failed", "failure": f"sandbox_bridge died running {SCRIPT}",
         "actors": {"sandbox_bridge": actor}}))
    RosterFile(run_dir, RUN_ID, "10.0.0.1:6379", boot_id()).update(
        1, state="running", series=f"{RUN_ID}/{SCRIPT}", host="10.0.0.2", node="ab" * 28)
    return run_dir


def on_terminal(*args: str, columns: int = 400) -> str:
    """`roboswe ARGS` run as a user would, on a pseudo-terminal of ``columns`` (raw: no newline translation)."""
    import fcntl
    import struct
    import termios

    roboswe = Path(sys.executable).with_name("roboswe")
    command = [str(roboswe)] if roboswe.exists() else [sys.executable, "-m", "roboswe.cli"]
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    master, replica = pty.openpty()
    tty.setraw(replica)
    fcntl.ioctl(replica, termios.TIOCSWINSZ, struct.pack("HHHH", 60, columns, 0, 0))
    proc = subprocess.Popen([*command, *args], stdin=replica, stdout=replica, stderr=replica,
                            env={**env, "TERM": "dumb", "COLUMNS": str(columns), "LINES": "60"}, close_fds=True)
    os.close(replica)
    chunks = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        code = proc.wait(10)
    out = b"".join(chunks).decode("utf-8", "replace")
    assert code == 0, out
    return out


def test_terminal_safe_escapes_controls_c1_and_bidi_and_keeps_what_a_layout_needs():
    assert terminal_safe(SCRIPT) == SHOWN
    assert terminal_safe(SHOWN) == SHOWN  # idempotent: escaping twice shows the same
    assert terminal_safe("a\tb\nc\x7f\x85\u2066\u2069\u2028\ud800") == "a\tb\nc\\x7f\\x85\\u2066\\u2069\\u2028\\ud800"
    assert terminal_safe("one\ntwo\r", multiline=False) == "one\\ntwo\\r"
    assert terminal_safe("café, 東京, ✓") == "café, 東京, ✓"


def test_a_terminal_console_escapes_strings_and_text_built_elsewhere_and_plain_is_never_markup():
    from rich.text import Text

    out = io.StringIO()
    console = terminal_console(file=out, width=400, color_system=None)
    console.print(f"[bold]A[/bold] {SCRIPT}", soft_wrap=True)
    console.print(Text(f"raw text {SCRIPT}"), soft_wrap=True)
    console.print(plain(SCRIPT), soft_wrap=True)
    lines = out.getvalue().splitlines()
    assert not any(c in out.getvalue() for c in RAW), repr(out.getvalue())
    assert lines[0].startswith(r"A \x1b]0;pwned\x07\x1b[2J\x1b[32mall trials success")  # markup in it is obeyed:
    assert lines[2] == SHOWN  # participant text goes in as plain()
    assert lines[1] == f"raw text {SHOWN}".replace("\\x07", "")  # rich's Text drops BEL itself; the rest is escaped


def test_logs_on_a_terminal_show_the_name_escaped_and_one_line_per_event(run_dir):
    out = on_terminal("logs", "--run-dir", str(run_dir))
    assert_escaped(out)
    lines = out.splitlines()
    assert len(lines) == 2 and [line.split()[3] for line in lines] == ["exec_done", "trial_verified"]
    assert f"stdout=moving\\n{FORGED_LINE}" in lines[0]


def test_report_shows_reasons_and_divergences_escaped_and_as_text(run_dir):
    out = on_terminal("report", str(run_dir))
    assert_escaped(out)
    assert f"diverged: exec {SHOWN}: steps 20 vs 19" in out  # the replay note, markup and all shown as written


def test_status_on_a_terminal_shows_failure_exits_and_series_escaped(run_dir):
    out = on_terminal("status", "--run-dir", str(run_dir))
    assert_escaped(out)
    assert f"failure: sandbox_bridge died running {SHOWN}" in out
    assert f"{run_dir}  [failed]" in out  # the state in brackets is text, not a style tag


def test_compare_shows_a_run_dir_named_with_escapes_escaped(run_dir, tmp_path):
    import shutil

    renamed = tmp_path / "\x1b]0;pwned\x07\x1b[2J\u202e[red]run[/red]"  # a directory name cannot hold "/"
    shutil.copytree(run_dir, renamed)
    out = on_terminal("compare", str(run_dir), str(renamed))
    assert_escaped(out, shown=f"B {tmp_path}/\\x1b]0;pwned\\x07\\x1b[2J\\u202e[red]run[/red] (run {RUN_ID}")


def test_run_and_verify_print_outcomes_and_progress_lines_escaped(run_dir, capsys):
    from roboswe.protocol.coordinator import Progress

    from roboswe.commands.run import Display, print_outcome

    print_outcome(run_dir)
    display = Display(False, "verify", run_dir)
    progress = Progress(state="running", task=SCRIPT, last_outcome=f"trial 1: failure ({SCRIPT} raised)",
                        lines=[f"12:00:00 {SERIES}: trial 2 replay mismatch: exec {SCRIPT}\n{FORGED_LINE}"])
    display.update(progress)
    out = capsys.readouterr().out
    assert_escaped(out, shown=r"\x1b]0;pwned\x07")  # the outcome table cuts long reasons to its column
    assert f"trial 1 attempt 0: {SHOWN} raised" in out  # ... and prints the whole reason below
    assert not any(line.startswith(FORGED_LINE) for line in out.splitlines())

    live = io.StringIO()
    terminal_console(file=live, width=400, color_system=None).print(display._render())
    assert_escaped(live.getvalue())
