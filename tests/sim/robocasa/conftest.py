"""RoboCasa kitchens on the placeholder kit. Skipped where RoboCasa is not installed (the main venv).

RoboCasa fixes its asset root when first imported, so nothing here imports it before the
backend has pointed it at the session's kit; every in-process scene uses the same kit.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

MANIFESTS = Path(__file__).resolve().parents[3] / "configs" / "tasks"

ROBOCASA_MISSING = importlib.util.find_spec("robocasa") is None  # find_spec: importing it would fix its asset root


def pytest_collection_modifyitems(config, items):
    """Skip every test here where RoboCasa is not installed (a conftest cannot skip at module level)."""
    if not ROBOCASA_MISSING:
        return
    skip = pytest.mark.skip(reason="robocasa is not installed here (praxis-robocasa); see docs/robocasa-environment.md")
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(item.fspath).resolve().parents:
            item.add_marker(skip)


def kitchen(env: str, **changes):
    """The kit OpenDrawer manifest with another RoboCasa task class (and any other field changes)."""
    from roboswe.sim.robocasa.backend import load_kitchen_manifest

    base = load_kitchen_manifest(MANIFESTS / "kit-opendrawer.toml")
    upstream = msgspec.structs.replace(base.upstream, env=env)
    return msgspec.structs.replace(base, id=f"kit-{env.lower()}", upstream=upstream, **changes)


@pytest.fixture(scope="session")
def kit_dir(tmp_path_factory) -> Path:
    from roboswe.sim.robocasa.kit import write_kit

    return write_kit(tmp_path_factory.mktemp("robocasa") / "kit")


@pytest.fixture(scope="session")
def open_drawer(kit_dir):
    """One OpenDrawer scene for the session; tests reset it with the seed they need."""
    from roboswe.sim.robocasa.backend import RobocasaBackend

    sim = RobocasaBackend(kitchen("OpenDrawer"), kit_dir=kit_dir)
    sim.reset(0)
    yield sim
    sim.close()


PROBE = """
import json, sys
from roboswe.sim.robocasa.backend import RobocasaBackend, kitchen_manifest
request = json.loads(sys.argv[1])
sim = RobocasaBackend(kitchen_manifest(request["manifest"]), kit_dir=request["kit_dir"], require_fixed_hash_seed=True)
fp = sim.reset(request["seed"])
print("FINGERPRINT " + json.dumps({"digest": fp.digest, "xml": fp.model_xml_sha256, "state": fp.initial_state_sha256,
                                   "compiled": fp.compiled_model_sha256, "versions": fp.versions}))
sim.close()
"""


def fingerprint_in_fresh_process(manifest, kit_dir: Path, seed: int) -> subprocess.Popen:
    """Start a fresh simulator process that builds the task and prints its fingerprint."""
    request = json.dumps({"manifest": manifest.to_builtins(), "kit_dir": str(kit_dir), "seed": seed})
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.Popen([sys.executable, "-c", PROBE, request], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def read_fingerprint(proc: subprocess.Popen, timeout: float = 600) -> dict:
    out, err = proc.communicate(timeout=timeout)
    for line in out.splitlines():
        if line.startswith("FINGERPRINT "):
            return json.loads(line[len("FINGERPRINT "):])
    raise AssertionError(f"probe exited {proc.returncode} without a fingerprint: {err[-2000:]}")
