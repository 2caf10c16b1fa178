"""The context policy a run used and every slide it made, read from the records.

The policy (DESIGN.md section 5): context capacity C and output reserve O from the pinned
``[provider]`` config, the safety allowance S, the input budget B = min(C - O, the model's input cap) - S
(as the run computed it from the model profile), the minimum a
slide removes, and the counting methods the requests were actually measured with (the
``request_count`` events: a provider count endpoint, or an estimate or proxy, kept apart).
Each slide (the ``slides`` table): its trial, time, the archived messages that left the
active request, the units before and after, and the counting method.
"""

from __future__ import annotations

from typing import Any

import msgspec

from roboswe.records.reader import RunReader

# Mirrors roboswe.context.policy (S and the slide minimum); read from there when it imports.
try:
    from roboswe.context.policy import SAFETY_ALLOWANCE, SLIDE_MIN_UNITS
except ImportError:  # pragma: no cover - the records must stay readable without the context package's deps
    SAFETY_ALLOWANCE, SLIDE_MIN_UNITS = 4096, 200_000


class ContextPolicy(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    model: str
    C: int | None  # context capacity
    O: int | None  # output reserve
    S: int  # safety allowance
    B: int | None  # input budget min(C - O, the model's input cap) - S
    slide_min_units: int
    counting: dict[str, int]  # method -> requests counted with it
    exact_requests: int  # counted by a provider endpoint
    estimated_requests: int  # counted by a local estimate or the OpenRouter proxy


class Slide(msgspec.Struct, frozen=True, kw_only=True):
    series_id: str
    trial_id: str
    trial: int  # trial index in its series
    seq: int
    at: float
    removed: int  # archived messages that left the active request
    removed_ids: list[str]
    before_units: int
    after_units: int
    units_removed: int
    method: str


class ContextEvidence(msgspec.Struct, frozen=True, kw_only=True):
    policy: ContextPolicy
    slides: list[Slide]
    slides_by_trial: dict[str, int]


def _budget(provider: dict[str, Any], C: Any, O: Any) -> int | None:
    """B as the run's context policy computed it (the model profile's window and input cap included); C - O - S
    when the pinned section no longer decodes (a kind or key this version does not know)."""
    try:
        from roboswe.providers import decode_provider_config

        return decode_provider_config(provider).input_budget
    except (msgspec.MsgspecError, ValueError, TypeError):  # an older or foreign run record: the plain formula
        return (C - O - SAFETY_ALLOWANCE) if isinstance(C, int) and isinstance(O, int) else None


def context_evidence(reader: RunReader, run_id: str) -> ContextEvidence:
    """The run's context policy and its slides, from the run record, count events and slides table."""
    run = reader.run(run_id)
    provider: dict[str, Any] = run.config.provider
    C, O = provider.get("context_window"), provider.get("max_output_tokens")
    counting: dict[str, int] = {}
    exact = estimated = 0
    for _, e in reader.events(event="request_count"):
        if e.run_id != run_id:
            continue
        method = str(e.data.get("method") or "unrecorded")
        counting[method] = counting.get(method, 0) + 1
        if e.data.get("exact_tokens") is not None:
            exact += 1
        elif e.data.get("estimated_units") is not None:
            estimated += 1
    policy = ContextPolicy(provider=str(provider.get("kind") or "none"), model=str(provider.get("model") or ""),
                           C=C, O=O, S=SAFETY_ALLOWANCE,
                           B=_budget(provider, C, O),
                           slide_min_units=SLIDE_MIN_UNITS, counting=dict(sorted(counting.items())),
                           exact_requests=exact, estimated_requests=estimated)
    slides: list[Slide] = []
    by_trial: dict[str, int] = {}
    for s in reader.series(run_id):
        for view in reader.trials(s.series_id):
            for r in reader.slides(view.trial_id):
                slides.append(Slide(series_id=s.series_id, trial_id=view.trial_id, trial=view.start.index, seq=r.seq,
                                    at=r.at, removed=len(r.removed), removed_ids=list(r.removed),
                                    before_units=r.before_units, after_units=r.after_units,
                                    units_removed=r.before_units - r.after_units, method=r.method))
                by_trial[view.trial_id] = by_trial.get(view.trial_id, 0) + 1
    return ContextEvidence(policy=policy, slides=slides, slides_by_trial=by_trial)
