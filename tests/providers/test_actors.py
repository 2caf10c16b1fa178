"""The provider client and context manager as real actor processes, talking to a fake provider."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from roboswe.actors import Client, RemoteError
from roboswe.actors._endpoints import socket_dir
from roboswe.protocol.context import (
    CONTEXT_CODEC,
    AppendTurns,
    ContextState,
    Prepared,
    PrepareRequest,
    RecordUsage,
    ResetContext,
    SearchHistoryRequest,
)
from roboswe.protocol.participant import ListFiles, TextPart, Turn, image_part, join_images, result_turn, split_images
from roboswe.protocol.provider import PROVIDER_CODEC, Decide, Decided, ProviderFailed

from .fakes import REPLY, FakeProvider, error_reply
from .test_adapters import IMAGE

KEY_ENV = "ROBOSWE_ACTOR_TEST_KEY"


class Actors:
    def __init__(self, run_dir: Path, config: str, env: dict[str, str],
                 names: tuple[str, ...] = ("provider_client", "context_manager")):
        self.run_dir = run_dir
        self.env = env
        (run_dir / "run.toml").write_text(config)
        self.procs: list[subprocess.Popen] = []
        for name in names:
            self.spawn(name)

    def spawn(self, name: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", f"roboswe.actors.{name}", "--run-dir", str(self.run_dir),
                                 "--config", str(self.run_dir / "run.toml")], env=self.env, stdout=subprocess.DEVNULL,
                                stderr=open(self.run_dir / f"{name}.err", "a"))  # noqa: SIM115 - the child holds it
        self.procs.append(proc)
        return proc

    def endpoint(self, name: str) -> str:
        return f"ipc://{socket_dir(self.run_dir) / name}.sock"  # where the actor binds (short /tmp dir for a long path)

    def close(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def actors(tmp_path):
    started = []

    def start(config: str, names: tuple[str, ...] = ("provider_client", "context_manager")) -> Actors:
        a = Actors(tmp_path, config, {**os.environ, KEY_ENV: "sk-actor-SECRET", "PYTHONHASHSEED": "0"}, names)
        started.append(a)
        return a

    yield start
    for a in started:
        a.close()


def connect(endpoint: str, codec) -> Client:
    """A client for an actor process; wait_bound() first, since the process starts slowly."""
    return Client("test", endpoint, codec, heartbeat_interval=0.5, liveness=6)


async def wait_bound(*endpoints: str) -> None:
    with trio.fail_after(60):
        for endpoint in endpoints:
            path = Path(endpoint.removeprefix("ipc://"))
            while not path.exists():
                await trio.sleep(0.1)


def anthropic_config(fake: FakeProvider, more: str = "", model: str = "claude-opus-4-8") -> str:
    """A run config for the anthropic adapter against ``fake`` (the key in KEY_ENV); ``more``: TOML lines after
    the provider's, in its table unless they open another. The model is one without the preserved-thinking
    prefix check (its profile in configs/models.toml), whose requests are counted turn by turn."""
    return f"""
