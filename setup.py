"""Build hook: the package list is derived from pyproject's ``package-dir``, never typed by hand.

pyproject maps the design's top-level folders into ``roboswe.*`` (``roboswe.sim`` -> ``sim/``,
``roboswe.configs`` -> ``configs/``, ...). setuptools' ``find`` cannot add that prefix, so this walks
each mapped folder: every folder below it that holds a file is a package (a data-only folder such as
``configs/tasks`` or ``roboswe/viewer/assets`` ships as a namespace package, which is how setuptools
wants package data listed). A new task family's folder under ``sim/`` ships without an edit here.
Everything else about the build is in pyproject.toml.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def mapped_packages(package_dir: dict[str, str], root: Path = HERE) -> list[str]:
    """Every package under the mapped folders; a folder mapped by its own entry is walked for that entry only."""
    folders = {Path(folder): name for name, folder in package_dir.items()}
    packages = set()
    for folder, name in folders.items():
        for path in [root / folder, *sorted((root / folder).rglob("*"))]:
            if not path.is_dir():
                continue
            parts = path.relative_to(root / folder).parts
            if any(part == "__pycache__" or not part.isidentifier() for part in parts):
                continue  # caches, hidden folders, *.egg-info: nothing that imports
            if any(folder.joinpath(*parts[:i]) in folders for i in range(1, len(parts) + 1)):
                continue  # e.g. configs/agents is roboswe.agents, not roboswe.configs.agents
            if any(p.is_file() for p in path.iterdir()):
                packages.add(".".join((name, *parts)))
    return sorted(packages)


setup(packages=mapped_packages(tomllib.loads((HERE / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]))
