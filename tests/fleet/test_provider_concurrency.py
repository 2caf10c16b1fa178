"""The provider client with several fleet workers deciding at once: a concurrency cap, and a
server's Retry-After holding every concurrent call, not only the one it answered."""

from __future__ import annotations

import time

import pytest
import trio
from roboswe.actors.provider_client import provider_handler
from roboswe.protocol import Decoded
from roboswe.protocol._base import Envelope
from roboswe.protocol.participant import (
    DecisionRequest,
    ListFiles,
    TextPart,
    Turn,
    offered_tools,
)
from roboswe.protocol.provider import Decide, Decided

from roboswe.providers import ProviderConfig, create_participant
from tests.providers.fakes import REPLY, FakeProvider, error_reply

KEY_ENV = "ROBOSWE_FLEET_TEST_KEY"


def request() -> DecisionRequest:
    return DecisionRequest(system="You control a robot by writing Python.", tools=offered_tools(search_history=False),
                           conversation=[Turn(id="u0", role="user", trial=1, parts=[TextPart(text="Lift the cube.")])],
                           trial=1)


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-fleet-test")


async def test_retry_after_holds_a_concurrent_call_of_the_same_provider():
    with FakeProvider("anthropic") as fake:
        p = create_participant(ProviderConfig(kind="anthropic", model="fake-model-2026-01-01", api_key_env=KEY_ENV,
                                              base_url=fake.base_url, timeout_s=5.0, attempts=3,
                                              backoff_initial_s=0.01, backoff_max_s=0.05))
        reply = REPLY["anthropic"](tool=("list_files", {}))
        fake.queue(error_reply(429, retry_after=2.0), reply, reply)
        finished: dict[str, float] = {}
        t0 = time.monotonic()

        async def decide(name: str) -> None:
            await p.decide(request())
            finished[name] = time.monotonic() - t0

        async with trio.open_nursery() as nursery:
            nursery.start_soon(decide, "first")  # answered 429, Retry-After 2 s
            while not fake.seen:  # the first request reached the server (on a busy machine: not at once)
                await trio.sleep(0.01)
            answered = time.monotonic() - t0
            await trio.sleep(0.5)  # the 429 is back at the client by now
            nursery.start_soon(decide, "second")  # would be answered at once without the shared hold
        assert finished["first"] >= answered + 1.9
        assert finished["second"] >= answered + 1.9, (answered, finished)
        await p.aclose()


async def test_provider_client_serves_concurrent_decisions_up_to_its_cap():
    from roboswe.providers.local import PythonParticipant

    class Agent:
        def __init__(self) -> None:
            self.in_flight = 0
            self.most = 0

        async def decide(self, request):
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            await trio.sleep(0.05)
            self.in_flight -= 1
            return ListFiles()

    agent = Agent()
    handle = provider_handler(PythonParticipant(ProviderConfig(kind="python", agent="x:Y"), agent=agent), concurrency=3)
    replies = []

    async def one() -> None:
        envelope = Envelope(version=(1, 0), message_id="m", correlation_id=None, sender="coordinator", sent_at=0.0)
        replies.append(await handle(Decoded(envelope, Decide(request=request(), image_digests=[]), ())))

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(one)
    assert len(replies) == 8 and all(isinstance(r, Decided) for r in replies)
    assert agent.most == 3  # concurrent (more than one at once), never past the cap
