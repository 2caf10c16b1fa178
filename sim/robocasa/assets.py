"""Where RoboCasa's downloaded kitchen assets are, and which of them a task needs.

RoboCasa's kitchens need ~10 GB of textures, fixtures and objects that are not on PyPI; a
user downloads them with RoboCasa's own script (``python -m robocasa.scripts.download_kitchen_assets``),
which writes into the installed package's ``robocasa/models/assets``. roboswe never ships or
fakes them (the placeholder kit, sim/robocasa/kit.py, is labelled ``assets = "placeholder"``).

The asset root a real-asset task uses, first match wins:

1. an explicit root (the backend's ``assets_root``; ``roboswe assets robocasa --path DIR``);
2. the ``ROBOCASA_ASSETS`` environment variable;
3. the root recorded by ``roboswe assets robocasa --path DIR`` in ``$XDG_CONFIG_HOME/roboswe/assets.toml``
   (``~/.config/roboswe/assets.toml`` by default), as ``[robocasa] path = "..."``;
4. RoboCasa's own: ``robocasa.models.assets_root``, the package folder its download script fills.
   (RoboCasa 1.0.0's macros, ``robocasa/macros.py`` and ``macros_private.py``, have no asset-root
   setting; ``DATASET_BASE_PATH`` there is for demonstration datasets, not assets.)

A root is a whole RoboCasa asset tree: the folders the package ships (``arenas``, ``scenes``,
``fixtures/fixture_registry``, ...) plus the downloaded ones. This module reads paths only; it
never imports RoboCasa (importing it fixes the asset root for the life of the process).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

ENV_VAR = "ROBOCASA_ASSETS"
CONFIG_NAME = "assets.toml"
DOWNLOAD = "python -m robocasa.scripts.download_kitchen_assets --type {types}"


class Part(msgspec.Struct, frozen=True):
    """One unit of RoboCasa's asset tree: its folders under the root and how it arrives."""

    name: str
    folders: tuple[str, ...]
    source: str  # "shipped" (in the praxis-robocasa wheel) or the download script's --type key


# The download script's units (robocasa/scripts/download_kitchen_assets.py, DOWNLOAD_ASSET_REGISTRY)
# and their folders. The fixture download fills one folder per appliance family, named by the
# fixture registry; those are listed from the registry at check time (``fixture_folders``).
SHIPPED = Part("shipped", ("arenas", "scenes/kitchen_layouts", "scenes/kitchen_styles", "fixtures/fixture_registry",
                           "fixtures/cabinets", "fixtures/counters"), "shipped")
TEXTURES = Part("textures", ("textures",), "tex")
GENERATIVE_TEXTURES = Part("generative textures", ("generative_textures",), "tex_generative")
OBJECTS = {
    "objaverse": Part("objaverse objects", ("objects/objaverse",), "objs_objaverse"),
    "aigen": Part("AI-generated objects", ("objects/aigen_objs",), "objs_aigen"),
    "lightwheel": Part("lightwheel objects", ("objects/lightwheel",), "objs_lw"),
}


def package_root() -> Path | None:
    """``robocasa/models/assets`` of the installed package, found without importing it (None if not installed)."""
    import importlib.util

    spec = importlib.util.find_spec("robocasa")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "models" / "assets"


def config_file(environ: Mapping[str, str] | None = None) -> Path:
    """The user file where ``roboswe assets robocasa --path`` records the root."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".config")
    return Path(base) / "roboswe" / CONFIG_NAME


def recorded_root(environ: Mapping[str, str] | None = None) -> Path | None:
    """The recorded root, or None; a file that cannot be read records nothing (the check says so)."""
    try:
        data = msgspec.toml.decode(config_file(environ).read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    path = (data.get("robocasa") or {}).get("path") if isinstance(data, dict) else None
    return Path(path) if isinstance(path, str) and path else None


def record_root(root: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Record ``root`` as the user's RoboCasa asset root; returns the file written. Raises OSError."""
    path = config_file(environ)
    path.parent.mkdir(parents=True, exist_ok=True)
    # json.dumps gives a valid TOML basic string for any path (same escapes); no TOML writer needed.
    text = ("# written by `roboswe assets robocasa --path`; read by the robocasa simulator backend\n"
            f"[robocasa]\npath = {json.dumps(str(root))}\n"
            f"recorded_at = {json.dumps(time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()))}\n")
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def resolve_root(explicit: str | Path | None = None, environ: Mapping[str, str] | None = None) -> tuple[Path | None, str]:
    """(root, where it came from); root is None only when nothing names one and RoboCasa is not installed."""
    environ = os.environ if environ is None else environ
    if explicit:
        return Path(explicit).expanduser(), "given path"
    if environ.get(ENV_VAR):
        return Path(environ[ENV_VAR]).expanduser(), f"${ENV_VAR}"
    recorded = recorded_root(environ)
    if recorded is not None:
        return recorded, f"recorded in {config_file(environ)}"
    return package_root(), "RoboCasa's package folder, where its download script writes"


