"""The offline RoboCasa kit: placeholder assets so real RoboCasa code builds, steps and grades kitchens.

RoboCasa's kitchen assets (textures, fixture meshes, object models; ~10 GB) are downloaded by
its own script into the installed package and are not on PyPI, so tests and CI cannot have
them. This module writes, at run time and into a directory the caller chooses, a stand-in
asset root:

- every file RoboCasa ships inside its package (fixture registry, cabinet/drawer/handle XML,
  arena, scene YAML) is linked, not copied, so the real procedural fixtures are used;
- every texture the shipped files name becomes a small flat-colour PNG (colour from a digest
  of the path, so the kit is byte-identical on every run);
- every object category of RoboCasa's registry gets one box model (6 cm cube, a collision
  geom, a visual geom and the ``reg_bbox`` region RoboCasa's samplers read);
- a microwave stand-in (a box with a hinged door, tray region and buttons) is written under
  the name RoboCasa's microwave registry defaults to.

A minimal kitchen layout and style (walls, floor, counters, a drawer stack, single and
double hinged cabinets, the microwave) are given as dicts (RoboCasa accepts dict layouts).
Nothing binary is committed: tests call ``write_kit``. Everything run on the kit is labelled
``assets = "placeholder"``; its results are never comparable with real-asset runs.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import struct
import zlib
from pathlib import Path

KIT_FORMAT = "roboswe.robocasa-kit/1"
MARKER = "ROBOSWE_KIT.json"
"""File at the kit root that says this asset root is a placeholder kit (read by the backend)."""

OBJECT_HALF_EXTENT = 0.03  # every kit object is a 6 cm cube: graspable by the Panda hand, fits every max_size
_REGISTRY_DIRS = {"objaverse": "objaverse", "aigen": "aigen_objs", "lightwheel": "lightwheel"}
_TEXTURE_REF = re.compile(r"(?:generative_)?textures/[A-Za-z0-9_./\-]+?\.(?:png|jpg|jpeg)")
_MICROWAVE_DEFAULT = "fixtures/microwaves/Microwave011"  # RoboCasa's microwave registry default


class KitError(RuntimeError):
    """The kit cannot be written (no RoboCasa package found, unwritable directory)."""


def robocasa_package_dir() -> Path:
    """The installed ``robocasa`` package directory, found without importing it.

    Importing robocasa fixes its asset root for the life of the process, so the kit (which
    decides that root) must be written before the import.
    """
    import importlib.util

    spec = importlib.util.find_spec("robocasa")
    if spec is None or not spec.submodule_search_locations:
        raise KitError("the robocasa package is not installed in this environment; install praxis-robocasa==1.0.0")
    return Path(next(iter(spec.submodule_search_locations)))


# ---- placeholder textures ------------------------------------------------------------------


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A flat-colour RGB PNG with a 2-pixel darker checker so textures are visibly not blank."""
    rows = []
    for y in range(height):
        row = bytearray([0])  # filter type: none
        for x in range(width):
            dark = ((x // 2) + (y // 2)) % 2
            row += bytes(max(0, c - 24) if dark else c for c in rgb)
        rows.append(bytes(row))
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b"")


def _colour(name: str) -> tuple[int, int, int]:
    d = hashlib.sha256(name.encode()).digest()
    return (96 + d[0] % 128, 96 + d[1] % 128, 96 + d[2] % 128)


def texture_references(package: Path) -> list[str]:
    """Every texture path (relative to the asset root) that RoboCasa's shipped code, XML and YAML name."""
    refs: set[str] = set()
    for pattern in ("*.py", "*.xml", "*.yaml"):
        for path in package.rglob(pattern):
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            refs.update(m.group(0) for m in _TEXTURE_REF.finditer(text))
    return sorted(refs)


# ---- object categories ---------------------------------------------------------------------


def write_box_objects(root: Path, categories: dict[str, dict]) -> None:
    """One placeholder box model per object category, in each registry folder the category names."""
    for name, entry in categories.items():
        for folder in entry["folders"]:
            model_dir = root / "objects" / folder / f"{name}_kit"
            if entry["auxiliary"]:
                model_dir = model_dir / f"{name}_kit"
            model_dir.mkdir(parents=True, exist_ok=True)
            (model_dir / "model.xml").write_text(_box_object_xml(name))


def object_categories(package: Path, registry_dirs: dict[str, str] = _REGISTRY_DIRS,
                      owner: str = "RoboCasa") -> dict[str, dict]:
    """RoboCasa's object registry read from its source (name -> registries, model folders, auxiliary flag).

    Parsed with ``ast`` rather than imported: importing robocasa scans the asset root once
    and for good, which must happen after the kit exists. robocasa_gr1 keeps the same registry
    with one more registry folder (``registry_dirs``).
    """
    source = (package / "models" / "objects" / "kitchen_objects.py").read_text()
    tree = ast.parse(source)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "OBJ_CATEGORIES" for t in node.targets)
                and isinstance(node.value, ast.Call)):
            break
    else:
        raise KitError(f"{package}/models/objects/kitchen_objects.py has no OBJ_CATEGORIES = dict(...); {owner} changed")
    categories = {}
    for kw in node.value.keywords:
        entry = {"folders": [], "auxiliary": False}
        if not isinstance(kw.value, ast.Call):
            continue
        for field in kw.value.keywords:
            if field.arg == "is_auxiliary_obj":
                entry["auxiliary"] = bool(ast.literal_eval(field.value))
            elif field.arg in registry_dirs and isinstance(field.value, ast.Call):
                folders = [f"{registry_dirs[field.arg]}/{kw.arg}"]
                for sub in field.value.keywords:
                    if sub.arg == "model_folders":
                        folders = list(ast.literal_eval(sub.value))
                    elif sub.arg == "is_auxiliary_obj":
                        entry["auxiliary"] = bool(ast.literal_eval(sub.value))
                entry["folders"].extend(folders)
        categories[kw.arg] = entry
    return categories


