"""The strict fakes bite: each documented request rule, broken once through the real SDK,
comes back as the provider's own error (status, error type, message)."""

from __future__ import annotations

import base64
import json

import pytest

from .fakes import (
    REPLY,
    FakeProvider,
    anthropic_reply,
    google_reply,
    openai_reply,
    openrouter_reply,
)

KEY = "fake-key"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32).decode()


def anthropic_client(fake):
    import anthropic

    return anthropic.Anthropic(api_key=KEY, base_url=fake.base_url, max_retries=0)


def openai_client(fake):
    import openai

    return openai.OpenAI(api_key=KEY, base_url=fake.base_url, max_retries=0)


def google_client(fake):
    from google import genai

    return genai.Client(api_key=KEY, http_options=genai.types.HttpOptions(
        base_url=fake.base_url, retry_options=genai.types.HttpRetryOptions(attempts=1)))


def user(text="go"):
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def tool_use(cid="toolu_x", thinking=None):
    content = list(thinking or []) + [{"type": "tool_use", "id": cid, "name": "list_files", "input": {}}]
    return {"role": "assistant", "content": content}


def tool_result(cid="toolu_x"):
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": "ok"}]}


def image_message(n):
    return {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
                                        for _ in range(n)]}


def anthropic_rejects(fake, match, **kw):
    import anthropic

    body = {"model": "claude-sonnet-4-5", "max_tokens": 2048, **kw}
    with pytest.raises(anthropic.BadRequestError, match=match) as err:
        anthropic_client(fake).messages.create(**body)
    assert err.value.status_code == 400 and err.value.body["error"]["type"] == "invalid_request_error"
    assert fake.rejected  # kept for the test that wants to see what was refused


def anthropic_original(fake, **reply):
    """One real answer from the fake (it remembers its thinking blocks), returned as content."""
    fake.queue(anthropic_reply(tool=("list_files", {}), **reply))
    msg = anthropic_client(fake).messages.create(model="claude-sonnet-4-5", max_tokens=4096, messages=[user()],
                                                 thinking={"type": "enabled", "budget_tokens": 2048})
    return json.loads(msg.model_dump_json())["content"]


ANTHROPIC_BROKEN = {
    "tool_use without tool_result after it": (dict(messages=[user(), tool_use(), user("next")]),
                                              "`tool_use` ids were found without `tool_result`"),
    "tool_result without its tool_use": (dict(messages=[user(), tool_result("toolu_nope")]),
                                         "unexpected `tool_use_id`"),
    "a message with empty content": (dict(messages=[user(), {"role": "assistant", "content": []}, user()]),
                                     "must have non-empty content"),
    "an empty text block": (dict(messages=[{"role": "user", "content": [{"type": "text", "text": ""}]}]),
                            "text content blocks must be non-empty"),
    "manual thinking on an adaptive-only model": (
        dict(model="claude-opus-4-7", thinking={"type": "enabled", "budget_tokens": 1024}, messages=[user()]),
        "thinking.type.enabled is not supported"),
    "adaptive thinking on a manual-only model": (dict(thinking={"type": "adaptive"}, messages=[user()]),
                                                 "thinking.type.adaptive is not supported"),
    "budget_tokens not below max_tokens": (dict(thinking={"type": "enabled", "budget_tokens": 2048}, messages=[user()]),
                                           "`max_tokens` must be greater than `thinking.budget_tokens`"),
    "more than 100 images": (dict(messages=[image_message(101)]), "too many images"),
}


@pytest.mark.parametrize("rule", ANTHROPIC_BROKEN)
def test_anthropic_fake_refuses(rule):
    body, match = ANTHROPIC_BROKEN[rule]
    with FakeProvider("anthropic") as fake:
        anthropic_rejects(fake, match, **body)


def test_anthropic_fake_refuses_a_final_tool_loop_turn_without_its_thinking():
    with FakeProvider("anthropic") as fake:
        content = anthropic_original(fake)
        cid = next(b["id"] for b in content if b["type"] == "tool_use")
        without = [b for b in content if b["type"] != "thinking"]
        anthropic_rejects(fake, "must start with a thinking block", thinking={"type": "enabled", "budget_tokens": 1024},
                          messages=[user(), {"role": "assistant", "content": without}, tool_result(cid)])


def test_anthropic_fake_refuses_modified_thinking():
    with FakeProvider("anthropic") as fake:
        content = anthropic_original(fake)
        cid = next(b["id"] for b in content if b["type"] == "tool_use")
        changed = [{**b, "thinking": b["thinking"] + " (edited)"} if b["type"] == "thinking" else b for b in content]
        anthropic_rejects(fake, "thinking blocks cannot be modified", thinking={"type": "enabled", "budget_tokens": 1024},
                          messages=[user(), {"role": "assistant", "content": changed}, tool_result(cid)])
        fake.queue(REPLY["anthropic"](tool=("finish", {})))  # the unmodified history is accepted
        anthropic_client(fake).messages.create(model="claude-sonnet-4-5", max_tokens=2048, messages=[
            user(), {"role": "assistant", "content": content}, tool_result(cid)],
            thinking={"type": "enabled", "budget_tokens": 1024})


