"""The RLE verifier, its own process: ``python -m roboswe.rle.verifier RUN_DIR [--salt-file FILE]``.

It checks the sealed copy against its digest and the ledger chain (when the run has one), draws the
hidden seeds from the salt (only this process reads it), renders the battery, restores the artifact
read-only into a fresh sandbox (artifact_bridge.py) and drives it call by call, then writes the
RewardReport with the seeds revealed. ``--replay`` re-runs a recorded run from its revealed seeds
(no salt): the plan must match the recorded commitment, every answer the recorded answer, and the
reward, recomputed with the recorded call times (a rate is a measurement of that verification,
not something a second run can reproduce), the recorded reward bit for bit.

Exit status: 0 report written (whatever the artifact did) / replay reproduced; 1 replay mismatch;
2 the harness could not verify (no image, no backend, unreadable run directory).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import msgspec
import trio

from roboswe.sandbox import SandboxError, choose_backend
from roboswe.sandbox.images import ImageError, artifact_cache_dir, load_image

from . import rundir
from .artifact_bridge import artifact_session
from .ledger import ChainVerdict, decode_rows, verify_chain
from .manifest import RleTask, task_digest
from .pose import family as pose
from .report import Gate, RewardReport
from .rundir import CallRecord
from .seal import SealError, read_sealed
from .seeds import Salt, commitment, hidden_seeds, load_salt, protocol_id


class Drive(msgspec.Struct, kw_only=True):
    calls: list[CallRecord]
    estimates: dict[int, tuple | None]
    gates: list[Gate]
    estimate_seconds: float = 0.0
    answered: int = 0
    end: object = None


async def drive(task: RleTask, battery: pose.Battery, contents: dict[str, bytes], entry: tuple[str, str],
                image, backend: str) -> Drive:
    """Load the artifact, then reset/estimate through the battery; the artifact's failures become gates and
    missing answers, never exceptions."""
    out = Drive(calls=[], estimates={}, gates=[])
    limits = task.evaluation.calls
    ev = task.evaluation
    async with artifact_session(image, backend, contents, *entry, limits) as session:
        res = await session.call({"call": "load"}, cap=limits.load_seconds)
        out.calls.append(CallRecord(n=0, kind="load", seconds=round(res.seconds, 6), ok=res.ok, error=res.error))
        if not res.ok:
            out.gates.append(Gate(name="load", reason=f"the artifact did not load: {res.error}"))
        else:
            for call in pose.calls(battery):
                if call.kind == "reset":
                    res = await session.call({"call": "reset"})
                else:
                    obs = pose.observation(task, battery, call.frame)
                    blobs = (obs["rgb"].tobytes(),) + ((obs["depth"].tobytes(),) if "depth" in obs else ())
                    res = await session.call({"call": "estimate", "width": ev.width, "height": ev.height,
                                              "camera": obs["camera"]}, blobs)
                    est = pose.valid_estimate(res.value) if res.ok else None
                    out.estimates[call.frame] = est
                    if res.ok:  # summed as recorded (rounded), so a replay re-scores from the same figures
                        out.estimate_seconds += round(res.seconds, 6)
                        out.answered += 1
                    if call.frame == 0 and est is None:
                        why = res.error if not res.ok else f"the answer {str(res.value)[:200]} is not one finite pose with a shape id"
                        out.gates.append(Gate(name="interface", reason=f"the first estimate failed: {why}"))
                out.calls.append(CallRecord(n=len(out.calls), kind=call.kind, unit=call.unit, frame=call.frame,
                                            seconds=round(res.seconds, 6), ok=res.ok, error=res.error,
                                            value=res.value if call.kind == "estimate" else None))
                if res.fatal or out.gates:
                    break
    out.end = session.end
    return out


def check_ledger(run_dir: Path, task: RleTask, sealed) -> ChainVerdict | None:
    path = run_dir / rundir.LEDGER
    if not path.exists():
        if sealed.ledger_head is not None:  # the seal names a ledger that is not there
            return ChainVerdict(ok=False, rows=0, head="", spent=0, first_bad_row=0, reason="the ledger is missing")
        return None
    try:
        rows = decode_rows(path.read_bytes())
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        return ChainVerdict(ok=False, rows=0, head="", spent=0, first_bad_row=None, reason=f"a row does not parse: {e}")
    verdict = verify_chain(rows, budget=task.budget.charged_steps, head=sealed.ledger_head, artifact_digest=sealed.digest)
    resets = [r.index for r in rows if r.kind == "charge" and r.operation == "reset"]
    if verdict.ok and len(resets) > task.budget.resets:  # resets have their own budget beside the charged steps
        return msgspec.structs.replace(verdict, ok=False, first_bad_row=resets[task.budget.resets],
                                       reason=f"the rows charge {len(resets)} resets, over the budget of {task.budget.resets}")
    return verdict


def verify_run(run_dir: Path, *, salt: Salt | None = None, seeds: list[int] | None = None,
               backend: str | None = None, battery_cache: Path | None = None) -> tuple[RewardReport, Drive | None]:
    """The report for ``run_dir`` (seeds from ``salt``, or the given revealed ``seeds`` for a replay)."""
    started = time.monotonic()
    task, sealed = rundir.read_task(run_dir), rundir.read_sealed_record(run_dir)
    if seeds is None:
        salt = salt or load_salt(None)
        seeds = hidden_seeds(salt, task.id, task.protocol.version, pose.seed_count(task))
    plan = pose.make_plan(task, seeds)
    gates: list[Gate] = []
    try:
        contents = read_sealed(run_dir / rundir.ARTIFACT, sealed)
    except SealError as e:
        contents = None
        gates.append(Gate(name="artifact", reason=f"artifact unverifiable: {e}"))
    ledger = check_ledger(run_dir, task, sealed)
    if ledger is not None and not ledger.ok:
        gates.append(Gate(name="ledger", reason=f"ledger unverifiable: {ledger.reason}"))
    image = load_image(artifact_cache_dir())
    result, chosen = None, None
    reward, components = 0.0, ()
    if not gates:
        if not sealed.has_entry:
            gates.append(Gate(name="load", reason=f"the artifact has no {sealed.entry_file}"))
        else:
            battery = pose.render_battery(task, plan, battery_cache)
            chosen = choose_backend(backend, image)
            result = trio.run(drive, task, battery, contents, (sealed.entry_file, sealed.entry_function), image, chosen)
            gates += result.gates
            if not gates:
                reward, components = pose.score(task, battery, result.estimates, result.estimate_seconds, result.answered)
    report = RewardReport(
        task=task.id, family=task.protocol.family, workflow=task.protocol.workflow,
        protocol=protocol_id(task.protocol.version, *_salt_identity(run_dir, salt)),
        placeholder=task.placeholder, status="gated" if gates else "scored", reward=0.0 if gates else reward,
        components=components, gates=tuple(gates), ledger=ledger, artifact_digest=sealed.digest,
        image_digest=image.digest, sandbox=chosen, task_digest=task_digest(task), salt_sha256=_salt_identity(run_dir, salt)[0],
        salt_label=_salt_identity(run_dir, salt)[1], plan_commitment=commitment(plan), revealed_seeds=tuple(seeds),
        calls=len(result.calls) if result else 0, verifier_seconds=round(time.monotonic() - started, 3))
    return report, result


def _salt_identity(run_dir: Path, salt: Salt | None) -> tuple[str, str]:
    if salt is not None:
        return salt.sha256, salt.label
    recorded = rundir.read_report(run_dir)  # a replay keeps the recorded salt's identity
    return recorded.salt_sha256, recorded.salt_label


def write_evidence(out: Path, report: RewardReport, result: Drive | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rundir.write_calls(out, result.calls if result else [])
    (out / rundir.SANDBOX).write_bytes(msgspec.json.encode(result.end if result else None))
    rundir.write_report(out, report)


def replay(run_dir: Path, out: Path, *, backend: str | None, battery_cache: Path | None) -> list[str]:
    """Re-run a recorded verification from its revealed seeds; the differences (none: reproduced)."""
    recorded, calls = rundir.read_report(run_dir), rundir.read_calls(run_dir)
    task = rundir.read_task(run_dir)
    plan = pose.make_plan(task, list(recorded.revealed_seeds))
    if commitment(plan) != recorded.plan_commitment:
        return ["the revealed seeds do not produce the committed plan"]
    report, result = verify_run(run_dir, seeds=list(recorded.revealed_seeds), backend=backend, battery_cache=battery_cache)
    diffs = []
    if result is not None and not report.gates:
        answers = {c.frame: c.value for c in calls if c.kind == "estimate"}
        again = {c.frame: c.value for c in result.calls if c.kind == "estimate"}
        differing = sorted(f for f in answers.keys() | again.keys() if answers.get(f) != again.get(f))
        if differing:
            diffs.append(f"{len(differing)} answers differ from the recorded ones (first at frame {differing[0]})")
        # the rate is the recorded verification's measurement: re-score the new answers with its times
        seconds = sum(c.seconds for c in calls if c.kind == "estimate" and c.ok)
        answered = sum(1 for c in calls if c.kind == "estimate" and c.ok)
        battery = pose.render_battery(task, plan, battery_cache)
        reward, components = pose.score(task, battery, result.estimates, seconds, answered)
        report = msgspec.structs.replace(report, reward=reward, components=components)
    for field in ("status", "reward", "components", "gates", "artifact_digest", "plan_commitment", "task_digest"):
        if getattr(report, field) != getattr(recorded, field):
            diffs.append(f"{field}: recorded {str(getattr(recorded, field))[:200]}, replay {str(getattr(report, field))[:200]}")
    write_evidence(out, report, result)
    return diffs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m roboswe.rle.verifier", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--salt-file", type=Path, default=None, help="the hidden salt (default: the public CI salt)")
    p.add_argument("--replay", type=Path, default=None, metavar="OUT",
                   help="re-run from the recorded report's revealed seeds; write the replay's evidence to OUT")
    p.add_argument("--backend", choices=["bwrap", "docker"], default=None)
    p.add_argument("--battery-cache", type=Path, default=None, help="reuse rendered batteries (tests, calibration)")
    args = p.parse_args(argv)
    run_dir = args.run_dir.resolve()
    try:
        if args.replay is not None:
            diffs = replay(run_dir, args.replay, backend=args.backend, battery_cache=args.battery_cache)
            sys.stdout.write(msgspec.json.encode({"reproduced": not diffs, "differences": diffs}).decode() + "\n")
            return 1 if diffs else 0
        report, result = verify_run(run_dir, salt=load_salt(args.salt_file), backend=args.backend,
                                    battery_cache=args.battery_cache)
        write_evidence(run_dir, report, result)
    except (ImageError, SandboxError, OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError) as e:
        sys.stderr.write(f"rle verifier: could not verify {run_dir}: {e}\n")
        return 2
    sys.stdout.write(f"{report.task}: {report.status} reward {report.reward:.4f}\n")
    return 0


if __name__ == "__main__":
    import os

    os.environ.setdefault("MUJOCO_GL", "egl")
    sys.exit(main())