def _box_object_xml(name: str) -> str:
    h = OBJECT_HALF_EXTENT
    r, g, b = (c / 255 for c in _colour(name))
    return f"""<mujoco model="{name}">
  <asset>
    <texture name="tex" type="2d" builtin="flat" rgb1="{r:.3f} {g:.3f} {b:.3f}" width="8" height="8"/>
    <material name="mat" texture="tex"/>
  </asset>
  <worldbody>
    <body>
      <body name="object">
        <geom name="collision" type="box" pos="0 0 0" size="{h} {h} {h}" group="0" rgba="0.5 0.5 0.5 0"/>
        <geom name="visual" type="box" pos="0 0 0" size="{h} {h} {h}" group="1" contype="0" conaffinity="0" material="mat"/>
        <geom name="reg_bbox" type="box" pos="0 0 0" size="{h} {h} {h}" group="1" contype="0" conaffinity="0" rgba="0 1 0 0"/>
      </body>
      <site name="bottom_site" pos="0 0 -{h}" size="0.005" rgba="0 0 0 0"/>
      <site name="top_site" pos="0 0 {h}" size="0.005" rgba="0 0 0 0"/>
      <site name="horizontal_radius_site" pos="{h} {h} 0" size="0.005" rgba="0 0 0 0"/>
    </body>
  </worldbody>
</mujoco>
"""


# ---- microwave stand-in --------------------------------------------------------------------


