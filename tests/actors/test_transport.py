"""Request/reply, fire-and-forget, heartbeats and PeerDead between real actor processes."""

from __future__ import annotations

import os
import signal
import time

import pytest
import trio

from roboswe.actors import Client, CurveClientKeys, PeerDead, RemoteError, new_key_pair
from roboswe.protocol.control import Ok, Statistics, StatisticsRequest

from .echo_server import ECHO_CODEC, Crunch, Echo, Hog, Nap


@pytest.fixture(params=["ipc", "tcp"])
def endpoint(request, tmp_path):
    return f"ipc://{tmp_path}/echo.sock" if request.param == "ipc" else "tcp://127.0.0.1:0"


async def test_round_trip_between_processes_carries_message_and_blobs(echo_server_factory, endpoint):
    server = echo_server_factory(endpoint)
    image = os.urandom(256 * 256 * 3)
    async with Client("tester", server.endpoint, ECHO_CODEC) as client:
        assert client.peer == "echo" and client.peer_pid == server.process.pid
        with trio.fail_after(5):
            reply = await client.request(Echo(text="hello"), blobs=[image, b"x"])
        assert reply.message == Echo(text="hello")
        assert [bytes(b) for b in reply.blobs] == [image, b"x"]
        assert reply.envelope.sender == "echo"


async def test_concurrent_requests_are_matched_by_correlation_id(echo_server_factory, tmp_path):
    server = echo_server_factory(f"ipc://{tmp_path}/echo.sock")
    async with Client("tester", server.endpoint, ECHO_CODEC) as client:
        results = {}

        async def ask(i: int) -> None:
            await trio.sleep(0)
            if i % 3 == 0:
                await client.request(Nap(seconds=0.05))
            results[i] = (await client.request(Echo(text=str(i)))).message.text

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for i in range(50):
                    nursery.start_soon(ask, i)
        assert results == {i: str(i) for i in range(50)}


async def test_fire_and_forget_then_statistics_count_handling(echo_server_factory, tmp_path):
    server = echo_server_factory(f"ipc://{tmp_path}/echo.sock")
    async with Client("tester", server.endpoint, ECHO_CODEC) as client:
        for _ in range(5):
            await client.send(Nap(seconds=0.01))
        with trio.fail_after(5):
            while True:
                stats = (await client.request(StatisticsRequest())).message
                if stats.handled.get("Nap") == 5:
                    break
                await trio.sleep(0.02)
        assert isinstance(stats, Statistics) and stats.actor == "echo"
        assert stats.handling["Nap"] >= 0.05
        assert stats.handled["Hello"] == 1
        assert 0 <= stats.idle <= stats.uptime
        assert client.accounts.statistics().waiting["echo"] > 0


async def test_deadline_is_the_callers_cancel_scope(echo_server_factory, tmp_path):
    server = echo_server_factory(f"ipc://{tmp_path}/echo.sock")
    async with Client("tester", server.endpoint, ECHO_CODEC) as client:
        with trio.move_on_after(0.2) as scope:
            await client.request(Nap(seconds=5))
        assert scope.cancelled_caught
        # The link still works after an abandoned request.
        with trio.fail_after(5):
            assert (await client.request(Echo(text="still here"))).message.text == "still here"


async def test_stopped_peer_fails_pending_request_with_peer_dead(echo_server_factory, tmp_path):
    server = echo_server_factory(f"ipc://{tmp_path}/echo.sock")
    async with Client("tester", server.endpoint, ECHO_CODEC, heartbeat_interval=0.2, liveness=3) as client:
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with trio.fail_after(10), pytest.raises(PeerDead) as failure:
                await client.request(Nap(seconds=0.01))
            # not before the 0.6 s liveness window; the upper bound leaves room for a busy 2-core machine
            assert 0.5 <= time.monotonic() - started < 5
            assert failure.value.peer == "echo"
            with pytest.raises(PeerDead):  # new requests fail at once while the peer is dead
                await client.request(Echo(text="x"))
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        with trio.fail_after(3):
            await client.wait_peer_dead()  # already declared: returns at once
            while not client.peer_alive:
                await trio.sleep(0.05)
            assert (await client.request(Echo(text="back"))).message.text == "back"


async def test_loop_blocking_handler_looks_dead_but_offloaded_work_keeps_heartbeats(echo_server_factory, tmp_path):
    server = echo_server_factory(f"ipc://{tmp_path}/echo.sock")
    async with Client("tester", server.endpoint, ECHO_CODEC, heartbeat_interval=0.1, liveness=3) as client:
        with trio.fail_after(5):
            assert isinstance((await client.request(Crunch(seconds=1.0))).message, Ok)
        assert client.peer_alive
        with trio.fail_after(5), pytest.raises(PeerDead):
            await client.request(Hog(seconds=1.0))


