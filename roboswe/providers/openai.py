"""OpenAI adapter: the Responses API, function tools, input_image, encrypted reasoning items.

Requests are stateless (`store: false`). For every model that can reason (the o-series,
gpt-5 and later, or any model given `[provider.reasoning]`) the request includes
"reasoning.encrypted_content", so reasoning items come back with their encrypted content
and are sent back verbatim before the function calls they belong to, as OpenAI requires
for reasoning models with tool calls (guides/reasoning, "keeping reasoning items in context").
Counting uses the input-token count endpoint (`client.responses.input_tokens.count`) with
the request's own input, instructions and tools; the byte estimate (see `_estimate`) is
only a fallback, labelled as such, when that endpoint cannot answer.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import msgspec

from roboswe.protocol.participant import (
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

from ._common import data_url, native_items
from ._config import ProviderConfig
from ._estimate import estimate_request
from ._hosted import (
    HostedParticipant,
    Retryable,
    import_sdk,
    new_turn_id,
    read_key,
    token_count,
)

# Models that produce reasoning items (docs: guides/reasoning): o1/o3/o4..., gpt-5 and later, codex.
REASONING_MODELS = re.compile(r"^(o\d|gpt-([5-9]|\d\d)|codex|computer-use)", re.IGNORECASE)


def can_reason(config: ProviderConfig) -> bool:
    """Whether requests should ask for encrypted reasoning items (a reasoning model, or reasoning set)."""
    return bool(config.reasoning) or bool(REASONING_MODELS.match(config.model.rsplit("/", 1)[-1]))


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
            # An incomplete response may hold reasoning alone, which cannot go back without the item it belongs to.
            if any(i.get("type") in ("message", "function_call") for i in native):
                items.extend(replayable(native))
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


def replayable(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A response's output items as input items. With store=false a reasoning item can only
    be sent back with its encrypted content; when a turn lacks it (a run made without
    `include`), its reasoning is dropped and the other items lose their ids, which would
    otherwise make OpenAI look for the reasoning item they were produced with."""
    if all(i.get("encrypted_content") for i in output if i.get("type") == "reasoning"):
        return output
    return [{k: v for k, v in i.items() if k != "id"} for i in output if i.get("type") != "reasoning"]


def wire_ready(body: dict[str, Any]) -> dict[str, Any]:
    """SDK arguments for a body already in wire form: everything but the model rides in
    `extra_body`, which the SDK sends as given. Passed as typed arguments, the SDK walks every
    input item against its TypedDicts first, about a second per request at a few hundred items."""
    rest = {k: v for k, v in body.items() if k not in ("model", "extra_body")}
    return {"model": body["model"], "extra_body": {**rest, **body.get("extra_body", {})}}


def read_usage(usage: dict[str, Any] | None) -> Usage:
    u = usage or {}
    return Usage(
        input_tokens=int(u.get("input_tokens") or 0),
        output_tokens=int(u.get("output_tokens") or 0),
        reasoning_tokens=int((u.get("output_tokens_details") or {}).get("reasoning_tokens") or 0),
        cached_input_tokens=int((u.get("input_tokens_details") or {}).get("cached_tokens") or 0),
    )


class OpenAIParticipant(HostedParticipant):
    """A model behind the OpenAI Responses API."""

    kind = "openai"
    # docs: api-reference/responses (status "incomplete", incomplete_details.reason max_output_tokens or content_filter)
    OUTCOME_STOPS = {"incomplete": "the response was incomplete (the reason follows): no complete tool call came back; "
                                   "answer with one shorter tool call"}
    STOP_FIELD = "status (incomplete_details.reason)"
    LENGTH_STOPS = ("incomplete: max_output_tokens",)
    OUTPUT_LIMIT_KEY = "max_output_tokens"

    def __init__(self, config: ProviderConfig):
        super().__init__(config)
        openai = import_sdk("openai", "openai")
        self.client = openai.AsyncOpenAI(
            api_key=read_key(config), base_url=config.base_url, max_retries=0, http_client=self.http
        )

    def _common(self, request: DecisionRequest) -> dict[str, Any]:
        """What the generation and the count share: model, instructions, input, tools."""
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
        }
        if cfg.reasoning:
            body["reasoning"] = dict(cfg.reasoning)
        return body

    def build_body(self, request: DecisionRequest) -> dict[str, Any]:
        cfg = self.config
        body = self._common(request)
        body["max_output_tokens"] = cfg.max_output_tokens
        body["store"] = False
        if cfg.cache and request.series:
            # Caching is automatic on an exact prefix; the key routes a series' requests together, which
            # raises the hit rate (docs: guides/prompt-caching, prompt_cache_key). A digest of the series
            # id, not the id itself: the docs ask for no identifying data in the key.
            body["prompt_cache_key"] = "roboswe-" + hashlib.sha256(request.series.encode()).hexdigest()[:32]
        # Reasoning items come back encrypted, so they can be sent back with store=false; a
        # history that already holds reasoning items needs it whatever the model name says.
        if can_reason(cfg) or any(i.get("type") == "reasoning" for i in body["input"]):
            body["include"] = ["reasoning.encrypted_content"]
        body.update(cfg.extra_body)
        return body

    async def count_tokens(self, request: DecisionRequest) -> TokenCount:
        """The input-token count endpoint on the request's own input; on failure the byte
        estimate, labelled as a fallback and carrying the failed attempts as evidence."""
        body = self._common(request)

        async def send(b: dict[str, Any]) -> None:
            await self.client.responses.input_tokens.with_raw_response.count(**wire_ready(b))

        try:
            tokens, attempts = await self.call(body, lambda raw: token_count(raw, "input_tokens", "input_tokens"),
                                               send=send)
        except ProviderFailure as e:
            return TokenCount(tokens=estimate_request(request), method="openai.local_estimate(fallback)", exact=False,
                              attempts=e.attempts)
        return TokenCount(tokens=tokens, method="openai.input_tokens", exact=True, attempts=attempts)

    async def send(self, body: dict[str, Any]) -> None:
        await self.client.responses.with_raw_response.create(**wire_ready(body))

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
