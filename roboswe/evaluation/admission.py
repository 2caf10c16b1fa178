"""Admission: check every task of a dataset before any model call, and pin what was checked.

For each task: the scene loads; the seeded initial state is valid and not already
successful; spec, every allowed camera and a few hundred hold steps work within the
budgets; and two fresh constructions in two fresh processes give the same fingerprint.
The result, admitted.json, carries per task the full pinned manifest, the reference
fingerprint, the measured figures or the exclusion reason, and a digest of its content.
``read_admitted`` refuses a file whose content no longer matches its digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

import msgspec
import structlog

from roboswe.protocol.recorder import RunPins
from roboswe.sim.manifest import (
    Dataset,
    TaskManifest,
    load_dataset,
    manifest_from_builtins,
)

log = structlog.get_logger()

FORMAT = "roboswe.admitted/1"
HOLD_STEPS = 200


class AdmissionError(Exception):
    """An admitted.json that cannot be trusted or read; the message says what to do."""


class AdmittedTask(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    status: Literal["admitted", "excluded"]
    manifest: dict[str, Any]  # full pinned TaskManifest (to_builtins)
    manifest_digest: str
    privileged: bool
    fingerprint: dict[str, Any] | None = None  # reference Fingerprint of the admitted seed
    measured: dict[str, Any] = {}
    reason: str | None = None  # why excluded
    review: dict[str, Any] | None = None  # predicate review (families that pin one): live digest, reviewed digest, text

    def task_manifest(self) -> TaskManifest:
        return manifest_from_builtins(self.manifest)


class Admitted(msgspec.Struct, frozen=True, kw_only=True):
    format: str
    dataset: dict[str, Any]
    created_at: str
    host: dict[str, str]
    run_config_sha256: str | None
    tasks: list[AdmittedTask]
    digest: str = ""

    def admitted_tasks(self) -> list[AdmittedTask]:
        return [t for t in self.tasks if t.status == "admitted"]

    def task(self, task_id: str) -> AdmittedTask:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(f"task {task_id!r} is not in this admitted file; it has {[t.id for t in self.tasks]}")


def _content_digest(admitted: Admitted) -> str:
    body = msgspec.to_builtins(admitted)
    body.pop("digest", None)
    for task in body["tasks"]:  # files written before tasks had a review keep their digest
        if task.get("review") is None:
            task.pop("review", None)
    return hashlib.sha256(msgspec.json.encode(body, order="sorted")).hexdigest()


def task_set_pin(admitted: Admitted) -> dict[str, str]:
    """What defines the admitted task set, as named fields (`roboswe compare` names the ones that differ).

    The dataset, and per task its status, manifest, budgets, reference fingerprint and predicate
    review. Measurements (``created_at``, the host, build, step and observe timings, exclusion
    wording that quotes them) are left out: two admissions of the same tasks pin alike, though
    their files' digests differ.
    """
    def digest(value: Any) -> str:
        return hashlib.sha256(msgspec.json.encode(value, order="sorted")).hexdigest()[:16]

    pin = {"dataset": digest(admitted.dataset)}
    for t in admitted.tasks:
        pin[f"{t.id} status"] = t.status
        if t.status == "admitted":
            pin[f"{t.id} manifest"] = t.manifest_digest
            pin[f"{t.id} budgets"] = digest(t.manifest.get("budgets"))
            pin[f"{t.id} fingerprint"] = str((t.fingerprint or {}).get("digest"))
        if t.review is not None:
            pin[f"{t.id} review"] = digest(t.review)
    return pin


def write_admitted(admitted: Admitted, path: str | Path) -> Admitted:
    """Seal (digest) and write; returns the sealed value."""
    sealed = msgspec.structs.replace(admitted, digest=_content_digest(admitted))
    Path(path).write_bytes(msgspec.json.format(msgspec.json.encode(sealed), indent=2) + b"\n")
    return sealed


def pinned_admitted(config: RunPins, admitted_sha256: str) -> Admitted | None:
    """The admitted file a run pinned, if it can still be read and is still the pinned one (None otherwise)."""
    path = config.admitted_path
    if not path:
        return None
    try:
        admitted = read_admitted(path)
    except AdmissionError:
        return None
    if admitted_sha256 and admitted.digest != admitted_sha256:
        return None
    return admitted


def read_admitted(path: str | Path) -> Admitted:
    """Read admitted.json and verify its digest; raises AdmissionError naming the problem and the fix."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise AdmissionError(f"cannot read admission file {path}: {e.strerror}; run `roboswe admit DATASET --out {path}`") from None
    try:
        admitted = msgspec.json.decode(data, type=Admitted)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise AdmissionError(f"{path} is not a roboswe admission file ({e}); run `roboswe admit DATASET --out {path}`") from None
    if admitted.format != FORMAT:
        raise AdmissionError(f"{path} has format {admitted.format!r}, expected {FORMAT!r}; re-run `roboswe admit`")
    actual = _content_digest(admitted)
    if actual != admitted.digest:
        raise AdmissionError(
            f"{path} was modified after admission: its content digest is {actual[:16]}… but it records "
            f"{admitted.digest[:16]}…; admitted files must not be edited. Re-run `roboswe admit` to produce a new one."
        )
    return admitted


