"""The recorded opening of a trial (RoboSWE-ADAPT): instruction, the current camera images as image parts,
the robot's sensor readings, and the native interface named; the participant receives the images."""

from __future__ import annotations

import trio
from roboswe.protocol.participant import DecisionRequest, Finish, ImagePart, TextPart

from roboswe.evaluation.conversation import turn_from_event
from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series import run_series
from roboswe.records.reader import RunReader

from .harness import (
    admitted_task,
    peers,
    reach_manifest,
    reader_factory,
    record_run,
    series_plan,
)


class FirstLook:
    """Finishes at once; keeps the first request of each trial."""

    def __init__(self):
        self.first: dict[int, DecisionRequest] = {}

    def decide(self, request: DecisionRequest):
        self.first.setdefault(request.trial, request)
        return Finish(reason="looked")


async def test_the_opening_carries_instruction_camera_images_and_sensor_readings(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    manifest = reach_manifest()
    plan = series_plan(run_dir, admitted_task(manifest), trials=2)
    agent = FirstLook()
    with trio.fail_after(60):
        async with peers(run_dir, agent) as links:
            await record_run(links)
            await run_series(links, plan, Progress(), reader_factory(run_dir))
    with RunReader(run_dir) as reader:
        views = reader.trials(plan.series_id)
        for view in views:
            turns = [turn_from_event(e.data) for _, e in reader.events(event="turn", trial_id=view.trial_id)]
            opening = turns[0]
            assert opening.role == "user" and opening.trial == view.start.index
            (text,) = [p.text for p in opening.parts if isinstance(p, TextPart)]
            images = [p for p in opening.parts if isinstance(p, ImagePart)]
            assert text.startswith(f"Trial {view.start.index} of 2 begins.")
            assert f"Task: {manifest['instruction']}" in text
            assert images and all(f"{p.camera}" in text for p in images)
            for key in manifest["observation"]["proprio"]:
                assert f"  {key}: [" in text
            stored = {e.data["digest"] for _, e in reader.events(event="image", trial_id=view.trial_id)}
            assert {p.digest for p in images} <= stored  # the images are in the records
            # ... and reached the participant with the request
            request = agent.first[view.start.index]
            assert all(p.digest in request.images for p in images)


async def test_the_opening_is_fetched_while_the_sandbox_is_still_starting(tmp_path):
    """A docker sandbox takes ~0.35 s to start, now longer than a staged scene's Load: the opening's goal and
    camera images are fetched while it starts, not after. Here the sandbox opens only once the opening's
    observation was asked for; a trial that waited for the sandbox first would never get there."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    plan = series_plan(run_dir, admitted_task(reach_manifest()), trials=1)
    agent = FirstLook()
    with trio.fail_after(30):
        async with peers(run_dir, agent) as links:
            await record_run(links)
            observed = trio.Event()
            observe, open_sandbox = links.sim.observe, links.bridge.open

            async def observe_then_tell(*args, **kwargs):
                observed.set()
                return await observe(*args, **kwargs)

            async def open_after_the_opening(*args, **kwargs):
                await observed.wait()
                return await open_sandbox(*args, **kwargs)

            links.sim.observe, links.bridge.open = observe_then_tell, open_after_the_opening
            (ended,) = await run_series(links, plan, Progress(), reader_factory(run_dir))
    assert (ended.outcome, ended.reason) == ("failure", "finish"), ended
    assert 1 in agent.first and any(isinstance(p, ImagePart) for p in agent.first[1].conversation[0].parts)
