"""The pose development participant: a fixed plan over the real operations.

list_files → write estimator.py and templates.json (the reference estimator, roboswe/rle/pose/reference/)
→ write develop_pose.py → exec it (it observes labelled development renders, resets and pushes on the
charged budget, and prints the estimator's errors against the labels) → finish, quoting that summary.
Each decision is a pure function of the conversation so far, so a resumed session decides the same way.
"""

from __future__ import annotations

import json
from importlib import resources

from roboswe.protocol.participant import (
    AnyOperation,
    DecisionRequest,
    Exec,
    Finish,
    ListFiles,
    ToolCallPart,
    ToolResultPart,
    WriteFile,
)

SCRIPT = "develop_pose.py"
REFERENCE_FILES = ("estimator.py", "templates.json")
SUMMARY_PREFIX = "DEVELOPMENT "  # the line develop_pose.py prints its JSON summary on


def reference_source(name: str) -> str:
    return resources.files("roboswe.rle.pose").joinpath("reference", name).read_text(encoding="utf-8")


def script_source() -> str:
    return resources.files(__package__).joinpath("scripts", SCRIPT).read_text(encoding="utf-8")


class PoseDemoAgent:
    """agent = "roboswe.agents.rle_pose_demo:PoseDemoAgent" (kind = "python")."""

    def __init__(self, max_execs: int = 2):
        self.max_execs = max_execs
        self.plan: list[AnyOperation] = [ListFiles()]
        self.plan += [WriteFile(path=name, content=reference_source(name)) for name in REFERENCE_FILES]
        self.plan.append(WriteFile(path=SCRIPT, content=script_source()))

    def decide(self, request: DecisionRequest) -> AnyOperation:
        calls = [p for t in request.conversation if t.role == "assistant" for p in t.parts
                 if isinstance(p, ToolCallPart) and p.operation is not None]
        results = {p.call_id: p for t in request.conversation for p in t.parts if isinstance(p, ToolResultPart)}
        if len(calls) < len(self.plan):
            return self.plan[len(calls)]
        execs = [results.get(c.call_id) for c in calls if isinstance(c.operation, Exec)]
        summary = next((line[len(SUMMARY_PREFIX):] for r in reversed(execs) if r is not None
                        for line in r.text.splitlines() if line.startswith(SUMMARY_PREFIX)), None)
        if summary is None and len(execs) < self.max_execs:
            return Exec(path=SCRIPT)
        if summary is None:
            return Finish(reason="the development script printed no summary; submitting the estimator as written")
        s = json.loads(summary)
        return Finish(reason=(f"estimator checked on {s['renders']} labelled renders: mean error {s['mean_error_m'] * 1000:.1f} mm, "
                              f"{s['mean_error_deg']:.1f} deg; {s['budget_left']} charged steps left"))