# ---- probing one task in a fresh process ----------------------------------------------------


def _probe(manifest: TaskManifest, hold_steps: int, full: bool) -> dict[str, Any]:
    """Runs inside a fresh simulator process: build, reset, and (if full) exercise the interface."""
    import numpy as np

    from roboswe.sim.backend import create_backend

    t0 = time.perf_counter()
    sim = create_backend(manifest.upstream.package, manifest, require_fixed_hash_seed=True)  # the manifest's simulator family
    build_s = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        fingerprint = sim.reset(manifest.seed)
        out: dict[str, Any] = {"fingerprint": msgspec.to_builtins(fingerprint), "build_seconds": round(build_s, 3),
                               "reset_seconds": round(time.perf_counter() - t0, 4)}
        if not full:
            return out
        state = sim.state()
        bad = [k for k, v in state.items() if not np.all(np.isfinite(v))]
        if bad:
            raise RuntimeError(f"initial state has non-finite values in {bad}")
        spec = sim.spec()
        hold = np.array(spec.action.hold)
        sim.validate(hold)  # the hold action is itself within bounds
        observe_ms = {}
        for cam in manifest.observation.cameras:
            sim.observe([cam.name], depth=cam.depth)  # first render warms the context
            t0 = time.perf_counter()
            frames = sim.observe([cam.name], depth=cam.depth)
            observe_ms[cam.name] = round((time.perf_counter() - t0) * 1000, 2)
            f = frames[0]
            if f.rgb.shape != (cam.height, cam.width, 3) or f.rgb.std() < 1.0:
                raise RuntimeError(f"camera {cam.name} rendered a blank or mis-sized image {f.rgb.shape}")
            if cam.depth and not np.all(np.isfinite(f.depth)):
                raise RuntimeError(f"camera {cam.name} depth has non-finite values")
        steps = min(hold_steps, manifest.budgets.trial.steps)
        t0 = time.perf_counter()
        result = sim.wait(steps)
        hold_s = time.perf_counter() - t0
        if result.applied != steps:
            raise RuntimeError(f"only {result.applied} of {steps} hold steps applied ({result.stopped})")
        after = sim.state()
        bad = [k for k, v in after.items() if not np.all(np.isfinite(v))]
        if bad:
            raise RuntimeError(f"state became non-finite after {steps} hold steps: {bad}")
        success = sim.success()
        if success.achieved:
            raise RuntimeError(f"success was achieved by holding still for {steps} steps; the task is trivial from this seed")
        step_ms = hold_s / steps * 1000
        # Can the trial's step budget physically fit in its active-time budget at this speed?
        budget_fits = manifest.budgets.trial.steps * step_ms / 1000 < manifest.budgets.trial.seconds
        out.update({
            "action_dim": spec.action_dim, "cameras": [c.name for c in manifest.observation.cameras],
            "hold_steps": steps, "step_ms": round(step_ms, 3), "observe_ms": observe_ms,
            "sim_seconds_per_step": spec.control_dt, "trial_steps_fit_time_budget": bool(budget_fits),
            "predicate_held_during_hold": success.longest_run,
        })
        if not budget_fits:
            raise RuntimeError(f"{manifest.budgets.trial.steps} steps at {step_ms:.1f} ms exceed the {manifest.budgets.trial.seconds} s trial budget")
        return out
    finally:
        sim.close()


def _probe_main() -> None:
    """``python -m roboswe.evaluation.admission REQUEST_JSON`` ({manifest, hold_steps, full}); prints one result line."""
    request = json.loads(sys.argv[1])
    try:
        manifest = manifest_from_builtins(request["manifest"])
        result = {"ok": True, **_probe(manifest, int(request["hold_steps"]), bool(request["full"]))}
    except Exception as e:  # noqa: BLE001  (every failure becomes a recorded exclusion reason)
        result = {"ok": False, "reason": f"{type(e).__name__}: {e}"}
    sys.stdout.write("\nADMISSION " + json.dumps(result) + "\n")


def _probe_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "roboswe" / "numba"))
    return env


def _start_probe(manifest: TaskManifest, hold_steps: int, full: bool) -> subprocess.Popen:
    request = json.dumps({"manifest": manifest.to_builtins(), "hold_steps": hold_steps, "full": full})
    return subprocess.Popen([sys.executable, "-m", "roboswe.evaluation.admission", request], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_probe_env())


def _finish_probe(proc: subprocess.Popen, timeout: float) -> dict[str, Any]:
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"ok": False, "reason": f"probe process exceeded {timeout:.0f} s"}
    for line in reversed(stdout.splitlines()):
        if line.startswith("ADMISSION "):
            return json.loads(line[len("ADMISSION "):])
    tail = stderr.strip().splitlines()[-3:]
    return {"ok": False, "reason": f"probe process exited {proc.returncode} without a result: {' | '.join(tail)}"}


