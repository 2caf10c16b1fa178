"""What every hosted-model adapter shares: exact recording of HTTP attempts, retries, keys.

Each adapter builds its provider's native request body from the neutral DecisionRequest,
sends it through the provider's own SDK (SDK retries off: we retry here so every attempt
is recorded), and reads the decision from the exact response bytes the transport saw.
"""

from __future__ import annotations

import abc
import contextvars
import email.utils
import hashlib
import json
import os
import re
import time
import typing
import uuid
from typing import Any

import anyio
import msgspec
import structlog

from roboswe.protocol.participant import (
    Attempt,
    Decision,
    DecisionRequest,
    InvalidOperation,
    OpaquePart,
    ProviderFailure,
    ReasoningPart,
    TextPart,
    TokenCount,
    ToolCallPart,
    Turn,
    Usage,
    clean_text,
    clean_turn,
    parse_operation,
)

from ._common import clean_json, mask_lone_surrogates, prune_json, unmask, unmask_turn
from ._config import (
    SAFETY_ALLOWANCE,
    MissingKey,
    MissingSDK,
    ProviderConfig,
    effective_limits,
)
from ._estimate import estimate_request
from ._profiles import model_profile
from ._registry import Participant

log = structlog.get_logger()

STOP = "stop"  # OpaquePart kind: the provider's stop field of a reply whose stop was the model's outcome

# Headers kept in the evidence; everything else (notably credentials) is dropped.
_KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms", "request-id", "x-request-id")


class Exchange(msgspec.Struct, kw_only=True):
    """One HTTP request/response as the wire carried it (body bytes; no credentials)."""

    url: str
    request: bytes = b""
    status: int = 0
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    response: bytes = b""


_exchanges: contextvars.ContextVar[list[Exchange] | None] = contextvars.ContextVar("exchanges", default=None)


def _open_exchange(request: Any, body: bytes) -> Exchange:
    """Start recording one exchange into the current attempt's sink (if any)."""
    # The query string may carry a key (?key=...); never record it.
    exchange = Exchange(url=str(request.url.copy_with(query=None)), request=body)
    sink = _exchanges.get()
    if sink is not None:
        sink.append(exchange)
    return exchange


