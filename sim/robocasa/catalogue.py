"""The RoboCasa365 task catalogue (configs/catalogues/robocasa365.toml), read as typed data.

The file is written by tools/robocasa_catalogue.py from the installed package (its dataset
registry and task classes) and carries RoboSWE-ADAPT's candidate selection. Membership is not
admission: a task runs only through a task manifest that `roboswe admit` admitted.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from ..manifest import CONFIGS_DIR, ManifestError

CATALOGUES_DIR = CONFIGS_DIR / "catalogues"
FORMAT = "roboswe.catalogue/1"


class CatalogueTask(msgspec.Struct, frozen=True, kw_only=True):
    kind: str  # "atomic" | "composite"
    registry_horizon: int
    registry_horizon_seconds: float
    predicate: str
    predicate_sha256: str
    title: str = ""
    activity: str = ""
    summary: str = ""
    subtasks: int | None = None
    subtasks_source: str = ""
    skills: list[str] | None = None
    median_demo_seconds: float | None = None
    demo_splits: list[str] = []
    task_sets: list[str] = []
    exclude_layouts: list[int] = []
    exclude_styles: list[int] = []


class Selection(msgspec.Struct, frozen=True, kw_only=True):
    rule: str
    provisional: bool
    unevaluated: list[str]
    shorter_eligible: int
    harder: list[str]
    shorter: list[str]


class Composition(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    parts: list[str]
    status: str
    note: str


class Catalogue(msgspec.Struct, frozen=True, kw_only=True):
    format: str
    id: str
    description: str
    upstream: dict[str, str | int]
    notes: dict[str, str]
    selection: Selection
    compositions: list[Composition]
    tasks: dict[str, CatalogueTask]

    def candidate(self, name: str) -> str:
        """'harder', 'shorter' or '' for a task class."""
        return "harder" if name in self.selection.harder else "shorter" if name in self.selection.shorter else ""


def catalogue_path(name_or_path: str | Path) -> Path | None:
    """The catalogue file for a name (``robocasa365``) or path, or None if it names none."""
    path = Path(name_or_path)
    if path.suffix == ".toml":
        return path if path.is_file() and path.parent.name == "catalogues" else None
    candidate = CATALOGUES_DIR / f"{name_or_path}.toml"
    return candidate if candidate.is_file() else None


def load_catalogue(name_or_path: str | Path = "robocasa365") -> Catalogue:
    path = catalogue_path(name_or_path) or Path(name_or_path)
    try:
        catalogue = msgspec.toml.decode(path.read_bytes(), type=Catalogue)
    except OSError as e:
        raise ManifestError(f"cannot read catalogue {path}: {e.strerror}") from None
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise ManifestError(f"{path}: not a task catalogue ({e}); regenerate it with tools/robocasa_catalogue.py") from None
    if catalogue.format != FORMAT:
        raise ManifestError(f"{path}: format {catalogue.format!r}, expected {FORMAT!r}")
    return catalogue
