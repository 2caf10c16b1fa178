"""A trial's transcript for the trial page: the system prompt and every turn of its conversation, in order.

Built from the records alone: the ``turn`` events the trial recorded as it went (the opening
with the previous outcome, each decision, each operation's result), the trial's slides, and
the request of its first provider call (the system prompt it was sent). Never from what the
participant wrote about itself. Every text here is participant- or provider-controlled: the
page escapes it.

Each turn is tied to the operation it decided or answered, by the order the trial loop keeps
(roboswe.evaluation.trial): a decision's turn is recorded before its operation starts, the
result's turn after it ends. So a decision belongs to the first operation that started at or
after it, a result to the last one that ended at or before it; the page uses that link to
seek the videos and the timeline.
"""

from __future__ import annotations

import bisect
from typing import Any

import msgspec

from roboswe.evaluation.conversation import turn_from_event
from roboswe.protocol.participant import (
    DecisionRequest,
    ImagePart,
    OpaquePart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

MAX_PART_TEXT = 64 * 1024  # a longer text part is cut, with the original length noted

_request_decoder = msgspec.json.Decoder(DecisionRequest)


def _cut(text: str) -> str:
    if len(text) <= MAX_PART_TEXT:
        return text
    return text[:MAX_PART_TEXT] + f"\n... [{len(text) - MAX_PART_TEXT} more characters in the run database]"


def system_prompt(request: bytes) -> str | None:
    """The system prompt a recorded request carried, or None when it is not readable from it.

    The python participant's request is the neutral DecisionRequest; a hosted provider's is its
    own body, where each adapter puts the prompt under one key (roboswe/providers)."""
    try:
        return _request_decoder.decode(request).system
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    try:
        body = msgspec.json.decode(request)
    except msgspec.DecodeError:
        return None
    if not isinstance(body, dict):
        return None
    for key in ("system", "instructions", "system_instruction", "systemInstruction"):
        value = body.get(key)
        if isinstance(value, dict):  # {"parts": [{"text": ...}]}
            value = value.get("parts")
        if isinstance(value, list):  # content blocks
            value = "".join(str(b.get("text", "")) for b in value if isinstance(b, dict)) or None
        if isinstance(value, str):
            return value
    messages = body.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[0], dict) \
            and messages[0].get("role") in ("system", "developer") and isinstance(messages[0].get("content"), str):
        return messages[0]["content"]
    return None


def _image(part: ImagePart, images: dict[str, str]) -> dict[str, Any]:
    return {"kind": "image", "camera": part.camera, "width": part.width, "height": part.height,
            "src": images.get(part.digest)}  # None: the bytes were not recorded as sent


def _parts(parts: list[Any], images: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case TextPart(text=text):
                out.append({"kind": "text", "text": _cut(text)})
            case ReasoningPart(text=text):
                out.append({"kind": "reasoning", "text": _cut(text)})
            case ImagePart():
                out.append(_image(part, images))
            case ToolCallPart(name=name, arguments=arguments, call_id=call_id):
                out.append({"kind": "tool_call", "name": name, "call_id": call_id, "arguments": _cut(arguments)})
            case ToolResultPart(text=text, is_error=is_error, images=shots, call_id=call_id):
                out.append({"kind": "tool_result", "call_id": call_id, "text": _cut(text), "is_error": is_error,
                            "images": [_image(s, images) for s in shots]})
            case OpaquePart(provider=provider, kind=kind, data=data):
                out.append({"kind": "opaque", "provider": provider, "item": kind, "size": len(data)})
    return out


def _role(turn: Any, first_user: bool, trial_index: int) -> str:
    """What the turn is in the trial: opening, decision, result (or a plain user turn)."""
    if turn.role == "assistant":
        return "decision"
    if any(isinstance(p, ToolResultPart) for p in turn.parts):
        return "result"
    if first_user:
        return "opening" if trial_index <= 1 else "opening with the previous outcome"
    return turn.role


def transcript(turns: list[tuple[float, dict[str, Any]]], operations: list[Any], slides: list[Any],
               first_request: bytes | None, images: dict[str, str], trial_index: int) -> dict[str, Any]:
    """The trial page's transcript: {system, entries, slides}; ``turns`` are the (at, data) of the trial's
    turn events in recorded order, ``images`` the exported images by digest."""
    starts = [op.started_at for op in operations]
    ends = [op.ended_at for op in operations]
    removed = {turn_id: s.seq for s in slides for turn_id in s.removed}
    entries: list[dict[str, Any]] = []
    seen_user = False
    for n, (at, data) in enumerate(turns):
        try:
            turn = turn_from_event(data)
        except (msgspec.ValidationError, KeyError, TypeError) as e:
            entries.append({"n": n, "at": at, "role": "unreadable", "parts": [{"kind": "text", "text": str(e)}]})
            continue
        role = _role(turn, not seen_user and turn.role == "user", trial_index)
        seen_user = seen_user or turn.role == "user"
        op = None
        if role == "decision":
            i = bisect.bisect_left(starts, at)
            op = operations[i] if i < len(operations) else None
        elif role == "result":
            i = bisect.bisect_right(ends, at) - 1
            op = operations[i] if i >= 0 else None
        entry: dict[str, Any] = {"n": n, "at": at, "id": turn.id, "role": role, "provider": turn.provider,
                                 "pinned": turn.pinned, "parts": _parts(turn.parts, images)}
        if op is not None:
            entry.update(seq=op.seq, step=op.step_start)
        if turn.id in removed:
            entry["removed_by"] = removed[turn.id]
        entries.append(entry)
    marks = []
    for s in slides:  # a slide happens as a request is prepared: before the first turn recorded after it
        before = next((e["n"] for e in entries if e["at"] >= s.at), None)
        marks.append({"seq": s.seq, "at": s.at, "before": before, "removed": len(s.removed),
                      "before_units": s.before_units, "after_units": s.after_units, "method": s.method})
    system = system_prompt(first_request) if first_request else None
    return {"system": None if system is None else _cut(system), "system_recorded": first_request is not None,
            "entries": entries, "slides": marks}
