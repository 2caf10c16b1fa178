"""The reward report: the verifier's authoritative word on one sealed artifact.

A report refuses evidence it cannot stand behind: a reward or component that is not a finite
number in its range raises ``EvidenceError`` when the report is built, so a NaN from a scorer or a
forged file never becomes a number in the index.
"""

from __future__ import annotations

import math
from typing import Literal

import msgspec

from .ledger import ChainVerdict

Status = Literal["scored", "gated", "missing"]
REPORT_FORMAT = "rle-report/1"


class EvidenceError(ValueError):
    """A reward, component or figure that is not finite or is out of its range."""


class Gate(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # "load", "interface", "ledger", "artifact"
    reason: str


class Component(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # e.g. "stage_a", "stage_b", "deduction", "rate_hz"
    value: float
    low: float = 0.0
    high: float | None = 1.0  # None: unbounded above (a rate)


class RewardReport(msgspec.Struct, frozen=True, kw_only=True):
    format: str = REPORT_FORMAT
    task: str
    family: str
    workflow: str
    protocol: str  # seeds.protocol_id: version + which salt
    placeholder: bool
    status: Status
    reward: float
    components: tuple[Component, ...] = ()
    gates: tuple[Gate, ...] = ()
    ledger: ChainVerdict | None = None  # None: no ledger was given (a submitted directory)
    artifact_digest: str | None
    image_digest: str | None
    sandbox: str | None = None  # the backend the artifact ran on (bwrap | docker); None when it never ran
    task_digest: str
    salt_sha256: str
    salt_label: str
    plan_commitment: str
    revealed_seeds: tuple[int, ...] = ()  # written only after verification
    calls: int = 0
    verifier_seconds: float = 0.0
    privileged: tuple[str, ...] = ()  # state keys a real robot lacks that the participant read (RLE-Bench L3's priv_*)

    def __post_init__(self) -> None:
        _check("reward", self.reward, 0.0, 1.0)
        for c in self.components:
            _check(c.name, c.value, c.low, c.high)
        if self.status == "scored" and self.gates:
            raise EvidenceError("a scored report has no gates")
        if self.status != "scored" and self.reward != 0.0:
            raise EvidenceError(f"a {self.status} report's reward is 0, not {self.reward}")

    @property
    def score(self) -> float:
        return self.reward * 100.0


def _check(name: str, value: float, low: float, high: float | None) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise EvidenceError(f"{name} = {value!r} is not a finite number")
    if value < low or (high is not None and value > high):
        raise EvidenceError(f"{name} = {value} is outside [{low}, {high}]")


def encode_report(report: RewardReport) -> bytes:
    return msgspec.json.encode(report, order="sorted")


def decode_report(data: bytes) -> RewardReport:
    """A recorded report, re-checked (``__post_init__`` runs on decode); raises EvidenceError or msgspec errors."""
    return msgspec.json.decode(data, type=RewardReport)
