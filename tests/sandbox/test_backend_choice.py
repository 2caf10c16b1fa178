"""The automatic backend choice on this machine: without ``-e``, a trial opens on docker when a daemon
answers and the image is imported, else on bwrap; the choice is logged and is the backend that runs."""

from __future__ import annotations

from structlog.testing import capture_logs

from roboswe.sandbox import backend_class

from .stand_in_sim import ToyRobot, serve_toy_robot


async def test_a_trial_opened_without_a_backend_runs_on_the_one_this_machine_should_choose(image, scratch, nursery):
    from roboswe.actors import robot_link
    from roboswe.bridge.trial import open_trial

    expected = "docker" if backend_class("docker").available() is None and image.docker_tag else "bwrap"
    endpoint = f"ipc://{scratch}/sim.sock"
    await nursery.start(serve_toy_robot, endpoint, ToyRobot())
    workspace = scratch / "workspace"
    workspace.mkdir()
    (workspace / "where.py").write_text("import os\nprint(os.path.exists('/.dockerenv'), os.getuid())\n")
    with capture_logs() as logs:
        async with robot_link(endpoint) as sim, open_trial("choice", workspace, sim, backend=None, image=image) as sandbox:
            fb = await sandbox.exec("where.py")
    (chosen,) = [e for e in logs if e["event"] == "sandbox_backend_chosen"]
    assert chosen["backend"] == expected and chosen["requested"] is None
    assert sandbox.backend.name == expected and fb.backend == expected
    assert fb.exit_status == 0, fb.stderr
    # Docker marks its containers with /.dockerenv; bwrap's root is the image's, which has none.
    assert fb.stdout == f"{expected == 'docker'} {image.uid}\n", fb.stdout
