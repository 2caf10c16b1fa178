"""RoboPaint: a Panda holding a brush over paper, our own scene; the participant acts with MoveFlange.

``backend.py`` (PaintManifest, PaintBackend, replay_round), ``scene.py`` (the MuJoCo world built from
robosuite's Panda MJCF), ``control.py`` (MoveFlange rules and the flange controller), ``goals.py``
(goal images drawn from recipes), ``painter.py`` (scripted strokes for demos and tests), ``prompt.py``
(what a participant on the ``paint`` interface is told).
"""

from __future__ import annotations

from ..families import AssetProblem, Family, Prompt
from ..manifest import TaskManifest
from .backend import PaintManifest
from .prompt import OPENING, system_prompt


def _build(manifest: TaskManifest, **kwargs):
    from .backend import PaintBackend

    return PaintBackend(manifest, **kwargs)


def asset_problems(manifests: list[TaskManifest]) -> list[AssetProblem]:
    """The paint scene (scene.py) loads robosuite's Panda MJCF; its goals are drawn, nothing is downloaded."""
    from .scene import robot_xml_path

    try:
        path = robot_xml_path()
        if not path.is_file():
            raise FileNotFoundError(f"robosuite's Panda model {path} is missing")
    except FileNotFoundError as e:
        return [AssetProblem(where=f"tasks {[m.id for m in manifests]}", what=str(e),
                             fix="run ./setup.sh (or .venv/bin/pip install -e .)")]
    return []


FAMILY = Family(name="paint", manifest=PaintManifest, build=_build, asset_problems=asset_problems,
                pins=("praxis-robosuite", "mujoco", "numpy"),
                # its own interface (move_flange / submit_painting) and code; its action limit is per
                # MoveFlange, so direct action chunks would not say what the round allows
                interfaces=("code", "paint"), prompt=Prompt(system=system_prompt, opening=OPENING))
