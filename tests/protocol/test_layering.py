"""Layering runs one way (DESIGN.md section 3): protocol knows only msgspec/stdlib; domain code knows no ZeroMQ;
neither reaches up into the coordinator's packages."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STDLIB = set(sys.stdlib_module_names)


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_protocol_imports_only_msgspec_and_stdlib():
    for path in sorted((ROOT / "protocol").glob("*.py")):
        foreign = {n for n in imports(path) if n.split(".")[0] not in STDLIB | {"msgspec"} and not n.startswith("roboswe.protocol")}
        assert not foreign, f"{path.relative_to(ROOT)} imports {sorted(foreign)}; protocol/ may use only msgspec and the stdlib"


def test_domain_packages_know_no_zeromq_or_actor_runtime():
    # The sandbox-side `robot` module is the one client of the runtime inside bridge/.
    for package in ("sim", "sandbox", "bridge"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if package == "bridge" and path.stem == "robot":
                continue
            wired = {n for n in imports(path) if n.split(".")[0] == "zmq" or n.startswith("roboswe.actors")}
            assert not wired, f"{path.relative_to(ROOT)} imports {sorted(wired)}; wire ZeroMQ in actors/, not in {package}/"


# The coordinator's side: what the domain packages and the wire must never reach into.
COORDINATOR_PACKAGES = ("roboswe.commands", "roboswe.evaluation", "roboswe.records", "roboswe.context",
                        "roboswe.providers", "roboswe.viewer", "roboswe.cli", "roboswe.config")
LOWER_PACKAGES = ("sim", "sandbox", "bridge", "protocol")


def _coordinator(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in COORDINATOR_PACKAGES)


def test_lower_packages_name_no_coordinator_package():
    # Every import statement, lazy ones inside functions included, and module paths spelled as
    # strings (importlib.import_module("roboswe.providers.x") is an import too).
    for package in LOWER_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            named = {n for n in imports(path) if _coordinator(n)}
            named |= {node.value for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str) and _coordinator(node.value)}
            assert not named, (f"{path.relative_to(ROOT)} reaches {sorted(named)}; {package}/ sits below the "
                               "coordinator's packages: pass what it needs in, or move the code up")


IMPORT_EVERYTHING = """
import importlib, pkgutil, sys
for package in ("roboswe.protocol", "roboswe.sim", "roboswe.sandbox", "roboswe.bridge"):
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        importlib.import_module(info.name)
print("MODULES", " ".join(sorted(sys.modules)))
"""


def test_importing_every_lower_module_loads_no_coordinator_module():
    out = subprocess.run([sys.executable, "-c", IMPORT_EVERYTHING], capture_output=True, text=True, timeout=300,
                         cwd=ROOT, env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    assert out.returncode == 0, out.stderr[-3000:]
    modules = next(line for line in out.stdout.splitlines() if line.startswith("MODULES ")).split()[1:]
    assert {"roboswe.sim.physics_state", "roboswe.sandbox.checkpoints", "roboswe.bridge.door",
            "roboswe.protocol.sim"} <= set(modules)  # the walk reached the packages
    loaded = sorted(m for m in modules if _coordinator(m))
    assert not loaded, f"importing sim/, sandbox/, bridge/ and protocol/ loaded {loaded}"
