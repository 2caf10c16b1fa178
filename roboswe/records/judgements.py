"""The visual cross-check's record: one judge's look at one trial, kept apart from the trial's own records.

A row of the ``judgements`` table (records/schema.py). It is written by `roboswe judge` (roboswe/judge),
never by a run, and never read by scoring: the mechanical outcome is the pass gate, the judge a
supplementary audit. Judging a trial again adds a row; nothing written is rewritten.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from roboswe.protocol.participant import Attempt

JudgementStatus = Literal["answered", "error"]
"""answered: the judge's tool call was read, every condition has a verdict; error: no verdict (why: ``error``)."""


class JudgementRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One judge request for one trial attempt, its exact evidence and what was read from the answer."""

    judgement_id: str
    run_id: str
    trial_id: str
    judge: str  # the judge config's name
    judge_sha256: str  # of the judge config file's bytes
    provider: str  # the provider kind that answered (anthropic, openai, google, openrouter, python)
    model: str  # the model pin (a local judge: its agent spec)
    settings: dict[str, Any]  # the judge's [provider] section as plain data (a key variable's NAME only) and view rule
    conditions_sha256: str  # of the task's conditions file
    prompt_sha256: str  # of the request's words: system prompt, texts and tool schema, image bytes excluded
    views: list[dict[str, Any]]  # per image in request order: label, camera, step, row, sha256, width, height
    request: bytes  # the neutral request as sent to the adapter, image bytes replaced by their digests
    request_sha256: str
    attempts: list[Attempt]  # every attempt with its exact wire request and response bytes
    response: bytes | None  # the answering attempt's exact response bytes (None: no attempt answered)
    status: JudgementStatus
    error: str  # why there is no verdict ("" when answered)
    verdicts: list[dict[str, Any]]  # per condition: id, verdict, evidence, views, expected, comparison
    usage: dict[str, Any]  # tokens as records/usage.py counts them
    cost: dict[str, Any]  # at the judge config's [provider.price]; amount None with the reason when not known
    started_at: float
    ended_at: float