async def test_client_of_other_major_version_is_refused(echo_server_factory, tmp_path, monkeypatch):
    import roboswe.actors._client as client_module

    server = echo_server_factory(f"ipc://{tmp_path}/echo.sock")
    monkeypatch.setattr(client_module, "PROTOCOL_VERSION", (99, 0))
    with trio.fail_after(5), pytest.raises(RemoteError) as failure:
        async with Client("future", server.endpoint, ECHO_CODEC):
            pass
    assert failure.value.code == "version"
    assert "future speaks protocol 99.0" in failure.value.error.detail


async def test_unknown_request_kind_gets_remote_error(tmp_path):
    from roboswe.actors import Actor, refuse_unhandled
    from roboswe.config import RunConfig

    actor = Actor("coordinator", tmp_path, RunConfig(), None)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.serve, __import__("roboswe.protocol.control", fromlist=["x"]).CONTROL_CODEC, refuse_unhandled("coordinator"))
        async with actor.client("coordinator", __import__("roboswe.protocol.control", fromlist=["x"]).CONTROL_CODEC) as client:
            with trio.fail_after(5), pytest.raises(RemoteError) as failure:
                await client.request(Ok())
            assert failure.value.code == "unsupported"
        nursery.cancel_scope.cancel()
    assert not (tmp_path / "sock" / "coordinator.sock").exists()


async def test_curve_admits_known_client_and_refuses_stranger(echo_server_factory):
    server_pub, server_sec = new_key_pair()
    client_pub, client_sec = new_key_pair()
    server = echo_server_factory(
        "tcp://127.0.0.1:0", "--curve-keys", server_pub.decode(), server_sec.decode(), client_pub.decode()
    )
    known = CurveClientKeys(public_key=client_pub, secret_key=client_sec, server_key=server_pub)
    async with Client("tester", server.endpoint, ECHO_CODEC, curve=known) as client:
        with trio.fail_after(5):
            assert (await client.request(Echo(text="secret"))).message.text == "secret"
    stranger_pub, stranger_sec = new_key_pair()
    stranger = CurveClientKeys(public_key=stranger_pub, secret_key=stranger_sec, server_key=server_pub)
    with trio.fail_after(5), pytest.raises(PeerDead):
        async with Client("stranger", server.endpoint, ECHO_CODEC, curve=stranger, heartbeat_interval=0.2):
            pass
    server.stop()
    assert "curve_client_refused" in server.log()


async def test_handler_bugs_are_answered_as_internal_errors_and_serving_continues(tmp_path):
    from roboswe.actors import Server
    from roboswe.protocol.control import CONTROL_CODEC

    async def buggy(decoded):
        raise RuntimeError("boom")

    server = Server("buggy", f"ipc://{tmp_path}/buggy.sock", CONTROL_CODEC, buggy)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        async with Client("tester", server.endpoint, CONTROL_CODEC) as client:
            with trio.fail_after(5):
                with pytest.raises(RemoteError, match="RuntimeError: boom"):
                    await client.request(Ok())
                assert isinstance((await client.request(StatisticsRequest())).message, Statistics)
        assert server.statistics().errors == 1
        nursery.cancel_scope.cancel()


async def test_a_hello_lost_while_heartbeats_flow_is_said_again(tmp_path):
    """A Hello written to a connection that drops is gone (ZeroMQ keeps nothing written to a closed socket),
    while the heartbeats after it reach the peer: the handshake says Hello again instead of waiting forever."""
    import zmq
    from roboswe.actors._socket import AsyncSocket
    from roboswe.protocol import PROTOCOL_VERSION
    from roboswe.protocol.control import CONTROL_CODEC, Heartbeat, Hello, Ready

    peer = AsyncSocket(zmq.Context.instance().socket(zmq.ROUTER))
    peer.raw.bind(f"ipc://{tmp_path}/lossy.sock")
    hellos: list[float] = []

    async def lose_the_first_hello() -> None:
        while True:
            identity, *frames = await peer.receive()
            decoded = CONTROL_CODEC.decode(frames)
            if isinstance(decoded.message, Hello):
                hellos.append(trio.current_time())
                if len(hellos) == 1:
                    continue
                reply = Ready(version=PROTOCOL_VERSION, actor="lossy", pid=os.getpid())
            elif isinstance(decoded.message, Heartbeat):
                reply = Heartbeat(pid=os.getpid())
            else:
                continue
            _, out = CONTROL_CODEC.encode(reply, sender="lossy", correlation_id=decoded.envelope.message_id)
            peer.send_nowait([identity, *out])

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lose_the_first_hello)
            with trio.fail_after(5):
                async with Client("tester", f"ipc://{tmp_path}/lossy.sock", CONTROL_CODEC,
                                  heartbeat_interval=0.1, liveness=3) as client:
                    assert client.peer == "lossy" and client.peer_alive
            nursery.cancel_scope.cancel()
    finally:
        peer.close(0)
    # said again once the 0.3 s liveness window passed with heartbeats answered and no Ready (stamped on
    # arrival, so the first Hello's own delivery delay may shorten the gap seen here a little)
    assert len(hellos) == 2 and hellos[1] - hellos[0] >= 0.25