def test_anthropic_long_non_streamed_request_is_refused_by_the_sdk_and_the_fake():
    import httpx2

    with FakeProvider("anthropic") as fake:
        with pytest.raises(ValueError, match="Streaming is required"):
            anthropic_client(fake).messages.create(model="claude-sonnet-4-5", max_tokens=64_000, messages=[user()])
        assert fake.seen == []  # the SDK refuses before sending
        r = httpx2.post(fake.base_url + "/v1/messages", json={"model": "m", "max_tokens": 64_000, "messages": [user()]})
        assert r.status_code == 400 and "Streaming is required" in r.json()["error"]["message"]


def openai_rejects(fake, match, items, **kw):
    import openai

    body = {"model": "gpt-fake", "input": items, "store": False, **kw}
    with pytest.raises(openai.BadRequestError, match=match) as err:
        openai_client(fake).responses.create(**body)
    assert err.value.status_code == 400 and err.value.body["type"] == "invalid_request_error"


def call(cid="call_x", fid="fc_x"):
    return {"type": "function_call", "id": fid, "call_id": cid, "name": "list_files", "arguments": "{}"}


def output(cid="call_x"):
    return {"type": "function_call_output", "call_id": cid, "output": "ok"}


def reasoning(rid="rs_x", encrypted=True):
    item = {"type": "reasoning", "id": rid, "summary": []}
    if encrypted:
        item["encrypted_content"] = "gAAAA=="
    return item


ASK = {"role": "user", "content": [{"type": "input_text", "text": "go"}]}
ENC = ["reasoning.encrypted_content"]
OPENAI_BROKEN = {
    "function_call without its output": ([ASK, call()], {}, "No tool output found for function call call_x"),
    "output without its function_call": ([ASK, output()], {}, "No tool call found for function call output"),
    "reasoning without a following item": ([ASK, reasoning()], {"include": ENC}, "without its required following item"),
    "reasoning without encrypted content under store=false": (
        [ASK, reasoning(encrypted=False), call(), output()], {"include": ENC}, "Items are not persisted"),
    "reasoning replayed without include": ([ASK, reasoning(), call(), output()], {}, "reasoning.encrypted_content"),
    "duplicate item ids": ([ASK, reasoning(), call(), output(), reasoning(), call("call_y", "fc_y"), output("call_y")],
                           {"include": ENC}, "Duplicate item found with id rs_x"),
    "more than 500 images": ([{"role": "user", "content": [
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}] * 501}], {}, "Too many images"),
}


@pytest.mark.parametrize("rule", OPENAI_BROKEN)
def test_openai_fake_refuses(rule):
    items, kw, match = OPENAI_BROKEN[rule]
    with FakeProvider("openai") as fake:
        openai_rejects(fake, match, items, **kw)


def test_openai_fake_refuses_a_reasoning_call_replayed_without_its_reasoning_item():
    with FakeProvider("openai") as fake:
        fake.queue(openai_reply(tool=("list_files", {})))
        resp = openai_client(fake).responses.create(model="gpt-fake", input=[ASK], store=False, include=ENC)
        items = [json.loads(i.model_dump_json()) for i in resp.output]
        fc = next(i for i in items if i["type"] == "function_call")
        openai_rejects(fake, "without its required 'reasoning' item", [ASK, fc, output(fc["call_id"])], include=ENC)
        fake.queue(openai_reply(tool=("finish", {})))
        openai_client(fake).responses.create(model="gpt-fake", input=[ASK, *items, output(fc["call_id"])], store=False,
                                             include=ENC)


def google_rejects(fake, match, contents):
    from google.genai import errors

    client = google_client(fake)  # held: a collected client closes its connection pool
    with pytest.raises(errors.ClientError, match=match) as err:
        client.models.generate_content(model="gemini-fake", contents=contents)
    assert err.value.code == 400 and err.value.status == "INVALID_ARGUMENT"


def test_google_fake_refuses_a_content_without_parts():
    with FakeProvider("google") as fake:
        google_rejects(fake, "parts must not be empty", [{"role": "user", "parts": [{"text": "go"}]},
                                                         {"role": "model", "parts": []}])


def test_google_fake_refuses_unpaired_function_responses():
    with FakeProvider("google") as fake:
        google_rejects(fake, "number of function response parts", [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"function_call": {"name": "list_files", "args": {}}}]},
            {"role": "user", "parts": [{"text": "no response part"}]}])