def _close_exchange(httpx2: Any, exchange: Exchange, request: Any, response: Any, content: bytes) -> Any:
    """Record the decoded response and hand the SDK an equivalent, already-read response."""
    exchange.status = response.status_code
    exchange.response = content
    exchange.headers = {k: response.headers[k] for k in _KEPT_HEADERS if k in response.headers}
    headers = [
        (k, v) for k, v in response.headers.items() if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return httpx2.Response(
        response.status_code, headers=headers, content=content, request=request, extensions=response.extensions
    )


def recording_client(timeout_s: float, connect_timeout_s: float) -> Any:
    """An httpx2 AsyncClient whose transport records every exchange of the current attempt."""
    import httpx2

    class RecordingTransport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            exchange = _open_exchange(request, await request.aread())
            response = await self._inner.handle_async_request(request)
            try:
                raw = httpx2.Response(response.status_code, headers=response.headers, stream=response.stream)
                content = await raw.aread()  # decoded (gzip etc. undone)
            finally:
                await response.aclose()
            return _close_exchange(httpx2, exchange, request, response, content)

        async def aclose(self) -> None:
            await self._inner.aclose()

    timeout = httpx2.Timeout(timeout_s, connect=connect_timeout_s)
    return httpx2.AsyncClient(transport=RecordingTransport(), timeout=timeout)


def recording_sync_client(timeout_s: float, connect_timeout_s: float) -> Any:
    """The blocking twin of `recording_client`, for SDKs whose async path needs asyncio
    (google-genai); they run in a worker thread, which inherits the attempt's context."""
    import httpx2

    class RecordingTransport(httpx2.BaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.HTTPTransport()

        def handle_request(self, request: Any) -> Any:
            exchange = _open_exchange(request, request.read())
            response = self._inner.handle_request(request)
            try:
                raw = httpx2.Response(response.status_code, headers=response.headers, stream=response.stream)
                content = raw.read()
            finally:
                response.close()
            return _close_exchange(httpx2, exchange, request, response, content)

        def close(self) -> None:
            self._inner.close()

    timeout = httpx2.Timeout(timeout_s, connect=connect_timeout_s)
    return httpx2.Client(transport=RecordingTransport(), timeout=timeout)


def read_key(config: ProviderConfig) -> str:
    """The API key from the variable the config names; raises MissingKey saying what to set."""
    if not config.api_key_env:
        raise MissingKey(f"provider {config.kind}: set api_key_env in the run config to the NAME of the variable holding the key")
    key = os.environ.get(config.api_key_env, "")
    if not key:
        raise MissingKey(
            f"provider {config.kind}: environment variable {config.api_key_env} is empty or unset; "
            f"export it with your API key (the config holds only the variable's name)"
        )
    return key


def import_sdk(module: str, package: str) -> Any:
    """Import a provider SDK lazily; raises MissingSDK naming the package to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingSDK(f"the {package!r} package is needed for this provider: pip install {package} ({e})") from e


class Retryable(Exception):
    """An attempt that failed in a way worth retrying (transport, 429, 5xx, malformed body)."""

    def __init__(self, outcome: str, detail: str, *, retry_after: float | None = None):
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail
        self.retry_after = retry_after


class Refused(Exception):
    """An attempt the provider refused for good (bad request, auth, not found)."""

    def __init__(self, outcome: str, detail: str):
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail


def retry_after_seconds(headers: dict[str, str]) -> float | None:
    """Seconds a server asked us to wait (Retry-After seconds or HTTP date, retry-after-ms)."""
    if "retry-after-ms" in headers:
        try:
            return float(headers["retry-after-ms"]) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def classify_status(status: int, body: bytes, headers: dict[str, str]) -> Exception:
    """Turn an HTTP error status into Retryable or Refused."""
    snippet = body[:300].decode("utf-8", "replace")
    if status == 429 or status == 408 or status >= 500:
        outcome = "overloaded" if status == 529 else f"http_{status}"
        return Retryable(outcome, f"HTTP {status}: {snippet}", retry_after=retry_after_seconds(headers))
    return Refused(f"http_{status}", f"HTTP {status}: {snippet}")


def new_turn_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:16]}"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest() if data else ""


class HostedParticipant(Participant):
    """Base of the hosted-model adapters: the attempt loop and the decision assembly."""

    # Monotonic time before which no attempt is sent: a server's Retry-After holds every
    # concurrent call of this participant (fleet workers share it), not only the one it answered.
    _hold_until = 0.0

    def __init__(self, config: ProviderConfig):
        if not config.model:
            raise ValueError(f"provider {config.kind}: set `model` in the run config to an exact model pin")
        self.config = config
        self.http = recording_client(config.timeout_s, config.connect_timeout_s)
        self._refusals: dict[str, tuple[str, int]] = {}  # a 400's words -> the (series, trial) it first ended
        if warning := model_profile(config).warning:
            log.warning("model_profile_unknown", provider=config.kind, model=config.model, detail=warning)

    # ---- what each adapter provides

    @abc.abstractmethod
    def build_body(self, request: DecisionRequest) -> dict[str, Any]:
        """The provider-native request body for this decision."""

    @abc.abstractmethod
    async def send(self, body: dict[str, Any]) -> None:
        """Send one attempt through the SDK; the transport records the exchange."""

    @abc.abstractmethod
    def read_response(self, raw: bytes) -> tuple[Turn, Usage, str, str]:
        """Parse the exact response bytes into (assistant turn, usage, model id, stop reason); raises
        Retryable("malformed") when they are not a valid response."""

    async def count_tokens(self, request: DecisionRequest) -> TokenCount:
        """Input units of a request; the base uses the conservative local estimate."""
        return TokenCount(tokens=estimate_request(request), method=f"{self.kind}.local_estimate", exact=False)

    def classify_error(self, error: BaseException) -> Exception:
        """Map an SDK exception that came without an HTTP response to Retryable/Refused."""
        name = type(error).__name__.lower()
        if "timeout" in name:
            return Retryable("timeout", f"{type(error).__name__}: {error}")
        if "connect" in name or "transport" in name or "network" in name or "protocol" in name:
            return Retryable("transport", f"{type(error).__name__}: {error}")
        return Refused("client_error", f"{type(error).__name__}: {error}")

    # ---- the attempt loop

    async def call(self, body: dict[str, Any], read: Any, *, send: Any = None) -> tuple[Any, list[Attempt]]:
        """Send `body` until an attempt succeeds; returns (read(raw), attempts) or raises
        ProviderFailure carrying every attempt."""
        cfg = self.config
        attempts: list[Attempt] = []
        for number in range(1, cfg.attempts + 1):
            while (hold := self._hold_until - time.monotonic()) > 0:
                await anyio.sleep(hold)
            sink: list[Exchange] = []
            token = _exchanges.set(sink)
            started, t0 = time.time(), time.monotonic()
            result: Any = None
            failure: Exception | None = None
            try:
                # A lone surrogate (a model's text, kept in the history) would stop the SDK's UTF-8 encoding.
                await (send or self.send)(clean_json(body))
            except BaseException as e:
                if isinstance(e, (KeyboardInterrupt, SystemExit)) or _is_cancellation(e):
                    raise
                failure = e
            finally:
                _exchanges.reset(token)
            latency = time.monotonic() - t0
            exchange = sink[-1] if sink else Exchange(url="")
            if exchange.status and exchange.status >= 400:
                failure = classify_status(exchange.status, exchange.response, exchange.headers)
            elif exchange.status == 200:
                try:
                    result = read(exchange.response)
                    failure = None
                except (Retryable, Refused) as e:
                    failure = e
                except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
                    # A 200 body this adapter cannot read is the provider's malformed answer: a failed
                    # attempt with its bytes recorded, never an exception that loses them.
                    failure = Retryable("malformed", f"the response could not be read: {type(e).__name__}: {e}")
            elif failure is not None:
                failure = self.classify_error(failure)
            else:
                failure = Retryable("transport", "no HTTP response was recorded")
            if failure is None:
                attempts.append(_attempt(number, started, latency, "ok", "", exchange))
                log.info("provider_attempt", provider=self.kind, attempt=number, outcome="ok", latency_s=round(latency, 3))
                return result, attempts
            outcome = getattr(failure, "outcome", "error")
            detail = getattr(failure, "detail", str(failure))
            last = number == cfg.attempts
            backoff = 0.0
            if isinstance(failure, Retryable) and not last:
                backoff = min(cfg.backoff_max_s, cfg.backoff_initial_s * 2 ** (number - 1))
                if failure.retry_after is not None:
                    backoff = max(backoff, min(cfg.retry_after_max_s, failure.retry_after))
                    self._hold_until = max(self._hold_until, time.monotonic() + backoff)
            attempts.append(_attempt(number, started, latency, outcome, detail, exchange, backoff))
            log.warning(
                "provider_attempt", provider=self.kind, attempt=number, outcome=outcome, detail=detail[:200], backoff_s=backoff
            )
            if isinstance(failure, Refused) or last:
                raise ProviderFailure(f"{self.kind}: {outcome} after {number} attempt(s): {detail}", attempts)
            await anyio.sleep(backoff)
        raise AssertionError("unreachable")

    def response_json(self, raw: bytes) -> bytes:
        """The response as one JSON document; an adapter whose responses may be event streams assembles them here."""
        return raw

    def read_turn(self, raw: bytes) -> tuple[Turn, Usage, str, str]:
        """read_response, safe for anything a model can put in a response: containers nested deeper
        than MAX_RESPONSE_DEPTH (only a tool call's arguments can be) are cut first (the turn keeps the
        cut bytes, the attempt the exact ones), lone surrogate escapes, which msgspec refuses, are read
        through stand-ins and given back to the turn (`mask_lone_surrogates`: assemble_decision then
        refuses them in a tool call and replaces them elsewhere). Raises Retryable("malformed") for a
        turn whose text fields are not text."""
        safe, table = mask_lone_surrogates(prune_json(self.response_json(raw)))
        turn, usage, model, stop = self.read_response(safe)
        if wrong := _mistyped(turn):  # e.g. a tool call's arguments as an object where the wire says text
            raise Retryable("malformed", f"the response's {wrong}")
        if table:
            turn = unmask_turn(turn, table)
            model, stop = unmask(model, table), unmask(stop, table)
        return turn, usage, model, stop

    # The stop reasons that are the model's outcome, not a glitch of the service: the value as
    # read_response returns it (a prefix: OpenAI's "incomplete: <reason>") -> what the participant is told.
    # Such a reply is a decision (recorded, the participant told in the next message), never resent unchanged.
    OUTCOME_STOPS: typing.ClassVar[dict[str, str]] = {}
    STOP_FIELD: typing.ClassVar[str] = "stop_reason"  # the provider's own name of the field, kept on the turn

    # The stops that mean the reply reached max_output_tokens (values as read_response returns them), and
    # where the body carries the limit: after one, `max_output_tokens_raise` sends the request once more.
    LENGTH_STOPS: typing.ClassVar[tuple[str, ...]] = ()
    OUTPUT_LIMIT_KEY: typing.ClassVar[str] = "max_tokens"

    def with_output_limit(self, body: dict[str, Any], tokens: int) -> dict[str, Any]:
        """``body`` asking for at most ``tokens`` output tokens."""
        return {**body, self.OUTPUT_LIMIT_KEY: tokens}

    def raised_output_limit(self, stop: str, usage: Usage) -> int:
        """The output limit to send the request again with after ``stop``, or 0: the configured raise, within
        the model's output cap and the window its input left (the input as billed, and the safety allowance)."""
        cfg = self.config
        if not cfg.max_output_tokens_raise or stop not in self.LENGTH_STOPS:
            return 0
        window, _ = effective_limits(cfg)
        cap = model_profile(cfg).max_output_tokens or cfg.max_output_tokens_raise
        raised = min(cfg.max_output_tokens_raise, cap, window - usage.input_tokens - SAFETY_ALLOWANCE)
        return raised if raised > cfg.max_output_tokens else 0

    def stop_outcome(self, stop: str) -> str:
        """What the participant is told when ``stop`` is the model's outcome; "" otherwise."""
        found = next((said for value, said in self.OUTCOME_STOPS.items() if stop == value or stop.startswith(value + ":")),
                     "")
        return f"{found} (the response stopped with {self.STOP_FIELD} {stop!r})" if found else ""

    def read_reply(self, raw: bytes) -> tuple[Turn, Usage, str, str]:
        """`read_turn`, with an empty reply (no text, no tool call: an Anthropic end_turn with
        no content, a Gemini candidate without parts, an OpenAI response holding only reasoning)
        made a failed attempt: retried and recorded, never a turn in the history, where every
        later request would carry it. An empty reply whose stop reason is the model's outcome (a
        refusal, max_tokens, an incomplete response, a safety block) is the model's answer instead:
        sending the same request again would pay for the same outcome."""
        turn, usage, model, stop = self.read_turn(raw)
        if self.stop_outcome(stop):
            return turn, usage, model, stop
        if not any(isinstance(p, ToolCallPart) or (isinstance(p, TextPart) and p.text.strip()) for p in turn.parts):
            raise Retryable("empty_reply", f"the response holds no text and no tool call (stop reason {stop!r}, "
                                           f"{len(turn.parts)} other part(s))")
        return turn, usage, model, stop

    def annotate(self, turn: Turn, request: DecisionRequest, body: dict[str, Any]) -> Turn:
        """The assistant turn as it enters the history; adapters add what replay needs later."""
        return turn

    async def decide(self, request: DecisionRequest) -> Decision:
        try:
            return await self._decide(request)
        except ProviderFailure as e:
            raise self._repeated_refusal(e, request) from None

    def _repeated_refusal(self, failure: ProviderFailure, request: DecisionRequest) -> ProviderFailure:
        """``failure``, made a ``configuration`` failure when its 400 is one an earlier trial already ended
        on: a request the provider refuses for good in two trials is the harness's or the configuration's
        doing, and every later trial would repeat it, so the run stops there (as for a refused key)."""
        last = failure.attempts[-1] if failure.attempts else None
        if last is None or last.status != 400:
            return failure
        # The refusal's words without the numbers and ids that differ between requests (message indices, ids).
        said = re.sub(r"[0-9a-f]{8,}|\d+", "#", last.response[:400].decode("utf-8", "replace"))
        where = (request.series, request.trial)
        first = self._refusals.setdefault(said, where)
        if first == where:
            return failure
        repeated = ProviderFailure(f"the provider refused this request as it refused one in trial {first[1]} of "
                                   f"series {first[0] or '-'} (a harness or configuration cause every later trial "
                                   f"would repeat): {failure.detail}", failure.attempts)
        repeated.reason = "configuration"
        return repeated

    async def _decide(self, request: DecisionRequest) -> Decision:
        body = self.build_body(request)
        (turn, usage, model, stop), attempts = await self.call(body, self.read_reply)
        raised = self.raised_output_limit(stop, usage)
        if raised:  # the stopped reply stays in the evidence (billed, counted as a stop), named
            log.info("max_output_tokens_raised", provider=self.kind, stop=stop, series=request.series,
                     trial=request.trial, old=self.config.max_output_tokens, new=raised)
            stopped = msgspec.structs.replace(
                attempts[-1], outcome="max_tokens_raised",
                detail=f"stopped with {self.STOP_FIELD} {stop!r} at max_output_tokens {self.config.max_output_tokens}; "
                       f"sent again with {raised} (max_output_tokens_raise)")
            before = [*attempts[:-1], stopped]
            try:
                (turn, usage, model, stop), again = await self.call(self.with_output_limit(body, raised), self.read_reply)
            except ProviderFailure as e:
                raise ProviderFailure(e.detail, [*before, *renumbered(e.attempts, len(before))]) from None
            attempts = [*before, *renumbered(again, len(before))]
        turn = self.annotate(msgspec.structs.replace(turn, trial=request.trial), request, body)
        outcome = self.stop_outcome(stop)
        if outcome:  # kept on the turn in the provider's own field; never sent back (STOP parts are not replayed)
            log.info("provider_stop_outcome", provider=self.kind, stop=stop, series=request.series, trial=request.trial)
            stop_part = OpaquePart(provider=self.kind, kind=STOP, data=json.dumps({self.STOP_FIELD: stop}).encode())
            turn = msgspec.structs.replace(turn, parts=[*turn.parts, stop_part])
        return assemble_decision(turn, usage, attempts, model, stop, outcome=outcome)

    async def aclose(self) -> None:
        await self.http.aclose()


def renumbered(attempts: list[Attempt], after: int) -> list[Attempt]:
    """``attempts`` numbered on from ``after`` earlier ones of the same decision."""
    return [msgspec.structs.replace(a, number=a.number + after) for a in attempts]


def _mistyped(turn: Turn) -> str:
    """What in a turn an adapter read is not the type its part declares (only text fields can be: the
    adapters take them from the response as they come), or ""."""
    for part in turn.parts:
        for name in _TEXT_FIELDS.get(type(part), ()):
            if not isinstance(value := getattr(part, name), str):
                return f"{type(part).__name__}.{name} is {type(value).__name__}, not text"
    return ""


_TEXT_FIELDS = {cls: tuple(n for n, t in typing.get_type_hints(cls).items() if t is str)
                for cls in (TextPart, ReasoningPart, ToolCallPart, OpaquePart)}


def _is_cancellation(e: BaseException) -> bool:
    try:
        return isinstance(e, anyio.get_cancelled_exc_class())
    except Exception:
        return False


def _attempt(number: int, started: float, latency: float, outcome: str, detail: str, ex: Exchange, backoff: float = 0.0) -> Attempt:
    return Attempt(
        number=number,
        started_at=started,
        latency_s=latency,
        outcome=outcome,
        status=ex.status,
        detail=detail,
        url=ex.url,
        request=ex.request,
        response=ex.response,
        request_sha256=sha256(ex.request),
        response_sha256=sha256(ex.response),
        backoff_s=backoff,
    )


def assemble_decision(turn: Turn, usage: Usage, attempts: list[Attempt], model: str, stop: str = "",
                      outcome: str = "") -> Decision:
    """Pick the operation from the turn's first tool call, or say why there is none (``outcome``: the
    model's own stop, e.g. a refusal). The call is parsed as the model sent it (a lone surrogate in it
    makes the decision invalid); the turn that enters the history then has lone surrogates replaced by
    U+FFFD, so every wire can carry it."""
    calls = turn.tool_calls()
    latency = attempts[-1].latency_s if attempts else 0.0
    model, stop = clean_text(model), clean_text(stop)
    if not calls:
        turn = clean_turn(turn)
        why = outcome or ("no tool call: answer with exactly one operation"
                          + (f" (the response stopped with {stop!r})" if stop else ""))
        return Decision(turn=turn, operation=None, invalid=why, usage=usage, attempts=attempts, latency_s=latency,
                        model=model, stop_reason=stop)
    first = calls[0]
    try:
        operation = parse_operation(first.name, first.arguments)
        invalid = ""
    except InvalidOperation as e:
        operation, invalid = None, str(e)
    if operation is not None and first.operation is None:
        parts = [msgspec.structs.replace(p, operation=operation) if p is first else p for p in turn.parts]
        turn = msgspec.structs.replace(turn, parts=parts)
    turn = clean_turn(turn)
    return Decision(turn=turn, operation=operation, call_id=clean_text(first.call_id), invalid=invalid, usage=usage,
                    attempts=attempts, latency_s=latency, model=model, stop_reason=stop)


def loads_json(raw: bytes) -> Any:
    """json.loads that turns a bad body into Retryable("malformed")."""
    try:
        return json.loads(raw)
    except ValueError as e:
        raise Retryable("malformed", f"response is not valid JSON: {e}; first bytes {raw[:80]!r}") from None


def token_count(raw: bytes, key: str, endpoint: str) -> int:
    """The integer ``key`` of a count endpoint's JSON answer; a missing one is Retryable("malformed")."""
    data = loads_json(raw)
    if not isinstance(data, dict) or not isinstance(data.get(key), int):
        raise Retryable("malformed", f"{endpoint} answer has no {key}: {raw[:120]!r}")
    return data[key]


__all__ = ["HostedParticipant", "Refused", "Retryable"]
