"""Google adapter: google-genai generate_content, function declarations, inline image data.

Gemini attaches thought signatures to parts (function calls, thought summaries); the
model's content is kept byte-exact and sent back unchanged so the signatures stay where
Gemini put them. A stored content is read back the way the SDK reads responses (fields
this SDK does not know are dropped first), so a field a newer API adds does not break
every later request. Counting uses the count_tokens endpoint; the Developer API accepts
only contents there, so the system instructions and tool schemas are counted as a leading
text content of the same request -- an approximation, recorded as such (exact=False), so
the context policy corrects it upward from the reported usage like any estimate.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
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

from ._common import call_arguments, clean_json
from ._config import ProviderConfig
from ._hosted import (
    HostedParticipant,
    Retryable,
    import_sdk,
    new_turn_id,
    read_key,
    recording_sync_client,
    token_count,
)

GENERATED = "gen-"  # prefix of call ids we made up because Gemini sent none


class _Candidate(msgspec.Struct, kw_only=True):
    content: msgspec.Raw = msgspec.Raw(b"null")
    finishReason: str = ""


class _Response(msgspec.Struct, kw_only=True):
    candidates: list[_Candidate] = []
    usageMetadata: dict[str, Any] | None = None
    modelVersion: str = ""
    promptFeedback: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


_decoder = msgspec.json.Decoder(_Response)


def contents(request: DecisionRequest, kind: str, types: Any) -> list[Any]:
    """The neutral conversation as Gemini contents (dicts, or Content for exact replays)."""
    out: list[Any] = []
    calls: dict[str, str] = {}  # call id -> function name (function responses need the name)
    for turn in request.conversation:
        for c in turn.tool_calls():
            calls[c.call_id] = c.name
        if turn.role == "assistant" and turn.provider == kind and turn.native:
            if json.loads(turn.native).get("parts"):  # a blocked or cut-off candidate may come without parts
                out.append(stored_content(types, turn.native))
            continue
        parts: list[dict[str, Any]] = []
        if turn.role == "assistant":
            for p in turn.parts:
                match p:
                    case TextPart(text=t) if t:
                        parts.append({"text": t})
                    case ToolCallPart(call_id=c, name=n, arguments=a):
                        call: dict[str, Any] = {"name": n, "args": call_arguments(a)}
                        if not c.startswith(GENERATED):
                            call["id"] = c
                        parts.append({"function_call": call})
        else:
            images: list[dict[str, Any]] = []
            for p in turn.parts:
                match p:
                    case ToolResultPart(call_id=c, text=t, images=ims, is_error=err):
                        resp: dict[str, Any] = {"name": calls.get(c, "unknown"), "response": {"error" if err else "output": t}}
                        if not c.startswith(GENERATED):
                            resp["id"] = c
                        parts.append({"function_response": resp})
                        images += [_inline(request, im) for im in ims]
                    case TextPart(text=t) if t:
                        parts.append({"text": t})
                    case ImagePart():
                        images.append(_inline(request, p))
            parts += images
        if parts:
            out.append({"role": "model" if turn.role == "assistant" else "user", "parts": parts})
    return out


def stored_content(types: Any, native: bytes) -> Any:
    """A model content kept from an earlier response, parsed forward-compatibly: the SDK's
    models forbid unknown fields, and the SDK itself drops them from responses before
    validating (`_common._remove_extra_fields`); bytes (thought signatures) stay base64 JSON."""
    data = clean_json(json.loads(native))  # the SDK's JSON reader refuses a lone surrogate's escape
    try:
        from google.genai._common import _remove_extra_fields

        _remove_extra_fields(types.Content, data)
    except ImportError:  # an SDK without the helper: keep the known top-level fields only
        data = {k: v for k, v in data.items() if k in ("role", "parts")}
    return types.Content.model_validate_json(json.dumps(data))


def _inline(request: DecisionRequest, im: ImagePart) -> dict[str, Any]:
    data = request.images.get(im.digest)
    if data is None:
        raise ValueError(f"image {im.digest[:12]} ({im.camera}) is referenced but not in DecisionRequest.images")
    return {"inline_data": {"mime_type": im.media_type, "data": data}}


def read_usage(u: dict[str, Any] | None) -> Usage:
    u = u or {}
    return Usage(
        input_tokens=int(u.get("promptTokenCount") or 0),
        output_tokens=int(u.get("candidatesTokenCount") or 0) + int(u.get("thoughtsTokenCount") or 0),
        reasoning_tokens=int(u.get("thoughtsTokenCount") or 0),
        cached_input_tokens=int(u.get("cachedContentTokenCount") or 0),
    )


def tools_text(request: DecisionRequest) -> str:
    return json.dumps([{"name": t.name, "description": t.description, "parameters": t.parameters} for t in request.tools])


class GoogleParticipant(HostedParticipant):
    """A Gemini model behind google-genai (Developer API or an API-compatible base URL)."""

    kind = "google"
    # docs: ai.google.dev/api/generate-content (Candidate.finishReason, PromptFeedback.blockReason)
    _BLOCKED = "the response was blocked by the provider's safety filters; no tool call came back"
    OUTCOME_STOPS = {
        "SAFETY": _BLOCKED, "PROHIBITED_CONTENT": _BLOCKED, "BLOCKLIST": _BLOCKED, "SPII": _BLOCKED,
        "IMAGE_SAFETY": _BLOCKED, "RECITATION": "the response was stopped for reciting its training data",
        "MAX_TOKENS": "the reply reached max_output_tokens before it held a complete tool call; answer with one "
                      "shorter tool call",
        "blocked": "the request was blocked by the provider's safety filters before the model answered",
    }
    STOP_FIELD = "finishReason (promptFeedback.blockReason when blocked)"
    LENGTH_STOPS = ("MAX_TOKENS",)

    def with_output_limit(self, body: dict[str, Any], tokens: int) -> dict[str, Any]:
        return {**body, "config": {**body["config"], "max_output_tokens": tokens}}

    def __init__(self, config: ProviderConfig, *, model: str | None = None, key_env: str | None = None,
                 base_url: str | None = None):
        if model is not None:  # used by OpenRouter to count Gemini requests natively
            config = msgspec.structs.replace(config, kind="google", model=model, api_key_env=key_env or "",
                                             base_url=base_url, extra_body={})
        super().__init__(config)
        self.genai = import_sdk("google.genai", "google-genai")
        self.types = self.genai.types
        # google-genai's async client is tied to asyncio; actors run trio, so the blocking
        # client runs in a worker thread instead.
        self.sync_http = recording_sync_client(config.timeout_s, config.connect_timeout_s)
        http_options = self.types.HttpOptions(
            base_url=config.base_url,
            httpx_client=self.sync_http,
            retry_options=self.types.HttpRetryOptions(attempts=1),
            timeout=int(config.timeout_s * 1000),
        )
        self.client = self.genai.Client(api_key=read_key(config), http_options=http_options)

    def build_body(self, request: DecisionRequest) -> dict[str, Any]:
        cfg = self.config
        config: dict[str, Any] = {
            "system_instruction": request.system,
            "tools": [self.types.Tool(function_declarations=[
                self.types.FunctionDeclaration(name=t.name, description=t.description, parameters_json_schema=t.parameters)
                for t in request.tools
            ])],
            "tool_config": {"function_calling_config": {"mode": "AUTO"}},
            "automatic_function_calling": {"disable": True},
            "max_output_tokens": cfg.max_output_tokens,
        }
        if cfg.reasoning:
            config["thinking_config"] = dict(cfg.reasoning)
        config.update(cfg.extra_body)
        return {"model": cfg.model, "contents": contents(request, "google", self.types), "config": config}

    async def send(self, body: dict[str, Any]) -> None:
        await anyio.to_thread.run_sync(lambda: self.client.models.generate_content(**body), abandon_on_cancel=True)

    async def count_tokens(self, request: DecisionRequest) -> TokenCount:
        preamble = {"role": "user", "parts": [{"text": request.system + "\n" + tools_text(request)}]}
        body = {"model": self.config.model, "contents": [preamble] + contents(request, "google", self.types)}

        async def send(b: dict[str, Any]) -> None:
            await anyio.to_thread.run_sync(lambda: self.client.models.count_tokens(**b), abandon_on_cancel=True)

        tokens, attempts = await self.call(body, lambda raw: token_count(raw, "totalTokens", "countTokens"), send=send)
        return TokenCount(tokens=tokens, method="google.count_tokens(approximate: instructions and tools as text)",
                          exact=False, attempts=attempts)

    def read_response(self, raw: bytes) -> tuple[Turn, Usage, str, str]:
        try:
            resp = _decoder.decode(raw)
        except msgspec.DecodeError as e:
            raise Retryable("malformed", f"Gemini response is not a GenerateContentResponse: {e}") from None
        if resp.error:
            raise Retryable("provider_error", f"Gemini error body: {resp.error}")
        turn_id = new_turn_id(self.kind)
        parts: list[Any] = []
        native = b""
        if resp.candidates and bytes(resp.candidates[0].content) != b"null":
            native = bytes(resp.candidates[0].content)
            content = json.loads(native)
            for i, part in enumerate(content.get("parts") or []):
                signature = part.get("thoughtSignature")
                if part.get("thought"):
                    parts.append(OpaquePart(provider=self.kind, kind="thought", data=json.dumps(part).encode()))
                    if part.get("text"):
                        parts.append(ReasoningPart(text=part["text"]))
                    continue
                if signature:
                    parts.append(OpaquePart(provider=self.kind, kind="thought_signature",
                                            data=json.dumps({"thoughtSignature": signature}).encode()))
                if "functionCall" in part:
                    fc = part["functionCall"]
                    parts.append(ToolCallPart(call_id=fc.get("id") or f"{GENERATED}{turn_id}-{i}", name=fc.get("name", ""),
                                              arguments=json.dumps(fc.get("args") or {})))
                elif "text" in part:
                    parts.append(TextPart(text=part["text"]))
        turn = Turn(id=turn_id, role="assistant", parts=parts, provider=self.kind, native=native)
        if resp.candidates:
            stop = resp.candidates[0].finishReason
        else:  # the prompt itself was blocked: no candidate, the reason in promptFeedback
            reason = (resp.promptFeedback or {}).get("blockReason")
            stop = f"blocked: {reason}" if reason else "NO_CANDIDATES"
        return turn, read_usage(resp.usageMetadata), resp.modelVersion, stop

    async def aclose(self) -> None:
        self.sync_http.close()
        await super().aclose()
