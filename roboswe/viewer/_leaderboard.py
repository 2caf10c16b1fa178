"""Results across runs: models x tasks, for `roboswe leaderboard` and its pages.

Every figure comes from the functions ``roboswe report`` uses: a run's series are scored by
``build_results`` (roboswe.records.scoring) and the runs of one pin group are pooled by
``dataset_metrics``, the aggregation the report prints per (model, mode): A and Q with
bootstrap intervals over completed tasks, trial-1 success and success by trial with Wilson
intervals, the gain, the missing slots. A task run by one model in several runs counts once,
its latest series (the runs in the order given, each run's series in creation order), as
within one run.

Runs are pooled only when the pins ``roboswe compare`` checks agree on the tasks they share
(``roboswe.records.compare.pin_differences``, the same check); otherwise they form separate
groups, each with the differences that split it from the first named, unless a difference is
allowed by name (``--allow-differ``), which is then stated in the output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from roboswe.records.compare import check_allowed, pin_differences, run_pins
from roboswe.records.reader import RunReader
from roboswe.records.scoring import BOOTSTRAP, _latest_by_task, dataset_metrics


def _run(run_dir: Path) -> dict[str, Any]:
    """One run's pins, its scored series and its usage, as the report computes them."""
    from roboswe.records.artifacts import build_results
    from roboswe.records.report import run_summary

    with RunReader(run_dir) as reader:
        run = reader.run()
        results = build_results(reader, run.run_id)
        summary = run_summary(reader, run.run_id, results=results)
        pins = run_pins(reader, run.run_id)
    return {"run_dir": str(run_dir), "run_id": run.run_id, "created_at": run.created_at, "pins": pins,
            "metrics": results.series, "admitted": list(results.denominators.admitted), "usage": summary["usage"],
            "series": [{k: s[k] for k in ("series_id", "task", "model", "mode", "trials")} for s in summary["series"]],
            "viewer": str(run_dir / "viewer" / "index.html") if (run_dir / "viewer" / "index.html").is_file() else None}


def _groups(runs: list[dict[str, Any]], allowed: set[str]) -> list[dict[str, Any]]:
    """Runs whose pins agree (or differ only where allowed), in the order given; each group says what split it."""
    groups: list[dict[str, Any]] = []
    for run in runs:
        tasks = {s["task"] for s in run["series"]}
        for g in groups:
            diffs = [d for member in g["runs"] for d in pin_differences(
                member["pins"], run["pins"], sorted(tasks & {s["task"] for s in member["series"]}), allowed)]
            if all(d.allowed for d in diffs):
                g["runs"].append(run)
                g["allowed"] += [msgspec.to_builtins(d) for d in diffs]
                break
        else:
            first = groups[0]["runs"][0] if groups else None
            split = [] if first is None else [msgspec.to_builtins(d) for d in pin_differences(
                first["pins"], run["pins"], sorted(tasks | {s["task"] for s in first["series"]}), allowed)
                if not d.allowed]
            groups.append({"runs": [run], "allowed": [], "differs_from_first": split})
    return groups


def _cost(picked: list[dict[str, Any]]) -> dict[str, Any]:
    """The summed cost of some series (each its run's series_cost), per task; not reported (with the reason)
    if any one is not."""
    missing = next((c for c in picked if c["amount"] is None), None)
    currencies = sorted({c["currency"] for c in picked if c["amount"] is not None})
    if missing is not None or len(currencies) > 1:
        return {"amount": None, "per_task": None, "currency": "",
                "reason": missing["reason"] if missing else f"mixed currencies {', '.join(currencies)}"}
    total = sum(c["amount"] for c in picked)
    return {"amount": total, "per_task": total / len(picked) if picked else None,
            "currency": currencies[0] if currencies else "", "reason": ""}


NO_CALLS = {"amount": None, "currency": "", "reason": "no provider calls recorded"}


def _board(group: dict[str, Any]) -> dict[str, Any]:
    runs = group["runs"]
    origin = {id(m): run for run in runs for m in run["metrics"]}  # by identity: a copied run repeats series ids
    metrics = [m for run in runs for m in run["metrics"]]
    admitted: list[str] = []
    for run in runs:
        admitted += [t for t in run["admitted"] if t not in admitted]
    models = []
    for d in dataset_metrics(metrics, admitted_tasks=admitted):
        latest = _latest_by_task([m for m in metrics if (m.model, m.mode) == (d.model, d.mode)])
        cells, costs = {}, []
        for task, m in latest.items():
            run = origin[id(m)]
            cost = run["usage"]["series_cost"].get(m.series_id, NO_CALLS)
            costs.append(cost)
            cells[task] = {"series_id": m.series_id, "run_dir": run["run_dir"], "A": m.A, "Q": m.Q,
                           "A_lower": m.A_lower, "y": list(m.y), "statuses": list(m.statuses),
                           "completed": m.completed, "cost": cost}
        models.append({**msgspec.to_builtins(d), "cells": cells, "cost": _cost(costs)})
    return {"runs": [r["run_dir"] for r in runs], "tasks": admitted, "models": models,
            "allowed": group["allowed"], "differs_from_first": group["differs_from_first"]}


def leaderboard(run_dirs: list[str | Path], *, allow_differ: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """The leaderboard of some runs: {groups: [...], runs: [...], bootstrap}; raises FileNotFoundError,
    LookupError, ValueError (an --allow-differ that is not a pin)."""
    check_allowed(allow_differ)
    runs = [_run(Path(d)) for d in run_dirs]
    groups = _groups(runs, set(allow_differ))
    group_of = {r["run_dir"]: i for i, g in enumerate(groups) for r in g["runs"]}
    listing = [{"run_dir": r["run_dir"], "run_id": r["run_id"], "created_at": r["created_at"],
                "group": group_of[r["run_dir"]] + 1, "viewer": r["viewer"],
                "models": sorted({s["model"] for s in r["series"]}), "tasks": sorted({s["task"] for s in r["series"]}),
                "series": len(r["series"]), "cost": r["usage"]["run_cost"]} for r in runs]
    return {"groups": [_board(g) for g in groups], "runs": listing, "bootstrap": dict(BOOTSTRAP)}


def export_leaderboard(board: dict[str, Any], site: str | Path) -> Path:
    """Write SITE_DIR/leaderboard.html and runs.html (the run browser) with data/leaderboard.js."""
    from ._export import _copy_assets, _write_data

    site = Path(site)
    site.mkdir(parents=True, exist_ok=True)
    _copy_assets(site, pages=("leaderboard.html", "runs.html"))
    data = {**board, "runs": [{**r, "viewer": Path(r["viewer"]).resolve().as_uri() if r["viewer"] else None}
                              for r in board["runs"]]}  # the run browser links each run's exported viewer
    _write_data(site, "data/leaderboard.js", "leaderboard", data)
    return site / "leaderboard.html"
