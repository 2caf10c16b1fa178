"""OpenRouter adapter: OpenAI-compatible chat completions, tools, image_url parts.

The assistant message comes back with `reasoning_details` (encrypted or signed reasoning
for models that have it); the message is kept byte-exact and sent back unchanged, which
is how OpenRouter preserves reasoning across tool calls. Counting is the conservative
proxy ceil(m*N) + 8192 applied by the context policy; N is the local estimate, or for
Gemini models Google's count_tokens on the same neutral request (count_via = "google").
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
)

from ._common import data_url, native_items
from ._config import ProviderConfig
from ._estimate import estimate_request
from ._hosted import (
    HostedParticipant,
    Retryable,
    classify_status,
    import_sdk,
    new_turn_id,
    read_key,
)
from .openai import wire_ready

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"


class _Choice(msgspec.Struct, kw_only=True):
    message: msgspec.Raw = msgspec.Raw(b"null")
    finish_reason: str | None = None


class _Completion(msgspec.Struct, kw_only=True):
    id: str = ""
    model: str = ""
    choices: list[_Choice] = []
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


_decoder = msgspec.json.Decoder(_Completion)


def chat_messages(request: DecisionRequest, kind: str, detail: str) -> list[dict[str, Any]]:
    """The neutral conversation as chat-completions messages."""
    out: list[dict[str, Any]] = [{"role": "system", "content": request.system}]
    for turn in request.conversation:
        native = native_items(turn, kind)
        if native is not None:
            if native.get("content") or native.get("tool_calls"):  # a filtered or cut-off reply may hold neither
                out.append(native)
            continue
        if turn.role == "assistant":
            text = "\n".join(p.text for p in turn.parts if isinstance(p, TextPart))
            calls = [
                {"id": p.call_id, "type": "function", "function": {"name": p.name, "arguments": p.arguments}}
                for p in turn.tool_calls()
            ]
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
        content: list[dict[str, Any]] = []
        for p in turn.parts:
            match p:
                case ToolResultPart(call_id=c, text=t, images=ims):
                    out.append({"role": "tool", "tool_call_id": c, "content": t or "(no output)"})
                    # Tool messages carry text only; their images follow in a user message.
                    content += [{"type": "image_url", "image_url": {"url": data_url(request, im), "detail": detail}}
                                for im in ims]
                case TextPart(text=t) if t:
                    content.append({"type": "text", "text": t})
                case ImagePart():
                    content.append({"type": "image_url", "image_url": {"url": data_url(request, p), "detail": detail}})
        if content:
            out.append({"role": "user", "content": content})
    return out


# Claude behind OpenRouter caches only what cache_control marks (docs: openrouter.ai/docs/features/
# prompt-caching, Anthropic Claude): one breakpoint on the system message (instructions; the tools come
# before it in Anthropic's order) and one on the newest message, which moves forward as the series
# grows, so each request reads the prefix the previous one wrote. At most 4 breakpoints are allowed.
CACHE_BREAKPOINT = {"type": "ephemeral"}


def claude(model: str) -> bool:
    return model.startswith("anthropic/")


def mark_cache_breakpoints(messages: list[dict[str, Any]]) -> None:
    """Put cache_control on the last content part of the system message and of the newest message
    (string content becomes one text part, which the chat format takes for every role)."""
    for m in {id(m): m for m in (messages[0], messages[-1])}.values():
        content = m.get("content")
        if isinstance(content, str) and content:
            m["content"] = [{"type": "text", "text": content, "cache_control": dict(CACHE_BREAKPOINT)}]
        elif isinstance(content, list) and content:
            content[-1] = {**content[-1], "cache_control": dict(CACHE_BREAKPOINT)}


class OpenRouterParticipant(HostedParticipant):
    """A model routed by OpenRouter's OpenAI-compatible chat completions endpoint."""

    kind = "openrouter"
    # docs: openrouter.ai/docs/api-reference (finish_reason, normalized across upstreams)
    OUTCOME_STOPS = {
        "length": "the reply reached max_output_tokens before it held a complete tool call; answer with one shorter "
                  "tool call",
        "content_filter": "the response was stopped by a content filter; no tool call came back",
    }
    STOP_FIELD = "finish_reason"
    LENGTH_STOPS = ("length",)

    def __init__(self, config: ProviderConfig):
        super().__init__(config)
        openai = import_sdk("openai", "openai")
        self.client = openai.AsyncOpenAI(
            api_key=read_key(config), base_url=config.base_url or DEFAULT_BASE_URL, max_retries=0, http_client=self.http
        )
        self.counter: Any = None
        if config.count_via == "google":
            from .google import GoogleParticipant

            if not config.count_model or not config.count_api_key_env:
                raise ValueError("provider openrouter: count_via = \"google\" needs count_model and count_api_key_env")
            self.counter = GoogleParticipant(config, model=config.count_model, key_env=config.count_api_key_env,
                                             base_url=config.count_base_url)

    def build_body(self, request: DecisionRequest) -> dict[str, Any]:
        cfg = self.config
        body: dict[str, Any] = {
            "model": cfg.model,
            "messages": chat_messages(request, self.kind, cfg.image_detail),
            "tools": [
                {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in request.tools
            ],
            "tool_choice": "auto",
            "parallel_tool_calls": False,
            "max_tokens": cfg.max_output_tokens,
        }
        # Usage (with cost and cache reads/writes) comes with every response; `usage.include` is deprecated
        # and has no effect (docs: openrouter.ai/docs/use-cases/usage-accounting).
        extra: dict[str, Any] = {}
        if cfg.cache and claude(cfg.model):
            mark_cache_breakpoints(body["messages"])
        if cfg.reasoning:
            extra["reasoning"] = dict(cfg.reasoning)
        extra.update(cfg.extra_body)
        body["extra_body"] = extra
        return body

    async def send(self, body: dict[str, Any]) -> None:
        # The messages ride in extra_body, sent as given (see openai.wire_ready); the required
        # argument gets an empty list that extra_body replaces.
        await self.client.chat.completions.with_raw_response.create(messages=[], **wire_ready(body))

    async def count_tokens(self, request: DecisionRequest) -> TokenCount:
        """N for the proxy ceil(m*N) + 8192 (the context policy applies m and the 8192)."""
        if self.counter is not None:
            native = await self.counter.count_tokens(request)
            return TokenCount(tokens=native.tokens, method="openrouter.proxy(google.count_tokens)", exact=False,
                              proxy=True, attempts=native.attempts)
        return TokenCount(tokens=estimate_request(request), method="openrouter.proxy(local_estimate)", exact=False, proxy=True)

    def read_response(self, raw: bytes) -> tuple[Turn, Usage, str, str]:
        try:
            resp = _decoder.decode(raw)
        except msgspec.DecodeError as e:
            raise Retryable("malformed", f"OpenRouter response is not a chat completion: {e}") from None
        if resp.error:  # OpenRouter may report an upstream failure inside a 200
            code = resp.error.get("code")
            status = code if isinstance(code, int) else 502
            raise classify_status(status, json.dumps(resp.error).encode(), {})
        if not resp.choices or bytes(resp.choices[0].message) == b"null":
            raise Retryable("malformed", "OpenRouter response has no choices[0].message")
        native = bytes(resp.choices[0].message)
        message = json.loads(native)
        parts: list[Any] = []
        for detail in message.get("reasoning_details") or []:
            parts.append(OpaquePart(provider=self.kind, kind=str(detail.get("type", "reasoning")), data=json.dumps(detail).encode()))
        if message.get("reasoning"):
            parts.append(ReasoningPart(text=message["reasoning"]))
        if message.get("content"):
            parts.append(TextPart(text=message["content"]))
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            parts.append(ToolCallPart(call_id=call.get("id", ""), name=fn.get("name", ""), arguments=fn.get("arguments") or ""))
        turn = Turn(id=new_turn_id(self.kind), role="assistant", parts=parts, provider=self.kind, native=native)
        u = resp.usage or {}
        usage = Usage(
            input_tokens=int(u.get("prompt_tokens") or 0),
            output_tokens=int(u.get("completion_tokens") or 0),
            reasoning_tokens=int((u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0),
            cached_input_tokens=int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0),
        )
        return turn, usage, resp.model, resp.choices[0].finish_reason or ""

    async def aclose(self) -> None:
        if self.counter is not None:
            await self.counter.aclose()
        await super().aclose()
