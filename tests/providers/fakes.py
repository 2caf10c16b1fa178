"""Fake provider HTTP servers on loopback that speak each wire format, strictly.

A `FakeProvider` serves a scripted queue of generation replies (tool calls, text,
thinking with signatures, errors, malformed bodies, stalls) and answers count-token
endpoints itself (Anthropic count_tokens, Google countTokens, OpenAI input_tokens). Before
answering, it checks every request against the service's documented rules
(tests/providers/rules.py) and refuses a broken one with the service's own 400 body, as
the real API would; refusals are kept in `rejected`. It records every request body
exactly, so tests can check what the real SDK sent. An Anthropic request with
`stream: true` is answered as server-sent events built from the scripted message.
Reusable for full series tests: queue one reply per expected decision with the `*_reply`
builders below (e.g. `anthropic_reply(tool=("write_file", {...}))`).
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .meter import Meter
from .rules import (
    CHECKS,
    IMAGE_LIMITS,
    Broken,
    Memory,
    error_body,
    input_cap,
    over_input_cap,
    shape_anthropic_reply,
    too_large,
)

WIRES = ("openai", "anthropic", "google", "openrouter")


@dataclass
class Reply:
    """One scripted HTTP answer; `stall_s` > 0 holds the connection silent that long first."""

    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)
    stall_s: float = 0.0


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def error_reply(status: int, *, retry_after: float | None = None, message: str = "fake error") -> Reply:
    headers = {"content-type": "application/json"}
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
    body = {"type": "error", "error": {"type": kind, "message": message, "code": status}}
    return Reply(status=status, body=json.dumps(body).encode(), headers=headers)


def malformed_reply() -> Reply:
    return Reply(status=200, body=b'{"id": "resp_1", "output": [', headers={"content-type": "application/json"})


def stall_reply(seconds: float = 30.0) -> Reply:
    return Reply(stall_s=seconds)


class FakeProvider:
    """A loopback HTTP server for one wire format with a scripted reply queue."""

    def __init__(self, wire: str, *, count: Callable[[bytes], int] | None = None, max_images: int | None = None,
                 metered: bool = False, max_input_tokens: int | None = None):
        assert wire in WIRES, wire
        self.wire = wire
        # The input cap a generation request is held to (rules.INPUT_CAPS by model unless given), its tokens
        # counted as the count endpoint counts them.
        self.max_input_tokens = max_input_tokens
        # metered: a reply's usage is computed from the request as the service bills it, prompt caching
        # included (`Meter`), instead of the scripted figures.
        self.meter = Meter(wire) if metered else None
        self.max_images = IMAGE_LIMITS[wire] if max_images is None else max_images
        self.memory = Memory()
        self.rejected: list[tuple[Seen, str]] = []  # requests refused for a broken rule, with the message
        self.script: deque[Reply | Callable[[Seen], Reply]] = deque()
        self.seen: list[Seen] = []
        self.count_script: deque[Reply] = deque()
        self.count = count or (lambda body: len(body) // 4 + 7)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"fake-{wire}", daemon=True)

    # ---- lifecycle

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """The base_url to give the SDK for this wire."""
        root = f"http://127.0.0.1:{self.port}"
        return {"openai": root + "/v1", "openrouter": root + "/v1", "anthropic": root, "google": root}[self.wire]

    def queue(self, *replies: Reply | Callable[[Seen], Reply]) -> FakeProvider:
        with self._lock:
            self.script.extend(replies)
        return self

    def generations(self) -> list[Seen]:
        return [s for s in self.seen if not _is_count(s.path)]

    def counts(self) -> list[Seen]:
        return [s for s in self.seen if _is_count(s.path)]

    # ---- serving

    def _next(self, seen: Seen) -> Reply:
        with self._lock:
            self.seen.append(seen)
            counting = _is_count(seen.path)
            refused = too_large(self.wire, len(seen.body))
            if refused is not None:
                self.rejected.append((seen, "request too large"))
                return Reply(status=refused[0], body=refused[1])
            try:
                CHECKS[self.wire](seen.json(), self.memory, count=counting, max_images=self.max_images, headers=seen.headers)
            except Broken as e:
                self.rejected.append((seen, e.message))
                return Reply(status=400, body=error_body(self.wire, e.message, e.param))
            cap = self.max_input_tokens or input_cap(self.wire, str(seen.json().get("model", "")))
            refusal = None if counting or cap is None else over_input_cap(self.wire, self.count(seen.body), cap)
            if refusal is not None:
                self.rejected.append((seen, refusal))
                return Reply(status=400, body=error_body(self.wire, refusal, "input", "context_length_exceeded"))
            if counting:
                if self.count_script:
                    return self.count_script.popleft()
                n = self.count(seen.body)
                key = {"anthropic": "input_tokens", "openai": "input_tokens"}.get(self.wire, "totalTokens")
                answer: dict[str, Any] = {key: n}
                if self.wire == "openai":
                    answer["object"] = "response.input_tokens"
                return Reply(body=json.dumps(answer).encode(), headers={"content-type": "application/json"})
            if not self.script:
                return error_reply(500, message=f"fake {self.wire}: script exhausted")
            item = self.script.popleft()
        reply = item(seen) if callable(item) else item
        if self.meter is not None and reply.status == 200 and not reply.stall_s:
            with self._lock:
                reply = Reply(body=self.meter.bill(seen.json(), reply.body), headers=reply.headers)
        if reply.status == 200 and not reply.stall_s and self.wire == "anthropic":
            try:
                scripted = json.loads(reply.body)
                shaped = shape_anthropic_reply(seen.json(), scripted)
            except (ValueError, AttributeError, TypeError, RecursionError):  # a malformed reply (a test of it)
                shaped = scripted = None
            if shaped is not scripted:  # otherwise the scripted bytes go as they are
                reply = Reply(body=json.dumps(shaped).encode(), headers=reply.headers)
        if reply.status == 200 and not reply.stall_s:
            with self._lock:
                self.memory.learn(self.wire, reply.body, seen.json())
            if self.wire == "anthropic" and seen.json().get("stream"):
                reply = Reply(body=sse_stream(reply.body), headers={"content-type": "text/event-stream"})
        return reply

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                seen = Seen("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = fake._next(seen)
                if reply.stall_s:
                    time.sleep(reply.stall_s)
                    self.close_connection = True
                    return
                self.send_response(reply.status)
                headers = {"content-type": "application/json", **reply.headers}
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def do_GET(self) -> None:  # the free model lookups the online preflight makes
                status, body = fake._lookup(self.path)
                self.send_response(status)
                self.send_header("content-type", "application/json" if status == 200 else "text/html")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def _lookup(self, path: str) -> tuple[int, bytes]:
        """A model lookup answered as the service does for a model it knows (any id here);
        a path the service does not have is a bare 404 page."""
        path = path.split("?", 1)[0]
        lookups = {"anthropic": "/v1/models/", "openai": "/v1/models/", "google": "/v1beta/models/"}
        if self.wire == "openrouter" and path == "/v1/key":
            return 200, json.dumps({"data": {"label": "fake", "limit": None, "usage": 0}}).encode()
        if self.wire == "openrouter" and path.startswith("/v1/models/") and path.endswith("/endpoints"):
            return 200, json.dumps({"data": {"id": path[len("/v1/models/"):-len("/endpoints")], "endpoints": []}}).encode()
        prefix = lookups.get(self.wire)
        if prefix and path.startswith(prefix) and len(path) > len(prefix):
            return 200, json.dumps({"id": path[len(prefix):], "type": "model", "name": path[len("/v1beta/"):]}).encode()
        return 404, b"<html><body>404 Not Found</body></html>"


def _is_count(path: str) -> bool:
    return "count_tokens" in path or ":countTokens" in path or "/responses/input_tokens" in path


def sse_stream(message: bytes) -> bytes:
    """A Messages API message as the event stream `stream: true` gets (docs: build-with-claude/streaming)."""
    try:
        msg = json.loads(message)
    except ValueError:
        return message  # malformed stays malformed
    events: list[tuple[str, dict[str, Any]]] = []
    usage = msg.get("usage") or {}
    start = {**msg, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events.append(("message_start", {"type": "message_start", "message": start}))
    for i, block in enumerate(msg.get("content") or []):
        kind = block.get("type")
        if kind == "thinking":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "thinking_delta", "thinking": block["thinking"]}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "signature_delta", "signature": block["signature"]}}))
        elif kind == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            text = block["text"]
            for piece in (text[: len(text) // 2], text[len(text) // 2:]):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "text_delta", "text": piece}}))
        elif kind == "tool_use":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {**block, "input": {}}}))
            raw = json.dumps(block["input"])
            for piece in (raw[: len(raw) // 2], raw[len(raw) // 2:]):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "input_json_delta", "partial_json": piece}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": block}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": msg.get("stop_reason"), "stop_sequence": None},
                                     "usage": {"output_tokens": usage.get("output_tokens", 0)}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


# --------------------------------------------------------------------------- reply builders

_SIG = base64.b64encode(b"fake-signature-bytes-0123456789").decode()
_ids = itertools.count(1)


def _unique(prefix: str) -> str:
    """Item ids are unique per service; a replayed history holds many of them."""
    return f"{prefix}{next(_ids)}"


def _json_reply(body: dict[str, Any]) -> Reply:
    return Reply(body=json.dumps(body).encode(), headers={"content-type": "application/json"})


def openai_reply(*, tool: tuple[str, dict[str, Any]] | None = None, text: str = "", reasoning: bool = True,
                 call_id: str | None = None, usage: tuple[int, int] = (1200, 80)) -> Reply:
    """A Responses API response: optional encrypted reasoning item, text, one function call."""
    output: list[dict[str, Any]] = []
    call_id = call_id or _unique("call_")
    if reasoning:
        output.append({"id": _unique("rs_"), "type": "reasoning", "encrypted_content": "gAAAAB-opaque-reasoning==",
                       "summary": [{"type": "summary_text", "text": "I should run the script."}]})
    if text:
        output.append({"id": _unique("msg_"), "type": "message", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    if tool:
        output.append({"id": _unique("fc_"), "type": "function_call", "status": "completed", "call_id": call_id,
                       "name": tool[0], "arguments": json.dumps(tool[1])})
    return _json_reply({
        "id": "resp_1", "object": "response", "created_at": 1764500000, "status": "completed", "model": "fake-gpt",
        "output": output, "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage),
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 40}},
    })


def anthropic_reply(*, tool: tuple[str, dict[str, Any]] | None = None, text: str = "", thinking: bool = True,
                    redacted: bool = False, call_id: str | None = None, usage: tuple[int, int] = (1200, 80)) -> Reply:
    """A Messages API message: thinking (with signature), optional redacted thinking, text, tool_use."""
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": "Let me plan the grasp.", "signature": _SIG})
    if redacted:
        content.append({"type": "redacted_thinking", "data": "EncryptedRedactedThinking=="})
    if text:
        content.append({"type": "text", "text": text})
    if tool:
        content.append({"type": "tool_use", "id": call_id or _unique("toolu_"), "name": tool[0], "input": tool[1]})
    return _json_reply({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "fake-claude", "content": content,
        "stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0},
    })


def google_reply(*, tool: tuple[str, dict[str, Any]] | None = None, text: str = "", thought: bool = True,
                 call_id: str | None = None, usage: tuple[int, int] = (1200, 80)) -> Reply:
    """A generateContent response: thought summary, text, functionCall with a thoughtSignature."""
    parts: list[dict[str, Any]] = []
    if thought:
        parts.append({"text": "Thinking about the cube.", "thought": True})
    if text:
        parts.append({"text": text})
    if tool:
        fc: dict[str, Any] = {"name": tool[0], "args": tool[1]}
        if call_id:
            fc["id"] = call_id
        parts.append({"functionCall": fc, "thoughtSignature": _SIG})
    return _json_reply({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": usage[0], "candidatesTokenCount": usage[1], "thoughtsTokenCount": 30,
                          "totalTokenCount": sum(usage) + 30},
        "modelVersion": "fake-gemini",
    })


def openrouter_reply(*, tool: tuple[str, dict[str, Any]] | None = None, text: str = "", reasoning: bool = True,
                     call_id: str | None = None, usage: tuple[int, int] = (1200, 80)) -> Reply:
    """A chat completion with reasoning_details (signed) and one tool call."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if reasoning:
        message["reasoning"] = "Plan: observe first."
        message["reasoning_details"] = [{"type": "reasoning.encrypted", "data": "opaque==", "id": "r1", "format": "x", "index": 0}]
    if tool:
        message["tool_calls"] = [{"id": call_id or _unique("call_or_"), "type": "function",
                                  "function": {"name": tool[0], "arguments": json.dumps(tool[1])}}]
    return _json_reply({
        "id": "gen-1", "object": "chat.completion", "created": 1764500000, "model": "fake/router-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool else "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    })