MICROWAVE_XML = """<mujoco model="microwave">
  <compiler angle="radian"/>
  <asset>
    <texture name="tex" type="cube" builtin="flat" rgb1="0.82 0.82 0.84" width="8" height="8"/>
    <material name="mat" texture="tex"/>
    <material name="glass" rgba="0.2 0.2 0.25 1"/>
  </asset>
  <default>
    <default class="region">
      <geom group="1" conaffinity="0" contype="0" rgba="0 1 0 0"/>
    </default>
  </default>
  <worldbody>
    <body>
      <body name="object">
        <!-- shell: bottom, top, back, left and right walls of a 0.5 x 0.36 x 0.3 m box -->
        <geom name="shell_bottom" type="box" group="0" pos="0 0 -0.14" size="0.25 0.18 0.01" material="mat" density="500"/>
        <geom name="shell_top" type="box" group="0" pos="0 0 0.14" size="0.25 0.18 0.01" material="mat" density="500"/>
        <geom name="shell_back" type="box" group="0" pos="0 0.17 0" size="0.25 0.01 0.15" material="mat" density="500"/>
        <geom name="shell_left" type="box" group="0" pos="-0.24 0 0" size="0.01 0.18 0.15" material="mat" density="500"/>
        <geom name="shell_right" type="box" group="0" pos="0.24 0 0" size="0.01 0.18 0.15" material="mat" density="500"/>
        <geom name="panel" type="box" group="0" pos="0.19 -0.17 0" size="0.05 0.01 0.14" material="mat" density="500"/>
        <geom name="start_button" type="box" group="0" pos="0.19 -0.185 0.05" size="0.02 0.005 0.015" rgba="0.1 0.6 0.1 1"/>
        <geom name="stop_button" type="box" group="0" pos="0.19 -0.185 -0.05" size="0.02 0.005 0.015" rgba="0.7 0.1 0.1 1"/>
        <!-- the door sits 6 mm in front of the shell: touching it at rest would push it open -->
        <body name="door" pos="-0.24 -0.196 0">
          <joint name="microjoint" type="hinge" axis="0 0 1" range="-1.57 0" damping="2" limited="true"/>
          <geom name="door_panel" type="box" group="0" pos="0.19 0 0" size="0.19 0.01 0.14" material="glass" density="300"/>
          <geom name="door_handle_main" type="box" group="0" pos="0.35 -0.03 0" size="0.01 0.02 0.1" material="mat" density="300"/>
          <geom name="door_handle_a" type="box" group="0" pos="0.35 -0.015 0.09" size="0.01 0.015 0.01" material="mat" density="300"/>
          <geom name="door_handle_b" type="box" group="0" pos="0.35 -0.015 -0.09" size="0.01 0.015 0.01" material="mat" density="300"/>
        </body>
        <geom class="region" name="reg_main" type="box" pos="0 0 0" size="0.25 0.18 0.15"/>
        <geom class="region" name="reg_tray" type="box" pos="-0.05 0 -0.12" size="0.15 0.12 0.02"/>
        <geom class="region" name="reg_int" type="box" pos="-0.05 0 0" size="0.18 0.16 0.13"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


# ---- the minimal kitchen -------------------------------------------------------------------


def kit_layout() -> dict:
    """A one-wall kitchen: counters over a drawer stack and cabinets, wall cabinets and a microwave.

    Fresh dict on every call: RoboCasa renames fixtures in the layout dict it is given.
    """
    return {
        "room": {
            "walls": [
                {"name": "wall", "type": "wall", "size": [2.2, 1.5, 0.02], "pos": [2.2, 0.0, 1.5]},
                {"name": "wall_backing", "type": "wall", "backing": True, "size": [2.2, 1.5, 0.1], "pos": [2.2, 0.0, 1.5]},
                {"name": "wall_left", "type": "wall", "wall_side": "left", "size": [1.6, 1.5, 0.02], "pos": [0.0, -1.6, 1.5]},
                {"name": "wall_left_backing", "type": "wall", "wall_side": "left", "backing": True,
                 "size": [1.6, 1.5, 0.1], "pos": [0.0, -1.6, 1.5]},
                {"name": "wall_right", "type": "wall", "wall_side": "right", "size": [1.6, 1.5, 0.02], "pos": [4.4, -1.6, 1.5]},
                {"name": "wall_right_backing", "type": "wall", "wall_side": "right", "backing": True,
                 "size": [1.6, 1.5, 0.1], "pos": [4.4, -1.6, 1.5]},
            ],
            "floor": [
                {"name": "floor", "type": "floor", "size": [2.2, 1.6, 0.02], "pos": [2.2, -1.6, 0.0]},
                {"name": "floor_backing", "type": "floor", "backing": True, "size": [2.2, 1.6, 0.1], "pos": [2.2, -1.6, 0.0]},
            ],
        },
        "main_group": {
            "group_origin": [0, 0],
            "group_pos": [0.0, 0.0],
            "group_z_rot": 0.0,
            "bottom_row": [
                {"name": "counter_1", "type": "counter", "pos": [1.1, -0.325, 0.46], "size": [2.2, 0.65, 0.92]},
                {"name": "counter_2", "type": "counter", "size": [1.6, 0.65, 0.92], "align_to": "counter_1",
                 "alignment": "top_back", "side": "right"},
            ],
            "bottom_row_cabinets": [
                {"name": "stack_1", "type": "stack", "pos": [0.5, -0.3, 0.47], "size": [0.6, 0.6, 0.84],
                 "levels": ["drawer", "drawer", "drawer", "drawer"], "percentages": [0.25, 0.25, 0.25, 0.25]},
                {"name": "stack_2", "type": "stack", "size": [0.5, 0.6, 0.84], "levels": ["single_cabinet", "drawer"],
                 "percentages": [0.75, 0.25], "align_to": "stack_1", "alignment": "top_back", "side": "right"},
                {"name": "stack_3", "type": "stack", "size": [0.8, 0.6, 0.84], "levels": ["hinge_cabinet", "drawer"],
                 "percentages": [0.75, 0.25], "align_to": "stack_2", "alignment": "top_back", "side": "right"},
            ],
            "top_row": [
                {"name": "cab_1", "type": "hinge_cabinet", "pos": [0.6, -0.2, 1.84], "size": [1.0, 0.4, 0.92]},
                {"name": "microwave", "type": "microwave", "size": [0.6, 0.4, None], "align_to": "cab_1",
                 "side": "right", "alignment": "back_bottom"},
                {"name": "cab_2", "type": "single_cabinet", "size": [0.6, 0.4, 0.92], "align_to": "microwave",
                 "alignment": "bottom_back", "side": "right"},
                {"name": "cab_3", "type": "hinge_cabinet", "size": [1.0, 0.4, 0.92], "align_to": "cab_2",
                 "alignment": "bottom_back", "side": "right"},
            ],
        },
    }


def kit_style() -> dict:
    """Every fixture type on its registry default (textures are placeholders anyway)."""
    return {}


# ---- writing the kit -----------------------------------------------------------------------


def write_kit(root: str | Path, *, package: Path | None = None) -> Path:
    """Write the placeholder asset root at ``root`` unless a current one is there; returns it. Raises KitError.

    Deterministic (the same RoboCasa package gives the same files) and safe to call from
    several processes at once: the kit is written to a private folder and renamed into place.
    A kit written by another generator (an older roboswe, another RoboCasa install) is
    replaced: the default kit lives in a cache that outlives code changes, and a stale one
    once kept a microwave door that the shell pushed open, so OpenMicrowave passed by
    holding still.
    """
    root = Path(root).resolve()
    package = package or robocasa_package_dir()
    generator = generator_digest(package)
    if _marker(root).get("generator") == generator:
        return root
    if root.exists() and not is_kit(root) and (not root.is_dir() or any(root.iterdir())):
        raise KitError(f"{root} exists and is not a RoboCasa kit; choose an empty or new folder for the kit")
    shipped = package / "models" / "assets"
    if not shipped.is_dir():
        raise KitError(f"{shipped} does not exist; is praxis-robocasa installed correctly?")
    staging = root.with_name(f"{root.name}.partial-{os.getpid()}")
    stale = root.with_name(f"{root.name}.stale-{os.getpid()}")
    try:
        shutil.rmtree(staging, ignore_errors=True)
        _write(staging, package, shipped, generator)
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(staging, root)
        except OSError:
            if _marker(root).get("generator") != generator:  # not another process's current kit: a stale one
                try:
                    os.rename(root, stale)
                except FileNotFoundError:
                    pass
                try:
                    os.rename(staging, root)
                except OSError:
                    if _marker(root).get("generator") != generator:  # another process won with a current kit
                        raise
    except OSError as e:
        raise KitError(f"cannot write the RoboCasa kit at {root}: {e}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(stale, ignore_errors=True)
    return root


def generator_digest(package: Path) -> str:
    """What a kit's files follow from: this generator's source and the RoboCasa package it reads and links."""
    import importlib.metadata

    try:
        version = importlib.metadata.version("praxis-robocasa")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    h = hashlib.sha256(f"{KIT_FORMAT}\0{Path(package).resolve()}\0{version}\0".encode())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()


def _write(root: Path, package: Path, shipped: Path, generator: str) -> None:
    root.mkdir(parents=True)
    # shipped assets: link the top-level folders, and each fixture folder (the kit adds fixture folders)
    for entry in sorted(shipped.iterdir()):
        if entry.name not in ("fixtures", "objects", "textures", "generative_textures"):
            os.symlink(entry, root / entry.name)
    (root / "fixtures").mkdir()
    for entry in sorted((shipped / "fixtures").iterdir()):
        os.symlink(entry, root / "fixtures" / entry.name)
    textures = texture_references(package)
    for ref in textures:
        path = root / ref
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_png(16, 16, _colour(ref)))
    categories = object_categories(package)
    write_box_objects(root, categories)
    microwave = root / _MICROWAVE_DEFAULT / "model.xml"
    microwave.parent.mkdir(parents=True, exist_ok=True)
    microwave.write_text(MICROWAVE_XML)
    marker = {"format": KIT_FORMAT, "assets": "placeholder", "robocasa_package": str(package), "generator": generator,
              "textures": len(textures), "object_categories": len(categories)}
    (root / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")  # written last: marks a complete kit


def is_kit(root: str | Path) -> bool:
    """Whether an asset root is a placeholder kit written by ``write_kit`` (of any generator)."""
    return (Path(root) / MARKER).is_file()


def _marker(root: Path) -> dict:
    try:
        return json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return {}
