"""The judge's one request per trial, its one tool, and the reading of its answer.

The request holds the task's instruction, the evidence guide, the conditions' plain words and the views
with their labels. It never holds the mechanical outcome, the end's cause or reason, the success interval,
control step numbers or times (the test on the recorded bytes checks it): the judge answers from the
pictures, and only ``compare`` puts its verdicts beside the record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from roboswe.protocol.participant import (
    Decision,
    DecisionRequest,
    ImagePart,
    TextPart,
    ToolSpec,
    Turn,
)
from roboswe.records.schema import sha256_hex

from .conditions import TaskConditions
from .views import View

TOOL = "report_conditions"
VERDICTS = ("supported", "contradicted", "unobservable")
Verdict = Literal["supported", "contradicted", "unobservable"]
MAX_EVIDENCE_CHARS = 1000

SYSTEM = (
    "You audit recorded robot trials from camera images. You see one trial of a robot task: pictures rendered "
    "from the recorded simulation at a few moments, every camera at each moment, and a list of observable "
    "conditions. Judge each condition from the pictures alone: 'supported' when they show it holds, "
    "'contradicted' when they show it does not, 'unobservable' when they cannot tell (out of frame, hidden, "
    "too dark, ambiguous). Give short evidence (what you see, in which picture) and the labels of the pictures "
    f"you used. Answer with one call of {TOOL}, every condition exactly once."
)


def tool(conditions: TaskConditions, labels: Sequence[str]) -> ToolSpec:
    """The one tool: its schema allows exactly one entry per condition, a verdict from the closed set,
    evidence text and the labels of the views used."""
    n = len(conditions.conditions)
    entry = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "enum": [c.id for c in conditions.conditions], "description": "the condition's id"},
            "verdict": {"type": "string", "enum": list(VERDICTS)},
            "evidence": {"type": "string", "description": "what the pictures show about it, briefly"},
            "views": {"type": "array", "items": {"type": "string", "enum": list(labels)},
                      "description": "labels of the pictures the verdict rests on"},
        },
        "required": ["id", "verdict", "evidence", "views"],
        "additionalProperties": False,
    }
    parameters = {"type": "object",
                  "properties": {"conditions": {"type": "array", "items": entry, "minItems": n, "maxItems": n}},
                  "required": ["conditions"], "additionalProperties": False}
    return ToolSpec(name=TOOL, description="Report a verdict, evidence and the pictures used for every condition.",
                    parameters=parameters)


def build_request(instruction: str, conditions: TaskConditions, views: Sequence[View], *, moments: int) -> DecisionRequest:
    """The judge's request for one trial (images by digest in the parts, bytes in ``images``)."""
    cameras = list(dict.fromkeys(v.camera for v in views))
    guide = "\n".join(f"- {c}: {conditions.evidence.get(c, 'a camera of the scene')}" for c in cameras)
    listed = "\n".join(f"- {c.id}: {c.text}" for c in conditions.conditions)
    opening = (f"Task {conditions.task}. The robot was asked: {instruction.strip()}\n\n"
               f"Cameras:\n{guide}\n\n"
               f"Pictures: {moments} moments t1 .. t{moments}, evenly spaced; t1 is the first recorded state, "
               f"t{moments} the final one. Each picture is labelled t<moment>/<camera>.\n\n"
               f"Conditions:\n{listed}")
    parts: list[Any] = [TextPart(text=opening)]
    for v in views:
        parts += [TextPart(text=f"picture {v.label}"),
                  ImagePart(digest=v.sha256, camera=v.camera, width=v.width, height=v.height)]
    return DecisionRequest(system=SYSTEM, tools=[tool(conditions, [v.label for v in views])],
                           conversation=[Turn(id="judge-1", role="user", parts=parts)],
                           images={v.sha256: v.png for v in views})


def neutral_bytes(request: DecisionRequest) -> bytes:
    """The request as recorded: every word and image digest, the image bytes left out (the attempts keep them)."""
    return msgspec.json.encode(msgspec.structs.replace(request, images={}))


def prompt_sha256(request: DecisionRequest) -> str:
    """Of the request's words alone (system prompt, tool, texts): the same for every trial asked the same way."""
    texts = [p.text for t in request.conversation for p in t.parts if isinstance(p, TextPart)]
    return sha256_hex(msgspec.json.encode([request.system, request.tools, texts]))


class ConditionVerdict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: str
    verdict: Verdict
    evidence: str
    views: list[str]


class _Answer(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    conditions: list[ConditionVerdict]


class MalformedAnswer(ValueError):
    """The judge's answer is not one the tool's schema allows: an error, never a verdict."""


def read_answer(decision: Decision, conditions: TaskConditions, labels: Sequence[str]) -> list[ConditionVerdict]:
    """The verdicts in condition order; raises MalformedAnswer saying what is wrong."""
    calls = decision.turn.tool_calls()
    if not calls:
        raise MalformedAnswer(f"no tool call ({decision.invalid or decision.stop_reason or 'the answer has none'})")
    if len(calls) != 1 or calls[0].name != TOOL:
        raise MalformedAnswer(f"expected one call of {TOOL}, got {[c.name for c in calls]}")
    try:
        answer = msgspec.json.decode(calls[0].arguments.encode("utf-8", "surrogatepass"), type=_Answer)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise MalformedAnswer(f"{TOOL} arguments do not fit its schema: {e}") from None
    want = [c.id for c in conditions.conditions]
    got = [v.id for v in answer.conditions]
    if sorted(got) != sorted(want):
        raise MalformedAnswer(f"{TOOL} must give every condition exactly once: expected {want}, got {got}")
    for v in answer.conditions:
        if unknown := sorted(set(v.views) - set(labels)):
            raise MalformedAnswer(f"condition {v.id}: views {unknown} were not shown")
        if not v.evidence.strip() or len(v.evidence) > MAX_EVIDENCE_CHARS:
            raise MalformedAnswer(f"condition {v.id}: evidence must be 1..{MAX_EVIDENCE_CHARS} characters")
    by_id = {v.id: v for v in answer.conditions}
    return [by_id[i] for i in want]


def answer_arguments(verdicts: Sequence[dict[str, Any]]) -> str:
    """The tool call's arguments text for verdicts given as plain data (what a local judge sends)."""
    return json.dumps({"conditions": list(verdicts)})
