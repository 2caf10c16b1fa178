"""What the pose scene renders: a stage-A group or stage-B episode from its seed, the whole battery,
and the labelled development renders on public seeds.

A spec is drawn from ``numpy.random.default_rng(seed)`` alone, so the verifier (hidden seeds) and
a replay (revealed seeds) draw the same scenes; the pixel noise is drawn from the same generator
after the scene, so it is part of what a seed fixes.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import msgspec
import numpy as np

from . import shapes
from .scene import Frame, Pose, PoseScene

BLOCK_X = (-0.15, 0.15)
BLOCK_Y = (-0.10, 0.12)


class Still(msgspec.Struct, frozen=True, kw_only=True):
    shape: str
    block: Pose
    stick: tuple[float, float]


class GroupSpec(msgspec.Struct, frozen=True, kw_only=True, tag="group"):
    """Stage A: independent stills (each its own shape and pose)."""

    seed: int
    stills: tuple[Still, ...]


class EpisodeSpec(msgspec.Struct, frozen=True, kw_only=True, tag="episode"):
    """Stage B: the stick, coming from the camera's side, pushes the block; up to ``frames`` frames."""

    seed: int
    shape: str
    block: Pose
    stick_start: tuple[float, float]
    direction: float
    speed: float
    frames: int


UnitSpec = GroupSpec | EpisodeSpec


def _block(rng: np.random.Generator) -> Pose:
    return Pose(float(rng.uniform(*BLOCK_X)), float(rng.uniform(*BLOCK_Y)), float(rng.uniform(-math.pi, math.pi)))


def group_spec(seed: int, frames: int) -> GroupSpec:
    rng = np.random.default_rng(seed)
    stills = []
    for _ in range(frames):
        shape, block = str(rng.choice(shapes.SHAPES)), _block(rng)
        # the stick stands 6-18 cm from the block; a third of the time on the camera's side of it
        angle = rng.uniform(-math.pi, math.pi) if rng.random() > 1 / 3 else rng.uniform(-2.2, -0.9)
        r = rng.uniform(0.06, 0.18)
        stills.append(Still(shape=shape, block=block, stick=(block.x + r * math.cos(angle), block.y + r * math.sin(angle))))
    return GroupSpec(seed=seed, stills=tuple(stills))


def episode_spec(seed: int, frames: int) -> EpisodeSpec:
    rng = np.random.default_rng(seed)
    shape, block = str(rng.choice(shapes.SHAPES)), _block(rng)
    direction = math.pi / 2 + rng.uniform(-0.6, 0.6)  # away from the camera: the stick crosses its line of sight
    lateral = rng.uniform(-0.025, 0.025)  # off-centre pushes turn the block
    back = 0.11
    start = (block.x - back * math.cos(direction) - lateral * math.sin(direction),
             block.y - back * math.sin(direction) + lateral * math.cos(direction))
    return EpisodeSpec(seed=seed, shape=shape, block=block, stick_start=start, direction=direction,
                       speed=float(rng.uniform(0.08, 0.12)), frames=frames)


def scene_digest() -> str:
    """sha256 over this folder's code and the MuJoCo version: a rendered battery cached under an older
    scene is never reused."""
    import mujoco

    h = hashlib.sha256(mujoco.__version__.encode())
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


class Renders(msgspec.Struct, kw_only=True):
    """Rendered frames, stacked: one row per frame."""

    rgb: np.ndarray  # (N, H, W, 3) uint8
    depth: np.ndarray  # (N, H, W) float32
    truth: np.ndarray  # (N, 3) x, y, yaw
    shape: np.ndarray  # (N,) "T" | "C" | "F"
    unit: np.ndarray  # (N,) index of the group/episode


