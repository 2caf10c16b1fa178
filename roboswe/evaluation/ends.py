"""What ended a trial, typed: its cause, its outcome and the words shown; the attribution rule.

The attribution rule is written here, once: whatever the participant's decisions and programs
cause is its own (an error it reads as feedback, and an end of its playing: ``success`` or
``failure``, ``participant_end``); whatever comes from outside it (the provider, a peer, the
sandbox, the simulator, the harness itself) ends the trial ``incomplete`` with a typed cause and
is never scored (``incomplete_end``). ``roboswe.evaluation.trial`` raises ``TrialIncomplete`` or
lets a peer's error through; every reader (retry eligibility and the configuration stop in
``series``, the front end's stop in ``commands/run.py``, the report and the viewer) reads the
cause, never the words. The causes themselves are ``TrialCause`` in ``protocol/recorder.py``.
"""

from __future__ import annotations

import re

import msgspec
import structlog

from roboswe.actors import PeerDead, RemoteError
from roboswe.evaluation.peers import INFRA_ERRORS
from roboswe.protocol.recorder import (
    INCOMPLETE_CAUSES,
    IncompleteCause,
    Outcome,
    ParticipantCause,
    TrialCause,
)

log = structlog.get_logger()


class TrialIncomplete(Exception):
    """The trial cannot go on for a cause outside the participant's control."""

    def __init__(self, cause: IncompleteCause, detail: str):
        super().__init__(shown(cause, detail))
        self.cause: IncompleteCause = cause
        self.detail = detail


class TrialEnd(msgspec.Struct, frozen=True):
    """How a trial ended: the outcome, its cause and the human words (``detail``)."""

    outcome: Outcome
    cause: TrialCause
    detail: str = ""

    @property
    def reason(self) -> str:
        """The line shown and kept in ``TrialEnded.reason``: ``cause: detail``."""
        return shown(self.cause, self.detail)


def shown(cause: str, detail: str) -> str:
    return f"{cause}: {detail}" if detail else cause


def participant_end(cause: ParticipantCause, achieved: bool) -> TrialEnd:
    """The participant played the trial to ``cause``: a success if the interval was reached, else its failure."""
    return TrialEnd("success" if achieved else "failure", cause)


def incomplete_end(error: Exception, trial_id: str) -> TrialEnd:
    """The end an error from outside the participant gives the trial (logged here, once)."""
    if isinstance(error, TrialIncomplete):
        return configured(TrialEnd("incomplete", error.cause, error.detail))
    if isinstance(error, INFRA_ERRORS):
        log.warning("trial_infrastructure_failure", trial=trial_id, error=f"{type(error).__name__}: {error}")
        # A peer that died costs this attempt only: the series re-runs it as a linked attempt (series.py).
        # A simulator that answers not_loaded mid-trial was restarted under it before its death reached
        # the trial's link (a fast supervisor restart): the scene is lost just the same.
        restarted_sim = isinstance(error, RemoteError) and error.error.code == "not_loaded"
        said = "the simulator was restarted under the trial: " if restarted_sim else ""
        cause: IncompleteCause = "interrupted" if isinstance(error, PeerDead) or restarted_sim else "infrastructure"
        return configured(TrialEnd("incomplete", cause, f"{said}{type(error).__name__}: {error}"))
    log.exception("trial_internal_error", trial=trial_id)  # a harness bug ends this trial, not the whole run
    return configured(TrialEnd("incomplete", "internal", f"{type(error).__name__}: {error}"))


def context_cause(code: str) -> IncompleteCause:
    """The cause of a context manager's refusal to prepare a request, by its error code."""
    return code if code in ("context_overflow", "provider", "internal") else "internal"  # type: ignore[return-value]


def provider_cause(reason: str) -> IncompleteCause:
    """The cause of a provider's failure (``ProviderFailed.reason``, "provider" today)."""
    return reason if reason in INCOMPLETE_CAUSES else "provider"  # type: ignore[return-value]


# ---- causes that will not go away by themselves --------------------------------------------------

# A provider's refusal of the key (401/403) or of the model/base_url (404). The provider reports it in
# words only (its HTTP status inside the detail), so its words are read here, where the cause is given.
_PROVIDER_REFUSAL = re.compile(r"\bhttp_40[134]\b|\bHTTP 40[134]\b")
# The provider client could not build the adapter (missing key or SDK, no model): every request is answered so.
_PROVIDER_UNUSABLE = re.compile(r"provider \w+ unavailable|environment variable \S+ is empty or unset")


def configured(end: TrialEnd) -> TrialEnd:
    """``end`` as a ``configuration`` end when every later trial would repeat it; else ``end`` itself.

    The detail keeps where it came from (``provider: anthropic: http_401 ...``).
    """
    refused = end.cause == "provider" and _PROVIDER_REFUSAL.search(end.detail)
    unusable = end.cause in ("provider", "infrastructure", "internal") and _PROVIDER_UNUSABLE.search(end.detail)
    if refused or unusable:
        return TrialEnd("incomplete", "configuration", end.reason)
    return end
