"""An RLE-Bench development session as a series trial: ``TrialRunner`` with the development scene.

What differs from a series trial, and only that, is here: the scene is a ``LoadDevelopment`` (the
simulator actor serves the family's development scene with the ledger on its side; the plan's
reference fingerprint is the task digest, so the trial's fingerprint check holds it to the task it
was planned for); the trial's step budget is the ledger's (the simulator reports its spent units as
the trial's control step); the manifest's token budget is charged from the provider's recorded usage
of each decision and ends the phase when spent; every answer the participant gets ends with what is
left of its budgets, and nothing more of them. Everything else (the decision loop, the operations,
the sandbox through the bridge actor, checkpoints, the conversation, every record) is the trial's.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import msgspec

from roboswe.evaluation.ends import TrialEnd, TrialIncomplete
from roboswe.evaluation.feedback import OpResult, Refused
from roboswe.evaluation.peers import INFRA_ERRORS, LOAD_DEADLINE, SIM_DEADLINE
from roboswe.evaluation.trial import TrialRunner
from roboswe.protocol import recorder as rec
from roboswe.protocol import sim as simp
from roboswe.protocol.participant import (
    AnyOperation,
    Decision,
    Exec,
    Finish,
    operation_name,
)

from . import diagnostic
from .manifest import RleTask

TOKENS_SPENT = "the development phase's token budget is spent"
MAX_TEXT = 4000  # characters of an operation's answer kept in development.json (the run database holds it whole)


class OperationRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One development operation in development.json: what was asked, what came back, what the ledger had left."""

    n: int
    operation: str
    path: str | None = None
    text: str
    error: bool
    budget_left: int
    seconds: float


class DevelopmentRunner(TrialRunner):
    """One development session of ``task`` (one trial of a one-trial series) through the run's actors."""

    def __init__(self, *args: Any, task: RleTask, ledger_record: Path | None = None, salt_file: str | None = None,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.task = task
        self.ledger_record = ledger_record
        self.salt_file = salt_file  # the simulator reads it (a hidden instance); None: the public salt
        self.tokens = 0  # input + output tokens of every decision, as the provider client recorded them
        self.tokens_spent = False
        self.finish_reason = ""
        self.operations: list[OperationRecord] = []
        self.diagnostics = 0  # diagnostic calls run (diagnostic.py)

    @property
    def tokens_left(self) -> int | None:
        budget = self.task.budget.tokens
        return None if budget is None else max(0, budget - self.tokens)

    async def _load(self) -> simp.Loaded:
        t0 = time.monotonic()
        load = simp.LoadDevelopment(task=simp.encode_manifest(self.task),
                                    record=str(self.ledger_record) if self.ledger_record else None,
                                    salt_file=self.salt_file)
        try:
            loaded = (await self.links.sim.ask(load, simp.Loaded, LOAD_DEADLINE)).message
        except INFRA_ERRORS as e:
            raise TrialIncomplete("infrastructure", f"the simulator could not load the development scene: "
                                                    f"{type(e).__name__}: {e}") from None
        self.timing.load += time.monotonic() - t0
        self._sim_compute = await self.links.sim.compute_seconds()
        return loaded

    async def _decide(self, time_left: float) -> Decision | None:
        """A decision while tokens are left; each one's usage is charged (the phase ends once none are)."""
        if self.tokens_left == 0:
            self.tokens_spent = True
            return None
        decision = await super()._decide(time_left)
        if decision is not None and self.task.budget.tokens is not None:
            charged = decision.usage.input_tokens + decision.usage.output_tokens
            self.tokens += charged
            await self.rec.event("development_tokens", self.trial_id, charged=charged, spent=self.tokens,
                                 left=self.tokens_left, budget=self.task.budget.tokens)
        return decision

    def _outcome(self, cause: rec.ParticipantCause) -> TrialEnd:
        if cause == "time_budget" and self.tokens_spent:  # _decide declined: no tokens left, not no time
            return TrialEnd("failure", "decision_budget", TOKENS_SPENT)
        return super()._outcome(cause)

    async def _execute(self, op: AnyOperation, seq: int) -> OpResult:
        """The trial's operation, its answer ending with the budget left; recorded for development.json."""
        started = time.monotonic()
        if isinstance(op, Exec) and op.path == diagnostic.DIAGNOSE:
            result = await self._diagnose(seq)
        else:
            result = await super()._execute(op, seq)
        state = (await self.links.sim.ask(simp.GetState(), simp.RobotState, SIM_DEADLINE)).message
        left = f"development budget left: {state.steps_left} charged steps, {int(state.values['resets_left'][0])} resets"
        if self.tokens_left is not None:
            left += f", {self.tokens_left} tokens"
        left += f", {max(0.0, self.plan.budgets.trial_seconds - self.active_time()):.0f} s"
        if isinstance(op, Finish):
            self.finish_reason = op.reason
        self.operations.append(OperationRecord(
            n=seq, operation=operation_name(op), path=getattr(op, "path", None), text=result.text[:MAX_TEXT],
            error=result.error, budget_left=state.steps_left, seconds=round(time.monotonic() - started, 3)))
        return dataclasses.replace(result, text=f"{result.text}\n[{left}]")

    async def _diagnose(self, seq: int) -> OpResult:
        """One diagnostic call (diagnostic.py), or its refusal once the manifest's calls are used; recorded either way."""
        calls = self.task.development.diagnostic_calls
        if self.diagnostics >= calls or self.task.evaluation is None:
            why = f"the development phase's {calls} diagnostic calls are used up" if calls else "this task has no diagnostic evaluator"
            await self.rec.event("rle_diagnostic", self.trial_id, seq=seq, refused=why)
            return OpResult(text=why, error=True, feedback=Refused(error=why))
        self.diagnostics += 1
        out = Path(self.plan.run_dir) / "diagnostics" / str(self.diagnostics)
        report = await diagnostic.diagnose(self.task, self.workspace_dir, out, backend=self.plan.backend)
        await self.rec.event("rle_diagnostic", self.trial_id, seq=seq, n=self.diagnostics, path=str(out),
                             report=msgspec.to_builtins(report))
        return OpResult(text=diagnostic.summary(report, self.diagnostics, calls))
