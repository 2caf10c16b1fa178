"""The placeholder kit generator: complete, deterministic, labelled, safe to write concurrently."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from roboswe.sim.robocasa import kit as robocasa_kit


def tree_digest(root: Path) -> str:
    """sha256 over every path under root and, for files, their bytes (links by their target)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_symlink():
            h.update(b"->" + str(p.readlink()).encode())
        elif p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def test_the_kit_is_labelled_placeholder(kit_dir):
    marker = json.loads((kit_dir / robocasa_kit.MARKER).read_text())
    assert marker["assets"] == "placeholder"
    assert marker["format"] == robocasa_kit.KIT_FORMAT
    assert robocasa_kit.is_kit(kit_dir)
    assert not robocasa_kit.is_kit(robocasa_kit.robocasa_package_dir() / "models" / "assets")


def test_every_texture_robocasa_names_exists_as_a_valid_png(kit_dir):
    refs = robocasa_kit.texture_references(robocasa_kit.robocasa_package_dir())
    assert len(refs) > 300  # RoboCasa 1.0.0 names 470; far fewer means the scan broke
    for ref in refs:
        data = (kit_dir / ref).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", ref
        length, kind = struct.unpack(">I4s", data[8:16])
        assert kind == b"IHDR" and zlib.crc32(data[12:16 + length]) == struct.unpack(">I", data[16 + length:20 + length])[0]
        width, height = struct.unpack(">II", data[16:24])
        assert (width, height) == (16, 16)


def test_every_object_category_has_its_own_box_model_in_each_registry_folder(kit_dir):
    categories = robocasa_kit.object_categories(robocasa_kit.robocasa_package_dir())
    assert len(categories) > 100 and "apple" in categories
    for name, entry in categories.items():
        assert entry["folders"], name
        for folder in entry["folders"]:
            # categories may share a folder (bread_flat samples aigen_objs/bread): each adds its own box
            models = list((kit_dir / "objects" / folder / f"{name}_kit").rglob("model.xml"))
            assert len(models) == 1, (name, folder, models)
            assert 'name="reg_bbox"' in models[0].read_text()


def test_shipped_fixture_definitions_are_linked_not_copied(kit_dir):
    shipped = robocasa_kit.robocasa_package_dir() / "models" / "assets"
    link = kit_dir / "fixtures" / "cabinets"
    assert link.is_symlink() and link.resolve() == (shipped / "fixtures" / "cabinets").resolve()
    assert (kit_dir / "fixtures" / "microwaves" / "Microwave011" / "model.xml").is_file()


def test_the_kit_is_byte_identical_when_written_again(kit_dir, tmp_path):
    again = robocasa_kit.write_kit(tmp_path / "kit")
    assert tree_digest(again) == tree_digest(kit_dir)


def test_two_processes_writing_the_same_kit_at_once_leave_one_complete_kit(tmp_path):
    code = "import sys; from roboswe.sim.robocasa.kit import write_kit; write_kit(sys.argv[1]); print('ok')"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "kit")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [r[0].strip() for r in results] == ["ok"] * 3, [r[1][-500:] for r in results]
    assert robocasa_kit.is_kit(tmp_path / "kit")
    assert [p.name for p in tmp_path.iterdir()] == ["kit"]  # no staging folders left behind


def test_a_kit_from_another_generator_is_replaced_and_a_foreign_folder_refused(tmp_path):
    """The default kit lives in a cache that outlives code changes: a stale one (here: the old
    microwave whose door touched its shell) must not be served as if current."""
    kit = robocasa_kit.write_kit(tmp_path / "kit")
    marker = json.loads((kit / robocasa_kit.MARKER).read_text())
    assert marker["generator"] == robocasa_kit.generator_digest(robocasa_kit.robocasa_package_dir())
    microwave = kit / "fixtures" / "microwaves" / "Microwave011" / "model.xml"
    microwave.write_text(robocasa_kit.MICROWAVE_XML.replace('pos="-0.24 -0.196 0"', 'pos="-0.24 -0.18 0"'))
    (kit / robocasa_kit.MARKER).write_text(json.dumps({**marker, "generator": "older"}))
    assert robocasa_kit.write_kit(tmp_path / "kit") == kit
    assert microwave.read_text() == robocasa_kit.MICROWAVE_XML
    assert json.loads((kit / robocasa_kit.MARKER).read_text()) == marker
    assert [p.name for p in tmp_path.iterdir()] == ["kit"]  # the stale kit and the staging folder are gone
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not a kit")
    with pytest.raises(robocasa_kit.KitError, match="not a RoboCasa kit"):
        robocasa_kit.write_kit(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "not a kit"


def test_kit_layout_is_a_fresh_dict_each_time():
    a = robocasa_kit.kit_layout()
    a["main_group"]["bottom_row"][0]["name"] += "_renamed"
    assert robocasa_kit.kit_layout()["main_group"]["bottom_row"][0]["name"] == "counter_1"
