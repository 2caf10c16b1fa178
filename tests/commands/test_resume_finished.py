"""`roboswe run --resume` of a finished run says there is nothing to resume and changes nothing."""

from __future__ import annotations

import argparse
import time

import msgspec
from roboswe.protocol.recorder import (
    RunPins,
    RunRecord,
    SeriesRecord,
    VerificationRecord,
)

from roboswe.commands.run import add_arguments_run, run_run
from roboswe.evaluation.job import CONFIG_COPY, Job, read_job, write_job
from roboswe.evaluation.run import work_left
from roboswe.records.store import RunStore

from ..records.conftest import trial_records

TASK = "lift-panda"


def _run_dir(tmp_path, admitted_file, *, ended: int = 2, verified: int = 2):
    """A run of one two-trial series on lift-panda: ``ended`` trials ended, ``verified`` of them replayed."""
    from roboswe.evaluation.admission import read_admitted

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / CONFIG_COPY).write_text('[provider]\nkind = "python"\nagent = "tests.evaluation.agents:ReachAgent"\n\n'
                                       '[series]\ntrials = 2\n')
    job = Job(kind="run", run_id="run", admitted_path=str(admitted_file), tasks=[TASK],
              admitted_sha256=read_admitted(admitted_file).digest)
    write_job(run_dir, job)
    series_id = f"run/{TASK}"
    now = time.time()
    records: list = [RunRecord(run_id="run", created_at=now, admitted_sha256=job.admitted_sha256, config=RunPins()),
                     SeriesRecord(series_id=series_id, run_id="run", task=TASK, model="python:demo", mode="retain",
                                  trials=2, created_at=now)]
    for t in range(1, ended + 1):
        records += trial_records(series_id, t, "success")
        if t <= verified:
            records.append(VerificationRecord(verification_id=f"v{t}", trial_id=f"{series_id}/t{t}a0",
                                              verdict="verified", outcome_reproduced=True, started_at=now, ended_at=now))
    with RunStore.open(run_dir) as store:
        store.put_durable(*records)
    (run_dir / "results.json").write_text("{}\n")
    return run_dir, job


def _contents(run_dir):
    # SQLite's WAL side files (an empty log, its shared-memory index) appear when anything reads the database
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in run_dir.iterdir() if not p.name.endswith(("-shm", "-wal"))}


def test_resuming_a_finished_run_says_so_and_starts_and_writes_nothing(tmp_path, admitted_file, no_actors, capsys):
    run_dir, _ = _run_dir(tmp_path, admitted_file)
    before = _contents(run_dir)
    parser = argparse.ArgumentParser()
    add_arguments_run(parser)
    assert run_run(parser.parse_args(["--resume", str(run_dir)])) == 0
    out = capsys.readouterr().out
    assert f"roboswe run: {run_dir} finished: every series ran its 2 trial(s)" in out and "nothing to resume" in out
    assert no_actors == []
    assert _contents(run_dir) == before


def test_the_work_a_resume_would_do_is_named(tmp_path, admitted_file):
    from roboswe.config import load_config

    series = msgspec.structs.replace(load_config(None).series, trials=2)
    run_dir, job = _run_dir(tmp_path, admitted_file, ended=2, verified=1)
    assert work_left(run_dir, job, series) == [f"{TASK}: 1 trial(s) to replay"]
    assert work_left(run_dir, msgspec.structs.replace(job, verify=False), series) == []
    (run_dir / "results.json").unlink()
    assert work_left(run_dir, msgspec.structs.replace(job, verify=False), series) == ["results.json to write"]
    assert read_job(run_dir) == job


def test_an_unfinished_series_is_work_left(tmp_path, admitted_file):
    from roboswe.config import load_config

    series = msgspec.structs.replace(load_config(None).series, trials=2)
    run_dir, job = _run_dir(tmp_path, admitted_file, ended=1, verified=1)
    assert work_left(run_dir, job, series) == [f"{TASK}: trial 2 of 2 to run"]
