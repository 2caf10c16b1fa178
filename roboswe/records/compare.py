"""Paired comparison of runs by task: retain vs fresh-context control, model vs model, two settings.

``compare_runs(a, b)`` pairs the series of two runs by task and reports, over the tasks both
runs *completed* (every slot replay-agreed, see ``roboswe.records.metrics``), each side's
mean and the paired difference (B - A) of A, Q, trial-1 success, success by trial T and the
gain, with paired bootstrap intervals: the same task resamples on both sides, the same
resample count and seed as every other figure (``roboswe.records.scoring``). Tasks only one
run completed, and tasks neither completed, are listed, never dropped silently.

A comparison is only meaningful when the runs differ in the compared factor alone. The
pins checked are each task's protocol (the budget track's identity, e.g. GR1's
``.../control-1000/v2`` vs ``.../decision-200-prefix-5/v1``, which are never pooled, and the
participant interface: code or actions), the admitted task set (admission.task_set_pin: manifests,
reference fingerprints, budgets, exclusions; not the admission's measurements), the budgets (and T), the
sandbox image, each task's observation interface and whether its assets are placeholders; any difference
refuses the comparison (``ComparisonRefused``, naming it) unless allowed by name
(``--allow-differ FIELD``), and an allowed difference stays in the output.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec

from roboswe.protocol.recorder import RunPins
from roboswe.records.reader import RunReader
from roboswe.records.scoring import (
    BOOTSTRAP,
    Estimate,
    bootstrap_mean,
    paired_difference,
    score_run,
)

PIN_FIELDS: tuple[str, ...] = ("protocol", "admitted_set", "budgets", "image", "observation", "assets")
WHOLE_PINS = ("admitted_set",)  # a dict of named fields, not per task: the whole task set must agree
PROTOCOL_KEYS = ("identity", "interface", "track")  # in the series' budgets pin; compared as the protocol pin
FIGURES: tuple[str, ...] = ("A", "Q", "trial1", "success_by_T", "gain")


class ComparisonRefused(Exception):
    """The runs' pins differ in something besides the compared factor; the message names it."""


class RunSide(msgspec.Struct, frozen=True, kw_only=True):
    run_dir: str
    run_id: str
    models: list[str]
    modes: list[str]
    pins: dict[str, Any]  # PIN_FIELDS -> value (per task where the pin is per task)


class PinDifference(msgspec.Struct, frozen=True, kw_only=True):
    field: str
    detail: str
    allowed: bool


class PairedFigure(msgspec.Struct, frozen=True, kw_only=True):
    figure: str
    a: Estimate  # side A's mean over the paired tasks
    b: Estimate
    difference: Estimate  # mean of (B - A) per task, paired bootstrap interval


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    a: RunSide
    b: RunSide
    factor: dict[str, list[Any]]  # what differs by design: model, mode, provider settings
    pin_differences: list[PinDifference]
    allowed: list[str]
    tasks_both: list[str]
    only_a: list[str]  # completed by A only
    only_b: list[str]
    neither: list[str]  # recorded by either run, completed by neither
    figures: list[PairedFigure]
    bootstrap: dict[str, Any]


def _digest(value: Any) -> str:
    return hashlib.sha256(msgspec.json.encode(value, order="sorted")).hexdigest()[:16]


def _admitted_manifests(config: RunPins, admitted_sha256: str) -> dict[str, dict[str, Any]]:
    """task -> pinned manifest, from the run's admitted file when it is still the pinned one."""
    from roboswe.evaluation.admission import pinned_admitted

    admitted = pinned_admitted(config, admitted_sha256)
    if admitted is None:
        return {}
    return {t.id: t.manifest for t in admitted.tasks}


def admitted_set_pin(config: RunPins, admitted_sha256: str) -> dict[str, str]:
    """The task set a run was admitted with (admission.task_set_pin), or, its file gone, the file's digest."""
    from roboswe.evaluation.admission import pinned_admitted, task_set_pin

    admitted = pinned_admitted(config, admitted_sha256)
    return task_set_pin(admitted) if admitted is not None else {"admitted file": admitted_sha256}


def run_pins(reader: RunReader, run_id: str) -> dict[str, Any]:
    """The pins a comparison checks, read from the run's records (and its pinned admitted file)."""
    run = reader.run(run_id)
    series = reader.series(run_id)
    manifests = _admitted_manifests(run.config, run.admitted_sha256)
    images = sorted({str(e.data["image_digest"]) for _, e in reader.events(event="trial_opened")
                     if e.run_id == run_id and e.data.get("image_digest")})
    protocol, budgets, observation, assets = {}, {}, {}, {}
    for s in series:
        recorded = dict(s.pins.get("budgets") or {})
        protocol[s.task] = protocol_pin(recorded)
        budgets[s.task] = {"trials": s.trials, **{k: v for k, v in recorded.items() if k not in PROTOCOL_KEYS}}
        manifest = manifests.get(s.task) or {}
        if "observation" in manifest:
            observation[s.task] = _digest(manifest["observation"])
        else:  # the manifest digest covers the observation interface, among the rest of the scene
            observation[s.task] = f"manifest {str(s.pins.get('manifest_digest', 'unrecorded'))[:16]}"
        assets[s.task] = str(s.pins.get("assets") or (manifest.get("upstream") or {}).get("assets")
                             or "unlabelled")
    return {"protocol": protocol, "admitted_set": admitted_set_pin(run.config, run.admitted_sha256), "budgets": budgets, "image": images, "observation": observation,
            "assets": assets}


