"""What a run found, from its database (printed by `roboswe report RUN_DIR [--json]`).

The summary (``run_summary``) is computed from RUN_DIR/run.sqlite by the one scoring function
(roboswe.records.scoring, through artifacts.build_results, which also writes results.json): per
task a trial-by-trial table (outcome, replay verdict, scored or unscored slot, control steps,
simulated and active time), the headline with missing slots and its lower bound, the admitted
denominator with exclusions, RoboSWE-ADAPT's figures with intervals, tokens and cost, the context
policy and its slides, and where the time went. The viewer exports the same summary.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from roboswe.judge.summary import print_judgements
from roboswe.protocol.recorder import RunPins
from roboswe.records.recovery import print_recovery, stored_recovery

# The order timing components are shown in; others follow alphabetically.
TIMING_ORDER = ("provider", "execution", "transport", "physics", "rendering", "waits", "recovery", "replay")
TOTALS = ("active_time", "sim_time", "wall")  # shown as totals, not as components
BADGES = {"verified": "verified", "mismatch": "MISMATCH", "error": "replay error", None: "unverified"}
# What an assets label pinned by a series means, where readers must be told (report header, viewer).
ASSET_NOTICES = {"placeholder": "placeholder assets (RoboCasa's offline kit: generated textures, box objects; "
                                "sim/robocasa/kit.py): for tests and CI, never comparable with runs on RoboCasa's assets"}


def run_summary(reader: Any, run_id: str | None = None, *, results: Any = None) -> dict[str, Any]:
    """The run's figures and every trial attempt as plain data; raises LookupError for an unknown run.

    ``results`` (artifacts.Results of this run) is computed here unless given."""
    from roboswe.records.artifacts import build_results, failed_artifacts
    from roboswe.records.compare import run_pins

    run = reader.run(run_id)
    if results is None:
        results = build_results(reader, run.run_id)
    assets = run_pins(reader, run.run_id)["assets"]  # the label compare checks, for runs before the series pinned it too
    judged = (results.judge or {}).get("trials", {})  # the visual cross-check, a supplementary audit (roboswe.judge)
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
                # the typed cause (None: an end recorded without one) and its words
                "cause": (end.cause if end else "interrupted"),
                "detail": (end.detail if end.cause is not None else end.reason) if end else "no end recorded",
                "verdict": ver.verdict if ver else None,
                "outcome_reproduced": ver.outcome_reproduced if ver else None,
                "replay_outcome": ver.replay_outcome if ver else None,
                "first_divergence": ver.first_divergence if ver else "",
                "output_differences": list(ver.detail.get("output_differences", [])) if ver else [],
                "control_steps": end.control_steps if end else None,
                "sim_time": end.sim_time if end else None,
                "active_time": end.active_time if end else None,
                "timing": dict(end.timing) if end else {},
                "success_interval": list(end.success_interval) if end and end.success_interval else None,
                "started_at": view.start.started_at, "ended_at": end.ended_at if end else None,
                "recovers": view.start.recovers, "recovered_by": view.recovered_by,
                "fingerprint": view.start.fingerprint,
                "judge": judged.get(view.trial_id),  # the latest judgement beside the outcome; None: not judged
            })
        m = metrics_by_id.get(s.series_id)
        from roboswe.records.compare import (
            protocol_pin,  # the series' budget-track identity and interface
        )
        series.append({"series_id": s.series_id, "task": s.task, "model": s.model, "mode": s.mode,
                       "protocol": protocol_pin(dict(s.pins.get("budgets") or {})),
                       "trials": s.trials, "assets": assets.get(s.task), "attempts": attempts,
                       "metrics": msgspec.to_builtins(m) if m is not None else None,
                       "timing": results.timing_by_series.get(s.series_id, {})})
    return {
        "run": msgspec.to_builtins(run),
        "denominators": msgspec.to_builtins(results.denominators),
        "bootstrap": results.bootstrap,
        "scoring": results.scoring,
        "series": series,
        "datasets": msgspec.to_builtins(results.datasets),
        "timing": results.timing,
        "verifications": results.verifications,
        "usage": msgspec.to_builtins(results.usage),
        "context": msgspec.to_builtins(results.context),
        "predicate_reviews": predicate_reviews(run.config, run.admitted_sha256),
        "assets_notice": assets_notice(series),
        "recovery": stored_recovery(reader, run.run_id),  # a diagnostic, never scored (roboswe.records.recovery)
        "judge": results.judge,  # the visual cross-check, never scored (roboswe.judge)
        "failed_artifacts": failed_artifacts(reader),
    }


def assets_notice(series: list[dict[str, Any]]) -> str:
    """One line naming the tasks whose assets label needs telling ("placeholder"), or "" when none does."""
    lines = []
    for label, notice in ASSET_NOTICES.items():
        tasks = sorted({s["task"] for s in series if s.get("assets") == label})
        if tasks:
            lines.append(f"assets = {label} ({', '.join(tasks)}): {notice}")
    return "; ".join(lines)


def predicate_reviews(config: RunPins, admitted_sha256: str) -> dict[str, dict[str, Any]]:
    """task -> predicate review record from the run's pinned admitted file (empty if it is gone or not the pinned one)."""
    from roboswe.evaluation.admission import pinned_admitted

    admitted = pinned_admitted(config, admitted_sha256)
    if admitted is None:
        return {}
    return {t.id: t.review for t in admitted.tasks if t.review}


