"""RUN_DIR/job.json: what the coordinator is asked to do (run or verify), written by the CLI.

The coordinator reads it at start, so one restarted by the supervisor (or started again by
``roboswe run --resume``) finds the same job and continues it from the run database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec

JOB_FILE = "job.json"
CONFIG_COPY = "config.toml"


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """One job for the coordinator of a run directory."""

    kind: Literal["run", "verify"]
    run_id: str
    admitted_path: str
    admitted_sha256: str  # the admitted file's content digest, checked again by the coordinator
    tasks: list[str]
    backend: Literal["docker", "bwrap"] | None = None
    verify: bool = True
    videos: bool = True  # render each trial's video from its recorded states after the run (`run --no-video`: none)
    sim_endpoint: str | None = None  # remote simulator (tcp://HOST:PORT); None: the run's own simulator actor
    sim_keys: str | None = None  # CURVE key directory for a remote simulator
    config_sha256: str = ""
    trials: list[str] = msgspec.field(default_factory=list)  # verify only: trial ids (empty: every ended trial)
    retry_incomplete: bool = False  # `run --resume --retry-incomplete`: re-run retryable incomplete slots (series.py)
    workers: int = 1  # series at once, each on its own simulator, sandbox bridge and context manager (roboswe/config.py)
    rle: bool = False  # an RLE-Bench run ([rle] of the config): ``tasks`` are RLE tasks, no admitted file (roboswe/rle/run.py)
    ray: str | None = None  # a Ray cluster ("auto" or HOST:PORT) the workers' simulators and bridges are placed on (roboswe/fleet)


def write_job(run_dir: str | Path, job: Job) -> None:
    path = Path(run_dir) / JOB_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(job), indent=2))
    tmp.replace(path)


def read_job(run_dir: str | Path) -> Job:
    """The job of a run dir; raises FileNotFoundError / ValueError saying what to do."""
    path = Path(run_dir) / JOB_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: no job file; start the run with `roboswe run ADMITTED.json --config RUN.toml`")
    try:
        return msgspec.json.decode(path.read_bytes(), type=Job)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ValueError(f"{path}: not a roboswe job file ({e})") from None
