"""Within-trial recovery: mishaps and regained progress, found in a trial's recorded physics states.

RoboSWE-ADAPT proposes this as a separate diagnostic: mishaps identified independently of the
participant's words, each paired with regained task progress and the control steps and simulated
time it took; a mishap still open when the trial ends is censored at the trial boundary. It is
never a penalty and never part of A or Q: exploratory mistakes can support later success, and
producing extra mishaps must earn nothing.

Per task the rules (configs/diagnostics/recovery.toml, read by ``load_rules``) name one progress
measure each: a body's rise above its height at step 0, or a joint's opening. ``detect`` is the
pure state machine over one progress series; ``trial_progress`` reads the measures from recorded
states through the task's own compiled model (the scene the video renderer builds, its fingerprint
checked against the trial's, then forward kinematics on every recorded row); ``run_recovery``
does this for every trial of a run.
"""

from __future__ import annotations

import statistics
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np

from roboswe.records.schema import sha256_hex

RULES_PATH = Path(__file__).resolve().parents[2] / "configs" / "diagnostics" / "recovery.toml"
TASKS_DIR = RULES_PATH.parents[1] / "tasks"
LABEL = "within-trial recovery (diagnostic: never a penalty, never part of A or Q)"


class RecoveryError(ValueError):
    """Rules that cannot be read, or a trial whose states cannot be measured; the message says which."""


