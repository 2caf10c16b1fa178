"""The development ledger: every charged operation is a ``charge`` row before dispatch and a
``confirm`` row after; each row carries the hash of the previous one, so a row edited, dropped,
reordered or inserted after the fact breaks the chain at that row. Pure code: who holds the
ledger (the simulator, the trusted side) and where its rows are recorded is the caller's business.
"""

from __future__ import annotations

import hashlib
from typing import Literal

import msgspec

GENESIS = "0" * 64
"""The ``prev`` of the first row."""

RowKind = Literal["charge", "confirm", "seal"]


class LedgerRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    index: int
    kind: RowKind
    operation: str  # "step", "reset", "render", "diagnostic", ... ; "seal" for the closing row
    cost: int  # units charged by a charge row; 0 for confirm and seal rows
    detail: str = ""  # e.g. the confirm's outcome, the seal's artifact digest
    prev: str  # hash of the previous row (GENESIS for the first)
    hash: str  # sha256 over this row's fields other than ``hash``


def row_hash(index: int, kind: str, operation: str, cost: int, detail: str, prev: str) -> str:
    body = msgspec.json.encode([index, kind, operation, cost, detail, prev])
    return hashlib.sha256(body).hexdigest()


class BudgetExhausted(Exception):
    """A charge the remaining budget cannot pay; nothing was charged."""


class Ledger:
    """The trusted side's ledger: ``charge`` before an operation is dispatched, ``confirm`` after."""

    def __init__(self, budget: int):
        self.budget = budget
        self.rows: list[LedgerRow] = []
        self._open: int | None = None  # index of the charge awaiting its confirm

    @classmethod
    def resume(cls, rows: list[LedgerRow], budget: int) -> Ledger:
        """The ledger another process kept, from its recorded rows (check them with verify_chain first)."""
        ledger = cls(budget)
        ledger.rows = list(rows)
        if rows and rows[-1].kind == "charge":
            ledger._open = rows[-1].index
        return ledger

    @property
    def head(self) -> str:
        return self.rows[-1].hash if self.rows else GENESIS

    @property
    def spent(self) -> int:
        return sum(r.cost for r in self.rows if r.kind == "charge")

    @property
    def remaining(self) -> int:
        return self.budget - self.spent

    def _append(self, kind: RowKind, operation: str, cost: int, detail: str) -> LedgerRow:
        index, prev = len(self.rows), self.head
        row = LedgerRow(index=index, kind=kind, operation=operation, cost=cost, detail=detail, prev=prev,
                        hash=row_hash(index, kind, operation, cost, detail, prev))
        self.rows.append(row)
        return row

    def charge(self, operation: str, cost: int = 1) -> LedgerRow:
        """Charge before dispatch; raises BudgetExhausted (nothing written) when the budget cannot pay."""
        if self._open is not None:
            raise RuntimeError(f"charge while row {self._open} awaits its confirm")
        if self.sealed:
            raise RuntimeError("the ledger is sealed")
        if cost < 0 or cost > self.remaining:
            raise BudgetExhausted(f"{operation} costs {cost}, {self.remaining} left")
        row = self._append("charge", operation, cost, "")
        self._open = row.index
        return row

    def confirm(self, outcome: str = "ok") -> LedgerRow:
        """Confirm the open charge once the operation returned (its outcome, e.g. "ok" or an error kind)."""
        if self._open is None:
            raise RuntimeError("confirm without a charge")
        operation = self.rows[self._open].operation
        self._open = None
        return self._append("confirm", operation, 0, outcome)

    @property
    def sealed(self) -> bool:
        return bool(self.rows) and self.rows[-1].kind == "seal"

    def seal(self, artifact_digest: str) -> str:
        """The closing row binds the ledger to the sealed artifact; returns the head."""
        if self._open is not None:
            self.confirm("interrupted")  # the phase ended with an operation in flight
        self._append("seal", "seal", 0, artifact_digest)
        return self.head


class ChainVerdict(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    rows: int
    head: str
    spent: int
    first_bad_row: int | None = None
    reason: str | None = None


def verify_chain(rows: list[LedgerRow], *, budget: int | None = None, head: str | None = None,
                 artifact_digest: str | None = None) -> ChainVerdict:
    """Recompute every hash and link; the first row that does not check is named with why."""
    prev, spent, open_charge = GENESIS, 0, None

    def bad(i: int, why: str) -> ChainVerdict:
        return ChainVerdict(ok=False, rows=len(rows), head=prev, spent=spent, first_bad_row=i, reason=why)

    for i, row in enumerate(rows):
        if row.index != i:
            return bad(i, f"row {i} says it is row {row.index}")
        if row.prev != prev:
            return bad(i, f"row {i} does not link to row {i - 1}")
        if row.hash != row_hash(row.index, row.kind, row.operation, row.cost, row.detail, row.prev):
            return bad(i, f"row {i}'s hash does not match its content")
        if row.kind == "charge":
            if open_charge is not None or row.cost < 0:
                return bad(i, f"row {i} charges while row {open_charge} is unconfirmed" if open_charge is not None
                           else f"row {i} charges a negative cost")
            open_charge, spent = i, spent + row.cost
        elif row.kind == "confirm":
            if open_charge is None or rows[open_charge].operation != row.operation or row.cost:
                return bad(i, f"row {i} confirms no open charge of {row.operation!r}")
            open_charge = None
        elif row.kind == "seal" and i != len(rows) - 1:
            return bad(i, f"row {i} seals but rows follow it")
        prev = row.hash
    if budget is not None and spent > budget:
        return bad(len(rows) - 1, f"the rows charge {spent}, over the budget of {budget}")
    if head is not None and prev != head:
        return bad(len(rows), "the recorded head is not the chain's last hash (rows missing at the end)")
    if artifact_digest is not None and (not rows or rows[-1].kind != "seal" or rows[-1].detail != artifact_digest):
        return bad(len(rows), "the ledger is not sealed over this artifact")
    return ChainVerdict(ok=True, rows=len(rows), head=prev, spent=spent)


def encode_rows(rows: list[LedgerRow]) -> bytes:
    """JSON lines, one row each (the recorded form)."""
    return b"".join(msgspec.json.encode(r) + b"\n" for r in rows)


def decode_rows(data: bytes) -> list[LedgerRow]:
    """Rows from JSON lines; raises msgspec errors for a malformed row (the verifier reports it unverifiable)."""
    return [msgspec.json.decode(line, type=LedgerRow) for line in data.splitlines() if line.strip()]
