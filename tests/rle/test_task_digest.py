"""A task's digest is its scoring rules' identity: a section added for another family must not change it."""

from __future__ import annotations

import msgspec

from roboswe.rle.manifest import OPTIONAL_SECTIONS, load_task, task_digest

POSE_RGBD = "e81cd455259d88c03f647725f8a1b33d0bd7e9f726a9b07f7a02d65b76c2083e"
"""pose-rgbd's digest as its runs recorded it before the tabletop and kitchen sections existed."""


def test_a_missing_optional_section_is_no_part_of_the_digest():
    task = load_task("pose-rgbd")
    assert {"tabletop", "kitchen"} <= set(OPTIONAL_SECTIONS) and "kit" not in OPTIONAL_SECTIONS
    assert task.tabletop is None and task.kitchen is None
    assert task_digest(task) == POSE_RGBD
    # a section the task has is part of it
    assert task_digest(msgspec.structs.replace(task, scoring=None)) != POSE_RGBD
    assert task_digest(msgspec.structs.replace(task, instruction=task.instruction + " ")) != POSE_RGBD