class Renderer:
    """Keeps one PoseScene per shape (three compiled models, one GL context each)."""

    def __init__(self, width: int, height: int):
        self.width, self.height = width, height
        self._scenes: dict[str, PoseScene] = {}

    def scene(self, shape: str) -> PoseScene:
        if shape not in self._scenes:
            self._scenes[shape] = PoseScene(shape, self.width, self.height)
        return self._scenes[shape]

    def camera(self) -> dict[str, list]:
        return self.scene(shapes.SHAPES[0]).camera()

    def close(self) -> None:
        for s in self._scenes.values():
            s.close()
        self._scenes.clear()

    def unit(self, spec: UnitSpec) -> list[tuple[str, Frame]]:
        if isinstance(spec, GroupSpec):
            out = []
            for still in spec.stills:
                scene = self.scene(still.shape)
                scene.set_block(still.block.x, still.block.y, still.block.yaw)
                scene.set_stick(*still.stick)
                out.append((still.shape, scene.frame()))
            return out
        scene = self.scene(spec.shape)
        scene.set_block(spec.block.x, spec.block.y, spec.block.yaw)
        return [(spec.shape, f) for f in scene.push(spec.stick_start, spec.direction, spec.speed, spec.frames)]


def noisy(frames: list[Frame], seed: int, rgb_noise: float, depth_noise: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """The sensor: additive Gaussian noise on RGB (0..255) and depth (metres), drawn from the unit's seed."""
    rng = np.random.default_rng([seed, 1])  # a stream apart from the scene's draws
    out = []
    for f in frames:
        rgb = f.rgb.astype(np.float32) + rng.normal(0.0, rgb_noise, f.rgb.shape).astype(np.float32)
        depth = f.depth + rng.normal(0.0, depth_noise, f.depth.shape).astype(np.float32)
        out.append((np.clip(np.rint(rgb), 0, 255).astype(np.uint8), depth.astype(np.float32)))
    return out


def render_units(specs: list[UnitSpec], width: int, height: int, rgb_noise: float, depth_noise: float) -> Renders:
    renderer = Renderer(width, height)
    rgb, depth, truth, shape, unit = [], [], [], [], []
    try:
        for i, spec in enumerate(specs):
            frames = renderer.unit(spec)
            for (s, f), (r, d) in zip(frames, noisy([f for _, f in frames], spec.seed, rgb_noise, depth_noise)):
                rgb.append(r)
                depth.append(d)
                truth.append((f.truth.x, f.truth.y, f.truth.yaw))
                shape.append(s)
                unit.append(i)
    finally:
        renderer.close()
    return Renders(rgb=np.stack(rgb), depth=np.stack(depth), truth=np.array(truth), shape=np.array(shape),
                   unit=np.array(unit))


def observation(variant: str, rgb: np.ndarray, depth: np.ndarray, camera: dict) -> dict:
    """What the estimator is given: RGB, depth only in the RGB-D variant, the camera."""
    obs = {"rgb": rgb, "camera": camera}
    if variant == "rgbd":
        obs["depth"] = depth
    return obs


def development_renders(seeds: list[int], variant: str, width: int, height: int, *, rgb_noise: float, depth_noise: float,
                        label_noise_m: float, label_noise_rad: float) -> list[dict]:
    """Labelled development stills on public seeds: the observation as the artifact gets it and a pose
    label with noise (``{"x", "y", "yaw"}``), never the shape. One still per seed."""
    renderer = Renderer(width, height)
    try:
        camera = renderer.camera()
        out = []
        for seed in seeds:
            spec = group_spec(seed, 1)
            [(_, frame)] = renderer.unit(spec)
            [(rgb, depth)] = noisy([frame], seed, rgb_noise, depth_noise)
            rng = np.random.default_rng([seed, 2])
            t = frame.truth
            yaw = t.yaw + rng.normal(0, label_noise_rad)
            label = {"x": t.x + rng.normal(0, label_noise_m), "y": t.y + rng.normal(0, label_noise_m),
                     "yaw": math.atan2(math.sin(yaw), math.cos(yaw))}
            out.append({"obs": observation(variant, rgb, depth, camera), "label": label})
        return out
    finally:
        renderer.close()
