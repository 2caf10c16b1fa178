"""Links.interrupt_on_death: a peer that dies under a trial ends it, even when the trial never asks that peer.

Real peer processes (tests/actors/echo_server.py) behind the facades; the body only sleeps, as a
trial does between a recorder's fire-and-forget records or while the bridge is not asked.
"""

from __future__ import annotations

import time

import pytest
import trio

from roboswe.actors import Client, PeerDead
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
