"""Links.interrupt_on_death: a peer that dies under a trial ends it, even when the trial never asks that peer.

Real peer processes (tests/actors/echo_server.py) behind the facades; the body only sleeps, as a
trial does between a recorder's fire-and-forget records or while the bridge is not asked.
"""

from __future__ import annotations

import sqlite3
import time

import pytest
import trio
from roboswe.actors import Client, PeerDead, Server

from roboswe.evaluation.peers import Bridge, Links, Recorder, Simulator

from ..actors.echo_server import ECHO_CODEC


def _links(other: Client, watched: Client) -> Links:
    """Links whose recorder is ``watched`` and whose simulator and bridge share ``other`` (one process fewer)."""
    return Links(sim=Simulator(other), bridge=Bridge(other), recorder=Recorder(watched, "run"))


async def test_a_peer_replaced_under_the_body_cancels_it_and_raises_peer_dead_naming_it(echo_server_factory, tmp_path):
    ends = {name: f"ipc://{tmp_path}/{name}.sock" for name in ("other", "recorder")}
    first = {name: echo_server_factory(e) for name, e in ends.items()}
    # A 20 s liveness window: only the new pid answering at the endpoint can tell the body in time.
    async with (Client("t", ends["other"], ECHO_CODEC, heartbeat_interval=0.1, liveness=200) as other,
                Client("t", ends["recorder"], ECHO_CODEC, heartbeat_interval=0.1, liveness=200) as recorder):
        links = _links(other, recorder)
        reached_end = False
        with trio.fail_after(30), pytest.raises(PeerDead) as caught:
            async with links.interrupt_on_death():
                first["recorder"].stop()  # SIGKILL, then a new process at the same endpoint (a supervisor restart)
                restarted = time.monotonic()
                await trio.to_thread.run_sync(echo_server_factory, ends["recorder"])
                await trio.sleep(60)
                reached_end = True
        noticed = time.monotonic() - restarted
    assert not reached_end
    assert caught.value.restarted and caught.value.endpoint == ends["recorder"]
    assert noticed < 10, noticed  # a few heartbeats after the new process binds (it imports first)


async def test_a_silent_peer_is_noticed_within_its_liveness_window(echo_server_factory, tmp_path):
    ends = {name: f"ipc://{tmp_path}/{name}.sock" for name in ("other", "recorder")}
    first = {name: echo_server_factory(e) for name, e in ends.items()}
    async with (Client("t", ends["other"], ECHO_CODEC, heartbeat_interval=0.2, liveness=5) as other,
                Client("t", ends["recorder"], ECHO_CODEC, heartbeat_interval=0.2, liveness=5) as recorder):
        links = _links(other, recorder)
        with trio.fail_after(30), pytest.raises(PeerDead) as caught:
            async with links.interrupt_on_death():
                first["recorder"].stop()  # and nothing comes back
                killed = time.monotonic()
                await trio.sleep(60)
        noticed = time.monotonic() - killed
    assert not caught.value.restarted and caught.value.endpoint == ends["recorder"]
    assert noticed < 10, noticed  # the 1 s window plus the watch's poll, with room for a busy machine


async def test_a_body_that_ends_or_fails_on_its_own_passes_through_unwrapped(echo_server_factory, tmp_path):
    endpoint = f"ipc://{tmp_path}/peer.sock"
    echo_server_factory(endpoint)
    async with Client("t", endpoint, ECHO_CODEC) as peer:
        links = _links(peer, peer)
        async with links.interrupt_on_death():
            await trio.sleep(0.5)  # every peer alive: nothing is raised
        with pytest.raises(ValueError, match="the body's own"):  # not an ExceptionGroup: trial.py catches by type
            async with links.interrupt_on_death():
                raise ValueError("the body's own")


async def test_a_series_whose_bridge_dies_under_a_waiting_trial_ends_it_interrupted_and_reruns_it_linked(tmp_path):
    """In one process (tests/evaluation/harness.py): mid-trial, the bridge's link is moved to an endpoint where
    nothing answers yet (its process gone) while the trial only waits (it never asks the bridge); once the trial
    has ended, a bridge is served there again. The end-to-end kills are tests/series/test_actor_kills.py."""
    from roboswe.protocol.bridge import BRIDGE_CODEC

    from roboswe.evaluation.progress import Progress
    from roboswe.evaluation.series import run_series
    from roboswe.records.reader import RunReader

    from ..series.restart_agents import HoldUntilKilledAgent
    from .harness import (
        admitted_task,
        peers,
        reach_manifest,
        reader_factory,
        record_run,
        series_plan,
    )

    run_dir, state = tmp_path / "run", tmp_path / "state"
    run_dir.mkdir()
    state.mkdir()
    (state / "killed.2").write_text("")
    plan = series_plan(run_dir, admitted_task(reach_manifest()), trials=2, trial_steps=200)
    moved = f"ipc://{tmp_path}/moved-bridge.sock"

    def seen(query: str) -> int:
        conn = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True)
        try:
            return conn.execute(query).fetchone()[0]
        finally:
            conn.close()

    with trio.fail_after(120):
        async with peers(run_dir, HoldUntilKilledAgent(str(state), pause=0.05)) as links:
            await record_run(links)
            async with (trio.open_nursery() as nursery,
                        Client("coordinator", moved, BRIDGE_CODEC, handshake=False, heartbeat_interval=0.1,
                               liveness=3) as new_link):
                ends: list = []
                nursery.start_soon(lambda: _collect(ends, run_series(links, plan, Progress(), reader_factory(run_dir))))
                while seen("SELECT count(*) FROM operations WHERE trial_id LIKE '%/t1a0'") < 3:
                    await trio.sleep(0.05)
                (state / "killed.1").write_text("")
                links.bridge.client = new_link  # the bridge process is gone; its successor will answer here
                while seen("SELECT count(*) FROM trial_ends WHERE trial_id LIKE '%/t1a0'") == 0:
                    await trio.sleep(0.05)
                await nursery.start(Server("sandbox_bridge", moved, BRIDGE_CODEC, links.fake_bridge.handle).serve)
                while len(ends) == 0:
                    await trio.sleep(0.05)
                nursery.cancel_scope.cancel()
    # without the watch, trial 1 waits on to its 200-step budget (failure, step_budget) and is never re-run
    assert [(e.outcome, e.cause) for e in ends[0]] == [
        ("incomplete", "interrupted"), ("failure", "finish"), ("failure", "finish")], ends[0]
    one = ends[0][0]
    assert one.detail.startswith("PeerDead") and one.control_steps < 200, one
    with RunReader(run_dir) as reader:
        views = reader.trials(plan.series_id)
        assert [(v.start.index, v.start.attempt, v.start.recovers) for v in views] == [
            (1, 0, None), (1, 1, views[0].trial_id), (2, 0, None)]


async def _collect(into: list, awaitable) -> None:
    into.append(await awaitable)
