"""An RLE run directory: the documented file layout `roboswe rle score --out`, `roboswe index` and
`roboswe verify` share (the development phase adds ledger.jsonl and its own evidence beside it).

    rle.json        RunMarker: format, task id (what tells `roboswe verify` this is an RLE run)
    task.json       the RleTask the artifact was scored under (its digest is in the report)
    sealed.json     the SealedArtifact record
    artifact/       the sealed copy (read-only; checked against sealed.json before use)
    ledger.jsonl    the development ledger's rows, when there was a development phase
    development.json  that phase's record (run.py's DevelopmentRecord: how it ended, spent, every operation)
    calls.jsonl     every verifier call: kind, unit, frame, seconds, ok, error, the artifact's answer
    sandbox.json    how the artifact's sandbox ended (exit status, limit, output tails)
    report.json     the RewardReport, seeds revealed
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from .manifest import RleTask
from .report import RewardReport, decode_report, encode_report
from .seal import SealedArtifact, write_sealed

RUN_FORMAT = "rle-run/1"
MARKER, TASK, SEALED, ARTIFACT, LEDGER, CALLS, SANDBOX, REPORT = (
    "rle.json", "task.json", "sealed.json", "artifact", "ledger.jsonl", "calls.jsonl", "sandbox.json", "report.json")


class RunMarker(msgspec.Struct, frozen=True, kw_only=True):
    format: str = RUN_FORMAT
    task: str


class CallRecord(msgspec.Struct, frozen=True, kw_only=True):
    n: int
    kind: str  # load | reset | estimate
    unit: int = -1
    frame: int = -1
    seconds: float
    ok: bool
    error: str | None = None
    value: object = None  # the artifact's answer (estimates), as it came back


def is_rle_run(run_dir: Path) -> bool:
    return (Path(run_dir) / MARKER).is_file()


def write_submission(run_dir: Path, task: RleTask, sealed: SealedArtifact, contents: dict[str, bytes],
                     ledger_rows: bytes | None = None) -> None:
    """What exists before verification: marker, task, seal record, sealed copy, ledger."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / MARKER).write_bytes(msgspec.json.encode(RunMarker(task=task.id)))
    (run_dir / TASK).write_bytes(msgspec.json.encode(task))
    (run_dir / SEALED).write_bytes(msgspec.json.encode(sealed))
    write_sealed(run_dir / ARTIFACT, contents)
    if ledger_rows is not None:
        (run_dir / LEDGER).write_bytes(ledger_rows)


def read_task(run_dir: Path) -> RleTask:
    return msgspec.json.decode((Path(run_dir) / TASK).read_bytes(), type=RleTask)


def read_sealed_record(run_dir: Path) -> SealedArtifact:
    return msgspec.json.decode((Path(run_dir) / SEALED).read_bytes(), type=SealedArtifact)


def read_report(run_dir: Path) -> RewardReport:
    return decode_report((Path(run_dir) / REPORT).read_bytes())


def write_report(run_dir: Path, report: RewardReport) -> None:
    (Path(run_dir) / REPORT).write_bytes(encode_report(report))


def write_calls(run_dir: Path, calls: list[CallRecord]) -> None:
    (Path(run_dir) / CALLS).write_bytes(b"".join(msgspec.json.encode(c) + b"\n" for c in calls))


def read_calls(run_dir: Path) -> list[CallRecord]:
    data = (Path(run_dir) / CALLS).read_bytes()
    return [msgspec.json.decode(line, type=CallRecord) for line in data.splitlines() if line.strip()]
