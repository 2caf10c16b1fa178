"""Judgements in the run database: a database written before the table existed stays readable and gets it
when a writer opens it; the table is append-only; re-judging adds a record and the latest is shown."""

from __future__ import annotations

import sqlite3

import pytest
import trio

from roboswe.judge.conditions import load_judge_config
from roboswe.judge.judging import judge_one
from roboswe.judge.summary import judge_summary
from roboswe.providers import create_participant
from roboswe.records.reader import RunReader
from roboswe.records.schema import DB_NAME
from roboswe.records.store import RunStore

from ..records.conftest import run_records, trial_records
from .golden import TASK, asked, picture, views

SID = f"r1/{TASK}"


def older_database(run_dir) -> None:
    """A run database as roboswe wrote it before the judgements table (the same schema version, no table)."""
    with RunStore.open(run_dir, flush_interval=0.01) as store:
        store.put_durable(*run_records(series_id=SID), *trial_records(SID, 1, "success"))
    conn = sqlite3.connect(run_dir / DB_NAME, isolation_level=None)
    for trigger in ("judgements_no_update", "judgements_no_delete"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE judgements")
    conn.close()


def judge(outcome="success", shown=None):
    config, digest = load_judge_config()
    return trio.run(judge_one, create_participant(config.provider), config, digest, asked(outcome, shown))


def test_an_older_database_is_read_then_given_the_table_and_rejudging_appends(tmp_path):
    run_dir = tmp_path / "run"
    older_database(run_dir)
    with RunReader(run_dir) as reader:
        assert reader.judgements() == [] and reader.count("judgements") == 0
        assert judge_summary(reader) is None
        assert reader.row_digests("judgements") == {}
    first = judge()
    second = judge(shown=views(final={"sideview": picture("sideview", "open")}))
    with RunStore.open(run_dir) as store:  # the writer adds the table, then the records
        store.put_durable(first)
    with RunStore.open(run_dir) as store:
        store.put_durable(second)
    with RunReader(run_dir) as reader:
        assert [r.judgement_id for r in reader.judgements(f"{SID}/t1a0")] == [first.judgement_id, second.judgement_id]
        assert reader.judgements()[0] == first  # read back exactly, attempts' bytes included
        summary = judge_summary(reader)
    (only,) = summary["trials"].values()
    assert (only["judgements"], only["judgement_id"], only["contradiction"]) == (2, second.judgement_id, 1)
    assert summary["flagged"] == [f"{SID}/t1a0"] and "supplementary audit" in summary["label"]
    conn = sqlite3.connect(run_dir / DB_NAME, isolation_level=None)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE judgements SET status = 'answered'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM judgements")
    conn.close()
