"""sim/ and protocol/sim.py know nothing of ZeroMQ, importing them builds no scene, and the
coordinator's side reaches a simulator family only through its ``Family`` (sim/families.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from roboswe.sim.families import families

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import sys
import roboswe.protocol.sim, roboswe.sim, roboswe.sim.backend, roboswe.sim.manifest, roboswe.sim.render
import roboswe.sim.session, roboswe.sim.video, roboswe.sim.fingerprint, roboswe.sim.robosuite.backend
heavy = [m for m in ("zmq", "trio", "robosuite", "mujoco") if m in sys.modules]
print(",".join(heavy))
"""

# Importing every family's folder (what the registry does) loads no simulator either: each
# family imports robosuite, MuJoCo or RoboCasa inside the callables of its Family.
FAMILIES = """
import sys
from roboswe.sim.families import families
names = [f.name for f in families()]
heavy = [m for m in ("zmq", "trio", "robosuite", "mujoco", "robocasa", "robocasa_gr1") if m in sys.modules]
print(",".join(names) + ";" + ",".join(heavy))
"""

COORDINATOR = ("roboswe/evaluation", "roboswe/commands", "roboswe/records", "roboswe/fleet")


def test_sim_imports_no_transport_and_no_simulator():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == ""


def test_the_registry_finds_every_family_folder_without_importing_a_simulator():
    out = subprocess.run([sys.executable, "-c", FAMILIES], capture_output=True, text=True, check=True, timeout=60)
    names, heavy = out.stdout.strip().split(";")
    assert set(names.split(",")) >= {"robosuite", "robocasa", "gr1", "paint", "fake"}
    assert heavy == ""


def _family_modules() -> set[str]:
    return {f"roboswe.sim.{f.name}" for f in families()}


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names]
    return found


def test_the_coordinator_side_imports_no_family_module():
    """roboswe/evaluation, commands, records and fleet reach a family through sim/families.py, never its folder."""
    prefixes = _family_modules()
    offenders = {}
    for folder in COORDINATOR:
        for path in sorted((ROOT / folder).rglob("*.py")):
            named = [m for m in _imports(path) if any(m == p or m.startswith(p + ".") for p in prefixes)]
            if named:
                offenders[str(path.relative_to(ROOT))] = named
    assert offenders == {}


def test_every_registered_family_has_its_folder_and_its_tests():
    for family in families():
        assert (ROOT / "sim" / family.name / "__init__.py").is_file(), f"sim/{family.name}/ is the {family.name} family's folder"
        tests = ROOT / "tests" / "sim" / family.name
        assert (tests / "__init__.py").is_file() and any(tests.glob("test_*.py")), \
            f"tests/sim/{family.name}/ holds the {family.name} family's tests"
