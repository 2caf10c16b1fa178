"""The RLE Index: task reward ×100 → family (mean of its tasks) → workflow (mean of its families) →
overall (mean of the four workflows, equally weighted).

A family whose tasks come in harness levels (family 01's speed-run: L1-L3 share task, plan, seeds and
weights; only observation and tools differ) is one task per subtask, each entry recording its harness
level: the family has a row per harness level reported (over all its tasks at that level, so L3's is k/5
as L1's), and only its headline level, L1 (no skills, no privileged state), feeds the workflow and overall.

Every level says how many of its parts are present (k/n), the mean over the present ones, and a
lower bound that counts a missing part as 0; the overall figure exists only when all four
workflows are present (else it is "partial"). A gated report is a measured zero, a missing one is
missing. One function, ``rle_index``, computes the numbers; the report text, ``--json`` and the
viewer all show its result.
"""

from __future__ import annotations

import msgspec

from .manifest import WORKFLOWS, TaskError, load_task, task_names
from .report import RewardReport

HEADLINE_LEVEL = "L1"
"""The harness level at which a levelled family's tasks count in workflows and overall (the others are shown)."""


class PoolingError(ValueError):
    """Reports that cannot be pooled (different salts, versions of one task, placeholder with real)."""


class TaskEntry(msgspec.Struct, frozen=True, kw_only=True):
    task: str  # a levelled family's task at its base id (its L1 id), whatever level was run
    harness_level: str | None = None  # family 01: L1 | L2 | L3; None for a family without harness levels
    status: str  # scored | gated | missing
    reward: float | None  # in [0, 1]; None when missing
    score: float | None  # reward × 100
    components: dict[str, float] = {}  # the report's components by name (family 01: success_rate, development_steps, budget)


