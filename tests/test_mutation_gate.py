"""The mutation gate (tools/mutation_gate.py) stays runnable: every mutation's snippet occurs exactly once
in the checkout and every test it names exists, so a refactor that moves guarded code fails here (update
the gate's snippet) instead of leaving the gate to report a mutation it can no longer apply."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _gate():
    spec = importlib.util.spec_from_file_location("mutation_gate", ROOT / "tools" / "mutation_gate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutation_gate", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_mutation_applies_to_this_checkout_and_names_existing_tests():
    gate = _gate()
    assert len(gate.MUTATIONS) >= 11 and len({m.name for m in gate.MUTATIONS}) == len(gate.MUTATIONS)
    assert gate.check_snippets(ROOT, list(gate.MUTATIONS)) == []
    for m in gate.MUTATIONS:
        assert m.original != m.replacement and m.tests, m.name
        for node in m.tests:
            path, _, function = node.partition("::")
            source = (ROOT / path).read_text()  # FileNotFoundError names a moved test file
            if function:
                assert re.search(rf"^(async )?def {re.escape(function)}\(", source, re.M), f"{m.name}: {node} is gone"


def test_the_copy_maps_every_package_dir_of_pyproject(tmp_path):
    gate = _gate()
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    for folder in ("roboswe", "protocol", "actors", "bridge", "sim", "sandbox", "roboswe/providers", "configs/agents/lift_demo"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    gate.link_packages(tmp_path)
    assert (tmp_path / "roboswe" / "protocol").resolve() == (tmp_path / "protocol").resolve()
    assert (tmp_path / "roboswe" / "agents" / "lift_demo").resolve() == (tmp_path / "configs" / "agents" / "lift_demo").resolve()
    assert not (tmp_path / "roboswe" / "providers").is_symlink()
