"""Composite kitchen scenes: one composite task in one kit kitchen, and the development scene over the practice set.

``CompositeScene`` is family 01's ``KitchenScene`` (sim/robocasa's backend, the kitchen manifest's
robot, controller, cameras and proprioception, L1 observations: RGB-D and proprioception, no object
poses) with the composite's RoboCasa class setting the scene up and the composite's stages grading it
in place of the class's own predicate. ``stages()`` is the stage vector now (stages.py), read on the
trusted side.

``TransferDevelopmentScene`` (``DEVELOPMENT_SCENES["transfer"]``) serves the practice composites on
public seeds: seed *s* is practice composite *s* mod n, RoboCasa seed *s* in the kit's kitchen; a reset
is the next seed, so resets walk through the practice set. During development, and only then, the
state carries ``practice_task`` (the composite's index in the guide's list) and ``stages`` (the stage
vector as 0/1): practice is for learning what the stages are.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from roboswe.configs import CONFIGS_DIR
from roboswe.protocol import sim as simp

from ..kitchen.development import KIT_DIR_ENV, KitchenScene
from ..kitchen.plan import HiddenKitchen, kit_variant
from ..manifest import RleTask
from .rules import Composite
from .stages import stage_vector

DEVELOPMENT_KEYS = ["practice_task", "stages"]


def composite_manifest(composite: Composite):
    """The kitchen manifest behind a composite: its kitchen task with the composite's RoboCasa class and words."""
    from roboswe.sim.robocasa.backend import load_kitchen_manifest

    base = load_kitchen_manifest(CONFIGS_DIR / "tasks" / f"{composite.kitchen_task}.toml")
    return msgspec.structs.replace(base, id=f"transfer-{composite.name}", instruction=composite.instruction.strip(),
                                   upstream=msgspec.structs.replace(base.upstream, env=composite.env))


class CompositeScene(KitchenScene):
    """One composite in the kit's kitchen (or a hidden variant of it), graded by its stages."""

    def __init__(self, composite: Composite, *, steps: int, kitchen: HiddenKitchen | None = None):  # noqa: D107
        from roboswe.sim.robocasa.backend import RobocasaBackend

        self.composite, self.level, self.privileged, self.seed = composite, "L1", False, None
        self.manifest = composite_manifest(composite)
        kit_dir = os.environ.get(KIT_DIR_ENV)
        self.backend = RobocasaBackend(self.manifest, trial_steps=steps, kit_dir=Path(kit_dir) if kit_dir else None,
                                       kit_layout=kit_variant(kitchen) if kitchen is not None else None,
                                       hidden_seed=kitchen is not None)
        self.control_hz = self.manifest.control_hz
        self.cameras = [simp.CameraInfo(name=c.name, width=c.width, height=c.height, depth=c.depth,
                                        calibration=c.calibration) for c in self.manifest.observation.cameras]

    def stages(self) -> tuple[bool, ...]:
        return stage_vector(self.backend.env, self.composite.stages)


class TransferDevelopmentScene:
    """The practice composites on public seeds; one composite's scene at a time (a new one when the seed's differs)."""

    privileged = False

    def __init__(self, task: RleTask, salt: object = None):  # salt: the registry's argument; public seeds need none
        self.task, self.rules = task, task.transfer
        self.max_batch = self.rules.batch_max
        self.steps = task.budget.charged_steps + 1  # the ledger governs; the backend never cuts
        self.index = 0
        self.current = CompositeScene(self.rules.practice[0], steps=self.steps)
        self.control_hz, self.cameras = self.current.control_hz, self.current.cameras

    @property
    def action(self) -> simp.ActionSpec:
        return self.current.action

    @property
    def state_keys(self) -> list[str]:
        return [*self.current.state_keys, *DEVELOPMENT_KEYS]

    def load(self, seed: int) -> None:
        index = seed % len(self.rules.practice)
        if index != self.index:
            self.current.close()
            self.index, self.current = index, CompositeScene(self.rules.practice[index], steps=self.steps)
        self.current.load(seed)

    def values(self, control_step: int) -> dict[str, list[float]]:
        return {**self.current.values(control_step), "practice_task": [float(self.index)],
                "stages": [float(s) for s in self.current.stages()]}

    def observe(self, control_step: int, depth: bool) -> tuple[list[simp.CameraImage], list[bytes]]:
        return self.current.observe(control_step, depth)

    def step(self, row: list[float]) -> None:
        self.current.step(row)

    def guide(self) -> str:
        tasks = "; ".join(f"{i}: {c.instruction.strip()} (stages {list(c.stages)})" for i, c in enumerate(self.rules.practice))
        return (f"Practice tasks, by robot.state()['practice_task']: {tasks}. Each reset opens the next practice task "
                f"in a new public kitchen. robot.state()['stages'] is the current task's stage vector (1 = holds), in "
                f"development only. Free: robot.observe(depth=True) ({[c.name for c in self.cameras]}, RGB-D with K "
                f"and T_world_camera) and robot.state(). A row of robot.step_many([...]) is one native action of "
                f"{len(self.action.low)} components; a batch holds 1..{self.max_batch} rows and never more than the "
                f"budget left (a larger one is refused whole). What transfers: {self.rules.harness_dir}/ (code and "
                f"{self.rules.manual}) and nothing else; fresh agents with no memory of this conversation will use it "
                f"on a task you will not see.")

    def close(self) -> None:
        self.current.close()
