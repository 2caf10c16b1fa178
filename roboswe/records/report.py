"""What a run found, from its database (printed by `roboswe report RUN_DIR [--json]`).

The summary (``run_summary``) is computed from RUN_DIR/run.sqlite with the same scoring as
results.json (roboswe.records.metrics): per task a trial-by-trial table (outcome, replay verdict,
control steps, simulated and active time), the metrics with their denominators, and where
the time went (timing components). The viewer exports the same summary.
"""

from __future__ import annotations

from typing import Any

import msgspec

# The order timing components are shown in; others follow alphabetically.
TIMING_ORDER = ("provider", "execution", "transport", "physics", "rendering", "waits", "recovery", "replay")
TOTALS = ("active_time", "sim_time", "wall")  # shown as totals, not as components
BADGES = {"verified": "verified", "mismatch": "MISMATCH", "error": "replay error", None: "unverified"}


def run_summary(reader: Any, run_id: str | None = None, *, resamples: int = 2000) -> dict[str, Any]:
    """The run's figures and every trial attempt as plain data; raises LookupError for an unknown run."""
    from roboswe.records.artifacts import build_results

    run = reader.run(run_id)
    results = build_results(reader, run.run_id, resamples=resamples)
    series = []
    metrics_by_id = {m.series_id: m for m in results.series}
    for s in reader.series(run.run_id):
        attempts = []
        for view in reader.trials(s.series_id):
            end, ver = view.end, view.verification
            attempts.append({
                "trial_id": view.trial_id, "index": view.start.index, "attempt": view.start.attempt,
                "outcome": end.outcome if end else "incomplete",
                "reason": end.reason if end else "interrupted (no end recorded)",
                "verdict": ver.verdict if ver else None,
                "success_reproduced": ver.success_reproduced if ver else None,
                "first_divergence": ver.first_divergence if ver else "",
                "control_steps": end.control_steps if end else None,
                "sim_time": end.sim_time if end else None,
                "active_time": end.active_time if end else None,
                "timing": dict(end.timing) if end else {},
                "success_interval": list(end.success_interval) if end and end.success_interval else None,
                "started_at": view.start.started_at, "ended_at": end.ended_at if end else None,
                "recovers": view.start.recovers, "recovered_by": view.recovered_by,
                "fingerprint": view.start.fingerprint,
            })
        m = metrics_by_id.get(s.series_id)
        series.append({"series_id": s.series_id, "task": s.task, "model": s.model, "mode": s.mode,
                       "trials": s.trials, "attempts": attempts,
                       "metrics": msgspec.to_builtins(m) if m is not None else None,
                       "timing": results.timing_by_series.get(s.series_id, {})})
    return {
        "run": msgspec.to_builtins(run),
        "series": series,
        "datasets": msgspec.to_builtins(results.datasets),
        "timing": results.timing,
        "verifications": results.verifications,
    }


def timing_rows(timing: dict[str, float]) -> list[tuple[str, float]]:
    """Timing components in display order (active/sim totals excluded)."""
    parts = {k: v for k, v in timing.items() if k not in TOTALS}
    known = [(k, parts.pop(k)) for k in TIMING_ORDER if k in parts]
    return known + sorted(parts.items())


def _fmt(value: Any, spec: str = ".2f", none: str = "-") -> str:
    return none if value is None else format(value, spec)


def _estimate(e: dict[str, Any]) -> str:
    if e["mean"] is None:
        return f"- (n={e['n']})"
    return f"{e['mean']:.2f} [{e['low']:.2f}, {e['high']:.2f}] (n={e['n']})"


def _proportion(p: dict[str, Any]) -> str:
    return f"{p['numerator']}/{p['denominator']}" + (f" = {p['value']:.2f}" if p["value"] is not None else "")


