"""The same series on the Docker sandbox (runs where dockerd answers, e.g. CI)."""

from __future__ import annotations

import pytest

from roboswe.records.reader import RunReader

from ..conftest import require_in_ci
from .conftest import roboswe, write_config

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def test_demo_series_on_docker_is_recorded_and_verified(work_dir, admitted, sandbox_image):
    from roboswe.sandbox import backend_class

    why = backend_class("docker").available()
    if why or not sandbox_image.docker_tag:
        require_in_ci(f"docker backend unavailable: {why or 'image not imported into Docker'}")
    config = write_config(work_dir, "docker", series="trials = 2")
    run_dir = work_dir / "docker"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video", "-e", "docker")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        views = reader.trials(series.series_id)
        assert [v.end.outcome for v in views] == ["success", "success"]
        assert [v.verification.verdict for v in views] == ["verified", "verified"]
        backends = {e.data["backend"] for _, e in reader.events() if e.event == "trial_opened"}
        assert backends == {"docker"}
        execs = [o for v in views for o in reader.operations(v.trial_id) if o.operation == "exec"]
        assert execs and {o.feedback["backend"] for o in execs} == {"docker"}
