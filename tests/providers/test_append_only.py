"""An append-only conversation and what a long series pays: the rules of the preserved-thinking
prefix check (docs: platform.claude.com build-with-claude/preserved-thinking/prefix-checks and
fix-bound-to-a-different-conversation), prompt caching on each wire (Anthropic build-with-claude/
prompt-caching, OpenRouter features/prompt-caching, OpenAI guides/prompt-caching), the model
profiles' input caps (OpenAI docs/models/gpt-5) and the configuration stop for a refusal every
later trial would repeat."""

from __future__ import annotations

import json

import msgspec
import pytest
from roboswe.protocol.participant import ImagePart, OpaquePart, ToolResultPart, Turn, result_turn

from roboswe.context.policy import window_for
from roboswe.providers import ProviderConfig, create_participant, profile_lines

from .fakes import REPLY, FakeProvider, Reply
from .rules import error_body
from .test_adapters import IMAGE, KEY_ENV, OPENING, PART, config, request
from .test_context import ExactCounter, exchange

replace = msgspec.structs.replace
BOUND = "claude-sonnet-5-5"  # a model with the prefix check (configs/models.toml [A1])


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "fake-key")


async def test_a_bound_to_a_different_conversation_refusal_is_repaired_once_with_drop_block():
    """A rewrite the policy did not undo (here a turn restored without the digest of its prefix, and an
    edited opening) makes the service refuse the thinking; the adapter sends drop_block with its beta
    header from then on in that series, and the refused attempt stays in the evidence, named."""
    with FakeProvider("anthropic") as fake:
        p = create_participant(config(fake, model=BOUND, reasoning={"effort": "high"}))
        fake.queue(REPLY["anthropic"](tool=("list_files", {})))
        d1 = await p.decide(request())
        restored = Turn(id=d1.turn.id, role="assistant", parts=[x for x in d1.turn.parts
                                                                if not (isinstance(x, OpaquePart) and x.kind == "prefix")],
                        provider="anthropic", native=d1.turn.native, trial=1)
        edited = Turn(id="u0", role="user", trial=1, parts=[*OPENING.parts[:1], PART, *OPENING.parts[:1]])
        rewritten = request(restored, result_turn(d1, id="r1", text="ok"))
        rewritten = msgspec.structs.replace(rewritten, conversation=[edited, *rewritten.conversation[1:]])
        fake.queue(REPLY["anthropic"](tool=("finish", {})), REPLY["anthropic"](tool=("finish", {})))
        d2 = await p.decide(rewritten)
        d3 = await p.decide(rewritten)  # the next request of the series carries it too: the API keeps no setting
        await p.aclose()
    assert [a.outcome for a in d2.attempts] == ["bound_thinking_refused", "ok"] and [a.number for a in d2.attempts] == [1, 2]
    assert "bound to a different conversation" in d2.attempts[0].response.decode()
    assert [a.outcome for a in d3.attempts] == ["ok"]
    for seen in fake.generations()[2:]:
        assert seen.json()["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
        assert "thinking-binding-controls-2026-08-01" in seen.headers["anthropic-beta"]


def _bound_turn(n: int) -> Turn:
    blocks = [{"type": "thinking", "thinking": "plan", "signature": "c2ln"},
              {"type": "tool_use", "id": f"c{n}", "name": "exec", "input": {"path": "x.py"}}]
    call, _ = exchange(n, 10)
    return Turn(id=call.id, role="assistant", trial=1, provider="anthropic", native=json.dumps(blocks).encode(),
                parts=[OpaquePart(provider="anthropic", kind="thinking", data=json.dumps(blocks[0]).encode()),
                       *call.parts])


async def test_images_left_out_remove_the_retained_thinking_and_say_so():
    """Images replaced by placeholders change the prefix of every later thinking block: for a model with
    the prefix check the retained turns lose their thinking once, for good, with a record of what and why."""
    cfg = ProviderConfig(kind="anthropic", model=BOUND, max_images_per_request=4, context_window=200_000)
    w = window_for(cfg, ExactCounter(), "s1")
    images = {}
    for n in range(6):
        w.append(_bound_turn(n))
        part = ImagePart(digest=f"{n:064x}", camera="agentview", media_type="image/png", width=8, height=8)
        images[part.digest] = IMAGE
        w.append(Turn(id=f"r{n}", role="user", trial=1, parts=[ToolResultPart(call_id=f"c{n}", text="ok", images=[part])]),
                 {part.digest: IMAGE})
        prepared = await w.prepare("system", 1)
        if prepared.count.thinking_removed:
            break
    record = prepared.count
    assert record.rewrite.startswith("images of") and record.thinking_removed == [f"a{i}" for i in range(n + 1)]
    sent = [t for t in prepared.request.conversation if t.role == "assistant"]
    assert not any(isinstance(x, OpaquePart) and x.kind == "thinking" for t in sent for x in t.parts)
    assert all(b"thinking" not in t.native for t in sent)
    assert any(isinstance(x, OpaquePart) and x.kind == "thinking" for t in w.archive for x in t.parts)  # archive intact
    assert record.method.endswith(":whole_request")


def test_the_gpt5_input_cap_bounds_the_budget_and_doctor_prints_the_profile():
    cfg = ProviderConfig(kind="openai", model="gpt-5-2025-08-07", context_window=400_000, max_output_tokens=32_000)
    w = window_for(cfg, ExactCounter())
    assert w.budget == 272_000 - 4096 < 400_000 - 32_000 - 4096  # a request in between would be refused
    lines = profile_lines(cfg)
    assert '[openai."gpt-5"]' in lines[0] and "272,000" in "\n".join(lines)
    unknown = profile_lines(ProviderConfig(kind="anthropic", model="claude-unheard-of-9"))
    assert "warning" in unknown[-1] and "conservative default" in unknown[-1]


@pytest.mark.parametrize("cache", [True, False])
async def test_caching_is_on_by_default_on_every_wire_that_offers_it(cache):
    bodies = {}
    for wire, model in (("anthropic", "claude-opus-4-8"), ("openai", "gpt-5-2025-08-07"),
                        ("openrouter", "anthropic/claude-sonnet-4.5")):
        with FakeProvider(wire) as fake:
            p = create_participant(config(fake, model=model, cache=cache))
            fake.queue(REPLY[wire](tool=("list_files", {})), REPLY[wire](tool=("finish", {})))
            req = replace(request(), series="series-1")
            d = await p.decide(req)
            await p.decide(replace(request(d.turn, result_turn(d, id="r1", text="ok")), series="series-1"))
            await p.aclose()
            bodies[wire] = [g.json() for g in fake.generations()]
            assert fake.rejected == []
    anthropic, openai, openrouter = bodies["anthropic"], bodies["openai"], bodies["openrouter"]
    assert all((b.get("cache_control") == {"type": "ephemeral"}) == cache for b in anthropic)  # automatic caching
    keys = {b.get("prompt_cache_key") for b in openai}
    assert (len(keys) == 1 and None not in keys and "series-1" not in next(iter(keys))) if cache else keys == {None}
    for b in openrouter:
        marked = [m for m in b["messages"] if isinstance(m["content"], list)
                  and any("cache_control" in c for c in m["content"])]
        assert (marked == [b["messages"][0], b["messages"][-1]]) == cache and (marked == []) != cache
        assert "usage" not in b  # the deprecated usage.include is not sent


async def test_a_400_that_repeats_in_the_next_trial_stops_the_run_as_a_configuration_cause():
    refusal = Reply(status=400, body=error_body("anthropic", "messages.3.content.0: tool_use ids were found without "
                                                             "tool_result blocks immediately after: toolu_0123456789"))
    with FakeProvider("anthropic") as fake:
        p = create_participant(config(fake, model="claude-opus-4-8"))
        fake.queue(refusal)
        with pytest.raises(Exception) as first:
            await p.decide(replace(request(), series="s1", trial=1))
        fake.queue(Reply(status=400, body=refusal.body.replace(b"0123456789", b"9876543210")))
        with pytest.raises(Exception) as again:
            await p.decide(replace(request(), series="s1", trial=2))
        await p.aclose()
    assert first.value.reason == "provider"
    assert again.value.reason == "configuration" and "trial 1 of series s1" in again.value.detail


async def test_streamed_usage_keeps_cache_writes_and_reads_and_openrouter_reports_its_cost():
    """A request streamed for a large max_tokens is billed as the assembled stream says: the report reads
    cache writes and reads from it (records/usage.py), as from a plain response."""
    from roboswe.records.usage import call_usage

    with FakeProvider("anthropic", metered=True) as fake:
        p = create_participant(config(fake, model="claude-opus-4-8", max_output_tokens=32_000))
        fake.queue(REPLY["anthropic"](tool=("list_files", {})), REPLY["anthropic"](tool=("finish", {})))
        big = replace(request(), system="You control a robot by writing Python. " * 200)
        d1 = await p.decide(big)
        d2 = await p.decide(replace(big, conversation=[*big.conversation, d1.turn, result_turn(d1, id="r1", text="ok")]))
        await p.aclose()
    assert all(g.json().get("stream") for g in fake.generations())
    first, second = (call_usage("anthropic", d.attempts[-1].response, {}) for d in (d1, d2))
    assert first.cache_write > 0 and first.cached_input == 0
    assert second.cached_input == first.cache_write and second.cache_write > 0
    assert d2.usage.cached_input_tokens == second.cached_input and d2.usage.input_tokens == second.input
    routed = json.dumps({"usage": {"prompt_tokens": 1200, "completion_tokens": 80, "cost": 0.0042,
                                   "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 150}}})
    said = call_usage("openrouter", routed.encode(), {})
    assert (said.reported_cost, said.cached_input, said.cache_write) == (0.0042, 1000, 150)
    refused = json.dumps({"content": [], "stop_reason": "refusal", "usage": {"input_tokens": 900, "output_tokens": 3}})
    assert call_usage("anthropic", refused.encode(), {}).stops == {"refusal": 1}  # counted per series in the report
    assert call_usage("anthropic", json.dumps({"stop_reason": "tool_use", "usage": {}}).encode(), {}).stops == {}


async def _routed_claude_series(fake: FakeProvider, *, remove_thinking: bool) -> list:
    """Decisions of Claude with preserved thinking behind OpenRouter while older images become placeholders
    (4 images a request); the context window removes retained thinking after the rewrite, or (the control)
    does not. Returns the count records."""
    cfg = config(fake, model="anthropic/claude-sonnet-5.5", max_images_per_request=4, context_window=200_000,
                 reasoning={"effort": "high"})
    p = create_participant(cfg)
    w = window_for(cfg, p.count_tokens, "s1")
    w.bound_thinking = remove_thinking
    w.append(replace(OPENING, pinned=True), {PART.digest: IMAGE})
    records = []
    try:
        for n in range(6):
            fake.queue(REPLY["openrouter"](tool=("list_files", {})))
            prepared = await w.prepare("You control a robot by writing Python.", 1)
            records.append(prepared.count)
            d = await p.decide(prepared.request)
            w.append(d.turn)
            part = ImagePart(digest=f"{n + 1:064x}", camera="agentview", media_type="image/png", width=8, height=8)
            w.append(result_turn(d, id=f"r{n}", text="ok", images=[part]), {part.digest: IMAGE})
    finally:
        await p.aclose()
    return records


async def test_claude_behind_openrouter_loses_retained_reasoning_after_a_rewrite_as_on_anthropic():
    """OpenRouter sends reasoning_details upstream as the thinking blocks they came from, so a Claude model with
    the prefix check refuses them after images became placeholders; the context window removes them from the
    retained turns (profile looked up under the dotted slug), and the strict fake refuses the control run."""
    with FakeProvider("openrouter") as fake:
        records = await _routed_claude_series(fake, remove_thinking=True)
        assert fake.rejected == []
    rewritten = [r for r in records if r.thinking_removed]
    assert rewritten and rewritten[0].rewrite.startswith("images of")
    later = [m for m in json.loads(fake.generations()[-1].body)["messages"] if m["role"] == "assistant"]
    assert not later[0].get("reasoning_details") and later[-1]["reasoning_details"]  # retained lost it; the newest has it
    with FakeProvider("openrouter") as control:
        with pytest.raises(Exception, match="bound to a different conversation"):
            await _routed_claude_series(control, remove_thinking=False)
