"""Anthropic adapter: the Messages API, tool_use/tool_result, base64 images, thinking.

Thinking and redacted_thinking blocks (with their signatures) are kept byte-exact and
sent back unchanged in the assistant turn, as the API requires when tools and extended
thinking are combined. Counting uses the count_tokens endpoint with the actual request.

Thinking is configured by model (docs: build-with-claude/adaptive-thinking): models that
take adaptive thinking get `thinking={"type": "adaptive"}` with `output_config.effort`
(adaptive thinking interleaves thinking between tool calls by itself); older models get
the manual form `{"type": "enabled", "budget_tokens": N}` with the interleaved-thinking
beta header, so the model thinks at every decision, not only the first of a trial.
Requests the SDK would refuse to send unstreamed (long generations: its 10-minute rule)
are streamed; the event stream is recorded as it came and assembled into the message.

Newer models bind each thinking block to the conversation before it (Opus 5.5, Fable 5.1:
"thinking blocks are tied to the model and conversation that produced them"); a block
sent back after that prefix changed -- a context slide, images left out -- is a 400. For
those models each assistant turn records a digest of the request it answered, and a turn
whose prefix no longer matches is sent back without its thinking blocks (logged), so the
prefix is stable again from there on.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec
import structlog

from roboswe.protocol.participant import (
    Decision,
    DecisionRequest,
    ImagePart,
    OpaquePart,
    ProviderFailure,
    ReasoningPart,
    TextPart,
    TokenCount,
    ToolCallPart,
    ToolResultPart,
    Turn,
    Usage,
)

from ._common import call_arguments, image_b64, merge_roles, native_items, prune_text
from ._config import ProviderConfig
from ._profiles import model_profile
from ._hosted import (
    STOP,
    HostedParticipant,
    Retryable,
    import_sdk,
    new_turn_id,
    read_key,
    renumbered,
    token_count,
)

log = structlog.get_logger()

CONTINUATION = "(Earlier conversation continues.)"
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
# The thinking form, the prefix check and drop_block come from the model's profile (configs/models.toml,
# each line with its documented source), not from its name.
# The escape the prefix-check docs give (build-with-claude/preserved-thinking/fix-bound-to-a-different-
# conversation): thinking.block_binding.prefix_mismatch_behavior = "drop_block" with this beta header.
BINDING_BETA = "thinking-binding-controls-2026-08-01"
DROP_BLOCK = {"prefix_mismatch_behavior": "drop_block"}
BOUND_REFUSAL = "bound to a different conversation"  # the documented 400's words
# Top-level automatic caching (build-with-claude/prompt-caching): the breakpoint goes on the last cacheable
# block and moves forward as the conversation grows, "best for multi-turn conversations".
AUTOMATIC_CACHE = {"type": "ephemeral"}
PREFIX = "prefix"  # OpaquePart kind: digest of the request an assistant turn answered
THINKING_BLOCKS = ("thinking", "redacted_thinking")
EFFORT_BUDGET = {"low": 2048, "medium": 8192, "high": 16_384, "xhigh": 24_576, "max": 32_768}
MIN_BUDGET = 1024


def thinking_settings(config: ProviderConfig) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(thinking, output_config, beta headers) for the config's model and `[provider.reasoning]`;
    raises ValueError naming the setting when the model cannot take what the config asks."""
    r = dict(config.reasoning)
    if not r:
        return {}, {}, []
    model = config.model
    takes = model_profile(config).thinking
    effort = r.pop("effort", None)
    form = r.pop("type", None) or ("enabled" if takes == "manual" else "adaptive")
    display = {"display": r.pop("display")} if "display" in r else {}
    budget = r.pop("budget_tokens", None)
    if r:
        raise ValueError(f"provider anthropic: unknown [provider.reasoning] key(s) {sorted(r)}; expected effort, "
                         "type, budget_tokens or display")
    if form == "adaptive":
        if takes == "manual":
            raise ValueError(f"provider anthropic: model {model} does not take adaptive thinking; set "
                             "[provider.reasoning] budget_tokens (manual thinking) instead of type = \"adaptive\"")
        return {"type": "adaptive", **display}, ({"effort": effort} if effort else {}), []
    if form != "enabled":
        raise ValueError(f"provider anthropic: [provider.reasoning] type {form!r} is not a thinking form roboswe "
                         "uses; expected \"adaptive\" or \"enabled\"")
    if takes == "adaptive":
        raise ValueError(f"provider anthropic: model {model} takes only adaptive thinking (a 400 on every request "
                         "otherwise); remove type = \"enabled\" and budget_tokens and set effort = \"high\"")
    if budget is None:
        budget = min(EFFORT_BUDGET.get(effort or "high", EFFORT_BUDGET["high"]), config.max_output_tokens - MIN_BUDGET)
    if not MIN_BUDGET <= budget < config.max_output_tokens:
        raise ValueError(f"provider anthropic: thinking budget_tokens {budget} must be at least {MIN_BUDGET} and "
                         f"below max_output_tokens {config.max_output_tokens}; raise max_output_tokens or lower it")
    return {"type": "enabled", "budget_tokens": budget, **display}, {}, [INTERLEAVED_THINKING_BETA]