REPLY = {"openai": openai_reply, "anthropic": anthropic_reply, "google": google_reply, "openrouter": openrouter_reply}
"""Wire name -> reply builder taking tool=(name, args), text=..."""


# --------------------------------------------------------------------------- agent-driven replies


def wire_calls(wire: str, body: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], str | None, bool]]:
    """The tool calls and results a request body carries, in order:
    (call id, name, arguments, result text or None, result is an error). The harness's own
    user texts (e.g. a trial's opening) come in order as ("", None, {}, text, False)."""
    calls: list[list[Any]] = []
    by_id: dict[str, list[Any]] = {}

    def said(text: Any) -> None:
        if isinstance(text, str) and text:
            calls.append(["", None, {}, text, False])

    def call(cid: str, name: str, args: Any) -> None:
        entry = [cid, name, args if isinstance(args, dict) else json.loads(args or "{}"), None, False]
        calls.append(entry)
        by_id[cid] = entry

    def result(cid: str | None, text: str, error: bool = False) -> None:
        entry = by_id.get(cid or "") or next((c for c in calls if c[3] is None), None)
        if entry is not None:
            entry[3], entry[4] = text, error

    def texts(content: Any, kind: str = "text") -> None:
        if isinstance(content, str):
            said(content)
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == kind:
                said(block.get("text"))

    if wire == "openai":
        for item in body.get("input", []):
            if item.get("role") == "user":
                texts(item.get("content"), "input_text")
            if item.get("type") == "function_call":
                call(item["call_id"], item["name"], item["arguments"])
            elif item.get("type") == "function_call_output":
                out = item["output"]
                result(item["call_id"], out if isinstance(out, str) else "".join(o.get("text", "") for o in out))
    elif wire == "anthropic":
        for m in body.get("messages", []):
            if m.get("role") == "user":
                texts(m["content"])
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_use":
                    call(b["id"], b["name"], b["input"])
                elif b.get("type") == "tool_result":
                    c = b.get("content")
                    text = c if isinstance(c, str) else "".join(x.get("text", "") for x in c or [])
                    result(b["tool_use_id"], text, bool(b.get("is_error")))
    elif wire == "google":
        for content in body.get("contents", []):
            for part in content.get("parts", []):
                if content.get("role") == "user" and "text" in part:
                    said(part["text"])
                if "functionCall" in part:
                    fc = part["functionCall"]
                    call(fc.get("id") or f"g{len(calls)}", fc["name"], fc.get("args") or {})
                elif "functionResponse" in part:
                    fr = part["functionResponse"]
                    resp = fr.get("response") or {}
                    result(fr.get("id"), str(resp.get("output", resp.get("error", ""))), "error" in resp)
    elif wire == "openrouter":
        for m in body.get("messages", []):
            if m.get("role") == "user":
                texts(m.get("content"))
            for tc in m.get("tool_calls") or []:
                call(tc["id"], tc["function"]["name"], tc["function"]["arguments"])
            if m.get("role") == "tool":  # a string, or text parts (the newest message carries cache_control)
                content = m.get("content") or ""
                result(m["tool_call_id"], content if isinstance(content, str) else
                       "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"))
    return [tuple(c) for c in calls]  # type: ignore[misc]