def test_google_fake_refuses_a_function_call_without_its_thought_signature():
    with FakeProvider("google") as fake:
        fake.queue(google_reply(tool=("list_files", {})))
        client = google_client(fake)
        client.models.generate_content(model="gemini-fake", contents="go")
        google_rejects(fake, "missing a thought_signature", [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"function_call": {"name": "list_files", "args": {}}}]},
            {"role": "user", "parts": [{"function_response": {"name": "list_files", "response": {"output": "ok"}}}]}])


def openrouter_rejects(fake, match, messages):
    import openai

    with pytest.raises(openai.BadRequestError, match=match) as err:
        openai_client(fake).chat.completions.create(model="vendor/fake", messages=messages)
    assert err.value.status_code == 400


TOOL_CALL = {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]}


def test_openrouter_fake_refuses_a_tool_call_without_its_tool_message():
    with FakeProvider("openrouter") as fake:
        openrouter_rejects(fake, "did not have response messages: call_a",
                           [{"role": "user", "content": "go"}, TOOL_CALL, {"role": "user", "content": "next"}])


def test_openrouter_fake_refuses_a_tool_message_without_its_call():
    with FakeProvider("openrouter") as fake:
        openrouter_rejects(fake, "must be a response to a preceeding message",
                           [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "x", "content": "ok"}])


def test_openrouter_fake_refuses_reasoning_details_that_were_not_echoed():
    with FakeProvider("openrouter") as fake:
        fake.queue(openrouter_reply(tool=("list_files", {})))
        first = openai_client(fake).chat.completions.create(model="vendor/fake", messages=[{"role": "user", "content": "go"}])
        message = json.loads(first.choices[0].message.model_dump_json())
        cid = message["tool_calls"][0]["id"]
        stripped = {k: v for k, v in message.items() if k not in ("reasoning_details", "reasoning")}
        openrouter_rejects(fake, "reasoning_details", [{"role": "user", "content": "go"}, stripped,
                                                       {"role": "tool", "tool_call_id": cid, "content": "ok"}])


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-sonnet-5-5", "claude-mythos-5-2"])
def test_anthropic_fake_refuses_thinking_sent_back_after_its_conversation_changed(model):
    """Models with preserved thinking check each thinking block's prefix (docs: preserved-thinking/
    prefix-checks); drop_block with its beta header drops the stale block instead (docs: fix-bound-to-a-
    different-conversation), and without the header the setting is refused."""
    import anthropic

    with FakeProvider("anthropic") as fake:
        client = anthropic_client(fake)
        fake.queue(anthropic_reply(tool=("list_files", {})))
        msg = client.messages.create(model=model, max_tokens=2048, messages=[user("first")],
                                     thinking={"type": "adaptive"})
        content = json.loads(msg.model_dump_json())["content"]
        cid = next(b["id"] for b in content if b["type"] == "tool_use")
        edited = [user("first, edited"), {"role": "assistant", "content": content}, tool_result(cid)]
        with pytest.raises(anthropic.BadRequestError, match="The block is bound to a different conversation"):
            client.messages.create(model=model, max_tokens=2048, thinking={"type": "adaptive"}, messages=edited)
        dropping = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
        with pytest.raises(anthropic.BadRequestError, match="thinking-binding-controls-2026-08-01"):
            client.messages.create(model=model, max_tokens=2048, thinking=dropping, messages=edited)
        fake.queue(*[anthropic_reply(tool=("finish", {})) for _ in range(3)])
        client.messages.create(model=model, max_tokens=2048, thinking=dropping, messages=edited,
                               extra_headers={"anthropic-beta": "thinking-binding-controls-2026-08-01"})
        without = [b for b in content if b["type"] != "thinking"]  # the changed conversation, thinking left out
        client.messages.create(model=model, max_tokens=2048, thinking={"type": "adaptive"}, messages=[
            user("first, edited"), {"role": "assistant", "content": without}, tool_result(cid)])
        client.messages.create(model=model, max_tokens=2048, thinking={"type": "adaptive"}, messages=[
            user("first"), {"role": "assistant", "content": content}, tool_result(cid)])  # unchanged: accepted


def test_anthropic_fake_refuses_a_request_over_32_mb():
    import anthropic

    with FakeProvider("anthropic") as fake:
        with pytest.raises(anthropic.APIStatusError, match="maximum allowed number of bytes") as err:
            anthropic_client(fake).messages.create(model="claude-sonnet-4-5", max_tokens=1024,
                                                   messages=[image_message(1), user("x" * 33_000_000)])
        assert err.value.status_code == 413 and err.value.body["error"]["type"] == "request_too_large"


