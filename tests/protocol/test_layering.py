"""Layering runs one way (DESIGN.md section 3): protocol knows only msgspec/stdlib; domain code knows no ZeroMQ."""

from __future__ import annotations

import ast
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
