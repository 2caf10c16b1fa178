"""A record acknowledged as durable survives kill -9 of the writing process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from roboswe.records.reader import RunReader
from roboswe.records.store import RunStore

WRITER = textwrap.dedent(
    """
    import sys, time
    from roboswe.protocol.recorder import EventRecord, RunRecord
    from roboswe.records.store import RunStore

    store = RunStore.open(sys.argv[1], flush_interval=0.05)
    store.put_durable(RunRecord(run_id="r", created_at=time.time()))
    i = 0
    while True:
        for _ in range(20):  # fire-and-forget traffic in between, as in a control loop
            store.put(EventRecord(run_id="r", event="tick", at=time.time(), data={"i": i}))
            i += 1
        store.put_durable(EventRecord(run_id="r", event="durable", at=time.time(), data={"i": i}))
        print("acked", i, flush=True)
        i += 1
    """
)


def test_acknowledged_records_survive_kill_9(tmp_path):
    run_dir = tmp_path / "run"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(run_dir)], stdout=subprocess.PIPE, text=True)
    acked = []
    try:
        for line in writer.stdout:
            acked.append(int(line.split()[1]))
            if len(acked) == 40:
                break
        os.kill(writer.pid, signal.SIGKILL)  # no chance to flush or close
    finally:
        writer.kill()
        writer.wait(10)
    assert writer.returncode == -signal.SIGKILL
    assert len(acked) == 40

    RunStore.open(run_dir).close()  # a new writer recovers the WAL
    with RunReader(run_dir) as reader:
        events = [e for _, e in reader.events()]
        durable = {e.data["i"] for e in events if e.event == "durable"}
        ticks = [e.data["i"] for e in events if e.event == "tick"]
        assert reader._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert set(acked) <= durable
    # everything queued before an acknowledged barrier was committed with it, in order
    assert set(range(acked[-1])) - set(ticks) - durable == set()