class _Message(msgspec.Struct, kw_only=True):
    id: str = ""
    type: str = ""
    model: str = ""
    content: list[msgspec.Raw] = []
    stop_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


_decoder = msgspec.json.Decoder(_Message)


def _image(request: DecisionRequest, im: ImagePart) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": im.media_type, "data": image_b64(request, im)}}


def tool_params(request: DecisionRequest) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools]


def _chain(previous: str, item: Any) -> str:
    return hashlib.sha256(previous.encode() + json.dumps(item, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def prefix_digests(request: DecisionRequest, out: list[dict[str, Any]]) -> list[str]:
    """digests[i]: the conversation before message i (instructions, tools, messages[:i]);
    digests[-1] covers every message."""
    digests = [_chain("", [request.system, tool_params(request)])]
    for m in out:
        digests.append(_chain(digests[-1], m))
    return digests


def messages(request: DecisionRequest, kind: str, *, bound: bool = False) -> list[dict[str, Any]]:
    """The neutral conversation as Messages API messages (user first, roles alternating).
    With `bound`, an assistant turn whose recorded prefix differs from the one it is sent
    after loses its thinking blocks (the model would refuse them)."""
    out: list[dict[str, Any]] = []
    recorded: dict[int, str] = {}  # id(message) -> prefix digest its turn was produced after
    for turn in request.conversation:
        native = native_items(turn, kind)
        if native is not None and refused(turn):
            continue  # the docs advise against continuing from a refused reply: it is left out of the history
        if native is not None:
            # An empty text block would be refused on the way back; thinking stays as it came.
            content = [b for b in native if b.get("type") != "text" or b.get("text")]
            if content:
                message = {"role": "assistant", "content": content}
                digest = next((p.data.decode() for p in turn.parts if isinstance(p, OpaquePart) and p.kind == PREFIX), "")
                if digest:
                    recorded[id(message)] = digest
                out.append(message)
            continue
        blocks: list[dict[str, Any]] = []
        if turn.role == "assistant":
            for p in turn.parts:
                match p:
                    case TextPart(text=t) if t:
                        blocks.append({"type": "text", "text": t})
                    case ToolCallPart(call_id=c, name=n, arguments=a):
                        blocks.append({"type": "tool_use", "id": c, "name": n, "input": call_arguments(a)})
                    case OpaquePart(provider=pv, kind=k, data=d) if pv == kind and k not in (PREFIX, STOP):
                        blocks.append(json.loads(d))
        else:
            results = [p for p in turn.parts if isinstance(p, ToolResultPart)]
            for r in results:  # tool results must open the user message
                content: list[dict[str, Any]] = [{"type": "text", "text": r.text or "(no output)"}]
                content += [_image(request, im) for im in r.images]
                blocks.append({"type": "tool_result", "tool_use_id": r.call_id, "content": content, "is_error": r.is_error})
            for p in turn.parts:
                match p:
                    case TextPart(text=t) if t:
                        blocks.append({"type": "text", "text": t})
                    case ImagePart():
                        blocks.append(_image(request, p))
        if blocks:
            out.append({"role": turn.role, "content": blocks})
    out = merge_roles(out)
    if not out or out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUATION}]})
    return unbind_stale_thinking(request, out, recorded) if bound and recorded else out


