"""Anthropic adapter: the Messages API, tool_use/tool_result, base64 images, thinking.

Thinking and redacted_thinking blocks (with their signatures) are kept byte-exact and
sent back unchanged in the assistant turn, as the API requires when tools and extended
thinking are combined. Counting uses the count_tokens endpoint with the actual request.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from roboswe.protocol.participant import (
    DecisionRequest,
    ImagePart,
    OpaquePart,
    ReasoningPart,
    TextPart,
    TokenCount,
    ToolCallPart,
    ToolResultPart,
    Turn,
    Usage,
    participant_kind,
)

from ._common import call_arguments, image_b64, merge_roles, native_items
from ._config import ProviderConfig
from ._hosted import HostedParticipant, Retryable, import_sdk, new_turn_id, read_key, token_count

CONTINUATION = "(Earlier conversation continues.)"


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


def messages(request: DecisionRequest, kind: str) -> list[dict[str, Any]]:
    """The neutral conversation as Messages API messages (user first, roles alternating)."""
    out: list[dict[str, Any]] = []
    for turn in request.conversation:
        native = native_items(turn, kind)
        if native is not None:
            out.append({"role": "assistant", "content": native})
            continue
        blocks: list[dict[str, Any]] = []
        if turn.role == "assistant":
            for p in turn.parts:
                match p:
                    case TextPart(text=t) if t:
                        blocks.append({"type": "text", "text": t})
                    case ToolCallPart(call_id=c, name=n, arguments=a):
                        blocks.append({"type": "tool_use", "id": c, "name": n, "input": call_arguments(a)})
                    case OpaquePart(provider=pv, data=d) if pv == kind:
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
    return out


def read_usage(u: dict[str, Any] | None) -> Usage:
    u = u or {}
    cached = int(u.get("cache_read_input_tokens") or 0)
    created = int(u.get("cache_creation_input_tokens") or 0)
    return Usage(
        input_tokens=int(u.get("input_tokens") or 0) + cached + created,
        output_tokens=int(u.get("output_tokens") or 0),
        cached_input_tokens=cached,
    )


@participant_kind("anthropic")
class AnthropicParticipant(HostedParticipant):
    """A model behind the Anthropic Messages API."""

    def __init__(self, config: ProviderConfig):
        super().__init__(config)
        anthropic = import_sdk("anthropic", "anthropic")
        self.client = anthropic.AsyncAnthropic(
            api_key=read_key(config), base_url=config.base_url, max_retries=0, http_client=self.http
        )

    def _common(self, request: DecisionRequest) -> dict[str, Any]:
        cfg = self.config
        body: dict[str, Any] = {
            "model": cfg.model,
            "system": request.system,
            "messages": messages(request, self.kind),
            "tools": [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools],
            # "auto" is the only choice compatible with extended thinking.
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        }
        if cfg.reasoning:
            body["thinking"] = dict(cfg.reasoning)
        return body

    def build_body(self, request: DecisionRequest) -> dict[str, Any]:
        body = self._common(request)
        body["max_tokens"] = self.config.max_output_tokens
        body.update(self.config.extra_body)
        return body

    async def send(self, body: dict[str, Any]) -> None:
        await self.client.messages.with_raw_response.create(**body)

    async def count_tokens(self, request: DecisionRequest) -> TokenCount:
        body = self._common(request)

        async def send(b: dict[str, Any]) -> None:
            await self.client.messages.with_raw_response.count_tokens(**b)

        tokens, attempts = await self.call(body, lambda raw: token_count(raw, "input_tokens", "count_tokens"), send=send)
        return TokenCount(tokens=tokens, method="anthropic.count_tokens", exact=True, attempts=attempts)

    def read_response(self, raw: bytes) -> tuple[Turn, Usage, str, str]:
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