class Rule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One progress measure and its thresholds (the rules file's header explains each)."""

    name: str
    measure: Literal["rise", "joint", "opening"]
    engaged: float
    drop: float
    body: str = ""
    joint: str = ""
    sign: float = 1.0
    fixture: str = ""  # opening: the task env's attribute naming the fixture it chose at reset (RoboCasa)
    regain: float | None = None
    target: str = ""
    target_radius: float = 0.0

    @property
    def regain_level(self) -> float:
        return self.engaged if self.regain is None else self.regain


class TaskRules(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    rules: list[Rule]


class Mishap(msgspec.Struct, frozen=True, kw_only=True):
    """One mishap: where it started, the progress it lost, and its recovery (None: censored)."""

    rule: str
    step: int  # the control step the progress fell
    time: float  # simulated seconds at that step
    peak: float  # the progress it fell from
    level: float  # the progress at ``step``
    recovered_step: int | None = None
    recovered_time: float | None = None
    censored_at: int | None = None  # the trial's last recorded step, when never recovered

    @property
    def steps_to_recovery(self) -> int | None:
        return None if self.recovered_step is None else self.recovered_step - self.step

    @property
    def seconds_to_recovery(self) -> float | None:
        return None if self.recovered_time is None else self.recovered_time - self.time


def load_rules(path: str | Path = RULES_PATH) -> dict[str, TaskRules]:
    """task id -> its rules; raises RecoveryError naming the file and the problem."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
        rules = msgspec.convert(raw, dict[str, TaskRules])
    except (OSError, tomllib.TOMLDecodeError, msgspec.ValidationError) as e:
        raise RecoveryError(f"{path}: {e}") from None
    for task, tr in rules.items():
        for r in tr.rules:
            needs = {"rise": "body", "joint": "joint", "opening": "fixture"}
            if [k for k in needs.values() if getattr(r, k)] != [needs[r.measure]]:
                raise RecoveryError(f"{path}: {task} rule {r.name!r}: measure {r.measure!r} needs "
                                    f"{needs[r.measure]} (and only that)")
            if not (r.engaged > 0 and r.drop > 0 and r.regain_level > 0):
                raise RecoveryError(f"{path}: {task} rule {r.name!r}: engaged, drop and regain must be > 0")
    return rules


def rules_digest(path: str | Path = RULES_PATH) -> str:
    return sha256_hex(Path(path).read_bytes())


def detect(rule: Rule, steps: Sequence[int], times: Sequence[float], progress: Sequence[float],
           on_target: Sequence[bool] | None = None) -> list[Mishap]:
    """Mishaps in one progress series (row i: after control step ``steps[i]``).

    Engaged once progress reaches ``rule.engaged``; a mishap at the first row below both
    ``engaged`` and ``peak - drop`` (unless ``on_target`` holds there: a placement, which
    disengages without a mishap); recovered at the first later row at or above the regain level;
    the one still open at the last row is censored there."""
    out: list[Mishap] = []
    engaged, peak, open_ = False, 0.0, None
    for i, p in enumerate(progress):
        p = float(p)
        if open_ is not None:
            if p >= rule.regain_level:
                out.append(msgspec.structs.replace(open_, recovered_step=int(steps[i]), recovered_time=float(times[i])))
                open_, engaged, peak = None, True, p
            continue
        if not engaged:
            engaged, peak = p >= rule.engaged, p
            continue
        peak = max(peak, p)
        if p < rule.engaged and p <= peak - rule.drop:
            engaged = False
            if on_target is None or not on_target[i]:
                open_ = Mishap(rule=rule.name, step=int(steps[i]), time=float(times[i]), peak=peak, level=p)
    if open_ is not None:
        out.append(msgspec.structs.replace(open_, censored_at=int(steps[-1])))
    return out


class SceneMeasures:
    """A task's compiled model, read on recorded states: body positions after forward kinematics, joint positions."""

    def __init__(self, sim: Any):
        import mujoco

        self._mj = mujoco
        self.sim = sim
        self.model = sim.model
        self._data = mujoco.MjData(self.model)

    def _id(self, kind: Any, name: str) -> int:
        i = self._mj.mj_name2id(self.model, kind, name)
        if i < 0:
            raise RecoveryError(f"{name!r} is not a {kind.name.removeprefix('mjOBJ_').lower()} of this scene")
        return i

    def body_positions(self, states: Any, bodies: Sequence[str]) -> dict[str, np.ndarray]:
        """body -> (rows, 3) world positions. Only qpos and mocap poses place bodies, so kinematics suffice."""
        ids = {b: self._id(self._mj.mjtObj.mjOBJ_BODY, b) for b in bodies}
        out = {b: np.empty((len(states.qpos), 3)) for b in bodies}
        d, mocap = self._data, bool(states.mocap_pos.size and self.model.nmocap)
        for row, q in enumerate(states.qpos):
            d.qpos[:] = q
            if mocap:
                d.mocap_pos[:] = states.mocap_pos[row].reshape(d.mocap_pos.shape)
                d.mocap_quat[:] = states.mocap_quat[row].reshape(d.mocap_quat.shape)
            self._mj.mj_kinematics(self.model, d)
            for b, i in ids.items():
                out[b][row] = d.xpos[i]
        return out

    def joint_positions(self, qpos: np.ndarray, joint: str) -> np.ndarray:
        j = self._id(self._mj.mjtObj.mjOBJ_JOINT, joint)
        return qpos[:, int(self.model.jnt_qposadr[j])].copy()

    def opening(self, qpos: np.ndarray, fixture: str) -> np.ndarray:
        """Mean open fraction of the door or drawer joints of the fixture the task chose at reset, normalised
        as RoboCasa's own predicate does (Fixture.get_joint_state: 0 closed, 1 open, whichever way it
        opens), clipped to [0, 1]."""
        fx = getattr(getattr(self.sim, "env", None), fixture, None)
        if fx is None or not hasattr(fx, "door_joint_names"):
            raise RecoveryError(f"this task's scene has no fixture {fixture!r} with door joints")
        fractions = []
        for name in fx.door_joint_names:
            # RoboCasa normalises by the range in the fixture's own XML (Fixture._joint_infos), which
            # need not be the compiled model's jnt_range (a drawer's slide is rescaled with its size)
            rng = getattr(fx, "_joint_infos", {}).get(name, {}).get("range")
            lo, hi = rng if rng is not None else self.model.jnt_range[self._id(self._mj.mjtObj.mjOBJ_JOINT, name)]
            f = np.clip((self.joint_positions(qpos, name) - lo) / (hi - lo), 0.0, 1.0)
            fractions.append(1.0 - f if lo < 0 else f)
        return np.mean(fractions, axis=0)


def trial_progress(measures: SceneMeasures, states: Any, rule: Rule) -> tuple[np.ndarray, np.ndarray | None]:
    """The rule's progress per recorded row, and whether the body is over its target there (None: no target)."""
    if states.qpos.shape[1:] != (measures.model.nq,):
        raise RecoveryError(f"recorded qpos has {states.qpos.shape[1:]} columns, the model has nq = {measures.model.nq}")
    if rule.measure == "opening":
        return measures.opening(states.qpos, rule.fixture), None
    if rule.measure == "joint":
        q = measures.joint_positions(states.qpos, rule.joint)
        return rule.sign * (q - q[0]), None
    bodies = [rule.body] + ([rule.target] if rule.target else [])
    pos = measures.body_positions(states, bodies)
    rise = pos[rule.body][:, 2] - pos[rule.body][0, 2]
    if not rule.target:
        return rise, None
    return rise, np.linalg.norm(pos[rule.body][:, :2] - pos[rule.target][:, :2], axis=1) <= rule.target_radius


def trial_mishaps(measures: SceneMeasures, states: Any, rules: Sequence[Rule]) -> list[Mishap]:
    """Every rule's mishaps in one trial's states, in step order."""
    found: list[Mishap] = []
    for rule in rules:
        progress, on_target = trial_progress(measures, states, rule)
        found += detect(rule, states.step.tolist(), states.time.tolist(), progress, on_target)
    return sorted(found, key=lambda m: (m.step, m.rule))


def tally(mishaps: Sequence[Mishap]) -> dict[str, Any]:
    """Counts and median recovery over a trial's or a series' mishaps (medians None when nothing recovered)."""
    done = [m for m in mishaps if m.recovered_step is not None]
    return {"mishaps": len(mishaps), "recovered": len(done), "censored": len(mishaps) - len(done),
            "median_steps_to_recovery": statistics.median(m.steps_to_recovery for m in done) if done else None,
            "median_seconds_to_recovery": statistics.median(m.seconds_to_recovery for m in done) if done else None}


def mishap_row(m: Mishap) -> dict[str, Any]:
    return {**msgspec.to_builtins(m), "steps_to_recovery": m.steps_to_recovery,
            "seconds_to_recovery": m.seconds_to_recovery}


# ---- a run: every trial of every series whose task has rules ------------------------------


def series_manifest(run: Any, series: Any, tasks_dir: Path = TASKS_DIR) -> Any:
    """The manifest the series ran: from the run's pinned admitted file, else the task file whose digest
    is the series' pin; raises RecoveryError when neither is the pinned one."""
    from roboswe.evaluation.admission import pinned_admitted
    from roboswe.sim.manifest import load_manifest

    want = series.pins.get("manifest_digest")
    admitted = pinned_admitted(run.config, run.admitted_sha256)
    try:
        manifest = (admitted.task(series.task).task_manifest() if admitted is not None
                    else load_manifest(Path(tasks_dir) / f"{series.task}.toml"))
    except (KeyError, OSError, ValueError) as e:
        raise RecoveryError(f"series {series.series_id}: cannot find the manifest of task {series.task!r}: {e}") from None
    if want and manifest.digest() != want:
        raise RecoveryError(f"series {series.series_id}: manifest of {series.task!r} found has digest "
                            f"{manifest.digest()[:12]}, the series pinned {want[:12]}")
    return manifest


def series_recovery(reader: Any, run: Any, series: Any, rules: TaskRules, scenes: dict[str, Any],
                    tasks_dir: Path = TASKS_DIR) -> dict[str, Any]:
    """One series: per trial its mishaps (or why it could not be measured), and the series' tally."""
    from roboswe.sim.backend import SimError, create_backend
    from roboswe.sim.physics_state import TraceError, states_from_traces

    manifest = series_manifest(run, series, tasks_dir)
    key = manifest.digest()
    try:
        if key not in scenes:  # the scene the video renderer builds; one per manifest (seconds for robosuite)
            scenes[key] = SceneMeasures(create_backend(manifest.upstream.package, manifest))
        measures = scenes[key]
        # The trial's fingerprint covers the model XML, the compiled model and the initial state: equal
        # digests mean the states are read through the very model they were recorded on.
        scene_fp = measures.sim.reset(series.pins.get("seed", manifest.seed)).digest
    except SimError as e:
        raise RecoveryError(f"series {series.series_id}: cannot rebuild the scene of {series.task!r}: {e}") from None
    trials, found = [], []
    for view in reader.trials(series.series_id):
        row: dict[str, Any] = {"trial_id": view.trial_id, "index": view.start.index, "attempt": view.start.attempt,
                               "outcome": view.outcome, "events": [], "error": ""}
        try:
            if view.start.fingerprint != scene_fp:
                raise RecoveryError(f"scene fingerprint {scene_fp[:12]} is not the trial's {view.start.fingerprint[:12]}")
            states = states_from_traces(reader.control_traces(view.trial_id))
            mishaps = trial_mishaps(measures, states, rules.rules)
            row["last_step"] = int(states.step[-1])
        except (RecoveryError, TraceError) as e:
            row["error"] = str(e)
            mishaps = []
        row["events"] = [mishap_row(m) for m in mishaps]  # beside the tally's counts
        row.update(tally(mishaps))
        found += mishaps
        trials.append(row)
    return {"series_id": series.series_id, "task": series.task, "model": series.model, "mode": series.mode,
            "rules": [r.name for r in rules.rules], "trials": trials, **tally(found)}


def run_recovery(reader: Any, run_id: str | None = None, *, rules_path: str | Path = RULES_PATH,
                 tasks_dir: Path = TASKS_DIR) -> dict[str, Any]:
    """Every series of the run: tasks with rules measured, the others listed as without rules."""
    rules = load_rules(rules_path)
    run = reader.run(run_id)
    scenes: dict[str, SceneMeasures] = {}
    out: dict[str, Any] = {"label": LABEL, "rules_file": str(rules_path), "rules_sha256": rules_digest(rules_path),
                           "run_id": run.run_id, "series": [], "without_rules": []}
    try:
        for s in reader.series(run.run_id):
            if s.task not in rules:
                out["without_rules"].append(s.task)
                continue
            try:
                out["series"].append(series_recovery(reader, run, s, rules[s.task], scenes, tasks_dir))
            except RecoveryError as e:
                out["series"].append({"series_id": s.series_id, "task": s.task, "error": str(e), "trials": [],
                                      **tally([])})
    finally:
        for m in scenes.values():
            m.sim.close()
    out["without_rules"] = sorted(set(out["without_rules"]))
    return out


# ---- stored beside the run, shown by `roboswe recovery` and `roboswe report` --------------

STORED_NAME = "recovery.json"  # RUN_DIR/recovery.json, written by `roboswe recovery`; never read by scoring


def save_recovery(run_dir: str | Path, data: dict[str, Any]) -> Path:
    """Write the diagnostic beside the run database (atomically); the run database itself is never written."""
    path = Path(run_dir) / STORED_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(data), indent=1) + b"\n")
    tmp.replace(path)
    return path


