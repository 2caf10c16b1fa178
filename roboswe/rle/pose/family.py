"""The pose family on the verifier's side: the plan from the seeds, the battery rendered from it (cached
by plan commitment and scene digest), the calls the artifact answers, and the scoring rule."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import msgspec
import numpy as np

from roboswe.sim.pose import battery as scene_battery
from roboswe.sim.pose.battery import GroupSpec, Renders, UnitSpec

from ..manifest import RleTask
from ..report import Component
from ..seeds import commitment

SHAPE_IDS = ("T", "C", "F")


class PosePlan(msgspec.Struct, frozen=True, kw_only=True):
    task: str
    version: str
    units: tuple[UnitSpec, ...]  # stage A groups, then stage B episodes


def seed_count(task: RleTask) -> int:
    return task.evaluation.stage_a_groups + task.evaluation.stage_b_episodes


def make_plan(task: RleTask, seeds: list[int]) -> PosePlan:
    ev = task.evaluation
    if len(seeds) != seed_count(task):
        raise ValueError(f"{task.id} needs {seed_count(task)} seeds, got {len(seeds)}")
    groups = [scene_battery.group_spec(s, ev.stage_a_frames_per_group) for s in seeds[: ev.stage_a_groups]]
    episodes = [scene_battery.episode_spec(s, ev.stage_b_frames) for s in seeds[ev.stage_a_groups :]]
    return PosePlan(task=task.id, version=task.protocol.version, units=(*groups, *episodes))


class Battery(msgspec.Struct, kw_only=True):
    renders: Renders
    camera: dict
    stage: tuple[str, ...]  # per unit: "A" | "B"


def _cache_name(plan: PosePlan, task: RleTask) -> str:
    ev = task.evaluation
    key = commitment([plan, ev.width, ev.height, ev.rgb_noise, ev.depth_noise_m, scene_battery.scene_digest()])
    return f"pose-{key[:24]}.npz"


def render_battery(task: RleTask, plan: PosePlan, cache_dir: Path | None = None) -> Battery:
    """The battery's frames; with ``cache_dir`` read from / written to a file named by the plan
    commitment and the scene's code digest (a test session renders each plan once)."""
    ev = task.evaluation
    stage = tuple("A" if isinstance(u, GroupSpec) else "B" for u in plan.units)
    path = Path(cache_dir) / _cache_name(plan, task) if cache_dir else None
    if path is not None and path.exists():
        z = np.load(path, allow_pickle=False)
        renders = Renders(rgb=z["rgb"], depth=z["depth"], truth=z["truth"], shape=z["shape"], unit=z["unit"])
        return Battery(renders=renders, camera=msgspec.json.decode(bytes(z["camera"])), stage=stage)
    renderer = scene_battery.Renderer(ev.width, ev.height)
    try:
        camera = renderer.camera()
    finally:
        renderer.close()
    renders = scene_battery.render_units(list(plan.units), ev.width, ev.height, ev.rgb_noise, ev.depth_noise_m)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, rgb=renders.rgb, depth=renders.depth, truth=renders.truth, shape=renders.shape,
                 unit=renders.unit, camera=np.frombuffer(msgspec.json.encode(camera), dtype=np.uint8))
        tmp.replace(path)
    return Battery(renders=renders, camera=camera, stage=stage)


class Call(msgspec.Struct, frozen=True, kw_only=True):
    kind: str  # "reset" | "estimate"
    unit: int
    frame: int = -1  # row in the battery for an estimate


def calls(battery: Battery) -> Iterator[Call]:
    """reset at the start of each group/episode, then one estimate per frame, in battery order."""
    unit = -1
    for row, u in enumerate(battery.renders.unit.tolist()):
        if u != unit:
            unit = u
            yield Call(kind="reset", unit=u)
        yield Call(kind="estimate", unit=u, frame=row)


def observation(task: RleTask, battery: Battery, row: int) -> dict:
    r = battery.renders
    return scene_battery.observation(task.evaluation.variant, r.rgb[row], r.depth[row], battery.camera)


def valid_estimate(value: object) -> tuple[float, float, float, str] | None:
    """(x, y, yaw, shape) from an artifact's answer, or None when it is not one finite pose."""
    if not isinstance(value, dict) or set(value) != {"x", "y", "yaw", "shape"}:
        return None
    nums = [value[k] for k in ("x", "y", "yaw")]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in nums):
        return None
    if value["shape"] not in SHAPE_IDS:
        return None
    return float(nums[0]), float(nums[1]), float(nums[2]), value["shape"]


def unit_score(truth: np.ndarray, shapes_true: np.ndarray, estimates: list, task: RleTask) -> float:
    """Mean of the two kernels over the unit's worst-k errors; 0 when any shape id (or answer) is wrong."""
    sc = task.scoring
    if any(e is None or e[3] != s for e, s in zip(estimates, shapes_true)):
        return 0.0
    est = np.array([e[:3] for e in estimates])
    trans = np.hypot(est[:, 0] - truth[:, 0], est[:, 1] - truth[:, 1])
    angle = np.abs(np.arctan2(np.sin(est[:, 2] - truth[:, 2]), np.cos(est[:, 2] - truth[:, 2])))
    k = min(sc.worst_k, len(trans))
    worst_t, worst_r = np.sort(trans)[-k:].mean(), np.sort(angle)[-k:].mean()
    return float(0.5 * (math.exp(-((worst_t / sc.translation_width_m) ** 2)) + math.exp(-((worst_r / sc.angle_width_rad) ** 2))))


def deduction(task: RleTask, rate_hz: float) -> float:
    sc = task.scoring
    return sc.max_deduction * min(1.0, max(0.0, (sc.full_rate_hz - rate_hz) / (sc.full_rate_hz - sc.zero_rate_hz)))


def score(task: RleTask, battery: Battery, estimates: dict[int, tuple | None], estimate_seconds: float,
          answered: int) -> tuple[float, tuple[Component, ...]]:
    """The reward and its components. ``estimates``: battery row → valid estimate (missing rows: None)."""
    r = battery.renders
    per_stage: dict[str, list[float]] = {"A": [], "B": []}
    for u, stage in enumerate(battery.stage):
        rows = np.flatnonzero(r.unit == u)
        per_stage[stage].append(unit_score(r.truth[rows], r.shape[rows], [estimates.get(int(i)) for i in rows], task))
    a = float(np.mean(per_stage["A"])) if per_stage["A"] else 0.0
    b = float(np.mean(per_stage["B"])) if per_stage["B"] else 0.0
    rate = answered / estimate_seconds if estimate_seconds > 0 else 0.0
    d = deduction(task, rate)
    sc = task.scoring
    reward = min(1.0, max(0.0, sc.stage_a_weight * a + sc.stage_b_weight * b - d))
    components = (
        Component(name="stage_a", value=a), Component(name="stage_b", value=b),
        Component(name="deduction", value=d, high=sc.max_deduction),
        Component(name="rate_hz", value=rate, high=None),
        *(Component(name=f"stage_{s.lower()}_{i}", value=v) for s in "AB" for i, v in enumerate(per_stage[s])),
    )
    return reward, components


