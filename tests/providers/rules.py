"""The documented request rules each loopback fake enforces, with each service's error shape.

A fake checks every request against these rules before it answers, so an adapter that sends
a history the real service would refuse fails the suite the way it would fail in a run: with
the provider's 400 and its message. Each rule names the documentation it comes from (the
README's providers section lists them). `Memory` is what the fake produced earlier (thinking
blocks, reasoning items, thought signatures, reasoning_details), so it can check that they
come back unchanged, as the services do with their signatures.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any


class Broken(Exception):
    """A request that breaks a documented rule; `message` is what the service would say."""

    def __init__(self, message: str, param: str = ""):
        super().__init__(message)
        self.message = message
        self.param = param


def error_body(wire: str, message: str, param: str = "", code: str | None = None) -> bytes:
    """The service's own 400 body for an invalid request."""
    match wire:
        case "anthropic":
            body: dict[str, Any] = {"type": "error", "error": {"type": "invalid_request_error", "message": message},
                                    "request_id": "req_fake"}
        case "openai":
            body = {"error": {"message": message, "type": "invalid_request_error", "param": param or None, "code": code}}
        case "google":
            body = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
        case _:
            body = {"error": {"code": 400, "message": message, "metadata": {"provider_name": "fake"}}}
    return json.dumps(body).encode()


@dataclass
class Memory:
    """What a fake produced, keyed so a replay can be checked against it."""

    anthropic_turns: dict[str, list[Any]] = field(default_factory=dict)  # tool_use id -> original content
    anthropic_prefix: dict[str, str] = field(default_factory=dict)  # tool_use id -> digest of the producing request
    openai_reasoning: dict[str, str] = field(default_factory=dict)  # function_call item id -> reasoning item id
    google_signatures: dict[str, str] = field(default_factory=dict)  # function call key -> thoughtSignature
    openrouter_details: dict[str, Any] = field(default_factory=dict)  # tool call id -> reasoning_details
    openrouter_prefix: dict[str, str] = field(default_factory=dict)  # tool call id -> digest of the producing request

    def learn(self, wire: str, reply: bytes, request: dict[str, Any] | None = None) -> None:
        """Remember the items of a 200 generation reply the fake is about to send (and, for
        Anthropic, the conversation it answers, to which its thinking is bound)."""
        try:
            data = json.loads(reply)
        except (ValueError, RecursionError):  # malformed, or nested deeper than Python's json reads: nothing to keep
            return
        if isinstance(data, dict):
            try:
                self._learn(wire, data, request)
            except (AttributeError, TypeError, KeyError):  # a reply of the wrong shape (a test of it): nothing to keep
                pass

    def _learn(self, wire: str, data: dict[str, Any], request: dict[str, Any] | None) -> None:
        if wire == "anthropic":
            content = data.get("content") or []
            prefix = _conversation_digests(request)[-1] if request else ""
            for block in content:
                if block.get("type") == "tool_use":
                    self.anthropic_turns[block["id"]] = content
                    self.anthropic_prefix[block["id"]] = prefix
        elif wire == "openai":
            reasoning = ""
            for item in data.get("output") or []:
                if item.get("type") == "reasoning":
                    reasoning = item.get("id", "")
                elif item.get("type") == "function_call" and reasoning and item.get("id"):
                    self.openai_reasoning[item["id"]] = reasoning
        elif wire == "google":
            for cand in data.get("candidates") or []:
                for part in (cand.get("content") or {}).get("parts") or []:
                    if "functionCall" in part and part.get("thoughtSignature"):
                        self.google_signatures[_call_key(part["functionCall"])] = part["thoughtSignature"]
        elif wire == "openrouter":
            prefix = _chat_digests(request)[-1] if request else ""
            for choice in data.get("choices") or []:
                message = choice.get("message") or {}
                for call in message.get("tool_calls") or []:
                    if message.get("reasoning_details"):
                        self.openrouter_details[call["id"]] = message["reasoning_details"]
                        self.openrouter_prefix[call["id"]] = prefix


def _call_key(call: dict[str, Any]) -> str:
    return call.get("id") or f"{call.get('name')}:{json.dumps(call.get('args') or {}, sort_keys=True)}"


