"""The RLE-Bench harness-transfer demo participants (family 02, on the kit), scripted.

``TransferDeveloper`` (the development agent): writes its harness, ``agent_harness/`` (``geometry.py``:
the depth geometry and arm motion, the same code as the speed-run's skills; ``pickplace.py``: the
speed-run participant's pick from the counter into a drawer; ``drawer.py``: locating an open drawer and
pushing it closed; ``MANUAL.md``), keeps its own notes outside it (``notes.md``: not sealed, never
transferred), and practises on the practice tasks: on the drawer task it pushes the drawer closed
(charged), on the others it only observes; a reset opens the next.

``FreshAgent``: what each evaluation agent does with what its workspace holds. With a harness it reads
``MANUAL.md`` and follows its recipe for the instruction it is given; with an empty workspace (the
control) it has nothing but the robot calls and makes a blind reach (close, down, up), then gives up.
Each is a new object per attempt and keeps its own context (``received``) only.
"""

from __future__ import annotations

import importlib
import sys
from importlib import resources
from pathlib import Path

HERE = Path(__file__).resolve().parent
HARNESS = "agent_harness"
HARNESS_MODULES = ("geometry", "pickplace", "drawer")
NOTES = "notes.md"
RECIPE_NEEDS = ("drawer.locate_front", "pickplace.main", "drawer.push_closed")


def harness_files() -> dict[str, bytes]:
    """What the developer writes into agent_harness/."""
    skills = resources.files("roboswe.rle.kitchen").joinpath("kitchen_skills.py").read_bytes()
    return {"geometry.py": skills,
            "pickplace.py": (HERE.parent / "rle_speedrun" / "scripts" / "policy.py").read_bytes(),
            "drawer.py": (HERE / "harness" / "drawer.py").read_bytes(),
            "MANUAL.md": (HERE / "harness" / "MANUAL.md").read_bytes()}


class TransferDeveloper:
    def __init__(self, practice: bool = True, tasks: int = 3):
        self.practice, self.tasks = practice, tasks
        self.conversation: list[str] = []

    def develop(self, robot, workspace: Path, brief: str) -> dict:
        self.conversation.append(brief)
        harness = workspace / HARNESS
        harness.mkdir()
        for name, data in harness_files().items():
            (harness / name).write_bytes(data)
        log = []
        for n in range(self.tasks):  # each practice task once, one public kitchen each; a reset opens the next
            if n:
                robot.reset()
            state = robot.state()
            task, stages = int(state["practice_task"][0]), state["stages"].tolist()
            entry = {"practice_task": task, "stages_at_start": stages}
            if self.practice and task == 0:  # the drawer task: practise the push
                drawer = load_harness(workspace)["drawer"]
                geometry = sys.modules["geometry"]
                located = drawer.locate_front(robot, state)
                drawer.push_closed(geometry.Arm(robot, robot.spec()), located, robot.state())
                entry["stages_after_push"] = robot.state()["stages"].tolist()
            log.append(entry)
        (workspace / NOTES).write_text(f"developer's notes, not for the harness: practice log {log}\n")
        self.conversation.append(str(log))
        return {"practice": log}


class FreshAgent:
    def __init__(self):
        self.received: list[str] = []

    def attempt(self, robot, workspace: Path, brief: str) -> dict:
        self.received.append(brief)
        manual = workspace / HARNESS / "MANUAL.md"
        if not manual.is_file():
            return self._blind(robot)
        text = manual.read_text()
        self.received.append(text)
        if not all(name in text for name in RECIPE_NEEDS) or "drawer" not in brief:
            return self._blind(robot)
        mods = load_harness(workspace)
        state = robot.state()
        located = mods["drawer"].locate_front(robot, state)
        picked = mods["pickplace"].main(robot)
        if "close" in brief:
            mods["drawer"].push_closed(mods["geometry"].Arm(robot, robot.spec()), located, robot.state())
        self.received.append(robot.finish_trial())
        return {"used": list(RECIPE_NEEDS), "picked": picked}

    def _blind(self, robot) -> dict:
        """No harness: a reach straight down and back with the gripper closing, then give up."""
        spec = robot.spec()
        names = [c.name for c in spec.action.components]
        arm_z = names.index("right.dx") + 2 if "right.dx" in names else 2
        grip = next((i for i, n in enumerate(names) if "grip" in n), 6)
        mode = names.index("mode") if "mode" in names else spec.action_dim - 1
        rows = []
        for dz, g in [(-0.4, -1.0)] * 20 + [(0.0, 1.0)] * 10 + [(0.4, 1.0)] * 20:
            row = [0.0] * spec.action_dim
            row[arm_z], row[grip], row[mode] = dz, g, -1.0
            rows.append(row)
        robot.step_many(rows)
        self.received.append(robot.finish_trial())
        return {"used": [], "actions": len(rows)}


def load_harness(workspace: Path) -> dict:
    """The harness's modules from this workspace's agent_harness/ (never another attempt's copies)."""
    for name in HARNESS_MODULES:
        sys.modules.pop(name, None)
    path = str(workspace / HARNESS)
    sys.path.insert(0, path)
    try:
        return {name: importlib.import_module(name) for name in HARNESS_MODULES}
    finally:
        sys.path.remove(path)
