"""Admission on real scenes in fresh processes, and the sealed admitted.json."""

from __future__ import annotations

import json
import shutil

import pytest

from roboswe.cli import main as cli_main
from roboswe.evaluation.admission import (
    AdmissionError,
    admit_dataset,
    read_admitted,
    write_admitted,
)

from .conftest import ROOT


@pytest.fixture(scope="module")
def admitted(tmp_path_factory):
    """A two-task dataset: Lift/Panda, and a copy whose camera does not exist."""
    root = tmp_path_factory.mktemp("configs")
    (root / "tasks").mkdir()
    (root / "datasets").mkdir()
    shutil.copy(ROOT / "configs" / "tasks" / "lift-panda.toml", root / "tasks")
    broken = (ROOT / "configs" / "tasks" / "lift-panda.toml").read_text()
    broken = broken.replace('id = "lift-panda"', 'id = "lift-nocam"').replace('name = "birdview"', 'name = "no_such_camera"')
    (root / "tasks" / "lift-nocam.toml").write_text(broken)
    (root / "datasets" / "two.toml").write_text(
        'id = "two"\ntasks = ["lift-panda", "lift-nocam"]\n[excluded]\nlift-sawyer = "not part of the pilot"\n'
    )
    result = admit_dataset(root / "datasets" / "two.toml", hold_steps=30)
    path = root / "admitted.json"
    write_admitted(result, path)
    return path


def test_admits_a_loadable_task_with_its_reference_fingerprint(admitted, lift_panda):
    a = read_admitted(admitted)
    lift = a.task("lift-panda")
    assert lift.status == "admitted" and lift.reason is None
    assert lift.fingerprint["digest"] == lift_panda.reset(0).digest  # same as a construction in this process
    assert lift.manifest_digest == lift.task_manifest().digest() == lift_panda.manifest.digest()
    m = lift.measured
    assert m["action_dim"] == 7 and m["hold_steps"] == 30 and m["step_ms"] > 0
    assert set(m["observe_ms"]) == {"agentview", "birdview", "robot0_eye_in_hand"}


def test_excludes_a_broken_task_with_its_reason(admitted):
    a = read_admitted(admitted)
    nocam = a.task("lift-nocam")
    assert nocam.status == "excluded" and "no_such_camera" in nocam.reason and nocam.fingerprint is None
    assert a.task("lift-sawyer").reason == "excluded by the dataset: not part of the pilot"
    assert [t.id for t in a.admitted_tasks()] == ["lift-panda"]


def test_reader_refuses_a_modified_file(admitted, tmp_path):
    data = json.loads(admitted.read_text())
    data["tasks"][0]["measured"]["step_ms"] = 0.001
    edited = tmp_path / "admitted.json"
    edited.write_text(json.dumps(data))
    with pytest.raises(AdmissionError, match="modified after admission"):
        read_admitted(edited)
    with pytest.raises(AdmissionError, match="roboswe admit"):
        read_admitted(tmp_path / "missing.json")


def test_tasks_command_lists_admission_status(admitted, capsys):
    assert cli_main(["tasks", "robosuite-pilot", "--admitted", str(admitted)]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert "admitted" in lines["lift-panda"] and " 7 " in lines["lift-panda"]
    assert "not admitted" in lines["door-panda"]