def review_line(task: str, review: dict[str, Any]) -> str:
    """One line per task: which function decides success, its source digest, whether the review covers it, the review."""
    where = review.get("defined_in", "?").rsplit(".", 2)
    name = ".".join(where[-2:]) if len(where) >= 2 else where[0]
    digest = (review.get("source_sha256") or review.get("reviewed_sha256") or "")[:12]
    return f"  {task}: {name} {digest} ({review.get('status', '?')}): {review.get('review', '')}"


def timing_rows(timing: dict[str, float]) -> list[tuple[str, float]]:
    """Timing components in display order (active/sim totals excluded)."""
    parts = {k: v for k, v in timing.items() if k not in TOTALS}
    known = [(k, parts.pop(k)) for k in TIMING_ORDER if k in parts]
    return known + sorted(parts.items())


def _fmt(value: Any, spec: str = ".2f", none: str = "-") -> str:
    return none if value is None else format(value, spec)


def _estimate(e: dict[str, Any], spec: str = ".2f") -> str:
    if e["mean"] is None:
        return f"- (n={e['n']})"
    return f"{e['mean']:{spec}} [{e['low']:{spec}}, {e['high']:{spec}}] (n={e['n']})"


def _proportion(p: dict[str, Any]) -> str:
    if p["value"] is None:
        return f"{p['numerator']}/{p['denominator']}"
    return f"{p['numerator']}/{p['denominator']} = {p['value']:.2f} [{p['low']:.2f}, {p['high']:.2f}]"


SLOT_STYLES = {"success": "green", "failure": "red", "mismatch": "magenta", "replay_error": "magenta",
               "unverified": "cyan", "incomplete": "yellow", "not_started": "dim"}


def dataset_rows(d: dict[str, Any]) -> list[tuple[str, str]]:
    """(figure, value) rows of one (model, mode) group, as the report prints them."""
    slots = d["slots"]
    return [
        ("tasks admitted / completed", f"{d['admitted_tasks']} / {d['completed_tasks']}"),
        ("tasks not completed", ", ".join(d["missing_tasks"]) or "none"),
        ("series recorded / completed", f"{d['series_recorded']} / {d['series_completed']}"),
        ("slots scored: success / failure", f"{slots['success']} / {slots['failure']}"),
        ("slots unscored: mismatch / replay error / unverified / incomplete / not started",
         " / ".join(str(slots[k]) for k in ("mismatch", "replay_error", "unverified", "incomplete", "not_started"))),
        ("missing slots (unscored + tasks never run)", str(d["missing_slots"])),
        ("A: mean verified success, completed tasks", _estimate(d["A"])),
        ("A lower bound: missing slots as failures", _estimate(d["A_lower"])),
        ("Q: final streak / T, completed tasks", _estimate(d["Q"])),
        ("Q lower bound: missing slots as failures", _estimate(d["Q_lower"])),
        ("trial-1 success", _proportion(d["trial1"])),
        ("success at trial t", "  ".join(f"t{i + 1}: {_proportion(p)}" for i, p in enumerate(d["success_at_trial"]))),
        ("success by trial t (>= 1 success)",
         "  ".join(f"t{i + 1}: {_proportion(p)}" for i, p in enumerate(d["success_by_trial"]))),
        (f"gain: success by trial {d['trials']} - trial 1", _estimate(d["gain"])),
        ("first success trial (tasks)", "  ".join(f"{k}: {v}" for k, v in d["first_success"].items())),
        *((f"class: {k.replace('_', ' ')}", _proportion(p)) for k, p in d["trajectories"].items()),
        ("regressions (success then failure)", str(d["regressions"])),
        ("recovery: failed trial 1, later verified success", _proportion(d["recovery"])),
        ("efficiency: first/last control steps (geo. mean)", _estimate(d["efficiency_steps_ratio"])),
        ("efficiency: first/last simulated time (geo. mean)", _estimate(d["efficiency_sim_time_ratio"])),
    ]