def refused(turn: Turn) -> bool:
    """Whether an assistant turn ended with stop_reason "refusal" (its STOP part says so)."""
    return any(isinstance(p, OpaquePart) and p.kind == STOP and b'"refusal"' in p.data for p in turn.parts)


def unbind_stale_thinking(request: DecisionRequest, out: list[dict[str, Any]], recorded: dict[int, str]) -> list[dict[str, Any]]:
    """Drop the thinking blocks of assistant messages sent after a changed prefix; each drop
    changes the prefix of what follows, which the running digest carries forward."""
    digest = _chain("", [request.system, tool_params(request)])
    result: list[dict[str, Any]] = []
    for m in out:
        want = recorded.get(id(m))
        if want is not None and want != digest and any(b.get("type") in THINKING_BLOCKS for b in m["content"]):
            m = {**m, "content": [b for b in m["content"] if b.get("type") not in THINKING_BLOCKS]}
            log.info("thinking_unbound", reason="the conversation before this turn changed (slide or images left out)")
        result.append(m)
        digest = _chain(digest, m)
    return result


def read_usage(u: dict[str, Any] | None) -> Usage:
    u = u or {}
    cached = int(u.get("cache_read_input_tokens") or 0)
    created = int(u.get("cache_creation_input_tokens") or 0)
    return Usage(
        input_tokens=int(u.get("input_tokens") or 0) + cached + created,
        output_tokens=int(u.get("output_tokens") or 0),
        cached_input_tokens=cached,
    )


