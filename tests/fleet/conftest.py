"""Fleet tests run `roboswe run` for real (supervisor, actor processes, robosuite, bwrap), as tests/series does."""

from __future__ import annotations

import msgspec
import pytest

from tests.series.conftest import ROOT, sandbox_image, work_dir  # noqa: F401 - fixtures shared with the series tests

# Three copies of lift-panda under their own ids: one admission instead of three (minutes on a busy machine).
TASKS = ("lift-a", "lift-b", "lift-c")


@pytest.fixture(scope="session")
def admitted_three(work_dir, sandbox_image):  # noqa: F811 - the imported fixtures
    from roboswe.sim.manifest import load_manifest

    from roboswe.evaluation.admission import (
        FORMAT,
        Admitted,
        admit_task,
        write_admitted,
    )

    manifest = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")
    task = admit_task(manifest)
    assert task.status == "admitted", task.reason
    copies = []
    for task_id in TASKS:
        renamed = msgspec.structs.replace(manifest, id=task_id)
        copies.append(msgspec.structs.replace(task, id=task_id, manifest=renamed.to_builtins(),
                                              manifest_digest=renamed.digest()))
    path = work_dir / "admitted-three.json"
    write_admitted(Admitted(format=FORMAT, dataset={"id": "fleet-tests", "tasks": list(TASKS)}, created_at="test",
                            host={}, run_config_sha256=None, tasks=copies), path)
    return path


