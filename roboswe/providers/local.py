"""The `python` participant: a local class (run config `agent = "module:Class"`) that
decides like a hosted model -- it receives the same DecisionRequest, images included.

Its answer is read the way a hosted model's tool call is: the Operation it returns is
validated through `parse_operation` of its arguments (msgspec Structs do not validate on
construction, so ``Act(actions=[])`` is only refused there), and an invalid one, a wrong
return type or an exception the agent raises is the participant's own failure: a Decision
with ``operation=None`` and ``invalid`` saying why, answered with an error result. Only a
`ProviderFailure` it raises (how tests simulate an outage) ends the trial incomplete.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
import traceback
from typing import Any

import msgspec
import structlog
import trio

from roboswe.protocol.participant import (
    Attempt,
    Decision,
    DecisionRequest,
    InvalidOperation,
    Operation,
    ProviderFailure,
    TokenCount,
    ToolCallPart,
    Turn,
    clean_text,
    clean_turn,
    operation_name,
    parse_operation,
)

from ._config import ProviderConfig
from ._estimate import estimate_request
from ._hosted import new_turn_id, sha256
from ._registry import Participant, load_object, maybe_await

log = structlog.get_logger()

_json = msgspec.json.Encoder()

# A tool call's arguments text over this many UTF-8 bytes is summarized in the turn (name, size,
# sha256, first bytes): the conversation, the records and every later request carry the summary,
# the attempt's response the exact text. A hosted model's is bounded by its max_output_tokens.
MAX_TURN_ARGUMENT_BYTES = 64 * 1024
_SHOWN_BYTES = 512  # of an over-bound arguments text, the first bytes shown in its summary
_MAX_INVALID_CHARS = 2000  # an agent's exception text, as the participant's error result shows it


class PythonParticipant(Participant):
    """Wraps a local agent. Its `decide(request)` (sync or async) returns an Operation, or a
    full Decision; an Operation becomes an assistant turn with one tool call."""

    kind = "python"

    def __init__(self, config: ProviderConfig, agent: Any = None):
        self.config = config
        if agent is None:
            if not config.agent:
                raise ValueError('provider python: set agent = "package.module:ClassName" in the run config')
            cls = load_object(config.agent)
            agent = cls(**config.options)
        if not callable(getattr(agent, "decide", None)):
            raise ValueError(f"agent {config.agent or type(agent).__name__} has no decide(request) method")
        self.agent = agent
        self._calls = 0

    async def decide(self, request: DecisionRequest) -> Decision:
        started, t0 = time.time(), time.monotonic()
        agent = type(self.agent).__name__
        try:
            if inspect.iscoroutinefunction(self.agent.decide):
                result = await self.agent.decide(request)
            else:
                # A synchronous agent runs in a worker thread: on the actor's trio thread it would stop
                # heartbeats and keep the process alive past a stop (the thread is abandoned on cancel).
                result = await trio.to_thread.run_sync(self.agent.decide, request, abandon_on_cancel=True)
        except ProviderFailure:
            raise  # a simulated outage: the trial is incomplete, as for a hosted provider's
        except Exception as e:  # noqa: BLE001 - the agent's bug is its own failed decision, not the harness's
            # A plain, bounded traceback: a renderer that pretty-prints the frames' locals (the agent's
            # 100,000-row chunk) would hold the actor's thread for as long as it takes.
            log.warning("agent_raised", agent=agent, error=f"{type(e).__name__}: {e}"[:_MAX_INVALID_CHARS],
                        traceback="".join(traceback.format_exception(e, limit=8))[-8000:])
            return self._refused(request, started, t0, f"the agent's decide raised {type(e).__name__}: {e}")
        latency = time.monotonic() - t0
        if isinstance(result, Decision):
            return self._checked(result)
        if not isinstance(result, Operation):
            return self._refused(request, started, t0, f"{agent}.decide returned {type(result).__name__}; "
                                                       "expected an Operation or a Decision")
        self._calls += 1
        # Unique across instances: a resumed run's new instance must not reuse an id.
        call_id = f"call-{new_turn_id('python').split('-', 1)[1]}-{self._calls}"
        name = operation_name(result)
        arguments, operation, invalid = _read_operation(name, result)
        exact = ToolCallPart(call_id=call_id, name=name, arguments=arguments, operation=operation)
        kept = msgspec.structs.replace(exact, arguments=bounded_arguments(name, arguments))
        turn = Turn(id=new_turn_id("python"), role="assistant", trial=request.trial, provider="python", parts=[kept])
        # Evidence like a hosted call: the request without image bytes, and the answer as it was made.
        req_bytes = _json.encode(msgspec.structs.replace(request, images={}))
        resp_bytes = _json.encode(msgspec.structs.replace(turn, parts=[exact]))
        attempt = Attempt(number=1, started_at=started, latency_s=latency, outcome="ok", request=req_bytes,
                          response=resp_bytes, request_sha256=sha256(req_bytes), response_sha256=sha256(resp_bytes))
        return Decision(turn=turn, operation=operation, call_id=call_id, invalid=invalid, attempts=[attempt],
                        latency_s=latency, model=self.config.agent)

    def _refused(self, request: DecisionRequest, started: float, t0: float, why: str) -> Decision:
        """A decision the agent could not make: no tool call, and why (its error result)."""
        if len(why) > _MAX_INVALID_CHARS:
            why = why[:_MAX_INVALID_CHARS] + " [...]"
        why = clean_text(why)
        latency = time.monotonic() - t0
        turn = Turn(id=new_turn_id("python"), role="assistant", trial=request.trial, provider="python", parts=[])
        req_bytes = _json.encode(msgspec.structs.replace(request, images={}))
        resp_bytes = _json.encode(turn)  # the answer: no tool call (why is the attempt's detail)
        attempt = Attempt(number=1, started_at=started, latency_s=latency, outcome="ok", detail=why, request=req_bytes,
                          response=resp_bytes, request_sha256=sha256(req_bytes), response_sha256=sha256(resp_bytes))
        return Decision(turn=turn, operation=None, invalid=why, attempts=[attempt], latency_s=latency,
                        model=self.config.agent)

    def _checked(self, decision: Decision) -> Decision:
        """A full Decision from the agent, its operation validated like a returned one's."""
        turn = clean_turn(decision.turn)
        if decision.operation is None:
            return msgspec.structs.replace(decision, turn=turn, invalid=clean_text(decision.invalid))
        _, operation, invalid = _read_operation(operation_name(decision.operation), decision.operation)
        if operation is None:
            parts = [msgspec.structs.replace(p, operation=None)
                     if isinstance(p, ToolCallPart) and p.call_id == decision.call_id else p for p in turn.parts]
            turn = msgspec.structs.replace(turn, parts=parts)
        return msgspec.structs.replace(decision, turn=turn, operation=operation, invalid=invalid)

    async def count_tokens(self, request: DecisionRequest) -> TokenCount:
        return TokenCount(tokens=estimate_request(request), method="python.local_estimate", exact=False)

    async def aclose(self) -> None:
        close = getattr(self.agent, "aclose", None)
        if close is not None:
            await maybe_await(close())