class Level(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    present: int
    total: int
    mean: float | None  # over the present parts; None when none is present
    lower_bound: float  # missing parts count as 0
    parts: tuple[str, ...] = ()
    harness_level: str | None = None  # a levelled family's row: the harness level its tasks ran at


class RleIndex(msgspec.Struct, frozen=True, kw_only=True):
    tasks: tuple[TaskEntry, ...]
    families: tuple[Level, ...]
    workflows: tuple[Level, ...]
    overall: float | None  # None: "partial"
    overall_level: Level
    protocols: tuple[str, ...]
    salt_sha256: str | None
    placeholder: bool


def _level(name: str, parts: list[tuple[str, float | None, float]], harness_level: str | None = None) -> Level:
    """``parts``: (name, mean or None when missing, lower bound)."""
    present = [m for _, m, _ in parts if m is not None]
    return Level(name=name, present=len(present), total=len(parts),
                 mean=sum(present) / len(present) if present else None,
                 lower_bound=sum(lb for _, _, lb in parts) / len(parts) if parts else 0.0,
                 parts=tuple(p for p, _, _ in parts), harness_level=harness_level)


def task_level(task: str) -> tuple[str, str | None]:
    """(the task's base id, its harness level) for a task of a levelled family (family 01: ``...-l3`` is the
    task at L3, kitchen/plan.py at_level); (task, None) for any other task, or one that is not shipped."""
    try:
        loaded = load_task(task)
    except TaskError:
        return task, None
    if loaded.kitchen is None:
        return task, None
    from .kitchen.plan import at_level

    return at_level(loaded, HEADLINE_LEVEL).id, loaded.kitchen.level


def _check_poolable(reports: list[RewardReport]) -> None:
    salts = {r.salt_sha256 for r in reports}
    if len(salts) > 1:
        raise PoolingError(f"the reports were drawn with {len(salts)} different salts; an index pools one salt")
    if len({r.placeholder for r in reports}) > 1:
        kit = sorted(r.task for r in reports if r.placeholder)
        raise PoolingError(f"placeholder assets ({', '.join(kit)}) are never pooled with real ones")
    seen: dict[str, RewardReport] = {}
    for r in reports:
        if r.task in seen:
            other = seen[r.task]
            why = "different protocol versions" if other.protocol != r.protocol else "two reports"
            raise PoolingError(f"task {r.task}: {why} ({other.protocol}, {r.protocol}); pass one run per task")
        seen[r.task] = r


def rle_index(reports: list[RewardReport], catalogue: dict[str, tuple[str, str]] | None = None) -> RleIndex:
    """The index over ``reports``; ``catalogue`` maps task → (family, workflow), default the shipped tasks
    plus any reported task (so every family counts its known tasks as its n)."""
    _check_poolable(reports)
    placeholder = bool(reports) and reports[0].placeholder
    catalogue = dict(catalogue if catalogue is not None else _shipped(placeholder))
    by_cell = {task_level(r.task): r for r in reports}  # (base task, harness level) -> report
    for (task, _), r in by_cell.items():
        catalogue.setdefault(task, (r.family, r.workflow))
    levelled = {t: task_level(t)[1] is not None for t in catalogue}
    harness = {f: {lvl for (t, lvl) in by_cell if catalogue[t][0] == f and levelled[t]} | (
        {HEADLINE_LEVEL} if any(levelled[t] for t, (g, _) in catalogue.items() if g == f) else {None})
        for f, _ in catalogue.values()}
    entries = []
    for task in sorted(catalogue):
        for level in sorted(harness[catalogue[task][0]], key=str) if levelled[task] else [None]:
            r = by_cell.get((task, level))
            if r is None or r.status == "missing":
                entries.append(TaskEntry(task=task, harness_level=level, status="missing", reward=None, score=None))
            else:
                entries.append(TaskEntry(task=task, harness_level=level, status=r.status, reward=r.reward, score=r.score,
                                         components={c.name: c.value for c in r.components}))
    score = {(e.task, e.harness_level): e.score for e in entries}
    families = []
    for fam in sorted(harness):
        for level in sorted(harness[fam], key=str):
            tasks = sorted(t for t, (f, _) in catalogue.items() if f == fam)
            cells = [(t, score.get((t, level if levelled[t] else None))) for t in tasks]
            families.append(_level(fam, [(t, s, s or 0.0) for t, s in cells], level))
    family_of = {lvl.name: lvl for lvl in families if lvl.harness_level in (None, HEADLINE_LEVEL)}
    workflows = []
    for wf in WORKFLOWS:
        fams = sorted({f for f, w in catalogue.values() if w == wf})
        workflows.append(_level(wf, [(f, family_of[f].mean, family_of[f].lower_bound) for f in fams]))
    overall_level = _level("overall", [(w.name, w.mean, w.lower_bound) for w in workflows])
    overall = overall_level.mean if overall_level.present == len(WORKFLOWS) else None
    return RleIndex(tasks=tuple(entries), families=tuple(families), workflows=tuple(workflows), overall=overall,
                    overall_level=overall_level, protocols=tuple(sorted({r.protocol for r in reports})),
                    salt_sha256=reports[0].salt_sha256 if reports else None,
                    placeholder=placeholder)


def _shipped(placeholder: bool) -> dict[str, tuple[str, str]]:
    """The shipped tasks on the reports' side of the asset line: kit tasks never count in a real-asset index."""
    out = {}
    for name in task_names():
        t = load_task(name)
        if t.placeholder == placeholder:
            out[t.id] = (t.protocol.family, t.protocol.workflow)
    return out


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:6.2f}"


def render_index(index: RleIndex) -> str:
    """The index as text: the same numbers ``--json`` prints."""
    lines = [(f"RLE Index  (protocol {', '.join(index.protocols) or '—'}"
              f"{'; PLACEHOLDER assets' if index.placeholder else ''})"), ""]
    lines.append(f"{'task':<42}{'level':<7}{'status':<9}{'score':>7}")
    lines += [f"{e.task:<42}{e.harness_level or '':<7}{e.status:<9}{_fmt(e.score):>7}" for e in index.tasks]
    lines.append("")
    lines.append(f"{'level':<58}{'present':>8}{'mean':>8}{'lower':>8}")
    for kind, levels in (("family", index.families), ("workflow", index.workflows)):
        for lvl in levels:
            name = f"{kind} {lvl.name}" + (f" at {lvl.harness_level}" if lvl.harness_level else "")
            if lvl.harness_level not in (None, HEADLINE_LEVEL):
                name += " (shown, not pooled)"
            lines.append(f"{name:<58}{f'{lvl.present}/{lvl.total}':>8}{_fmt(lvl.mean):>8}{_fmt(lvl.lower_bound):>8}")
    o = index.overall_level
    verdict = _fmt(index.overall) if index.overall is not None else "partial"
    lines.append(f"{'overall':<58}{f'{o.present}/{o.total}':>8}{_fmt(o.mean):>8}{_fmt(o.lower_bound):>8}")
    lines.append(f"RLE Index: {verdict.strip()}")
    return "\n".join(lines)