# ---- what is known before building a scene -----------------------------------------------------


def _static_exclusion(manifest: TaskManifest) -> str | None:
    """A reason the scene cannot load that needs no simulator (the family's ``exclusion``: e.g. missing downloads)."""
    from roboswe.sim.families import family

    exclusion = family(manifest.upstream.package).exclusion
    return exclusion(manifest) if exclusion is not None else None


def predicate_reviews(manifests: list[TaskManifest], timeout: float = 300) -> dict[str, dict[str, Any]]:
    """task id -> predicate review record, for the tasks whose family pins one (``Family.reviews``).

    A family reads the live source digests in a fresh process (importing a simulator may fix
    process-wide state, such as RoboCasa's asset root), started with the probes' environment."""
    from roboswe.sim.families import family

    by_family: dict[str, list[TaskManifest]] = {}
    for m in manifests:
        by_family.setdefault(m.upstream.package, []).append(m)
    out: dict[str, dict[str, Any]] = {}
    for name, tasks in sorted(by_family.items()):
        reviews = family(name).reviews
        if reviews is not None:
            out.update(reviews(tasks, timeout, _probe_env()))
    return out


def _review_exclusion(review: dict[str, Any] | None) -> str | None:
    if review is None or review["status"] == "current":
        return None
    if review["status"] == "unreadable":
        return f"predicate review: the success function's source could not be read ({review['problem']})"
    return (f"predicate review is stale: {review['defined_in']} has source sha256 {review['source_sha256'][:16]}…, "
            f"the review read {review['reviewed_sha256'][:16]}…; read it again and update [success] review and "
            "predicate_sha256 in the manifest")


def admit_task(manifest: TaskManifest, *, hold_steps: int = HOLD_STEPS, timeout: float = 600,
               review: dict[str, Any] | None = None) -> AdmittedTask:
    """Probe one task in two fresh processes (run side by side); never raises for a task failure.

    A task whose predicate review is stale, or whose assets are missing, is excluded without a probe."""
    log.info("admission.task_started", task=manifest.id)
    t0 = time.perf_counter()
    common = {"id": manifest.id, "manifest": manifest.to_builtins(), "manifest_digest": manifest.digest(),
              "privileged": manifest.privileged, "review": review}
    reason = _review_exclusion(review) or _static_exclusion(manifest)
    if reason is not None:
        log.warning("admission.task_excluded", task=manifest.id, reason=reason)
        return AdmittedTask(status="excluded", reason=reason, **common)
    full, second = _start_probe(manifest, hold_steps, True), _start_probe(manifest, hold_steps, False)
    a, b = _finish_probe(full, timeout), _finish_probe(second, timeout)
    if not a["ok"]:
        reason = a["reason"]
    elif not b["ok"]:
        reason = f"second fresh construction failed: {b['reason']}"
    elif a["fingerprint"] != b["fingerprint"]:
        reason = (f"fingerprint differs between two fresh processes ({a['fingerprint']['digest'][:16]} vs "
                  f"{b['fingerprint']['digest'][:16]}); the scene is not deterministic")
    if reason is not None:
        log.warning("admission.task_excluded", task=manifest.id, reason=reason)
        return AdmittedTask(status="excluded", reason=reason, **common)
    measured = {k: v for k, v in a.items() if k not in ("ok", "fingerprint")}
    measured["second_build_seconds"] = b["build_seconds"]
    measured["admission_seconds"] = round(time.perf_counter() - t0, 2)
    log.info("admission.task_admitted", task=manifest.id, fingerprint=a["fingerprint"]["digest"])
    return AdmittedTask(status="admitted", fingerprint=a["fingerprint"], measured=measured, **common)


def admit_dataset(dataset_ref: str | Path, *, run_config: Path | None = None, hold_steps: int = HOLD_STEPS,
                  progress=None) -> Admitted:
    """Admit every task of a dataset; a task that fails is excluded with its reason, never dropped."""
    import platform

    dataset: Dataset
    dataset, manifests = load_dataset(dataset_ref)
    tasks = []
    reviews = predicate_reviews(manifests)
    for m in manifests:
        task = admit_task(m, hold_steps=hold_steps, review=reviews.get(m.id))
        tasks.append(task)
        if progress:
            progress(task)
    for task_id, why in dataset.excluded.items():
        tasks.append(AdmittedTask(id=task_id, status="excluded", manifest={}, manifest_digest="", privileged=False,
                                  reason=f"excluded by the dataset: {why}"))
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    # metadata only: importing robosuite is slow and noisy. Each family names its distributions (sim/families.py).
    from roboswe.sim.families import pinned_distributions

    for package in pinned_distributions():
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = "absent"
    return Admitted(
        format=FORMAT,
        dataset=msgspec.to_builtins(dataset),
        created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        host={"python": platform.python_version(), "platform": platform.platform(), **versions},
        run_config_sha256=hashlib.sha256(run_config.read_bytes()).hexdigest() if run_config else None,
        tasks=tasks,
    )


if __name__ == "__main__":
    _probe_main()