def replay_notes(attempt: dict[str, Any], slot: str) -> list[str]:
    """What a replay found beyond its verdict, and how it was scored: its divergence, the output it did not match."""
    notes = []
    if attempt["verdict"] == "mismatch":
        how = {"failure": "scored as the recorded failure (a replay cannot lift a failure)",
               "mismatch": "unscored: a success its replay did not reproduce (a failure in the lower bound)"}
        reached = f"; the replay reached {attempt['replay_outcome']}" if attempt.get("replay_outcome") else ""
        notes.append(f"diverged: {attempt['first_divergence']}{reached}; {how.get(slot, slot)}")
    for d in attempt.get("output_differences") or []:
        notes.append(f"output differs (not scored): operation {d['seq']} exec {d['script']}: {', '.join(d['differs'])}")
    return notes


def print_report(summary: dict[str, Any], console: Any) -> None:
    """Render the summary as rich tables on ``console``; what a participant wrote is printed as text, escaped."""
    # text(): a record's words inside markup, shown as written, never read as tags
    from rich.markup import escape as text
    from rich.table import Table

    from roboswe.terminal import plain

    run = summary["run"]
    console.print(f"[bold]run[/bold] {text(run['run_id'])}  ·  roboswe {text(run.get('roboswe_version') or '?')}  ·  "
                  f"admitted {run.get('admitted_sha256', '')[:12] or '-'}")
    if summary.get("assets_notice"):
        console.print(summary["assets_notice"], style="bold yellow", soft_wrap=True, markup=False)
    print_failed_artifacts(summary, console)
    for s in summary["series"]:
        _print_series(s, console)
    _print_denominators(summary, console)
    for d in summary["datasets"]:
        console.print(f"[bold]{text(d['model'])} · mode={text(d['mode'])}:[/bold] {text(d['headline'])}", soft_wrap=True)
        table = Table(title=text(f"metrics  ·  {d['model']}  ·  mode={d['mode']}"), title_justify="left")
        table.add_column("figure")
        table.add_column("value")
        for k, v in dataset_rows(d):
            table.add_row(k, v)
        console.print(table)
    console.print(plain(f"scoring: {summary['scoring']}"), soft_wrap=True)
    b = summary["bootstrap"]
    console.print(f"intervals: {b['method']}, {b['resamples']} resamples, seed {b['seed']}; proportions: {b['proportions']}")
    print_usage(summary, console)
    print_context(summary, console)
    _print_timing(summary["timing"], console)
    if summary["verifications"]:
        console.print("replay verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(summary["verifications"].items())))
    print_recovery(summary.get("recovery"), console)
    print_judgements(summary.get("judge"), console)


def print_failed_artifacts(summary: dict[str, Any], console: Any) -> None:
    """Each artifact the run could not make (a video), with its reason: evidence lost is said, never silent."""
    from roboswe.records.artifacts import failed_artifact_line

    for failure in summary.get("failed_artifacts", []):
        console.print(failed_artifact_line(failure), style="bold yellow", soft_wrap=True, markup=False)


# The attempts table's columns (header, justify): short headers, so the table reads at 80 columns.
ATTEMPT_COLUMNS = (("trial", "right"), ("att", "right"), ("outcome", "left"), ("replay", "left"), ("slot", "left"),
                   ("steps", "right"), ("sim s", "right"), ("active s", "right"), ("cause", "left"), ("detail", "left"))


def _narrow_table(title: str, columns: tuple[tuple[str, str], ...]) -> Any:
    """A table that reads at 80 columns: a rule under the header, one space between columns, figures
    never cut, words folded onto the next line instead of ending in "…"."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=0)
    for col, just in columns:
        table.add_column(col, justify=just, min_width=len(col), overflow="fold", no_wrap=just == "right")
    return table


def _print_series(s: dict[str, Any], console: Any) -> None:
    """One series: its attempts table, what each replay found, its figures."""
    from rich.markup import escape as text

    from roboswe.terminal import plain

    label = f"  ·  assets={s['assets']}" if s.get("assets") not in (None, "unlabelled") else ""
    protocol = f"  ·  protocol {s['protocol']}" if s.get("protocol") else ""
    # no detail column when no attempt has one (every trial succeeded): the room goes to the cause
    columns = ATTEMPT_COLUMNS if any(a["detail"] for a in s["attempts"]) else ATTEMPT_COLUMNS[:-1]
    table = _narrow_table(text(f"{s['task']}  ·  {s['model']}  ·  mode={s['mode']}{label}{protocol}"), columns)
    m = s["metrics"] or {}
    statuses = m.get("statuses") or []
    last = {a["index"]: a["trial_id"] for a in s["attempts"]}  # the attempt that fills each slot
    for a in s["attempts"]:
        slot = statuses[a["index"] - 1] if last[a["index"]] == a["trial_id"] and statuses else "superseded"
        style = SLOT_STYLES.get(slot, "dim")
        row = [str(a["index"]), str(a["attempt"]), a["outcome"], BADGES.get(a["verdict"], a["verdict"]),
               f"[{style}]{slot}[/{style}]", _fmt(a["control_steps"], "d"), _fmt(a["sim_time"]),
               _fmt(a["active_time"]), a["cause"] or "-", plain((a["detail"] or "")[:60], multiline=False)]
        table.add_row(*row[:len(columns)])
    console.print(table)
    for a in s["attempts"]:
        slot = statuses[a["index"] - 1] if last[a["index"]] == a["trial_id"] and statuses else "superseded"
        for note in replay_notes(a, slot):
            console.print(plain(f"  trial {a['index']} attempt {a['attempt']}: {note}"), soft_wrap=True)
    if m:
        y = " ".join("·" if v is None else str(v) for v in m["y"])
        unscored = ", ".join(f"{k} {v}" for k, v in m["unscored"].items() if v) or "none"
        console.print(f"  y = [{y}]   A = {_fmt(m['A'])}   Q = {_fmt(m['Q'])}   "
                      f"(lower bounds {_fmt(m['A_lower'])} / {_fmt(m['Q_lower'])})   first success = "
                      f"{_fmt(m['first_success'], 'd')}   class = {m['trajectory'] or '-'}   "
                      f"completed = {m['completed']}   unscored: {unscored}")
        eff = m["efficiency"]
        if eff["control_steps"]:
            console.print(f"  efficiency (verified successes): steps {eff['control_steps']}  "
                          f"first/last = {_fmt(eff['steps_ratio'])}")


def _print_denominators(summary: dict[str, Any], console: Any) -> None:
    """The admitted tasks, each exclusion and why, and the predicate reviews."""
    from rich.markup import escape as text

    from roboswe.terminal import plain

    denom = summary["denominators"]
    console.print(f"[bold]admitted tasks[/bold] ({len(denom['admitted'])}): {text(', '.join(denom['admitted']) or '-')}")
    if denom["excluded"]:
        for task, why in denom["excluded"].items():
            console.print(plain(f"  excluded {task}: {why}"), soft_wrap=True)
    console.print(plain(f"  exclusions from: {denom['source']}"))
    if summary.get("predicate_reviews"):
        console.print("[bold]predicate review[/bold] (the success function, its source sha256, what it checks):")
        for task, review in sorted(summary["predicate_reviews"].items()):
            console.print(review_line(task, review), soft_wrap=True, markup=False)


def _print_timing(timing: dict[str, Any], console: Any) -> None:
    """Where the trials' time went, each component against the trial wall (or active) time."""
    from rich.table import Table

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


USAGE_COLUMNS = ("series", "calls", "input", "cached", "output", "reasoning", "unrep/failed", "cost")  # a legend follows


def _tokens(u: dict[str, Any]) -> list[str]:
    return [f"{u['calls']}", f"{u['input']:,}", f"{u['cached_input']:,}", f"{u['output']:,}",
            "-" if u["reasoning"] is None else f"{u['reasoning']:,}",
            f"{u['unreported_calls']} / {u['failed_calls']}"]


def _cost(c: dict[str, Any]) -> str:
    from rich.markup import escape

    return escape(f"{c['amount']:.4f} {c['currency']}") if c["amount"] is not None else "-"  # the reason: below the table


def print_usage(summary: dict[str, Any], console: Any) -> None:
    """Tokens and cost per series and for the run (per trial in --json and the viewer)."""
    from rich.markup import escape

    usage = summary["usage"]
    table = _narrow_table("tokens and cost (from the stored provider responses)",
                          tuple((col, "left" if col in ("series", "cost") else "right") for col in USAGE_COLUMNS))
    names = {s["series_id"]: s["task"] for s in summary["series"]}
    costs = [*usage["series_cost"].values(), usage["run_cost"]]
    for sid, u in usage["series"].items():
        table.add_row(escape(names.get(sid, sid)), *_tokens(u), _cost(usage["series_cost"][sid]))
    table.add_row("[bold]run[/bold]", *_tokens(usage["run"]), _cost(usage["run_cost"]))
    console.print(table)
    console.print("  cached: cached input tokens; unrep/failed: calls whose reply reported no usage / calls that "
                  "failed", markup=False, soft_wrap=True)
    if usage["price"]:  # without one the price line below says why no cost is shown
        for reason in dict.fromkeys(c["reason"] for c in costs if c["amount"] is None):  # once, not in every row
            console.print(f"  cost not reported: {reason}", markup=False, soft_wrap=True)
    run = usage["run"]
    if run.get("reported_cost") is not None:
        console.print(f"  cost the provider reported (usage.cost): {run['reported_cost']:.4f}", markup=False)
    for sid, u in usage["series"].items():  # replies that stopped with the model's own outcome, not retried
        if u.get("stops"):
            said = ", ".join(f"{k} {n}" for k, n in sorted(u["stops"].items()))
            console.print(f"  {names.get(sid, sid)}: model stops: {said}", markup=False, soft_wrap=True)
    price = usage["price"]
    console.print("  price: " + (f"{price['input']} input / {_fmt(price['cached_input'], 'g')} cached input / "
                                 f"{_fmt(price['cache_write'], 'g')} cache write / {price['output']} output "
                                 f"{price['currency']} per million tokens" if price else
                                 "none pinned ([provider.price] absent): cost not reported"), soft_wrap=True, markup=False)


def print_context(summary: dict[str, Any], console: Any) -> None:
    """The context policy (C, O, S, B, counting) and every slide."""
    from rich.markup import escape
    from rich.table import Table

    ctx = summary["context"]
    p = ctx["policy"]
    counting = ", ".join(f"{k} x{v}" for k, v in p["counting"].items()) or "no requests counted"
    console.print(f"[bold]context policy[/bold] {escape(p['provider'])} {escape(p['model'])}: C = {_fmt(p['C'], ',')}, "
                  f"O = {_fmt(p['O'], ',')}, S = {p['S']:,}, B = min(C - O, the model's input cap) - S = {_fmt(p['B'], ',')}; "
                  f"a slide removes >= {p['slide_min_units']:,} units; counting: {counting} "
                  f"({p['exact_requests']} exact, {p['estimated_requests']} estimated)", soft_wrap=True)
    if not ctx["slides"]:
        console.print("  slides: none")
        return
    table = Table(title="context slides", title_justify="left")
    for col in ("trial", "slide", "at", "messages removed", "units before", "units after", "removed", "method"):
        table.add_column(col)
    names = {s["series_id"]: s["task"] for s in summary["series"]}
    for sl in ctx["slides"]:
        table.add_row(escape(f"{names.get(sl['series_id'], sl['series_id'])} t{sl['trial']}"), str(sl["seq"]),
                      time.strftime("%H:%M:%S", time.gmtime(sl["at"])), str(sl["removed"]),
                      f"{sl['before_units']:,}", f"{sl['after_units']:,}", f"{sl['units_removed']:,}", sl["method"])
    console.print(table)
