"""Task manifests and datasets decode strictly, with errors that name the file and the field."""

from __future__ import annotations

import pytest
from roboswe.sim.manifest import ManifestError, load_dataset, load_manifest

from .conftest import ROOT

LIFT = (ROOT / "configs" / "tasks" / "lift-panda.toml").read_text()


def write(tmp_path, text, name="task.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_pilot_dataset_lists_six_tasks_with_trial_and_script_budgets():
    _dataset, manifests = load_dataset("robosuite-pilot")
    assert [m.id for m in manifests] == ["lift-panda", "stack-panda", "pickplacecan-panda", "nutassemblyround-panda",
                                         "door-panda", "lift-gr1armsonly"]
    for m in manifests:
        assert (m.budgets.trial.steps, m.budgets.trial.seconds) == (6000, 1800)
        assert (m.budgets.script.steps, m.budgets.script.seconds) == (50, 90)
        assert m.control_hz == 20 and m.video.fps == 10 and m.success.interval == 10
        assert not m.privileged and not m.observation.privileged
        assert m.upstream.registry_horizon == 1000 and m.upstream.version == "1.5.2"


def test_unknown_field_fails_naming_file_and_field(tmp_path):
    path = write(tmp_path, LIFT.replace("seed = 0", "seed = 0\nsede = 1"))
    with pytest.raises(ManifestError, match=r"task.toml: invalid task manifest: Object contains unknown field `sede`"):
        load_manifest(path)


def test_privileged_state_needs_the_privileged_label(tmp_path):
    text = LIFT.replace('proprio = [', 'privileged = ["cube_pos"]\nproprio = [')
    with pytest.raises(ManifestError, match="privileged = true"):
        load_manifest(write(tmp_path, text))
    labelled = load_manifest(write(tmp_path, text.replace("privileged = false", "privileged = true"), "ok.toml"))
    assert labelled.allowed_state_keys[-1] == "cube_pos"


def test_video_rate_must_divide_the_control_rate(tmp_path):
    with pytest.raises(ManifestError, match="video.fps = 7 must divide control_hz = 20"):
        load_manifest(write(tmp_path, LIFT.replace("fps = 10", "fps = 7")))


def test_digest_pins_content():
    a = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")
    b = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")
    assert a.digest() == b.digest()
    assert a.digest() != load_manifest(ROOT / "configs" / "tasks" / "stack-panda.toml").digest()


def test_unknown_dataset_names_the_shipped_ones():
    with pytest.raises(ManifestError, match="robosuite-pilot"):
        load_dataset("no-such-dataset")
