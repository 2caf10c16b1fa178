"""OpenAI adapter: the Responses API, function tools, input_image, encrypted reasoning items.

Requests are stateless (`store: false`); reasoning items come back with
`encrypted_content` (include "reasoning.encrypted_content") and are sent back verbatim
in later requests, as OpenAI requires for reasoning models with tool calls.
Counting uses the documented conservative local estimate (see `_estimate`).
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
    ToolCallPart,
    ToolResultPart,
    Turn,
    Usage,
    participant_kind,
)

from ._common import data_url, native_items
from ._config import ProviderConfig
from ._hosted import HostedParticipant, Retryable, import_sdk, new_turn_id, read_key


class _Response(msgspec.Struct, kw_only=True):
    id: str = ""
    model: str = ""
    status: str = ""
    output: list[msgspec.Raw] = []
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    incomplete_details: dict[str, Any] | None = None


_decoder = msgspec.json.Decoder(_Response)


def input_items(request: DecisionRequest, kind: str, detail: str) -> list[Any]:
    """The neutral conversation as Responses API input items."""
    items: list[Any] = []
    for turn in request.conversation:
        native = native_items(turn, kind)
        if native is not None:
            # With store=false a reasoning item can only be replayed with its encrypted content.
            items.extend(i for i in native if i.get("type") != "reasoning" or i.get("encrypted_content"))
            continue
        if turn.role == "assistant":
            for p in turn.parts:
                match p:
                    case TextPart(text=t):
                        items.append({"role": "assistant", "content": t})
                    case ToolCallPart(call_id=c, name=n, arguments=a):
                        items.append({"type": "function_call", "call_id": c, "name": n, "arguments": a})
            continue
        content: list[dict[str, Any]] = []
        for p in turn.parts:
            match p:
                case ToolResultPart(call_id=c, text=t, images=ims):
                    output: Any = t
                    if ims:
                        output = [{"type": "input_text", "text": t}] + [
                            {"type": "input_image", "image_url": data_url(request, im), "detail": detail} for im in ims
                        ]
                    items.append({"type": "function_call_output", "call_id": c, "output": output})
                case TextPart(text=t):
                    content.append({"type": "input_text", "text": t})
                case ImagePart():
                    content.append({"type": "input_image", "image_url": data_url(request, p), "detail": detail})
        if content:
            items.append({"role": "user", "content": content})
    return items


def read_usage(usage: dict[str, Any] | None) -> Usage:
    u = usage or {}
    return Usage(
        input_tokens=int(u.get("input_tokens") or 0),
        output_tokens=int(u.get("output_tokens") or 0),
        reasoning_tokens=int((u.get("output_tokens_details") or {}).get("reasoning_tokens") or 0),
        cached_input_tokens=int((u.get("input_tokens_details") or {}).get("cached_tokens") or 0),
    )


@participant_kind("openai")
class OpenAIParticipant(HostedParticipant):
    """A model behind the OpenAI Responses API."""

    def __init__(self, config: ProviderConfig):
        super().__init__(config)
        openai = import_sdk("openai", "openai")
        self.client = openai.AsyncOpenAI(
            api_key=read_key(config), base_url=config.base_url, max_retries=0, http_client=self.http
        )

    def build_body(self, request: DecisionRequest) -> dict[str, Any]:
        cfg = self.config
        body: dict[str, Any] = {
            "model": cfg.model,
            "instructions": request.system,
            "input": input_items(request, self.kind, cfg.image_detail),
            "tools": [
                {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": False}
                for t in request.tools
            ],
            "tool_choice": "auto",
            "parallel_tool_calls": False,
            "max_output_tokens": cfg.max_output_tokens,
            "store": False,
        }
        if cfg.reasoning:  # reasoning models: keep their reasoning as encrypted items we send back
            body["reasoning"] = dict(cfg.reasoning)
            body["include"] = ["reasoning.encrypted_content"]
        body.update(cfg.extra_body)
        return body

    async def send(self, body: dict[str, Any]) -> None:
        await self.client.responses.with_raw_response.create(**body)

    def read_response(self, raw: bytes) -> tuple[Turn, Usage, str, str]:
        try:
            resp = _decoder.decode(raw)
        except msgspec.DecodeError as e:
            raise Retryable("malformed", f"OpenAI response is not a Responses object: {e}") from None
        if resp.error:
            raise Retryable("provider_error", f"OpenAI response error: {resp.error}")
        parts: list[Any] = []
        for item_raw in resp.output:
            item = json.loads(bytes(item_raw))
            match item.get("type"):
                case "reasoning":
                    parts.append(OpaquePart(provider=self.kind, kind="reasoning", data=bytes(item_raw)))
                    summary = "\n".join(s.get("text", "") for s in item.get("summary") or [])
                    if summary:
                        parts.append(ReasoningPart(text=summary))
                case "message":
                    for c in item.get("content") or []:
                        if c.get("type") == "output_text":
                            parts.append(TextPart(text=c.get("text", "")))
                        elif c.get("type") == "refusal":
                            parts.append(TextPart(text=c.get("refusal", "")))
                case "function_call":
                    parts.append(ToolCallPart(call_id=item.get("call_id", ""), name=item.get("name", ""),
                                              arguments=item.get("arguments", "")))
                case _:
                    parts.append(OpaquePart(provider=self.kind, kind=str(item.get("type")), data=bytes(item_raw)))
        native = b"[" + b",".join(bytes(r) for r in resp.output) + b"]"
        turn = Turn(id=new_turn_id(self.kind), role="assistant", parts=parts, provider=self.kind, native=native)
        stop = resp.status + (f": {resp.incomplete_details.get('reason')}" if resp.incomplete_details else "")
        return turn, read_usage(resp.usage), resp.model, stop
