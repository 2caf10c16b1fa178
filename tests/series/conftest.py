"""Series tests run `roboswe run` for real: supervisor, six actor processes, robosuite, bwrap.

Shared pieces: one admitted file for lift-panda (admitted in two fresh processes, once per
session), run configs written per test, and a helper that runs the CLI as a subprocess.
"""

from __future__ import annotations

import os
import shutil
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