# --------------------------------------------------------------------------- Anthropic Messages

# Models that take only adaptive thinking (docs: build-with-claude/adaptive-thinking): Opus 4.7 and
# later, Mythos, Fable and the Claude 5 family. Models before 4.6 take only the manual form.
_ADAPTIVE_ONLY = re.compile(r"opus-4-[7-9]|mythos|fable|claude-(opus|sonnet|haiku)-5")
_MANUAL_ONLY = re.compile(r"claude-(3|opus-4-[015]|sonnet-4-[05]|haiku-4-5|opus-4-2025|sonnet-4-2025)")
# Models with preserved thinking, whose thinking blocks get the prefix check (docs: build-with-claude/
# preserved-thinking/prefix-checks, supportedModels). A block sent back after system, tools or an earlier
# message changed is refused with the documented 400 (fix-bound-to-a-different-conversation), unless the
# request sets thinking.block_binding.prefix_mismatch_behavior = "drop_block" with the beta header below,
# when the stale block is dropped instead.
# (OpenRouter's slugs spell the version with a dot: anthropic/claude-sonnet-5.5.)
_BINDS_THINKING = re.compile(r"claude-(fable-5[-.][12]|mythos-5[-.][12]|opus-5[-.]5|sonnet-5[-.]5|haiku-5[-.]5)")
BINDING_BETA = "thinking-binding-controls-2026-08-01"
SDK_NONSTREAMING_TOKENS = 21_333  # 60 min * max_tokens / 128,000 must stay under 10 min (SDK check)