def agent_reply(agent: Any, wire: str) -> Callable[[Seen], Reply]:
    """A scripted reply computed by a local agent (e.g. the Lift demo agent) from the tool
    calls and results in the request, so a whole series can run through a hosted-model
    adapter: `fake.queue(*[agent_reply(agent, wire)] * 200)`. Trial tags are not on the wire;
    the agent sees trial 0 and finds trial boundaries in the harness's texts, as a model would."""
    from roboswe.protocol.participant import (
        DecisionRequest,
        TextPart,
        ToolCallPart,
        ToolResultPart,
        Turn,
        operation_name,
        parse_operation,
    )

    counter = iter(range(1, 1_000_000))

    def reply(seen: Seen) -> Reply:
        turns: list[Turn] = []
        for i, (cid, name, args, text, error) in enumerate(wire_calls(wire, seen.json())):
            if name is None:
                turns.append(Turn(id=f"u{i}", role="user", parts=[TextPart(text=text)]))
                continue
            op = parse_operation(name, args)
            turns.append(Turn(id=f"a{i}", role="assistant", parts=[ToolCallPart(call_id=cid, name=name, arguments=json.dumps(args), operation=op)]))
            if text is not None:
                turns.append(Turn(id=f"r{i}", role="user", parts=[ToolResultPart(call_id=cid, text=text, is_error=error)]))
        op = agent.decide(DecisionRequest(system="", tools=[], conversation=turns))
        args = json.loads(json.dumps({k: getattr(op, k) for k in op.__struct_fields__}))
        n = next(counter)
        cid = {"openai": f"call_{n}", "anthropic": f"toolu_{n}", "google": None, "openrouter": f"call_or_{n}"}[wire]
        kw: dict[str, Any] = {"tool": (operation_name(op), args)}
        if cid is not None:
            kw["call_id"] = cid
        return REPLY[wire](**kw)

    return reply


