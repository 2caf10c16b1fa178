"""The pose family's scoring rule, the scene's geometry and the reference's templates (no sandbox)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from roboswe.sim.pose import shapes

from roboswe.rle.manifest import load_task
from roboswe.rle.pose import family as pose

from .conftest import REFERENCE

TASK = load_task("pose-rgbd")


def test_unit_score_is_the_mean_of_two_kernels_over_the_worst_five():
    truth = np.zeros((10, 3))
    shape = np.array(["T"] * 10)
    est = [(0.0, 0.0, 0.0, "T")] * 5 + [(0.02, 0.0, 0.2, "T")] * 5  # worst five: 2 cm and 0.2 rad
    expected = 0.5 * (math.exp(-((0.02 / 0.02) ** 2)) + math.exp(-((0.2 / 0.2) ** 2)))
    assert pose.unit_score(truth, shape, est, TASK) == pytest.approx(expected)
    wrapped = [(0.0, 0.0, 2 * math.pi - 1e-9, "T")] * 10  # the angle error wraps
    assert pose.unit_score(truth, shape, wrapped, TASK) == pytest.approx(1.0)
    one_wrong = [(0.0, 0.0, 0.0, "T")] * 9 + [(0.0, 0.0, 0.0, "C")]
    assert pose.unit_score(truth, shape, one_wrong, TASK) == 0.0
    assert pose.unit_score(truth, shape, [None] + [(0.0, 0.0, 0.0, "T")] * 9, TASK) == 0.0


def test_deduction_follows_the_documented_rate_rule():
    assert pose.deduction(TASK, 10.0) == 0.0 and pose.deduction(TASK, 50.0) == 0.0
    assert pose.deduction(TASK, 1.0) == pytest.approx(0.2) and pose.deduction(TASK, 0.1) == pytest.approx(0.2)
    assert pose.deduction(TASK, 5.5) == pytest.approx(0.2 * 4.5 / 9)


@pytest.mark.parametrize("answer", [
    {"x": 0.0, "y": 0.0, "yaw": float("nan"), "shape": "T"}, {"x": 0.0, "y": 0.0, "yaw": 0.0, "shape": "E"},
    {"x": True, "y": 0.0, "yaw": 0.0, "shape": "T"}, {"x": 0.0, "y": 0.0, "yaw": 0.0}, [0, 0, 0, "T"],
    {"x": 0.0, "y": 0.0, "yaw": 0.0, "shape": "T", "extra": 1},
])
def test_anything_but_one_finite_pose_is_no_answer(answer):
    assert pose.valid_estimate(answer) is None
    assert pose.valid_estimate({"x": 1, "y": 0.5, "yaw": -3.0, "shape": "F"}) == (1.0, 0.5, -3.0, "F")


def test_blocks_are_asymmetric_and_the_reference_templates_are_the_scene_geometry():
    spec = json.loads((REFERENCE / "templates.json").read_text())
    assert spec["height"] == shapes.HEIGHT
    g = np.linspace(-0.06, 0.06, 121)
    x, y = np.meshgrid(g, g)
    for s in shapes.SHAPES:
        assert np.allclose(spec["boxes"][s], shapes.boxes(s), atol=1e-6)
        base = shapes.contains(s, x, y)
        for turn in (math.pi / 2, math.pi, 3 * math.pi / 2):  # no rotation maps a block onto itself
            c, si = math.cos(turn), math.sin(turn)
            assert (shapes.contains(s, c * x + si * y, -si * x + c * y) != base).mean() > 0.02
        assert np.allclose([(x * base).sum(), (y * base).sum()], 0.0, atol=base.sum() * 1e-3)  # frame at the centroid
