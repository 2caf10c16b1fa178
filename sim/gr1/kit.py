"""The offline RoboCasa GR1 kit: generated placeholder assets so robocasa_gr1's native task classes build here.

RoboCasa GR1's tabletop assets (textures, fixture meshes, objaverse/sketchfab/lightwheel
objects; several GB) come from its download scripts and cannot be fetched here, and must never
be faked as real. This module writes, at run time into a folder the caller chooses, an asset
root that lets the NATIVE code paths (task classes, layouts, fixtures, samplers, success
checks) run end to end:

- every file robocasa_gr1 ships under ``models/assets`` (arenas, layouts, styles, fixture
  registry and fixture XML) is linked, so the real layouts and fixture joints are used;
- every mesh a shipped XML names but the package lacks becomes a 1 cm cube (small, so the
  placeholder collision geometry cannot wedge anything), every texture it or the code names
  becomes a small flat-colour PNG (colour from a digest of the path: byte-identical runs);
- every object category gets one 6 cm box model in each registry folder it names
  (objaverse, aigen, sketchfab, lightwheel), built like sim/robocasa/kit.py's.

A marker file says the root is a kit. Every run on it is labelled ``assets = "placeholder"``
(the backend records it in the fingerprint's versions); its results say nothing about a policy's
skill on the real tasks and are never comparable with real-asset runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from ..fingerprint import FILE_ATTR
from ..robocasa import kit as robocasa_kit
from ..robocasa.kit import KitError, _colour, _png, texture_references

KIT_FORMAT = "roboswe.robocasa-gr1-kit/1"
MARKER = "ROBOSWE_GR1_KIT.json"
_REGISTRY_DIRS = {"objaverse": "objaverse", "aigen": "aigen_objs", "sketchfab": "sketchfab", "lightwheel": "lightwheel"}
_CUBE_HALF = 0.005


def package_dir() -> Path:
    """The installed ``robocasa_gr1`` folder, found without importing it (the import fixes the asset root)."""
    import importlib.util

    spec = importlib.util.find_spec("robocasa_gr1")
    if spec is None or not spec.submodule_search_locations:
        raise KitError("robocasa_gr1 is not installed; pip install praxis-robocasa-gr1==0.2.0")
    return Path(next(iter(spec.submodule_search_locations)))


def _cube_obj() -> str:
    h = _CUBE_HALF
    verts = [(x, y, z) for x in (-h, h) for y in (-h, h) for z in (-h, h)]
    faces = [(1, 3, 4, 2), (5, 6, 8, 7), (1, 2, 6, 5), (3, 7, 8, 4), (1, 5, 7, 3), (2, 4, 8, 6)]
    return ("# roboswe GR1 kit placeholder mesh (not a RoboCasa asset)\n"
            + "".join(f"v {x} {y} {z}\n" for x, y, z in verts)
            + "".join("f " + " ".join(map(str, f)) + "\n" for f in faces))


def object_categories(package: Path) -> dict[str, dict]:
    """robocasa_gr1's object registry read from source (category -> model folders, auxiliary flag), without importing it."""
    return robocasa_kit.object_categories(package, _REGISTRY_DIRS, owner="robocasa_gr1")


def missing_shipped_files(shipped: Path) -> list[str]:
    """Files (relative to the asset root) that the shipped XML names but the package lacks: the downloaded meshes and textures."""
    missing = set()
    root = shipped.resolve()
    for xml in sorted(shipped.rglob("*.xml")):
        for ref in FILE_ATTR.findall(xml.read_text(errors="replace")):
            target = Path(os.path.normpath(xml.parent / ref)).resolve()
            if target.exists() or not target.is_relative_to(root):
                continue
            missing.add(str(target.relative_to(root)))
    return sorted(missing)


def generator_digest(package: Path) -> str:
    """What a kit follows from: this generator's source and the package it links and reads."""
    h = hashlib.sha256(f"{KIT_FORMAT}\0{package.resolve()}\0".encode())
    h.update(Path(__file__).read_bytes())
    h.update((package / "models" / "objects" / "kitchen_objects.py").read_bytes())
    return h.hexdigest()


def is_kit(root: str | Path) -> bool:
    return (Path(root) / MARKER).is_file()


def write_kit(root: str | Path, *, package: Path | None = None) -> Path:
    """Write the placeholder asset root at ``root`` unless a current one is there; returns it. Raises KitError."""
    root = Path(root).resolve()
    package = package or package_dir()
    generator = generator_digest(package)
    try:
        if json.loads((root / MARKER).read_text()).get("generator") == generator:
            return root
    except (OSError, ValueError):
        pass
    if root.exists() and (not root.is_dir() or (any(root.iterdir()) and not is_kit(root))):
        raise KitError(f"{root} exists and is not a RoboCasa GR1 kit; choose an empty or new folder")
    shipped = package / "models" / "assets"
    staging = root.with_name(f"{root.name}.partial-{os.getpid()}")
    try:
        shutil.rmtree(staging, ignore_errors=True)
        _write(staging, package, shipped, generator)
        shutil.rmtree(root, ignore_errors=True)
        os.rename(staging, root)
    except OSError as e:
        raise KitError(f"cannot write the RoboCasa GR1 kit at {root}: {e}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root


def _write(root: Path, package: Path, shipped: Path, generator: str) -> None:
    root.mkdir(parents=True)
    for src in sorted(shipped.rglob("*")):  # mirror the shipped tree file by file (the kit adds files beside them)
        dst = root / src.relative_to(shipped)
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(src, dst)
    meshes = textures = 0
    for rel in missing_shipped_files(shipped):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".obj"):
            path.write_text(_cube_obj())
            meshes += 1
        elif rel.endswith(".png"):
            path.write_bytes(_png(16, 16, _colour(rel)))
            textures += 1
    for ref in texture_references(package):
        path = root / ref
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_png(16, 16, _colour(ref)))
            textures += 1
    categories = object_categories(package)
    robocasa_kit.write_box_objects(root, categories)
    for folder in _REGISTRY_DIRS.values():
        (root / "objects" / folder).mkdir(parents=True, exist_ok=True)
    marker = {"format": KIT_FORMAT, "assets": "placeholder", "package": str(package), "generator": generator,
              "placeholder_meshes": meshes, "placeholder_textures": textures, "object_categories": len(categories)}
    (root / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")  # last: marks a complete kit