def outcome_reply(wire: str, stop: str) -> Reply:
    """A 200 reply whose stop is the model's outcome, with no tool call, as each service sends it:
    Anthropic `stop_reason` refusal (empty content) or max_tokens (cut-off text); OpenAI `status`
    incomplete with `incomplete_details.reason` (only a reasoning item); Gemini `finishReason` SAFETY
    (a candidate without parts) or a blocked prompt (no candidate, `promptFeedback.blockReason`);
    OpenRouter `finish_reason` content_filter or length (no content). Sources: Anthropic build-with-claude/
    handling-stop-reasons; OpenAI api-reference/responses (status, incomplete_details); Gemini
    api/generate-content (FinishReason, PromptFeedback.blockReason); OpenRouter api-reference (finish_reason)."""
    body = json.loads(REPLY[wire](tool=None, text="I will lift the" if stop in ("max_tokens", "length") else "").body)
    if wire == "anthropic":
        body["content"] = [] if stop == "refusal" else body["content"]
        body["stop_reason"] = stop
    elif wire == "openai":
        body["status"], body["incomplete_details"] = "incomplete", {"reason": stop}
        body["output"] = [o for o in body["output"] if o["type"] == "reasoning"]
    elif wire == "google" and stop == "blocked":
        body = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 900, "totalTokenCount": 900},
                "modelVersion": "fake-gemini"}
    elif wire == "google":
        body["candidates"] = [{"content": {"role": "model"}, "finishReason": stop, "index": 0}]
    else:
        body["choices"][0]["message"]["content"] = None
        body["choices"][0]["finish_reason"] = stop
    return _json_reply(body)
