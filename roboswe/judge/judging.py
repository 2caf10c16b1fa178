"""A run's trials through the judge: views, one request each, the answer read and compared, a record written.

Per series: the task's conditions (a task without a conditions file is listed, not judged), the manifest
the series ran (records.recovery.series_manifest: the pinned one or nothing), its scene built once by the
video renderer and its fingerprint checked against each trial's, so the pictures are drawn with the very
model the states were recorded on. Per trial with a mechanical outcome (success or failure) and recorded
states: the views, one request through the judge's provider adapter, the answer read strictly and only
then compared with the record. Every request, answered or not, becomes one ``JudgementRecord``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import structlog

from roboswe.protocol.participant import Decision, DecisionRequest, ProviderFailure
from roboswe.records.judgements import JudgementRecord
from roboswe.records.schema import sha256_hex
from roboswe.records.usage import Cost, TokenUsage, call_usage, cost

from .compare import compare
from .conditions import (
    CONDITIONS_DIR,
    JudgeConfig,
    JudgeError,
    TaskConditions,
    load_conditions,
)
from .request import (
    MalformedAnswer,
    build_request,
    neutral_bytes,
    prompt_sha256,
    read_answer,
)
from .views import View, render_views, rule_text

log = structlog.get_logger()

JUDGED_OUTCOMES = ("success", "failure")  # an incomplete or pending trial has no mechanical outcome to compare


class Asked(msgspec.Struct, frozen=True, kw_only=True):
    """One trial as put to the judge: what the record needs beside the answer."""

    run_id: str
    trial_id: str
    outcome: str
    conditions: TaskConditions
    conditions_sha256: str
    views: list[View]
    request: DecisionRequest


def ask(run_id: str, trial_id: str, outcome: str, instruction: str, conditions: TaskConditions, conditions_sha256: str,
        views: list[View]) -> Asked:
    moments = max((v.moment for v in views), default=0)
    return Asked(run_id=run_id, trial_id=trial_id, outcome=outcome, conditions=conditions,
                 conditions_sha256=conditions_sha256, views=views,
                 request=build_request(instruction, conditions, views, moments=moments))


async def judge_one(participant: Any, config: JudgeConfig, config_sha256: str, asked: Asked) -> JudgementRecord:
    """Send the request, read and compare the answer; an outage or a malformed answer is an error record."""
    started = time.time()
    decision: Decision | None = None
    attempts: list[Any] = []
    verdicts: list[dict[str, Any]] = []
    error = ""
    try:
        decision = await participant.decide(asked.request)
        attempts = list(decision.attempts)
        read = read_answer(decision, asked.conditions, [v.label for v in asked.views])
        verdicts = compare(read, asked.conditions, asked.outcome)
    except ProviderFailure as e:
        attempts, error = list(e.attempts), f"provider: {e.detail}"
    except MalformedAnswer as e:
        error = f"malformed answer: {e}"
    cfg = config.provider
    answered = next((a for a in reversed(attempts) if a.outcome == "ok"), None)
    usage = _usage(cfg.kind, attempts, decision)
    request = neutral_bytes(asked.request)
    return JudgementRecord(
        judgement_id=f"{asked.trial_id}/judge/{uuid.uuid4().hex[:12]}", run_id=asked.run_id, trial_id=asked.trial_id,
        judge=config.judge.name, judge_sha256=config_sha256, provider=cfg.kind,
        model=(decision.model if decision is not None and decision.model else cfg.model or cfg.agent),
        settings={"provider": msgspec.to_builtins(cfg), "views": config.judge.views, "rule": rule_text(config.judge.views)},
        conditions_sha256=asked.conditions_sha256, prompt_sha256=prompt_sha256(asked.request),
        views=[v.describe() for v in asked.views], request=request, request_sha256=sha256_hex(request),
        attempts=attempts, response=answered.response if answered is not None else None,
        status="error" if error else "answered", error=error, verdicts=verdicts,
        usage=msgspec.to_builtins(usage), cost=msgspec.to_builtins(_cost(usage, cfg.price)),
        started_at=started, ended_at=time.time())


def _cost(usage: TokenUsage, price: Any) -> Any:
    if price is None:  # records/usage.py's reason names the run config; a judge's price is in its own
        return Cost(amount=None, reason="no [provider.price] in the judge config")
    return cost(usage, price)


def _usage(kind: str, attempts: Sequence[Any], decision: Decision | None) -> TokenUsage:
    """Tokens of every attempt from its exact response (records/usage.py), else what the adapter reported."""
    total = TokenUsage()
    if not attempts and decision is not None:  # a local judge answering without a wire
        return TokenUsage(calls=1, input=decision.usage.input_tokens, output=decision.usage.output_tokens)
    for a in attempts:
        recorded = msgspec.to_builtins(decision.usage) if decision is not None and a is attempts[-1] else {}
        total = total + call_usage(kind, a.response or None, recorded, "" if a.outcome == "ok" else a.outcome)
    return total


def series_work(reader: Any, run: Any, series: Any, wanted: set[str] | None, renderer: Callable[[Any], Any],
                views: int, conditions_dir: Path = CONDITIONS_DIR) -> tuple[list[Asked], list[dict[str, str]]]:
    """The series' trials put as requests, and those skipped with why. ``renderer(manifest)`` gives a
    sim.video.VideoRenderer (cached by the caller: a scene build costs seconds)."""
    from roboswe.records.recovery import RecoveryError, series_manifest
    from roboswe.sim.backend import SimError
    from roboswe.sim.physics_state import TraceError, states_from_traces

    found = load_conditions(series.task, conditions_dir)
    if found is None:
        return [], [{"series_id": series.series_id, "trial_id": "", "why": f"task {series.task} has no conditions file"}]
    conditions, digest = found
    trials = [v for v in reader.trials(series.series_id) if wanted is None or v.trial_id in wanted]
    skipped: list[dict[str, str]] = []
    out: list[Asked] = []
    if not trials:  # nothing asked of this series: no scene to build
        return out, skipped
    try:
        manifest = series_manifest(run, series)
        video = renderer(manifest)
        seed = int(series.pins.get("seed", manifest.seed))
        scene_fp = video.scene_fingerprint(seed)  # the model the pictures are drawn with
    except (RecoveryError, SimError) as e:
        return [], [{"series_id": series.series_id, "trial_id": v.trial_id, "why": str(e)} for v in trials]
    cameras = conditions.cameras or list(manifest.video.cameras)
    if unguided := [c for c in cameras if c not in conditions.evidence]:
        raise JudgeError(f"{series.task}: cameras {unguided} have no [evidence] line in its conditions file")
    for view in trials:
        why = ""
        if view.outcome not in JUDGED_OUTCOMES:
            why = f"no mechanical outcome to compare (outcome {view.outcome or 'not recorded'})"
        elif view.start.fingerprint != scene_fp:
            why = f"scene fingerprint {scene_fp[:12]} is not the trial's {view.start.fingerprint[:12]}"
        if not why:
            try:
                states = states_from_traces(reader.control_traces(view.trial_id))
                shown = render_views(video, states, cameras, views, seed=seed)
            except (TraceError, SimError) as e:
                why = f"{type(e).__name__}: {e}"
        if why:
            skipped.append({"series_id": series.series_id, "trial_id": view.trial_id, "why": why})
            continue
        out.append(ask(run.run_id, view.trial_id, view.outcome, manifest.instruction, conditions, digest, shown))
    return out, skipped


def judge_run(run_dir: Path, config: JudgeConfig, config_sha256: str, *, trials: Sequence[str] = (),
              run_id: str | None = None, conditions_dir: Path = CONDITIONS_DIR,
              participant: Any = None) -> tuple[list[JudgementRecord], list[dict[str, str]]]:
    """Judge the run's trials (``trials``: only these ids) and append the records to its database.

    ``participant``: the judge to ask (tests); None builds it from the config's [provider]."""
    import trio

    from roboswe.providers import create_participant
    from roboswe.records.reader import RunReader
    from roboswe.records.store import RunStore
    from roboswe.sim.video import VideoRenderer

    renderers: dict[str, Any] = {}

    def renderer(manifest: Any) -> Any:
        if manifest.digest() not in renderers:
            renderers[manifest.digest()] = VideoRenderer(manifest)
        return renderers[manifest.digest()]

    # built first: a missing key or SDK is said before minutes of rendering
    judge = participant if participant is not None else create_participant(config.provider)
    wanted = set(trials) or None
    work: list[Asked] = []
    skipped: list[dict[str, str]] = []
    try:
        with RunReader(run_dir) as reader:
            run = reader.run(run_id)
            for series in reader.series(run.run_id):
                asked, left = series_work(reader, run, series, wanted, renderer, config.judge.views, conditions_dir)
                work += asked
                skipped += left
    finally:
        for r in renderers.values():
            r.close()
    if wanted is not None and (unknown := wanted - {a.trial_id for a in work} - {s["trial_id"] for s in skipped}):
        raise JudgeError(f"no such trial in the run: {', '.join(sorted(unknown))}")

    async def main() -> list[JudgementRecord]:
        try:
            return [await judge_one(judge, config, config_sha256, a) for a in work]
        finally:
            await judge.aclose()

    records = trio.run(main)
    if records:
        with RunStore.open(run_dir) as store:
            store.put_durable(*records)
            refresh_results(Path(run_dir), store, run_id)
    log.info("run_judged", judged=len(records), skipped=len(skipped))
    return records, skipped


def refresh_results(run_dir: Path, store: Any, run_id: str | None) -> None:
    """RUN_DIR/results.json with its ``judge`` section replaced by the judgements now recorded, every other
    figure as the run wrote it; stored (sha256 readback) and recorded as a new results artifact. A run
    without results.json (still unfinished) gets its section when the run writes the file."""
    from roboswe.records.artifacts import artifact_record, store_bytes
    from roboswe.records.reader import RunReader

    from .summary import judge_summary

    path = run_dir / "results.json"
    if not path.exists():
        return
    results = msgspec.json.decode(path.read_bytes())
    with RunReader(run_dir) as reader:
        rid = reader.run(run_id).run_id
        results["judge"] = judge_summary(reader, rid)
    stored = store_bytes(path, msgspec.json.format(msgspec.json.encode(results), indent=2))
    store.put_durable(artifact_record(run_dir, stored, artifact_id=f"{rid}/results/{int(time.time() * 1000)}",
                                      run_id=rid, artifact="results", meta={"job": "judge"}))