def _read_operation(name: str, op: Operation) -> tuple[str, Operation | None, str]:
    """(arguments JSON text, the validated operation or None, why not) for an operation an agent built."""
    try:
        args = msgspec.to_builtins(op)
    except (TypeError, ValueError, RecursionError) as e:
        why = "nested too deeply to read" if isinstance(e, RecursionError) else f"not JSON values ({e})"
        return "{}", None, f"arguments of {name} could not be read: {why}"
    args.pop("op", None)
    try:
        operation: Operation | None = parse_operation(name, args)
        invalid = ""
    except InvalidOperation as e:
        operation, invalid = None, str(e)
    try:
        arguments = _json.encode(args).decode()
    except UnicodeEncodeError:  # a lone surrogate (refused above): JSON's escapes keep the text exact
        arguments = json.dumps(args, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        arguments = "{}"
    return arguments, operation, invalid


def bounded_arguments(name: str, arguments: str) -> str:
    """The arguments text as the turn keeps it: itself up to MAX_TURN_ARGUMENT_BYTES, else a JSON
    summary naming the operation, the size, the sha256 and the first bytes."""
    data = arguments.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_TURN_ARGUMENT_BYTES:
        return arguments
    return json.dumps({"_summary": (f"{name} arguments of {len(data)} bytes, over the {MAX_TURN_ARGUMENT_BYTES}-byte "
                                    "bound of a conversation turn; the decision's attempt keeps them exactly"),
                       "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                       "first_bytes": data[:_SHOWN_BYTES].decode("utf-8", "replace")})
