"""What the participant sees (workspace image, flange pose; never brushcam or layout), the goals, and the manifests."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from roboswe.sim.manifest import ManifestError, load_dataset, manifest_from_builtins
from roboswe.sim.paint.backend import VIDEO_ONLY_CAMERAS, PaintManifest
from roboswe.sim.paint.goals import GOAL_SIZE, fit_without_cropping, goal_image
from roboswe.sim.paint.painter import stroke_batch
from roboswe.sim.paint.scene import PAPER_RGB, canvas_sha256, png_bytes


def test_observation_is_the_workspace_image_and_flange_pose_only(paint_sim, paint_manifest):
    paint_sim.reset(3)
    (frame,) = paint_sim.observe()
    assert frame.camera == "workspace" and frame.rgb.shape == (480, 640, 3) and frame.depth is None and frame.K is None
    assert set(paint_sim.state()) == {"flange_pos", "flange_quat_xyzw"}
    assert paint_sim.spec().state_keys == ["flange_pos", "flange_quat_xyzw"]
    with pytest.raises(KeyError, match="not allowed"):
        paint_sim.observe(["brushcam"])
    assert "brushcam" in paint_manifest.video.cameras
    video = paint_sim.render_video_frame("brushcam", 320, 240)
    assert video.rgb.shape == (240, 320, 3) and video.rgb.std() > 5  # a real picture, for humans only


def test_the_paper_in_the_workspace_image_shows_the_painted_canvas(paint_sim):
    paint_sim.reset(3)
    blank = paint_sim.observe()[0].rgb.astype(int)
    paint_sim.move_flange(stroke_batch(0.0, -0.08, 0.08, 0.008))
    paint_sim.move_flange([{"position": [-0.3, 0.3, 0.45], "quaternion": [1, 0, 0, 0], "duration_s": 2.0}])  # arm out of view
    painted = paint_sim.observe()[0].rgb.astype(int)
    darker = (blank.sum(-1) - painted.sum(-1)) > 150
    assert darker.sum() > 200  # the stroke is visible on the rendered paper (the texture is uploaded before drawing)


def test_a_manifest_cannot_expose_the_video_camera_or_privileged_state(paint_manifest):
    data = paint_manifest.to_builtins()
    data["observation"]["cameras"].append({"name": VIDEO_ONLY_CAMERAS[0]})
    with pytest.raises(ManifestError, match="video-only"):
        manifest_from_builtins(data)
    data = paint_manifest.to_builtins()
    data["observation"]["proprio"] = ["flange_pos", "paper_pos"]
    with pytest.raises(ManifestError, match="flange pose only"):
        manifest_from_builtins(data)


def test_the_paint_dataset_has_image_goals_with_recorded_hashes_and_a_text_goal():
    dataset, manifests = load_dataset("paint")
    assert dataset.tasks == [m.id for m in manifests]
    assert all(isinstance(m, PaintManifest) and m.upstream.package == "paint" for m in manifests)
    kinds = {m.paint.goal.kind for m in manifests}
    assert kinds == {"image", "text"} and all(m.paint.action_limit == 96 and m.paint.rounds == 3 for m in manifests)
    for m in manifests:
        if m.paint.goal.kind == "image":
            g = goal_image(m.paint.goal.image)
            assert (g.width, g.height) == GOAL_SIZE and g.sha256 == m.paint.goal.image_sha256
            assert hashlib.sha256(g.png).hexdigest() == g.sha256


def test_fitting_a_goal_never_crops():
    src = np.zeros((100, 100, 3), np.uint8)
    src[:, :, 2] = 200  # a blue square: all of it must survive inside 1280x800
    out = fit_without_cropping(src)
    red = np.nonzero(out[:, :, 0] < 100)  # not white
    assert out.shape == (800, 1280, 3)
    assert red[0].min() == 0 and red[0].max() == 799 and red[1].max() - red[1].min() + 1 == 800  # whole height, square
    assert (out[:, :200] == 255).all()  # the rest is white padding


def test_canvas_hash_covers_the_shape_and_png_is_lossless():
    blank = np.zeros((4, 6, 3), np.uint8)
    assert canvas_sha256(blank) != canvas_sha256(blank.reshape(6, 4, 3))
    from io import BytesIO

    from PIL import Image

    rgb = np.random.default_rng(0).integers(0, 256, (16, 8, 3), dtype=np.uint8)
    assert np.array_equal(np.asarray(Image.open(BytesIO(png_bytes(rgb)))), rgb)
    assert PAPER_RGB.shape == (3,)