def protocol_pin(budgets: dict[str, Any]) -> str:
    """A series' protocol as compared and shown: its track identity and interface (records before tracks: unrecorded)."""
    return f"{budgets.get('identity') or 'unrecorded'} ({budgets.get('interface') or 'code'} interface)"


def pin_differences(a: dict[str, Any], b: dict[str, Any], tasks: list[str], allowed: set[str]) -> list[PinDifference]:
    out = []
    for field in PIN_FIELDS:
        va, vb = a.get(field), b.get(field)
        if field in WHOLE_PINS:  # named fields, all of them compared
            if va != vb:
                out.append(PinDifference(field=field, detail=_show(va, vb), allowed=field in allowed))
        elif isinstance(va, dict) and isinstance(vb, dict):  # per task: only the paired tasks must agree
            for task in tasks:
                if task in va and task in vb and va[task] != vb[task]:
                    out.append(PinDifference(field=field, detail=f"{task}: {_show(va[task], vb[task])}",
                                             allowed=field in allowed))
        elif va != vb:
            out.append(PinDifference(field=field, detail=_show(va, vb), allowed=field in allowed))
    return out


def _show(va: Any, vb: Any) -> str:
    if isinstance(va, dict) and isinstance(vb, dict):
        keys = sorted(k for k in va.keys() | vb.keys() if va.get(k) != vb.get(k))
        return ", ".join(f"{k} {va.get(k)!r} vs {vb.get(k)!r}" for k in keys)
    return f"{va!r} vs {vb!r}"


def _side(run_dir: Path, run_id: str | None) -> tuple[RunSide, dict[str, Any], dict[str, Any]]:
    with RunReader(run_dir) as reader:
        run = reader.run(run_id)
        score = score_run(reader, run.run_id)
        pins = run_pins(reader, run.run_id)
    by_task: dict[str, Any] = {}
    for m in score.series:
        if m.task in by_task:
            raise ComparisonRefused(
                f"{run_dir}: run {run.run_id} has more than one series for task {m.task!r} "
                f"({by_task[m.task].series_id}, {m.series_id}); compare runs with one series per task")
        by_task[m.task] = m
    provider = run.config.provider
    side = RunSide(run_dir=str(run_dir), run_id=run.run_id, models=sorted({m.model for m in score.series}),
                   modes=sorted({m.mode for m in score.series}), pins=pins)
    settings = {k: v for k, v in provider.items() if k not in ("price", "api_key_env", "base_url")}
    return side, by_task, {"model": side.models, "mode": side.modes, "provider": settings}


def _task_values(m: Any) -> dict[str, float]:
    y = [v for v in m.y if v is not None]
    return {"A": m.A, "Q": m.Q, "trial1": float(y[0]), "success_by_T": float(any(y)),
            "gain": float(any(y)) - float(y[0])}


def check_allowed(allow_differ: list[str] | tuple[str, ...]) -> None:
    """Raises ValueError for an --allow-differ name that is not a pin."""
    unknown = sorted(set(allow_differ) - set(PIN_FIELDS))
    if unknown:
        raise ValueError(f"--allow-differ {', '.join(unknown)}: not a pin; expected one of {', '.join(PIN_FIELDS)}")


def compare_runs(run_a: str | Path, run_b: str | Path, *, allow_differ: list[str] | tuple[str, ...] = (),
                 run_id_a: str | None = None, run_id_b: str | None = None) -> Comparison:
    """Pair two runs' series by task and compare them; raises ComparisonRefused, LookupError, FileNotFoundError."""
    check_allowed(allow_differ)
    a, series_a, factor_a = _side(Path(run_a), run_id_a)
    b, series_b, factor_b = _side(Path(run_b), run_id_b)
    done_a = {t for t, m in series_a.items() if m.completed}
    done_b = {t for t, m in series_b.items() if m.completed}
    both = sorted(done_a & done_b)
    differences = pin_differences(a.pins, b.pins, sorted(series_a.keys() & series_b.keys()), set(allow_differ))
    refused = [d for d in differences if not d.allowed]
    if refused:
        raise ComparisonRefused(
            f"{run_a} and {run_b} differ in more than the compared factor: "
            + "; ".join(f"{d.field} ({d.detail})" for d in refused)
            + f". Compare runs pinned alike, or pass --allow-differ {refused[0].field} to compare anyway (shown in the output)")
    values_a = [_task_values(series_a[t]) for t in both]
    values_b = [_task_values(series_b[t]) for t in both]
    figures = []
    for name in FIGURES:
        xa, xb = [v[name] for v in values_a], [v[name] for v in values_b]
        figures.append(PairedFigure(figure=name, a=bootstrap_mean(xa), b=bootstrap_mean(xb),
                                    difference=paired_difference(xb, xa)))
    factor = {k: [factor_a[k], factor_b[k]] for k in factor_a if factor_a[k] != factor_b[k]}
    return Comparison(a=a, b=b, factor=factor, pin_differences=differences, allowed=sorted(allow_differ),
                      tasks_both=both, only_a=sorted(done_a - done_b), only_b=sorted(done_b - done_a),
                      neither=sorted((series_a.keys() | series_b.keys()) - done_a - done_b),
                      figures=figures, bootstrap=dict(BOOTSTRAP))
