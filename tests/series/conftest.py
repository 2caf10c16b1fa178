"""Series tests run `roboswe run` for real: supervisor, six actor processes, robosuite, bwrap.

Shared pieces: one admitted file for lift-panda (admitted in two fresh processes, once per
session), run configs written per test, and a helper that runs the CLI as a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from ..conftest import require_in_ci

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))

DEMO_AGENT = 'agent = "roboswe.agents.lift_demo:LiftDemoAgent"'
# A busy 2-core machine can starve an actor's loop for seconds while a scene is built.
TOLERANT_HEARTBEATS = """
[supervisor]
heartbeat_interval = 1.0
heartbeat_liveness = 5
[transport]
heartbeat_interval = 1.0
heartbeat_liveness = 5
"""


def cli_env() -> dict[str, str]:
    # tests.series.agents must import in the provider_client process
    return {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def roboswe(*args: str, timeout: float = 900, check: bool = False) -> subprocess.CompletedProcess:
    """Run the `roboswe` CLI in a subprocess (not a terminal: plain progress lines)."""
    proc = subprocess.run([sys.executable, "-m", "roboswe.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=cli_env(), cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"roboswe {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def start_run(run_dir: Path, admitted: Path, config: Path, *extra: str) -> subprocess.Popen:
    """Start `roboswe run` in the background (output merged into ``stdout``), for a test that acts on it mid-run;
    no videos (these tests look at records, and rendering them costs seconds per trial)."""
    return subprocess.Popen([sys.executable, "-m", "roboswe.cli", "run", str(admitted), "--config", str(config),
                             "--out", str(run_dir), "--no-video", *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=cli_env(), cwd=ROOT)


def operations_of(run_dir: Path, trial_suffix: str) -> int:
    """Operations recorded so far for the trial whose id ends with ``trial_suffix``; read-only, and 0 while the
    database does not exist yet or is busy (a test polls this while the run writes)."""
    db = run_dir / "run.sqlite"
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            (n,) = conn.execute("SELECT count(*) FROM operations WHERE trial_id LIKE ?", (f"%{trial_suffix}",)).fetchone()
        finally:
            conn.close()
        return n
    except sqlite3.Error:
        return 0


def actor_pid(run_dir: Path, name: str) -> int:
    """The pid of the run's actor ``name`` now, from the supervisor's state file."""
    return json.loads((run_dir / "supervisor.json").read_text())["actors"][name]["pid"]


def write_config(directory: Path, name: str, *, agent: str = DEMO_AGENT, series: str = "", extra: str = "") -> Path:
    path = directory / f"{name}.toml"
    path.write_text(textwrap.dedent(f"""
        [provider]
        kind = "python"
        {agent}

        [series]
        backend = "bwrap"
        {series}
    """) + TOLERANT_HEARTBEATS + extra)
    return path


@pytest.fixture(scope="session")
def sandbox_image():
    from roboswe.sandbox.images import ImageError, load_image

    try:
        return load_image()
    except ImageError as e:
        require_in_ci(f"{e} (setup.sh builds it)")


@pytest.fixture(scope="session")
def work_dir():
    # The sandbox user must traverse run dirs (pytest's tmp_path lives under a 0700 parent).
    d = Path(tempfile.mkdtemp(prefix="rs-series-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def admitted(work_dir, sandbox_image) -> Path:
    """admitted.json holding lift-panda, admitted in two fresh simulator processes."""
    from roboswe.sim.manifest import load_manifest

    from roboswe.evaluation.admission import (
        FORMAT,
        Admitted,
        admit_task,
        write_admitted,
    )

    task = admit_task(load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml"))
    assert task.status == "admitted", task.reason
    path = work_dir / "admitted.json"
    write_admitted(Admitted(format=FORMAT, dataset={"id": "series-tests", "tasks": ["lift-panda"]},
                            created_at="test", host={}, run_config_sha256=None, tasks=[task]), path)
    return path