def check_anthropic(body: dict[str, Any], memory: Memory, *, count: bool, max_images: int,
                    headers: dict[str, str] | None = None) -> None:
    """Messages API request rules (docs: api/messages, build-with-claude/tool-use,
    extended-thinking, adaptive-thinking, vision, preserved-thinking/prefix-checks, and the Python
    SDK's long-request check)."""
    model = str(body.get("model", ""))
    thinking = body.get("thinking") or {}
    kind = thinking.get("type")
    dropping = (thinking.get("block_binding") or {}).get("prefix_mismatch_behavior") == "drop_block"
    if dropping and BINDING_BETA not in (headers or {}).get("anthropic-beta", ""):
        raise Broken("thinking.block_binding: this setting requires the `thinking-binding-controls-2026-08-01` value "
                     "in the `anthropic-beta` header.")
    if kind == "enabled" and _ADAPTIVE_ONLY.search(model):
        raise Broken(f"thinking.type.enabled is not supported for this model ({model}). Use thinking.type.adaptive "
                     "and output_config.effort to control thinking behavior.")
    if kind == "adaptive" and _MANUAL_ONLY.search(model):
        raise Broken(f"thinking.type.adaptive is not supported for this model ({model}); use thinking.type.enabled "
                     "with budget_tokens.")
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            raise Broken("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if not count and budget >= int(body.get("max_tokens") or 0):
            raise Broken("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation "
                         "at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
    if not count and not body.get("stream") and int(body.get("max_tokens") or 0) > SDK_NONSTREAMING_TOKENS:
        raise Broken("Streaming is required for operations that may take longer than 10 minutes.")
    messages = body.get("messages") or []
    if not messages:
        raise Broken("messages: at least one message is required")
    if messages[0].get("role") != "user":
        raise Broken("messages: first message must use the \"user\" role")
    images = 0
    binds = bool(_BINDS_THINKING.search(model))
    prefixes = _conversation_digests(body) if binds else []
    for i, m in enumerate(messages):
        content = m.get("content")
        last = i == len(messages) - 1
        if not content and not (last and m.get("role") == "assistant"):
            raise Broken(f"messages.{i}: all messages must have non-empty content except for the optional final "
                         "assistant message")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for j, b in enumerate(blocks):
            if b.get("type") == "text" and not b.get("text"):
                raise Broken(f"messages.{i}.content.{j}.text: text content blocks must be non-empty")
            if b.get("type") == "image":
                images += 1
            for inner in b.get("content") or [] if b.get("type") == "tool_result" else []:
                if isinstance(inner, dict) and inner.get("type") == "image":
                    images += 1
        uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            prev = messages[i - 1] if i else {}
            prev_uses = {b.get("id") for b in prev.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"}
            stray = [r["tool_use_id"] for r in results if r.get("tool_use_id") not in prev_uses]
            if stray:
                raise Broken(f"messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                             f"{stray[0]}. Each `tool_result` block must have a corresponding `tool_use` block in the "
                             "previous message.")
            if any(b.get("type") != "tool_result" for b in blocks[: len(results)]):
                raise Broken(f"messages.{i}: `tool_result` blocks must come first in the user message that answers "
                             "`tool_use` blocks")
        if uses:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            answered = {b.get("tool_use_id") for b in (nxt or {}).get("content") or []
                        if isinstance(b, dict) and b.get("type") == "tool_result"}
            missing = [u for u in uses if u not in answered]
            if missing:
                raise Broken(f"messages.{i + 1 if nxt else i}: `tool_use` ids were found without `tool_result` blocks "
                             f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                             "`tool_result` block in the next message.")
        if m.get("role") == "assistant" and binds and _prefix_changed(blocks, memory, prefixes[i]):
            if any(b.get("type") in ("thinking", "redacted_thinking") for b in blocks) and not dropping:
                raise Broken(bound_refusal(i))
            continue  # without its thinking (or with drop_block, which drops it) the turn is taken as it is
        if m.get("role") == "assistant" and kind in ("enabled", "adaptive"):
            _check_thinking_replay(i, blocks, memory, final=_is_final_tool_loop_turn(messages, i), manual=kind == "enabled")
    if images > max_images:
        raise Broken(f"messages: too many images in this request: {images} > {max_images} (at most {max_images} "
                     "images per request for this model)")


def unmarked(value: Any) -> Any:
    """The value without cache_control markers: they mark a cache breakpoint and are no part of the content,
    so neither a cached prefix nor a thinking block's prefix changes when a marker moves."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def _digests(head: Any, messages: list[Any]) -> list[str]:
    h = hashlib.sha256(json.dumps(unmarked(head), sort_keys=True).encode()).hexdigest()
    out = [h]
    for m in messages:
        h = hashlib.sha256((h + json.dumps(unmarked(m), sort_keys=True)).encode()).hexdigest()
        out.append(h)
    return out


def _conversation_digests(body: dict[str, Any]) -> list[str]:
    """digests[i] names the conversation before message i: system, tools and messages[:i]."""
    return _digests([body.get("system"), body.get("tools")], body.get("messages") or [])


def _chat_digests(body: dict[str, Any]) -> list[str]:
    """The same for a chat-completions body, where the system text is messages[0]."""
    return _digests(body.get("tools"), body.get("messages") or [])


def bound_refusal(i: int) -> str:
    """The documented 400 for a thinking block sent after a changed prefix (fix-bound-to-a-different-conversation)."""
    return (f"messages.{i}.content.0: Invalid `signature` in `thinking` block. The block is bound to a different "
            "conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\".")


def _prefix_changed(blocks: list[Any], memory: Memory, prefix: str) -> bool:
    ids = [b["id"] for b in blocks if b.get("type") == "tool_use" and b["id"] in memory.anthropic_prefix]
    return bool(ids) and memory.anthropic_prefix[ids[0]] != prefix


def _is_final_tool_loop_turn(messages: list[dict[str, Any]], i: int) -> bool:
    # The last assistant message, answered by the tool results that end the request.
    return i == len(messages) - 2 and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in messages[-1].get("content") or [])


def _check_thinking_replay(i: int, blocks: list[Any], memory: Memory, *, final: bool, manual: bool) -> None:
    uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    original = next((memory.anthropic_turns[u] for u in uses if u in memory.anthropic_turns), None)
    thinking = [b for b in blocks if b.get("type") in ("thinking", "redacted_thinking")]
    if original is not None:
        produced = [b for b in original if b.get("type") in ("thinking", "redacted_thinking")]
        if thinking and thinking != produced:
            raise Broken(f"messages.{i}.content: thinking blocks cannot be modified. These blocks must remain as "
                         "they were in the original response.")
        if final and produced and blocks[: len(produced)] != produced:
            raise Broken(f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                         f"`{blocks[0].get('type') if blocks else 'nothing'}`. When `thinking` is enabled, a final "
                         "`assistant` message must start with a thinking block (preceeding the lastmost set of "
                         "`tool_use` and `tool_result` blocks).")
    if final and manual and uses and (not blocks or blocks[0].get("type") not in ("thinking", "redacted_thinking")):
        raise Broken(f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                     f"`{blocks[0].get('type') if blocks else 'nothing'}`. When `thinking` is enabled, a final "
                     "`assistant` message must start with a thinking block.")


# --------------------------------------------------------------------------- OpenAI Responses


def check_openai(body: dict[str, Any], memory: Memory, *, count: bool, max_images: int,
                 headers: dict[str, str] | None = None) -> None:
    """Responses API input rules (docs: api-reference/responses, guides/function-calling,
    guides/reasoning#keeping-reasoning-items-in-context, guides/images-vision)."""
    items = body.get("input") or []
    if isinstance(items, str):
        return
    store = body.get("store", True)
    include = body.get("include") or []
    ids: set[str] = set()
    outputs = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
    seen_calls: set[str] = set()
    earlier: set[str] = set()  # reasoning item ids so far
    images = 0
    for n, item in enumerate(items):
        kind = item.get("type")
        if item.get("id"):
            if item["id"] in ids:
                raise Broken(f"Duplicate item found with id {item['id']}. Remove duplicate items from your input "
                             "and try again.", f"input[{n}]")
            ids.add(item["id"])
        if kind == "reasoning":
            earlier.add(item.get("id", ""))
            following = items[n + 1] if n + 1 < len(items) else None
            if following is None or following.get("type") not in ("function_call", "message") and following.get("role") != "assistant":
                raise Broken(f"Item '{item.get('id')}' of type 'reasoning' was provided without its required "
                             "following item.", "input")
            if store is False and not item.get("encrypted_content"):
                raise Broken(f"Item with id '{item.get('id')}' not found. Items are not persisted when `store` is "
                             "set to false. Try again with `store` set to true, or remove this item from your input.",
                             "input")
            if store is False and "reasoning.encrypted_content" not in include:
                raise Broken("Reasoning items were provided with encrypted content, but `include` does not contain "
                             "'reasoning.encrypted_content'; with `store` false the reasoning cannot be continued.",
                             "include")
        elif kind == "function_call":
            if item.get("call_id") not in outputs:
                raise Broken(f"No tool output found for function call {item.get('call_id')}.", "input")
            seen_calls.add(item.get("call_id"))
            # A function call sent back with the item id it was produced under needs the reasoning
            # item produced before it; one without an id is a plain client-side call.
            wanted = memory.openai_reasoning.get(item.get("id") or "")
            if wanted and store is False and wanted not in earlier:
                raise Broken(f"Item '{item.get('id') or item.get('call_id')}' of type 'function_call' was provided "
                             f"without its required 'reasoning' item: '{wanted}'.", "input")
        elif kind == "function_call_output":
            if item.get("call_id") not in seen_calls:
                raise Broken(f"No tool call found for function call output with call_id {item.get('call_id')}.",
                             "input")
            out = item.get("output")
            images += sum(1 for o in out if o.get("type") == "input_image") if isinstance(out, list) else 0
        content = item.get("content")
        if isinstance(content, list):
            images += sum(1 for c in content if isinstance(c, dict) and c.get("type") == "input_image")
            if not content:
                raise Broken(f"Invalid 'input[{n}].content': empty array.", f"input[{n}].content")
    if images > max_images:
        raise Broken(f"Too many images in request: {images}. The maximum is {max_images}.", "input")


# --------------------------------------------------------------------------- Google genai


def check_google(body: dict[str, Any], memory: Memory, *, count: bool, max_images: int,
                 headers: dict[str, str] | None = None) -> None:
    """generateContent / countTokens content rules (docs: api/generate-content, function-calling,
    thought-signatures, image-understanding)."""
    contents = body.get("contents")
    if contents is None and "generateContentRequest" in body:
        contents = body["generateContentRequest"].get("contents")
    contents = contents or []
    if not count and not contents:
        raise Broken("* GenerateContentRequest.contents: contents is not specified")
    images = 0
    for n, content in enumerate(contents):
        parts = content.get("parts") or []
        if not parts:
            raise Broken(f"* GenerateContentRequest.contents[{n}].parts: contents.parts must not be empty.")
        if content.get("role") not in ("user", "model", None):
            raise Broken(f"Please use a valid role: user, model. (contents[{n}].role = {content.get('role')!r})")
        images += sum(1 for p in parts if "inlineData" in p)
        calls = [p for p in parts if "functionCall" in p]
        responses = [p for p in parts if "functionResponse" in p]
        if calls:
            nxt = contents[n + 1] if n + 1 < len(contents) else None
            answered = [p for p in (nxt or {}).get("parts") or [] if "functionResponse" in p]
            if nxt is not None and len(answered) != len(calls):
                raise Broken("Please ensure that the number of function response parts is equal to the number of "
                             "function call parts of the function call turn.")
            for p in calls:
                wanted = memory.google_signatures.get(_call_key(p["functionCall"]))
                if wanted and p.get("thoughtSignature") != wanted:
                    raise Broken("Function call is missing a thought_signature in functionCall parts. This is "
                                 "required for tools to work correctly, and missing thought_signature may lead to "
                                 f"degraded model performance. Additional data, function call "
                                 f"`default_api:{p['functionCall'].get('name')}` , position {n + 1}.")
        if responses:
            prev = contents[n - 1] if n else {}
            prev_calls = [p for p in prev.get("parts") or [] if "functionCall" in p]
            if len(prev_calls) != len(responses):
                raise Broken("Please ensure that function response turn comes immediately after a function call turn"
                             " and that the number of function response parts is equal to the number of function "
                             "call parts of the function call turn.")
    if images > max_images:
        raise Broken(f"The request contains {images} images; at most {max_images} images are allowed per request.")


# --------------------------------------------------------------------------- OpenRouter chat


def check_openrouter(body: dict[str, Any], memory: Memory, *, count: bool, max_images: int,
                     headers: dict[str, str] | None = None) -> None:
    """Chat completions rules (docs: openrouter.ai/docs api-reference, tool-calling,
    use-cases/reasoning-tokens#preserving-reasoning-blocks)."""
    messages = body.get("messages") or []
    if not messages:
        raise Broken("messages: at least one message is required")
    images = 0
    pending: list[str] = []
    # A Claude model with preserved thinking behind the router: its reasoning_details go upstream as the
    # thinking blocks they came from, under Anthropic's prefix check (docs: openrouter.ai use-cases/
    # reasoning-tokens, preserving reasoning blocks; Anthropic preserved-thinking/prefix-checks), and the
    # upstream's 400 comes back in OpenRouter's error body.
    model = str(body.get("model", ""))
    prefixes = _chat_digests(body) if model.startswith("anthropic/") and _BINDS_THINKING.search(model) else []
    for n, m in enumerate(messages):
        role = m.get("role")
        if pending and role != "tool":
            raise Broken("An assistant message with 'tool_calls' must be followed by tool messages responding to "
                         f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                         f"{', '.join(pending)}")
        if role == "tool":
            if m.get("tool_call_id") not in pending:
                raise Broken(f"Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                             f"message with 'tool_calls' (messages[{n}].tool_call_id = {m.get('tool_call_id')!r}).")
            pending.remove(m.get("tool_call_id"))
        if role == "assistant":
            calls = [c["id"] for c in m.get("tool_calls") or []]
            pending = list(calls)
            produced = next((memory.openrouter_prefix[c] for c in calls if c in memory.openrouter_prefix), None)
            moved = bool(prefixes) and produced not in (None, prefixes[n])  # the conversation before it changed
            if moved and m.get("reasoning_details"):
                raise Broken(bound_refusal(n))
            for c in calls if not moved else []:  # after a changed prefix the turn goes without its reasoning
                wanted = memory.openrouter_details.get(c)
                if wanted is not None and m.get("reasoning_details") != wanted:
                    raise Broken(f"messages[{n}]: the reasoning_details of an assistant message with tool calls must "
                                 "be passed back unmodified when continuing a tool-calling turn with reasoning.")
            if not m.get("content") and not calls:
                raise Broken(f"messages[{n}]: an assistant message needs content or tool_calls")
        content = m.get("content")
        if isinstance(content, list):
            images += sum(1 for c in content if isinstance(c, dict) and c.get("type") == "image_url")
    if pending:
        raise Broken("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                     f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}")
    if images > max_images:
        raise Broken(f"Too many images: {images} > {max_images} per request for the routed model.")


# --------------------------------------------------------------------------- input caps

# The most input tokens a request may carry, by model, as each service documents it, independent of the
# product's own table (configs/models.toml) so the two can disagree and a test notice: Anthropic
# (about-claude/models/overview: a 200,000-token window for the Claude models the tests use), OpenAI
# (docs/models/gpt-5: 400,000-token window of which at most 272,000 input; gpt-5.1, gpt-5.2 the same).
INPUT_CAPS: dict[str, list[tuple[re.Pattern[str], int]]] = {
    "anthropic": [(re.compile(r"claude"), 200_000)],
    "openai": [(re.compile(r"^gpt-5(\.[12])?($|-)"), 272_000)],
}


def input_cap(wire: str, model: str) -> int | None:
    return next((cap for pattern, cap in INPUT_CAPS.get(wire, []) if pattern.search(model)), None)


def over_input_cap(wire: str, tokens: int, cap: int) -> str | None:
    """The service's refusal of a request with ``tokens`` input tokens over its model's ``cap``, or None.
    Anthropic: invalid_request_error "prompt is too long: N tokens > M maximum"; OpenAI: invalid_request_error
    code context_length_exceeded, param input (the messages as the services send them)."""
    if tokens <= cap:
        return None
    if wire == "anthropic":
        return f"prompt is too long: {tokens} tokens > {cap} maximum"
    return "Your input exceeds the context window of this model. Please adjust your input and try again."


# --------------------------------------------------------------------------- what the service puts in a reply

# Opus 4.7 and later omit the thinking text unless the request asks for it (about-claude/models/
# whats-new-claude-4-7, "thinking content omitted by default": thinking.display defaults to "omitted",
# the block keeps its signature); the later adaptive-only families are taken to do the same.
_OMITS_THINKING = _ADAPTIVE_ONLY


def shape_anthropic_reply(request: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    """The reply as the service would send it for this request: thinking text omitted by default on the
    models above, kept with display = "summarized"; ``reply`` itself when that changes nothing."""
    thinking = request.get("thinking") or {}
    omitted = any(isinstance(b, dict) and b.get("type") == "thinking" and b.get("thinking")
                  for b in reply.get("content") or [])
    if not omitted or not _OMITS_THINKING.search(str(request.get("model", ""))) or thinking.get("display") == "summarized":
        return reply
    content = [{**b, "thinking": ""} if isinstance(b, dict) and b.get("type") == "thinking" else b
               for b in reply.get("content") or []]
    return {**reply, "content": content}


CHECKS = {"anthropic": check_anthropic, "openai": check_openai, "google": check_google, "openrouter": check_openrouter}
IMAGE_LIMITS = {"anthropic": 100, "openai": 500, "google": 3600, "openrouter": 100}
# Request size limits (docs: Anthropic api/overview "request size limits" 32 MB, answered 413
# request_too_large; Gemini image-understanding: 20 MB total request with inline data; OpenAI
# images-vision: 50 MB payload).
REQUEST_BYTES = {"anthropic": 32_000_000, "google": 20_000_000, "openai": 50_000_000, "openrouter": 20_000_000}


def too_large(wire: str, size: int) -> tuple[int, bytes] | None:
    """The service's answer to a request body over its size limit, or None."""
    limit = REQUEST_BYTES[wire]
    if size <= limit:
        return None
    if wire == "anthropic":
        body = {"type": "error", "error": {"type": "request_too_large",
                                           "message": f"Request exceeds the maximum allowed number of bytes ({limit})."}}
        return 413, json.dumps(body).encode()
    return 400, error_body(wire, f"Request payload size exceeds the limit: {limit} bytes.")