def print_report(summary: dict[str, Any], console: Any) -> None:
    """Render the summary as rich tables on ``console``."""
    from rich.table import Table

    run = summary["run"]
    console.print(f"[bold]run[/bold] {run['run_id']}  ·  roboswe {run.get('roboswe_version') or '?'}  ·  "
                  f"admitted {run.get('admitted_sha256', '')[:12] or '-'}")
    styles = {"success": "green", "failure": "red", "incomplete": "yellow", "pending": "cyan"}
    for s in summary["series"]:
        table = Table(title=f"{s['task']}  ·  {s['model']}  ·  mode={s['mode']}", title_justify="left")
        for col, just in (("trial", "right"), ("attempt", "right"), ("outcome", "left"), ("replay", "left"),
                          ("steps", "right"), ("sim time s", "right"), ("active s", "right"), ("reason", "left")):
            table.add_column(col, justify=just)
        for a in s["attempts"]:
            style = styles.get(a["outcome"], "")
            table.add_row(str(a["index"]), str(a["attempt"]), f"[{style}]{a['outcome']}[/{style}]",
                          BADGES.get(a["verdict"], a["verdict"]), _fmt(a["control_steps"], "d"),
                          _fmt(a["sim_time"]), _fmt(a["active_time"]), (a["reason"] or "")[:60])
        console.print(table)
        m = s["metrics"]
        if m:
            y = " ".join("·" if v is None else str(v) for v in m["y"])
            console.print(f"  y = [{y}]   A = {_fmt(m['A'])}   Q = {_fmt(m['Q'])}   first success = "
                          f"{_fmt(m['first_success'], 'd')}   regressions = {_fmt(m['regressions'], 'd')}   "
                          f"incomplete = {m['incomplete']}   pending = {m['pending']}   mismatches = {m['mismatches']}")
            eff = m["efficiency"]
            if eff["control_steps"]:
                console.print(f"  efficiency (successful trials): steps {eff['control_steps']}  "
                              f"first/last = {_fmt(eff['steps_ratio'])}")
    for d in summary["datasets"]:
        table = Table(title=f"metrics  ·  {d['model']}  ·  mode={d['mode']}", title_justify="left")
        table.add_column("figure")
        table.add_column("value")
        rows = [
            ("tasks admitted / completed", f"{d['admitted_tasks']} / {d['completed_tasks']}"),
            ("series recorded / completed", f"{d['series_recorded']} / {d['series_completed']}"),
            ("incomplete / pending / mismatch slots",
             f"{d['incomplete_slots']} / {d['pending_slots']} / {d['mismatch_slots']}"),
            ("A (mean success, 95% CI)", _estimate(d["A"])),
            ("Q (final streak / T, 95% CI)", _estimate(d["Q"])),
            ("success by trial", "  ".join(f"t{i + 1}: {_proportion(p)}" for i, p in enumerate(d["success_by_trial"]))),
            ("recovery (failed t1 -> later success)", _proportion(d["recovery"])),
            ("sustained conversion", _proportion(d["sustained_conversion"])),
            ("regressions", str(d["regressions"])),
            ("bootstrap", f"{d['bootstrap']['method']}; {d['bootstrap']['resamples']} resamples, seed {d['bootstrap']['seed']}"),
        ]
        for k, v in rows:
            table.add_row(k, v)
        console.print(table)
    timing = summary["timing"]
    table = Table(title="where time went (all trials)", title_justify="left",
                  caption="components overlap: physics and rendering a script asks for are inside its execution; "
                          "provider_http (the provider's API) is inside provider (the decision round trip)",
                  caption_justify="left")
    table.add_column("component")
    table.add_column("seconds", justify="right")
    active = timing.get("active_time") or 0.0
    base, base_name = (timing["wall"], "trial wall") if timing.get("wall") else (active, "active")
    table.add_column(f"share of {base_name}", justify="right")
    for k, v in timing_rows(timing):
        table.add_row(k, f"{v:.2f}", f"{100 * v / base:.1f}%" if base and k != "replay" else "")
    if "wall" in timing:
        table.add_row("trial wall time", f"{timing['wall']:.2f}", "")
    table.add_row("[bold]active time[/bold]", f"{active:.2f}", "")
    table.add_row("simulated time", f"{timing.get('sim_time', 0.0):.2f}", "")
    console.print(table)
    if summary["verifications"]:
        console.print("replay verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(summary["verifications"].items())))
