"""Shared fixtures: real actor processes started for a test and always reaped."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ECHO_SERVER = ROOT / "tests" / "actors" / "echo_server.py"


# Two pytest workers (README: `pytest -n 2`) share out whole modules, so a module's fixtures are built
# once; these folders go to one worker whole: their session fixtures are expensive scenes or runs
# (viewer, RoboCasa, GR1, paint, RLE batteries), or their tests assert that no process of their kind
# is left anywhere on the machine (the fleet's Ray nodes and workers), which the other worker's would break.
WHOLE_FOLDERS = ("tests/fleet/", "tests/viewer/", "tests/rle/", "tests/sim/robocasa/", "tests/sim/gr1/",
                 "tests/sim/paint/")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ModuleOrFolder(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            folder = next((f for f in WHOLE_FOLDERS if nodeid.startswith(f)), None)
            return folder or nodeid.split("::", 1)[0]

    return ModuleOrFolder(config, log)


def require_in_ci(reason: str) -> None:
    """Skip a test that needs missing infrastructure, except in CI (CI=true), where
    .ci/run provides it (dockerd, the sandbox image), so its absence is a failure."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)


def actor_env() -> dict[str, str]:
    return {**os.environ, "PYTHONHASHSEED": "0"}


class EchoProcess:
    """An echo server in its own OS process; ``endpoint`` is where it is bound."""

    def __init__(self, endpoint: str, *extra: str):
        # stderr to a file, not a pipe: an unread pipe fills up and blocks the actor's logging.
        self.stderr = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            [sys.executable, str(ECHO_SERVER), endpoint, *extra],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=actor_env(),
        )
        line = self.process.stdout.readline()
        if not line.startswith("bound "):
            self.process.kill()
            raise RuntimeError(f"echo server did not start: {line!r} {self.log()}")
        self.endpoint = line.split()[1]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(5)

    def log(self) -> str:
        """Everything the process wrote to stderr so far (its JSON events)."""
        self.stderr.seek(0)
        return self.stderr.read()


@pytest.fixture
def echo_server_factory() -> Iterator:
    started: list[EchoProcess] = []

    def start(endpoint: str, *extra: str) -> EchoProcess:
        server = EchoProcess(endpoint, *extra)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """Each test starts from structlog's defaults: a command run in-process configures logging for
    the whole process (a level filter of `error`, say), and `capture_logs` swaps only the
    processors, so a later test would capture nothing."""
    import structlog

    structlog.reset_defaults()
    yield
    structlog.reset_defaults()
