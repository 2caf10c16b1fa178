"""GR1 admission: stand-ins admit with one fingerprint across fresh processes; native tasks without assets are
excluded naming every missing folder."""

from __future__ import annotations

import msgspec
import pytest
from roboswe.sim.gr1.manifest import NATIVE_ASSET_FOLDERS, AssetsMissing
from roboswe.sim.gr1.native import check_native
from roboswe.sim.manifest import load_dataset

from roboswe.evaluation.admission import admit_task

from .conftest import TASKS


# A repeat: the GR1 direct-actions run admits the stand-in (two fresh processes, one fingerprint) by default.
@pytest.mark.exhaustive
def test_a_standin_admits_with_the_same_fingerprint_in_fresh_processes(cube_manifest):
    first = admit_task(cube_manifest, hold_steps=20)
    assert first.status == "admitted", first.reason
    second = admit_task(cube_manifest, hold_steps=20)  # two more fresh processes
    assert second.fingerprint == first.fingerprint
    assert first.fingerprint["versions"]["fidelity"] == "offline-standin"
    assert first.manifest["fidelity"] == "offline-standin"
    assert first.measured["action_dim"] == 29
    assert first.measured["cameras"] == ["ego_view_bg_crop_pad_res256_freq20"]


def test_the_standin_dataset_lists_only_standins():
    _, manifests = load_dataset(TASKS.parent / "datasets" / "gr1-tabletop-standin.toml")
    assert [m.fidelity for m in manifests] == ["offline-standin"] * len(manifests) and len(manifests) >= 2
    assert all(m.id.startswith("gr1-standin-") for m in manifests)


@pytest.fixture(scope="module")
def native_manifests():
    _, manifests = load_dataset(TASKS.parent / "datasets" / "gr1-tabletop-native.toml")
    return manifests


def test_the_native_dataset_is_the_seeds_four_tasks(native_manifests):
    assert [(m.upstream.env, m.upstream.layouts, m.fidelity) for m in native_manifests] == [
        ("PnPCupToDrawerClose", [4], "native"), ("PosttrainPnPNovelFromTrayToCardboardboxSplitA", [0], "native"),
        ("PnPPotatoToMicrowaveClose", [2], "native"), ("PnPMilkToMicrowaveClose", [2], "native")]
    assert all(m.upstream.styles == list(range(12)) and m.seed == 20260907 for m in native_manifests)


def test_missing_native_assets_are_named_per_folder(native_manifests, tmp_path):
    (tmp_path / "textures").mkdir()  # one of five present: the other four are named, it is not
    for m in native_manifests:
        m = msgspec.structs.replace(m, upstream=msgspec.structs.replace(m.upstream, assets_root=str(tmp_path)))
        with pytest.raises(AssetsMissing) as e:
            check_native(m)
        for folder in NATIVE_ASSET_FOLDERS:
            assert (str(tmp_path / folder) in str(e.value)) is (folder != "textures")
        assert m.id in str(e.value)


def test_admission_excludes_a_native_task_naming_its_missing_assets(native_manifests, tmp_path):
    m = native_manifests[0]
    m = msgspec.structs.replace(m, upstream=msgspec.structs.replace(m.upstream, assets_root=str(tmp_path)))
    task = admit_task(m, hold_steps=1)
    assert task.status == "excluded" and task.fingerprint is None
    assert task.reason.startswith("AssetsMissing") and str(tmp_path / "objects" / "sketchfab") in task.reason