def test_google_fake_refuses_a_request_over_20_mb():
    with FakeProvider("google") as fake:
        google_rejects(fake, "payload size exceeds", [{"role": "user", "parts": [{"text": "x" * 21_000_000}]}])


@pytest.mark.parametrize("wire", ["anthropic", "openai", "google", "openrouter"])
def test_the_fakes_answer_the_online_preflight_model_lookup(wire):
    from roboswe.evaluation.preflight import online_problems
    from roboswe.providers import ProviderConfig

    with FakeProvider(wire) as fake:
        config = ProviderConfig(kind=wire, model="vendor/fake-model" if wire == "openrouter" else "fake-model",
                                api_key_env="FAKE_KEY", base_url=fake.base_url)
        problems, notes = online_problems(config, "test", {"FAKE_KEY": KEY}, timeout_s=5.0)
    assert problems == [] and notes == []


def test_the_fakes_refuse_a_request_over_the_models_input_cap_with_the_services_words():
    """Anthropic: "prompt is too long: N tokens > M maximum"; OpenAI (the GPT-5 family takes at most 272,000
    input tokens of its 400,000 window): context_length_exceeded on `input`. Tokens as the count endpoints count."""
    import anthropic
    import openai

    with FakeProvider("anthropic", max_input_tokens=1000) as fake:
        with pytest.raises(anthropic.BadRequestError, match=r"prompt is too long: \d+ tokens > 1000 maximum"):
            anthropic_client(fake).messages.create(model="claude-sonnet-4-5", max_tokens=1024, messages=[user("x" * 5000)])
        fake.queue(anthropic_reply(text="fine"))
        anthropic_client(fake).messages.create(model="claude-sonnet-4-5", max_tokens=1024, messages=[user("x" * 3000)])
    with FakeProvider("openai") as fake:
        big = "x" * (4 * 280_000)  # about 280,000 tokens: inside the 400k window, over the 272k input cap
        with pytest.raises(openai.BadRequestError, match="exceeds the context window") as err:
            openai_client(fake).responses.create(model="gpt-5-2025-08-07", input=big)
        assert err.value.code == "context_length_exceeded" and err.value.param == "input"
        fake.queue(openai_reply(text="fine"))
        openai_client(fake).responses.create(model="gpt-5.4", input=big)  # a 1M-window model takes it


def test_anthropic_cache_hits_are_found_only_within_20_blocks_of_the_breakpoint():
    """Automatic caching puts the breakpoint on the last block; a prefix written more than 20 block
    boundaries before it is not found (a full write again), one within them is read."""
    with FakeProvider("anthropic", metered=True) as fake:
        client = anthropic_client(fake)
        fake.queue(*[anthropic_reply(text="ok") for _ in range(3)])
        first = [user("x" * 6000)]
        wide = [*first, {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
                {"role": "user", "content": [{"type": "text", "text": f"b{i}"} for i in range(24)]}]  # 25 blocks on
        near = [*wide, {"role": "assistant", "content": [{"type": "text", "text": "c"}]}, user("d")]  # 2 blocks on
        usage = [client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, messages=m,
                                        cache_control={"type": "ephemeral"}).usage for m in (first, wide, near)]
    assert usage[0].cache_read_input_tokens == 0 and usage[0].cache_creation_input_tokens > 1024
    assert usage[1].cache_read_input_tokens == 0  # 25 blocks back: outside the lookback
    assert usage[2].cache_read_input_tokens == usage[1].cache_creation_input_tokens  # within it: read


@pytest.mark.parametrize(("display", "readable"), [(None, False), ("summarized", True)])
def test_opus_4_7_and_later_omit_the_thinking_text_unless_display_asks_for_it(display, readable):
    """Thinking text is omitted by default from Opus 4.7 on (whats-new-claude-4-7); the block keeps its
    signature and goes back as it came."""
    with FakeProvider("anthropic") as fake:
        client = anthropic_client(fake)
        thinking = {"type": "adaptive", **({"display": display} if display else {})}
        fake.queue(anthropic_reply(tool=("list_files", {})), anthropic_reply(tool=("finish", {})))
        msg = client.messages.create(model="claude-opus-4-8", max_tokens=2048, thinking=thinking, messages=[user()])
        content = json.loads(msg.model_dump_json())["content"]
        (block,) = [b for b in content if b["type"] == "thinking"]
        assert bool(block["thinking"]) == readable and block["signature"]
        cid = next(b["id"] for b in content if b["type"] == "tool_use")
        client.messages.create(model="claude-opus-4-8", max_tokens=2048, thinking=thinking,
                               messages=[user(), {"role": "assistant", "content": content}, tool_result(cid)])
        assert fake.rejected == []
