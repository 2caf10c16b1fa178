"""Each verdict beside the mechanical record, only after the judge has answered.

The conditions of a task are parts of its predicate, so a mechanical success means every one holds and a
failure means at least one does not. Hence per condition:

| mechanical | supported | contradicted | unobservable |
|---|---|---|---|
| success | agree | contradiction | unresolved |
| failure, one condition | contradiction | agree | unresolved |
| failure, several | unresolved (another part may have failed); contradiction when every condition is supported | agree | unresolved |

A contradiction flags the trial for review; it changes no outcome and no score.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from .conditions import TaskConditions
from .request import ConditionVerdict

Comparison = Literal["agree", "contradiction", "unresolved"]


def compare(verdicts: Sequence[ConditionVerdict], conditions: TaskConditions, outcome: str) -> list[dict[str, Any]]:
    """One row per condition: the judge's words, what the record implies, and whether they agree."""
    if outcome not in ("success", "failure"):
        raise ValueError(f"only a success or a failure is compared with a judge's verdicts, not {outcome!r}")
    all_supported = all(v.verdict == "supported" for v in verdicts)
    rows = []
    for cond, v in zip(conditions.conditions, verdicts, strict=True):
        if v.verdict == "unobservable":
            comparison: Comparison = "unresolved"
        elif outcome == "success":
            comparison = "agree" if v.verdict == "supported" else "contradiction"
        elif v.verdict == "contradicted":
            comparison = "agree"
        else:
            comparison = "contradiction" if all_supported else "unresolved"
        rows.append({"id": cond.id, "part": cond.part, "verdict": v.verdict, "evidence": v.evidence, "views": v.views,
                     "expected": "holds" if outcome == "success" else "some part fails", "comparison": comparison})
    return rows
