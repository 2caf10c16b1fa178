"""What the report, results.json and the viewer show of the visual cross-check: per trial its latest
judgement beside the mechanical outcome, always under the supplementary audit's label."""

from __future__ import annotations

from collections import Counter
from typing import Any

LABEL = "visual cross-check (supplementary audit: never the pass gate, never part of A or Q)"


def trial_judgement(records: list[Any], outcome: str | None) -> dict[str, Any]:
    """A trial's latest judgement (records oldest first) and how many there are."""
    latest = records[-1]
    counts = Counter(v["comparison"] for v in latest.verdicts)
    return {"outcome": outcome, "judgement_id": latest.judgement_id, "judgements": len(records),
            "judge": latest.judge, "provider": latest.provider, "model": latest.model, "status": latest.status,
            "error": latest.error, "judged_at": latest.ended_at,
            "agree": counts["agree"], "contradiction": counts["contradiction"], "unresolved": counts["unresolved"],
            "conditions": [{k: v[k] for k in ("id", "verdict", "comparison", "evidence", "views")} for v in latest.verdicts],
            "cost": latest.cost}


def judge_summary(reader: Any, run_id: str | None = None) -> dict[str, Any] | None:
    """Every judged trial attempt of the run, or None when nothing was judged."""
    run = reader.run(run_id)
    outcomes = {v.trial_id: v.outcome for s in reader.series(run.run_id) for v in reader.trials(s.series_id)}
    by_trial: dict[str, list[Any]] = {}
    for r in reader.judgements():
        if r.trial_id in outcomes:
            by_trial.setdefault(r.trial_id, []).append(r)
    if not by_trial:
        return None
    trials = {t: trial_judgement(rs, outcomes[t]) for t, rs in by_trial.items()}
    return {"label": LABEL, "trials": trials,
            "flagged": sorted(t for t, j in trials.items() if j["contradiction"]),
            "errors": sorted(t for t, j in trials.items() if j["status"] == "error"),
            **{k: sum(j[k] for j in trials.values()) for k in ("agree", "contradiction", "unresolved")}}


def print_judgements(summary: dict[str, Any] | None, console: Any) -> None:
    """The report's section: per judged trial the outcome, then each condition's verdict and comparison."""
    from rich.markup import escape

    if summary is None:
        console.print(f"[bold]{LABEL}[/bold]: not judged (`roboswe judge RUN_DIR`)")
        return
    console.print(f"[bold]{LABEL}[/bold]: {len(summary['trials'])} trial attempt(s) judged; conditions agree "
                  f"{summary['agree']}, contradiction {summary['contradiction']} (flagged for review), "
                  f"unresolved {summary['unresolved']}; errors {len(summary['errors'])}", soft_wrap=True)
    for trial_id, j in sorted(summary["trials"].items()):
        head = (f"  {escape(trial_id)}: mechanical {j['outcome']}; judge {escape(j['judge'])} "
                f"({escape(j['provider'])} {escape(j['model'])})")
        if j["status"] == "error":
            console.print(f"{head}: error, no verdict: {escape(j['error'])}", soft_wrap=True)
            continue
        flag = "  [bold red]CONTRADICTION: review[/bold red]" if j["contradiction"] else ""
        console.print(head + flag, soft_wrap=True)
        for c in j["conditions"]:
            console.print(f"    {escape(c['id'])}: {c['verdict']} -> {c['comparison']}: {escape(c['evidence'])}",
                          soft_wrap=True)