def fixture_folders(root: Path) -> tuple[str, ...]:
    """The appliance folders RoboCasa's fixture registry points into (``xml: fixtures/<folder>/...``), minus shipped ones."""
    registry = root / "fixtures" / "fixture_registry"
    if not registry.is_dir():
        fallback = package_root()
        registry = fallback / "fixtures" / "fixture_registry" if fallback else registry
    folders = set()
    for yaml in sorted(registry.glob("*.yaml")) if registry.is_dir() else []:
        for line in yaml.read_text(errors="replace").splitlines():
            line = line.strip()
            if line.startswith("xml: fixtures/"):
                folders.add(line[len("xml: fixtures/"):].split("/", 1)[0])
    shipped = {f.split("/", 1)[1] for f in SHIPPED.folders if f.startswith("fixtures/")} | {"accessories", "handles"}
    return tuple(sorted(folders - shipped))


def parts_needed(obj_registries: Iterable[str], env_kwargs: Mapping[str, object] | None = None) -> list[Part]:
    """The parts a kitchen task needs: the shipped tree, textures, fixtures, and its object registries."""
    parts = [SHIPPED, TEXTURES, Part("fixtures", (), "fixtures_lw")]
    if (env_kwargs or {}).get("generative_textures"):
        parts.append(GENERATIVE_TEXTURES)
    parts += [OBJECTS[r] for r in obj_registries]
    return parts


def _present(path: Path) -> bool:
    """A folder counts when it exists and is not empty (an interrupted download leaves an empty one)."""
    try:
        return path.is_dir() and next(path.iterdir(), None) is not None
    except OSError:
        return False


def missing_by_part(root: Path, parts: Iterable[Part]) -> list[tuple[Part, list[str]]]:
    """Each part with its missing folders under ``root``, as absolute paths (empty lists when all are present)."""
    out = []
    for part in parts:
        folders = [f"fixtures/{f}" for f in fixture_folders(root)] if part.source == "fixtures_lw" else part.folders
        out.append((part, [str(root / f) for f in folders if not _present(root / f)]))
    return out


def missing(root: Path, parts: Iterable[Part]) -> list[str]:
    """Every missing folder of ``parts`` under ``root`` (empty when the task can load)."""
    return [path for _, paths in missing_by_part(root, parts) for path in paths]


ALL_PARTS = (SHIPPED, TEXTURES, GENERATIVE_TEXTURES, Part("fixtures", (), "fixtures_lw"), *OBJECTS.values())


def describe_missing(root: Path, by_part: Iterable[tuple[Part, list[str]]]) -> str:
    """The missing folders relative to ``root``, one part per entry (fixture folders grouped): for messages."""
    out = []
    for part, paths in by_part:
        rel = [str(Path(p).relative_to(root)) if Path(p).is_relative_to(root) else p for p in paths]
        if part.source == "fixtures_lw" and len(rel) > 1:
            out.append("fixtures/{" + ",".join(Path(r).name for r in rel) + "}")
        else:
            out += rel
    return ", ".join(out)


def download_hint(root: Path, by_part: Iterable[tuple[Part, list[str]]]) -> str:
    """How to get what is missing: RoboCasa's download script with the missing parts' --type keys."""
    by_part = [(p, m) for p, m in by_part if m]
    keys = [p.source for p, _ in by_part if p.source != "shipped"]
    hint = DOWNLOAD.format(types=" ".join(keys)) if keys else ""
    if any(p.source == "shipped" for p, _ in by_part):
        hint = (hint + "; " if hint else "") + (f"{root} lacks folders praxis-robocasa ships: give the whole asset tree "
                                                "(robocasa/models/assets, or a copy of it, with the downloads in it)")
    return hint