[provider]
kind = "anthropic"
model = "{model}"
api_key_env = "{KEY_ENV}"
base_url = "{fake.base_url}"
context_window = 100000
max_output_tokens = 8000
{more}
"""


async def test_anthropic_series_step_through_both_actors(actors):
    with FakeProvider("anthropic", count=lambda body: len(body) // 4) as fake:
        a = actors(anthropic_config(fake, "attempts = 2\nbackoff_initial_s = 0.01"))
        await wait_bound(a.endpoint("context_manager"), a.endpoint("provider_client"))
        async with connect(a.endpoint("context_manager"), CONTEXT_CODEC) as context, \
                connect(a.endpoint("provider_client"), PROVIDER_CODEC) as provider:
            with trio.fail_after(30):
                state = (await context.request(ResetContext(series="s1"))).message
                assert state == ContextState(archived=0, active=0, slides=0)
                part = image_part(IMAGE, "agentview")
                opening = Turn(id="u0", role="user", trial=1, pinned=True, parts=[TextPart(text="Lift."), part])
                await context.request(AppendTurns(turns=[opening], image_digests=[part.digest]), [IMAGE])
                reply = await context.request(PrepareRequest(system="You drive a robot.", trial=1))
                prepared = reply.message
                assert isinstance(prepared, Prepared)
                # instructions+tools, then the new turn; a count the context manager asked again (the provider
                # client slow to answer while it started, on a loaded machine) is the same body: counted once here
                bodies = list(dict.fromkeys(c.body for c in fake.counts()))
                base, turns = (len(body) // 4 for body in bodies)
                assert prepared.count.base_tokens == turns and prepared.count.exact_tokens is None  # base + (turns - base)
                assert prepared.count.method == "anthropic.count_tokens:per_message_sum"
                assert prepared.count.budget == 100000 - 8000 - 4096
                assert len(bodies) == 2  # counted through the provider client, with the key
                assert "sk-actor-SECRET" in str(fake.counts()[0].headers), fake.counts()[0].headers
                request = join_images(prepared.request, prepared.image_digests, reply.blobs)
                assert request.images == {part.digest: IMAGE}

                fake.queue(REPLY["anthropic"](tool=("list_files", {})))
                stripped, digests, blobs = split_images(request)
                decided = (await provider.request(Decide(request=stripped, image_digests=digests), blobs)).message
                assert isinstance(decided, Decided) and decided.decision.operation == ListFiles()
                assert decided.decision.attempts[0].request == fake.generations()[0].body
                await context.request(RecordUsage(usage=decided.decision.usage))
                answer = result_turn(decided.decision, id="r1", text="lift.py 120 bytes", trial=1)
                await context.request(AppendTurns(turns=[decided.decision.turn, answer]))
                again = (await context.request(PrepareRequest(system="You drive a robot.", trial=1))).message
                assert [t.id for t in again.request.conversation] == ["u0", decided.decision.turn.id, "r1"]

                with pytest.raises(RemoteError) as err:
                    await context.request(SearchHistoryRequest(query="lift.py"))
                assert err.value.error.code == "search_unavailable"

                fake.queue(error_reply(529), error_reply(529))
                failed = (await provider.request(Decide(request=stripped, image_digests=digests), blobs)).message
                assert isinstance(failed, ProviderFailed) and failed.reason == "provider"
                assert [x.outcome for x in failed.attempts] == ["overloaded", "overloaded"]
    events = (a.run_dir / "events.jsonl").read_text() if (a.run_dir / "events.jsonl").exists() else ""
    assert "sk-actor-SECRET" not in events


async def test_python_participant_through_the_provider_client(actors):
    a = actors('[provider]\nkind = "python"\nagent = "tests.providers.agents:SeeingAgent"\n[provider.options]\nfinish_after = 0\n')
    await wait_bound(a.endpoint("provider_client"))
    async with connect(a.endpoint("provider_client"), PROVIDER_CODEC) as provider:
        part = image_part(IMAGE, "frontview")
        from roboswe.protocol.participant import DecisionRequest, offered_tools

        request = DecisionRequest(system="s", tools=offered_tools(search_history=False), trial=1,
                                  conversation=[Turn(id="u0", role="user", parts=[part])], images={part.digest: IMAGE})
        stripped, digests, blobs = split_images(request)
        with trio.fail_after(30):
            decided = (await provider.request(Decide(request=stripped, image_digests=digests), blobs)).message
        assert decided.decision.operation.reason == "saw 1 image(s)"
        assert decided.decision.turn.tool_calls()[0].operation == decided.decision.operation
        assert msgspec.json.decode(decided.decision.attempts[0].response)["role"] == "assistant"


async def test_the_context_manager_counts_over_one_link_that_outlives_the_provider_client(actors):
    """The context manager links to the provider client once, for its whole life: a provider client that
    starts after it, or is killed and started again, is reached over the same link (no new Hello per count)."""
    with FakeProvider("anthropic", count=lambda body: len(body) // 4) as fake:
        a = actors(anthropic_config(fake, "[transport]\nheartbeat_interval = 0.2"), names=("context_manager",))
        await wait_bound(a.endpoint("context_manager"))
        async with connect(a.endpoint("context_manager"), CONTEXT_CODEC) as context:
            with trio.fail_after(60):
                await context.request(ResetContext(series="s1"))
                await context.request(AppendTurns(turns=[Turn(id="u0", role="user", trial=1, pinned=True,
                                                              parts=[TextPart(text="Lift.")])]))
                provider = a.spawn("provider_client")  # only now: the count waits for it
                first = (await context.request(PrepareRequest(system="You drive a robot.", trial=1))).message
                assert isinstance(first, Prepared) and first.count.method == "anthropic.count_tokens:per_message_sum"
                counted = len(fake.counts())
                provider.kill()
                provider.wait()
                await trio.sleep(1.0)  # past the link's liveness: it now holds the provider client dead
                a.spawn("provider_client")
                await context.request(AppendTurns(turns=[Turn(id="u1", role="user", trial=1,
                                                              parts=[TextPart(text="Lift it higher.")])]))
                again = (await context.request(PrepareRequest(system="You drive a robot.", trial=1))).message
                assert isinstance(again, Prepared) and again.count.base_tokens > first.count.base_tokens
                assert len(fake.counts()) > counted  # counted by the restarted provider client
    hellos = [line for line in (a.run_dir / "events.jsonl").read_text().splitlines()
              if '"peer_connected"' in line and '"peer": "context_manager"' in line]
    assert hellos == [], hellos  # the link never said Hello, let alone once per count


async def test_bad_decisions_through_the_provider_client_process(actors):
    """The provider_client actor as its own process: a hosted model's and a python agent's bad tool calls
    come back as Decided (before: an unencodable reply, answered with an internal Error)."""
    from .test_adapters import request
    from .test_bad_tool_calls import deep_reply, surrogate_reply

    with FakeProvider("anthropic") as fake:
        a = actors(anthropic_config(fake), names=("provider_client",))
        await wait_bound(a.endpoint("provider_client"))
        fake.queue(surrogate_reply("anthropic"), deep_reply("anthropic"), REPLY["anthropic"](tool=("finish", {})))
        async with connect(a.endpoint("provider_client"), PROVIDER_CODEC) as provider:
            turns = []
            for n, why in enumerate(["holds a lone surrogate", "nested deeper than 32 levels", ""]):
                stripped, digests, blobs = split_images(request(*turns))
                with trio.fail_after(30):
                    reply = (await provider.request(Decide(request=stripped, image_digests=digests), blobs)).message
                assert isinstance(reply, Decided), reply
                d = reply.decision
                assert why in d.invalid and (d.operation is None) == bool(why)
                turns += [d.turn, result_turn(d, id=f"r{n}", text=d.invalid or "ok", is_error=bool(why), trial=1)]
        assert not fake.rejected
    a.close()

    b = actors('[provider]\nkind = "python"\nagent = "tests.providers.agents:LoneSurrogateAgent"\n')
    (socket_dir(b.run_dir) / "provider_client.sock").unlink(missing_ok=True)
    await wait_bound(b.endpoint("provider_client"))
    async with connect(b.endpoint("provider_client"), PROVIDER_CODEC) as provider:
        stripped, digests, blobs = split_images(request())
        with trio.fail_after(30):
            reply = (await provider.request(Decide(request=stripped, image_digests=digests), blobs)).message
        assert isinstance(reply, Decided) and reply.decision.operation is None
        assert "$.content holds a lone surrogate" in reply.decision.invalid
