"""The readable part of a recorded provider response: model text, exposed reasoning, tool calls.

Responses are stored as the provider's exact bytes. The provider adapters already know how
to read them into neutral parts (``read_response``); this reuses them and keeps only
``TextPart``, ``ReasoningPart`` and ``ToolCallPart``. Opaque items (thinking signatures,
encrypted reasoning) are never shown.
"""

from __future__ import annotations

from typing import Any

import msgspec
import structlog

from roboswe.protocol.participant import ReasoningPart, TextPart, ToolCallPart, Turn

log = structlog.get_logger()

_turn_decoder = msgspec.json.Decoder(Turn)


def _adapter_turn(provider: str, raw: bytes) -> Turn | None:
    """Read hosted-provider bytes with that provider's adapter (no credentials, no network)."""
    from roboswe.providers import participant_class

    cls = participant_class(provider)
    if not isinstance(cls, type) or not hasattr(cls, "read_response"):
        return None
    from roboswe.protocol.participant import clean_turn

    reader = cls.__new__(cls)  # read_turn needs no configuration: skip __init__ (which wants a key)
    # read_turn, as the adapter read the reply when it came: deep nesting cut, lone surrogates shown as U+FFFD
    parsed = reader.read_turn(raw)  # (turn, usage, model, ...): only the turn is needed here
    return clean_turn(parsed[0])


def readable_parts(provider: str, response: bytes | None) -> list[dict[str, Any]]:
    """[{kind: text|reasoning|tool_call, ...}] for display; [] when the bytes cannot be read."""
    if not response:
        return []
    turn: Turn | None = None
    try:
        turn = _turn_decoder.decode(response)  # the python participant stores its Turn
    except (msgspec.DecodeError, msgspec.ValidationError):
        try:
            turn = _adapter_turn(provider, response)
        except Exception as e:  # noqa: BLE001 - an unreadable response is shown as such, not fatal
            log.debug("response_unreadable", provider=provider, error=str(e))
            return [{"kind": "note", "text": f"response not readable by the {provider} adapter: {e}"}]
    if turn is None:
        return []
    out: list[dict[str, Any]] = []
    for part in turn.parts:
        match part:
            case ReasoningPart(text=text):
                out.append({"kind": "reasoning", "text": text})
            case TextPart(text=text) if text:
                out.append({"kind": "text", "text": text})
            case ToolCallPart(name=name, arguments=arguments):
                out.append({"kind": "tool_call", "name": name, "arguments": arguments})
    return out
