"""The `python` participant: a local class (run config `agent = "module:Class"`) that
decides like a hosted model -- it receives the same DecisionRequest, images included."""

from __future__ import annotations

import inspect
import time
from typing import Any

import msgspec
import trio

from roboswe.protocol.participant import (
    Attempt,
    Decision,
    DecisionRequest,
    Operation,
    TokenCount,
    ToolCallPart,
    Turn,
    operation_name,
)

from ._config import ProviderConfig
from ._estimate import estimate_request
from ._hosted import new_turn_id, sha256
from ._registry import Participant, load_object, maybe_await

_json = msgspec.json.Encoder()


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
        if inspect.iscoroutinefunction(self.agent.decide):
            result = await self.agent.decide(request)
        else:
            # A synchronous agent runs in a worker thread: on the actor's trio thread it would stop
            # heartbeats and keep the process alive past a stop (the thread is abandoned on cancel).
            result = await trio.to_thread.run_sync(self.agent.decide, request, abandon_on_cancel=True)
        latency = time.monotonic() - t0
        if isinstance(result, Decision):
            return result
        if not isinstance(result, Operation):
            raise TypeError(f"agent {type(self.agent).__name__}.decide returned {type(result).__name__}; expected an Operation or a Decision")
        self._calls += 1
        # Unique across instances: a resumed run's new instance must not reuse an id.
        call_id = f"call-{new_turn_id('python').split('-', 1)[1]}-{self._calls}"
        args = msgspec.json.decode(_json.encode(result))
        args.pop("op", None)
        arguments = _json.encode(args).decode()
        turn = Turn(id=new_turn_id("python"), role="assistant", trial=request.trial, provider="python",
                    parts=[ToolCallPart(call_id=call_id, name=operation_name(result), arguments=arguments, operation=result)])
        # Evidence like a hosted call: the request without image bytes, and the answer.
        req_bytes = _json.encode(msgspec.structs.replace(request, images={}))
        resp_bytes = _json.encode(turn)
        attempt = Attempt(number=1, started_at=started, latency_s=latency, outcome="ok", request=req_bytes,
                          response=resp_bytes, request_sha256=sha256(req_bytes), response_sha256=sha256(resp_bytes))
        return Decision(turn=turn, operation=result, call_id=call_id, attempts=[attempt], latency_s=latency, model=self.config.agent)

    async def count_tokens(self, request: DecisionRequest) -> TokenCount:
        return TokenCount(tokens=estimate_request(request), method="python.local_estimate", exact=False)

    async def aclose(self) -> None:
        close = getattr(self.agent, "aclose", None)
        if close is not None:
            await maybe_await(close())