class AnthropicParticipant(HostedParticipant):
    """A model behind the Anthropic Messages API."""

    kind = "anthropic"
    # docs: build-with-claude/handling-stop-reasons
    OUTCOME_STOPS = {
        "refusal": "the model declined to continue (a refusal); the refused reply was not sent again",
        "max_tokens": "the reply reached max_output_tokens before it held a complete tool call; answer with one "
                      "shorter tool call",
        "model_context_window_exceeded": "the reply reached the end of the model's context window; answer with one "
                                         "short tool call",
    }

    LENGTH_STOPS = ("max_tokens",)
    OUTPUT_LIMIT_KEY = "max_tokens"

    def __init__(self, config: ProviderConfig):
        super().__init__(config)
        anthropic = import_sdk("anthropic", "anthropic")
        self.thinking, self.output_config, self.betas = thinking_settings(config)
        self.profile = model_profile(config)
        self.bound = self.profile.prefix_check
        self.dropping: set[str] = set()  # series sent drop_block since a prefix-check refusal (see decide)
        self.client = anthropic.AsyncAnthropic(
            api_key=read_key(config), base_url=config.base_url, max_retries=0, http_client=self.http
        )
        self._nonstreaming = getattr(getattr(anthropic, "_constants", None), "MODEL_NONSTREAMING_TOKENS", {})
        self.stream = self._sdk_requires_streaming(config.max_output_tokens)

    def _sdk_requires_streaming(self, max_tokens: int) -> bool:
        """Whether the SDK refuses this max_tokens unstreamed (its expected-time rule)."""
        try:
            self.client._calculate_nonstreaming_timeout(max_tokens, self._nonstreaming.get(self.config.model))
        except ValueError:
            return True
        except AttributeError:  # an SDK without the check: the same rule, 60 min * max_tokens / 128k over 10 min
            return max_tokens * 3600 / 128_000 > 600
        return False

    def with_output_limit(self, body: dict[str, Any], tokens: int) -> dict[str, Any]:
        # A raised limit may cross the SDK's unstreamed rule: the request is then streamed like any long one.
        raised = super().with_output_limit(body, tokens)
        if self._sdk_requires_streaming(tokens):
            raised["stream"] = True
        return raised

    def _headers(self, body: dict[str, Any]) -> dict[str, str] | None:
        """The beta headers a body needs (its thinking form's, and drop_block's when it carries it)."""
        binding = "block_binding" in (body.get("thinking") or {})
        betas = [*self.betas, *([BINDING_BETA] if binding else [])]
        return {"anthropic-beta": ",".join(betas)} if betas else None

    def _common(self, request: DecisionRequest) -> dict[str, Any]:
        cfg = self.config
        body: dict[str, Any] = {
            "model": cfg.model,
            "system": request.system,
            "messages": messages(request, self.kind, bound=self.bound),
            "tools": tool_params(request),
            # "auto" is the only choice compatible with extended thinking.
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        }
        if self.thinking:
            body["thinking"] = dict(self.thinking)
        if request.series in self.dropping:
            # Without a thinking parameter these models think adaptively anyway, so adding it changes nothing else.
            body["thinking"] = {**body.get("thinking", {"type": "adaptive"}), "block_binding": dict(DROP_BLOCK)}
        if self.output_config:
            body["output_config"] = dict(self.output_config)
        return body

    def build_body(self, request: DecisionRequest) -> dict[str, Any]:
        body = self._common(request)
        body["max_tokens"] = self.config.max_output_tokens
        if self.stream:
            body["stream"] = True
        if self.config.cache:
            body["cache_control"] = dict(AUTOMATIC_CACHE)
        body.update(self.config.extra_body)
        return body

    async def _decide(self, request: DecisionRequest) -> Decision:
        """A decision; a prefix-check refusal ("bound to a different conversation": the history was
        rewritten in a way the context policy did not undo) is repaired once per series by sending
        drop_block from then on, as the docs direct, and the refused attempt stays in the evidence
        with its outcome saying so. Sending the same body again could not succeed."""
        try:
            return await super()._decide(request)
        except ProviderFailure as e:
            last = e.attempts[-1] if e.attempts else None
            if (last is None or last.status != 400 or BOUND_REFUSAL not in last.response.decode("utf-8", "replace")
                    or request.series in self.dropping):
                raise
            self.dropping.add(request.series)
            log.warning("thinking_prefix_refused", series=request.series, trial=request.trial,
                        repair="drop_block sent on every later request of this series", detail=last.detail[:300])
            refused = [*e.attempts[:-1], msgspec.structs.replace(
                last, outcome="bound_thinking_refused",
                detail=f"{last.detail} [repaired: thinking.block_binding drop_block sent from here on]")]
            decision = await super()._decide(request)
            return msgspec.structs.replace(decision, attempts=[*refused, *renumbered(decision.attempts, len(refused))])

    def annotate(self, turn: Turn, request: DecisionRequest, body: dict[str, Any]) -> Turn:
        if not self.bound:
            return turn
        # The prefix this turn's thinking is bound to: the whole request it answered.
        digest = prefix_digests(request, body["messages"])[-1]
        return msgspec.structs.replace(turn, parts=[*turn.parts, OpaquePart(provider=self.kind, kind=PREFIX,
                                                                             data=digest.encode())])

    async def send(self, body: dict[str, Any]) -> None:
        # The transport reads a stream to its end and records it, so this returns when it is complete.
        await self.client.messages.with_raw_response.create(**body, extra_headers=self._headers(body))

    async def count_tokens(self, request: DecisionRequest) -> TokenCount:
        body = self._common(request)

        async def send(b: dict[str, Any]) -> None:
            await self.client.messages.with_raw_response.count_tokens(**b, extra_headers=self._headers(b))

        tokens, attempts = await self.call(body, lambda raw: token_count(raw, "input_tokens", "count_tokens"), send=send)
        return TokenCount(tokens=tokens, method="anthropic.count_tokens", exact=True, attempts=attempts)

    def response_json(self, raw: bytes) -> bytes:
        # Assembled before read_turn's checks, which then see the message the stream adds up to.
        return assemble_stream(raw) if raw.lstrip().startswith((b"event:", b"data:")) else raw

    def read_response(self, raw: bytes) -> tuple[Turn, Usage, str, str]:
        raw = self.response_json(raw)
        try:
            msg = _decoder.decode(raw)
        except msgspec.DecodeError as e:
            raise Retryable("malformed", f"Anthropic response is not a Message: {e}") from None
        if msg.type == "error" or msg.error:
            raise Retryable("provider_error", f"Anthropic error body: {msg.error}")
        parts: list[Any] = []
        for block_raw in msg.content:
            block = json.loads(bytes(block_raw))
            match block.get("type"):
                case "thinking":
                    parts.append(OpaquePart(provider=self.kind, kind="thinking", data=bytes(block_raw)))
                    if block.get("thinking"):
                        parts.append(ReasoningPart(text=block["thinking"]))
                case "redacted_thinking":
                    parts.append(OpaquePart(provider=self.kind, kind="redacted_thinking", data=bytes(block_raw)))
                case "text":
                    parts.append(TextPart(text=block.get("text", "")))
                case "tool_use":
                    parts.append(ToolCallPart(call_id=block.get("id", ""), name=block.get("name", ""),
                                              arguments=json.dumps(block.get("input", {}))))
                case other:
                    parts.append(OpaquePart(provider=self.kind, kind=str(other), data=bytes(block_raw)))
        native = b"[" + b",".join(bytes(r) for r in msg.content) + b"]"
        turn = Turn(id=new_turn_id(self.kind), role="assistant", parts=parts, provider=self.kind, native=native)
        return turn, read_usage(msg.usage), msg.model, msg.stop_reason or ""


