"""MoveFlange on the paint scene: RoboPaint's rules, rejection before physics with the rule named, protective stop, round end."""

from __future__ import annotations

import math

import msgspec
import numpy as np
import pytest
from roboswe.sim.paint import control as pc
from roboswe.sim.paint.backend import PaintBackend, RoundOver
from roboswe.sim.paint.painter import DOWN, NOMINAL_PAPER, stroke_batch

SEED = 11


def wp(x=0.0, y=0.5, z=0.3, q=DOWN, d=0.5):
    return {"position": [x, y, z], "quaternion": list(q), "duration_s": d}


@pytest.mark.parametrize(("batch", "rule", "index"), [
    ([], "count", None),
    ([wp(d=0.1)] * 33, "count", None),
    ([wp(), wp(d=0.079)], "duration", 1),
    ([wp(d=10.0), wp(d=10.0), wp(d=0.1)], "batch_duration", None),
    ([wp(), wp(q=(1.0, 0.0, 0.0, 0.1))], "quaternion_norm", 1),
    ([wp(x=0.36)], "workspace", 0),
    ([wp(), wp(y=0.2)], "workspace", 1),
    ([wp(z=0.09)], "workspace", 0),
    ([wp(), wp(x=0.3, d=0.1)], "linear_speed", 1),
    ([wp(q=(0.0, 0.0, 0.0, 1.0))], "tilt", 0),  # identity: the brush would point straight up
    ([wp(q=(math.cos(0.6), math.sin(0.6), 0.0, 0.0), d=0.2)], "angular_speed", 0),  # 1.2 rad in 0.2 s about z
    ([wp(x=float("nan"))], "finite", 0),
    ([{"position": [0, 0.5], "quaternion": list(DOWN), "duration_s": 1}], "malformed", None),
])
def test_an_invalid_batch_is_rejected_whole_naming_the_rule_and_waypoint(paint_sim, batch, rule, index):
    paint_sim.reset(SEED)
    before = paint_sim.data.qpos.copy()
    result = paint_sim.move_flange(batch)
    assert (result.accepted, result.rule, result.waypoint_index) == (False, rule, index), result.detail
    assert result.report is None and paint_sim.control_step == 0
    assert np.array_equal(paint_sim.data.qpos, before)  # nothing executed, nothing clipped
    assert result.actions_left == 95  # a rejected MoveFlange still uses one action


def test_the_seed_boundaries_are_accepted(paint_sim):
    paint_sim.reset(SEED)
    x, y = NOMINAL_PAPER
    # 0.08 s exactly, 32 waypoints, 20 s total: all at the edge of the seed's limits.
    batch = [wp(x, y, 0.35, d=0.08)] + [wp(x, y, 0.35, d=(20.0 - 0.08) / 31)] * 31
    assert len(batch) == 32 and math.isclose(sum(w["duration_s"] for w in batch), 20.0)
    plan = pc.validate_batch(pc.parse_batch(batch), paint_sim.rig.target_pos, paint_sim.rig.target_quat)
    assert [n for *_, n in plan][:2] == [8, 64] and sum(n for *_, n in plan) == 2000


def test_a_valid_batch_moves_the_flange_there_and_reports_only_flange_pose(paint_sim):
    paint_sim.reset(SEED)
    result = paint_sim.move_flange([wp(0.1, 0.45, 0.30, d=1.0), wp(0.1, 0.45, 0.30, d=0.3)])
    assert result.accepted and result.report.waypoints_completed == 2 and result.report.control_steps == 130
    assert np.allclose(result.report.flange_position, (0.1, 0.45, 0.30), atol=3e-3)
    q = np.array(result.report.flange_quaternion)
    assert abs(abs(float(q @ np.array(DOWN)))) > 0.999
    assert set(paint_sim.state()) == {"flange_pos", "flange_quat_xyzw"}
    assert paint_sim.control_step == 130 and paint_sim.sim_time == pytest.approx(1.3)


def test_pressing_through_the_mount_is_a_protective_stop_that_ends_the_batch(paint_sim):
    paint_sim.reset(SEED)
    x, y = NOMINAL_PAPER
    result = paint_sim.move_flange([wp(x, y, 0.20, d=1.0), wp(x, y, 0.10, d=1.0), wp(x, y, 0.30, d=1.0)])
    stop = result.report.protective_stop
    assert result.accepted and stop is not None, result.report
    assert stop.waypoint_index == 1 and stop.force_n > pc.PROTECTIVE_STOP_N
    assert result.report.waypoints_completed == 1 and result.report.control_steps < 300
    # The next batch starts from where the arm stopped, not from the unreached target.
    assert np.allclose(paint_sim.rig.target_pos, paint_sim.rig.flange()[0], atol=1e-9)


def test_a_stroke_after_a_dip_paints_and_without_a_dip_does_not(paint_sim):
    paint_sim.reset(SEED)
    dry = stroke_batch(0.0, -0.05, 0.05, 0.006)[4:]  # the same stroke without the dip
    r = paint_sim.move_flange(dry)
    assert r.report.paper_contact_steps > 0 and r.report.coverage == 0
    assert (paint_sim.canvas() != paint_sim.canvas()[0, 0]).sum() == 0
    r = paint_sim.move_flange(stroke_batch(0.0, -0.05, 0.05, 0.006))
    assert r.report.pigment_contact_steps > 0 and r.report.coverage > 100
    dark = paint_sim.canvas().sum(axis=-1) < 450
    rows, cols = np.nonzero(dark)
    # Paper centre row (y offset 0 -> row ~256), 0.1 m long (~170 px); the layout shifts it a little.
    assert 200 < rows.mean() < 312 and 120 < cols.max() - cols.min() < 230


def test_submit_and_the_action_limit_save_the_canvas_and_end_the_round(paint_manifest):
    small = msgspec.structs.replace(paint_manifest, paint=msgspec.structs.replace(paint_manifest.paint, action_limit=2))
    sim = PaintBackend(small)
    sim.reset(SEED)
    assert sim.move_flange([wp()]).saved is None
    last = sim.move_flange([wp(x=0.5)])  # rejected, but still the second action: the limit saves the canvas
    assert not last.accepted and last.saved is not None and last.saved.ended_by == "action_limit"
    assert last.saved.actions_used == 2 and last.saved.png.startswith(b"\x89PNG")
    assert sim.success().achieved
    with pytest.raises(RoundOver):
        sim.move_flange([wp()])
    with pytest.raises(RoundOver):
        sim.submit_painting()
    sim.reset(SEED)
    assert not sim.success().achieved and sim.actions_left == 2
    saved = sim.submit_painting()
    assert saved.ended_by == "submitted" and saved.actions_used == 1 and sim.action_log == [{"kind": "submit_painting"}]