def stored_recovery(reader: Any, run_id: str | None = None) -> dict[str, Any] | None:
    """The saved diagnostic of this run with how many of its trial attempts it does not cover (None: never computed)."""
    path = Path(reader.path).parent / STORED_NAME
    try:
        data = msgspec.json.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    run = reader.run(run_id)
    if data.get("run_id") != run.run_id:
        return None
    measured = {t["trial_id"] for s in data.get("series", []) for t in s.get("trials", [])}
    ruled = {s["series_id"] for s in data.get("series", [])}
    now = [v.trial_id for s in reader.series(run.run_id) if s.series_id in ruled for v in reader.trials(s.series_id)]
    return {**data, "not_covered": len(set(now) - measured)}


def _median(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_recovery(data: dict[str, Any] | None, console: Any) -> None:
    """Per series its tally, per trial its mishaps; always under the diagnostic's label."""
    from rich.markup import escape

    if data is None:
        console.print(f"[bold]{LABEL}[/bold]: not computed (`roboswe recovery RUN_DIR`)")
        return
    console.print(f"[bold]{LABEL}[/bold]  ·  rules {escape(Path(data['rules_file']).name)} "
                  f"{data['rules_sha256'][:12]}", soft_wrap=True)
    if data.get("not_covered"):
        console.print(f"  {data['not_covered']} trial attempt(s) recorded since: run `roboswe recovery RUN_DIR` again")
    for s in data["series"]:
        measured = sum(not t["error"] for t in s["trials"])
        head = (f"  {escape(s['task'])} ({escape(s['series_id'])}): trials measured {measured}/{len(s['trials'])}, "
                f"mishaps {s['mishaps']}, recovered {s['recovered']}, "
                f"censored {s['censored']}, median to recovery {_median(s['median_steps_to_recovery'], 'g')} steps / "
                f"{_median(s['median_seconds_to_recovery'], '.2f')} s simulated")
        console.print(head + (f"; not measured: {escape(s['error'])}" if s.get("error") else ""), soft_wrap=True)
        for t in s["trials"]:
            if t["error"]:
                console.print(f"    trial {t['index']} attempt {t['attempt']}: not measured: {escape(t['error'])}",
                              soft_wrap=True)
            for m in t["events"]:
                end = (f"recovered at step {m['recovered_step']} (+{m['steps_to_recovery']} steps, "
                       f"{m['seconds_to_recovery']:.2f} s)" if m["recovered_step"] is not None
                       else f"censored at step {m['censored_at']}")
                console.print(f"    trial {t['index']} attempt {t['attempt']}: {escape(m['rule'])} at step {m['step']} "
                              f"(progress {m['peak']:.3f} -> {m['level']:.3f}); {end}", soft_wrap=True)
    if data["without_rules"]:
        console.print(f"  tasks without recovery rules: {escape(', '.join(data['without_rules']))}", soft_wrap=True)