def assemble_stream(raw: bytes) -> bytes:
    """The Message JSON that a recorded event stream adds up to (docs: build-with-claude/streaming);
    raises Retryable for an error event or a stream that ended early."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    done = False
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        try:
            event = json.loads(line[5:].strip())
        except ValueError:
            raise Retryable("malformed", f"Anthropic stream event is not JSON: {line[:80]!r}") from None
        match event.get("type"):
            case "message_start":
                message = dict(event.get("message") or {})
            case "content_block_start":
                blocks[event["index"]] = dict(event.get("content_block") or {})
            case "content_block_delta":
                block, delta = blocks.setdefault(event["index"], {}), event.get("delta") or {}
                match delta.get("type"):
                    case "text_delta":
                        block["text"] = block.get("text", "") + delta.get("text", "")
                    case "thinking_delta":
                        block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
                    case "signature_delta":
                        block["signature"] = block.get("signature", "") + delta.get("signature", "")
                    case "input_json_delta":
                        partial[event["index"]] = partial.get(event["index"], "") + delta.get("partial_json", "")
            case "content_block_stop":
                if event["index"] in partial:
                    text = partial.pop(event["index"])
                    try:  # the arguments arrive as text here: cut like a whole response's (read_reply)
                        blocks[event["index"]]["input"] = json.loads(prune_text(text)) if text else {}
                    except ValueError:
                        raise Retryable("malformed", f"tool input in the stream is not JSON: {text[:80]!r}") from None
            case "message_delta":
                if message is not None:
                    message.update({k: v for k, v in (event.get("delta") or {}).items()})
                    # message_delta's usage is cumulative; a field it leaves null keeps message_start's value
                    # (cache_creation_input_tokens, cache_read_input_tokens: billed, so never lost).
                    delta_usage = {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
                    message["usage"] = {**(message.get("usage") or {}), **delta_usage}
            case "message_stop":
                done = True
            case "error":
                raise Retryable("provider_error", f"Anthropic stream error: {event.get('error')}")
    if message is None or not done:
        raise Retryable("malformed", "Anthropic event stream ended before message_stop")
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return json.dumps(message).encode()
