"""Building a scene's render context lets other threads run, and renders exactly like the bindings' context."""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np


def _ticks_during(work) -> tuple[float, int, float]:
    """Run ``work`` while a 5 ms ticker thread runs: (work seconds, ticks during it, longest tick gap)."""
    ticks: list[float] = []
    stop = threading.Event()

    def ticker() -> None:
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.005)

    thread = threading.Thread(target=ticker)
    thread.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    work()
    t1 = time.perf_counter()
    stop.set()
    thread.join()
    inside = [t for t in ticks if t0 <= t <= t1]
    edges = [t0, *inside, t1]
    return t1 - t0, len(inside), max(b - a for a, b in itertools.pairwise(edges))


def test_context_build_releases_the_gil_and_renders_identically(lift_panda):
    import mujoco
    from roboswe.sim.render import _context_address, make_context

    lift_panda.reset(0)
    model = lift_panda.model
    gl = mujoco.GLContext(int(model.vis.global_.offwidth), int(model.vis.global_.offheight))
    gl.make_current()
    built: list = []
    try:
        assert _context_address(mujoco.MjrContext()) is not None  # the layout check passes on the pinned MuJoCo
        seconds, ticks, gap = _ticks_during(lambda: built.append(make_context(model, 150)))
        # ~0.5 s of texture and mesh upload on a CPU machine; another thread ticks all along.
        # (The bindings' MjrContext(model) holds the GIL: the ticker stops for the whole build.)
        assert ticks >= 10 and gap < max(0.25, seconds / 2), (seconds, ticks, gap)
        reference = mujoco.MjrContext(model, 150)
        built.append(reference)
        ours = built[0]
        for field in ("ntexture", "offWidth", "offHeight", "offSamples", "fontScale", "shadowSize", "lineWidth", "fogStart", "fogEnd"):
            assert getattr(ours, field) == getattr(reference, field), field

        scene = mujoco.MjvScene(model, maxgeom=10000)
        camera = mujoco.MjvCamera()
        camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        camera.fixedcamid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, "agentview")
        mujoco.mjv_updateScene(model, lift_panda.data, mujoco.MjvOption(), mujoco.MjvPerturb(), camera,
                               mujoco.mjtCatBit.mjCAT_ALL, scene)
        viewport = mujoco.MjrRect(0, 0, 128, 128)
        images = []
        for context in (ours, reference):
            mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, context)
            mujoco.mjr_render(viewport, scene, context)
            rgb = np.empty((128, 128, 3), np.uint8)
            mujoco.mjr_readPixels(rgb, None, viewport, context)
            images.append(rgb)
        assert images[0].std() > 5 and np.array_equal(images[0], images[1])
    finally:
        for context in built:
            context.free()
        gl.free()


def test_the_rendering_device_is_reported(lift_panda):
    """Observations say which GL renderer drew them: Mesa's llvmpipe on a CPU host, the GPU where there is one
    (MUJOCO_EGL_DEVICE_ID chosen explicitly; a GPU host left on the software device is not silent)."""
    from roboswe.sim import render

    lift_panda.reset(0)
    lift_panda.observe(["agentview"], depth=False)
    assert render.device() and lift_panda._renderer.device == render.device()
    if render.gpu_present():
        assert "llvmpipe" not in render.device(), render.device()
    else:
        assert "llvmpipe" in render.device()


def test_closing_a_renderer_leaves_a_later_renderer_drawing_the_same_frame():
    """A staged scene's renderer is built while the loaded one still exists, and the loaded one is closed
    first: closing it must not free the later renderer's GL objects (mjr_freeContext works on the current
    context). Seen: every trial after the first rendered wrong frames and the Lift demo failed."""
    import mujoco
    from roboswe.sim.render import SceneRenderer

    model = mujoco.MjModel.from_xml_string("""
    <mujoco><worldbody><light pos="0 0 2"/><camera name="cam" pos="0 -1 0.5" xyaxes="1 0 0 0 0.5 1"/>
      <geom type="plane" size="1 1 0.1" rgba=".2 .6 .2 1"/><geom type="box" size=".1 .1 .1" pos="0 0 .1" rgba=".8 .1 .1 1"/>
    </worldbody></mujoco>""")
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    state = {name: getattr(data, name).copy() for name in ("qpos", "qvel", "act", "mocap_pos", "mocap_quat")}
    first, later = SceneRenderer(model, 64, 64), SceneRenderer(model, 64, 64)
    for r in (first, later):
        r.load_state(state)
    before = later.render("cam", 64, 64, depth=True, calibration=False)
    first.close()
    after = later.render("cam", 64, 64, depth=True, calibration=False)
    later.close()
    assert before.rgb.std() > 0  # a real picture, not an empty buffer
    np.testing.assert_array_equal(after.rgb, before.rgb)
    np.testing.assert_array_equal(after.depth, before.depth)


def test_the_next_fresh_scene_of_the_same_model_takes_over_the_gl_side_and_draws_the_same_frames(lift_manifest):
    """A trial's fresh scene is a new model; when it compiles to the same model as the last one (the next
    trial of a series) the renderer takes over the GL context and uploaded textures the last one left,
    instead of uploading them again (~0.55 s per trial for Lift on a CPU). The frames must be exactly
    those of a renderer built from nothing, for another seed too; a different model never gets them."""
    from roboswe.sim import render
    from roboswe.sim.backend import create_backend

    def frames(seed: int, *, parked: bool) -> tuple[bool, list]:
        if not parked:
            render.free_parked()
        sim = create_backend("robosuite", lift_manifest)
        try:
            sim.reset(seed)
            shot = sim.observe(["agentview", "robot0_eye_in_hand"], depth=True)
            return sim._renderer.reused, shot
        finally:
            sim.close()

    render.free_parked()
    assert frames(0, parked=True)[0] is False  # nothing to take over yet
    # On another thread than the one that parked it (in-process harnesses run scenes on worker threads):
    # a context still current on its old thread would be refused (EGL_BAD_ACCESS).
    out: list = []
    worker = threading.Thread(target=lambda: out.append(frames(1, parked=True)))
    worker.start()
    worker.join()
    reused, taken = out[0]
    fresh_reused, fresh = frames(1, parked=False)
    assert reused and not fresh_reused
    for a, b in zip(taken, fresh, strict=True):
        assert a.rgb.std() > 5
        np.testing.assert_array_equal(a.rgb, b.rgb)
        np.testing.assert_array_equal(a.depth, b.depth)

    import mujoco

    other = mujoco.MjModel.from_xml_string('<mujoco><worldbody><camera name="c" pos="0 -1 0"/>'
                                           '<geom type="box" size=".1 .1 .1"/></worldbody></mujoco>')
    r = render.SceneRenderer(other, 32, 32)
    r.model_digest = "another model"
    r.load_state({n: getattr(mujoco.MjData(other), n) for n in ("qpos", "qvel", "act", "mocap_pos", "mocap_quat")})
    r.render("c", 32, 32, depth=False, calibration=False)
    assert not r.reused and render._parked is None  # Lift's GL side was freed, not handed to another model
    r.close()
    assert render._parked is not None and render._parked[0] == "another model"
    render.free_parked()


def test_a_staged_load_retires_the_old_scene_which_closes_on_another_thread_while_the_new_one_renders(lift_manifest):
    """Loading a staged scene hands the old scene's GL side over at once and puts the rest aside
    (take_retired): the simulator closes it on a worker thread, off the Load's path, while the loaded scene
    draws. The frames are exactly those of a scene built from nothing; an untaken retired scene is closed
    by the session's close."""
    from roboswe.sim import render
    from roboswe.sim.session import SimSession

    data = lift_manifest.to_builtins()
    render.free_parked()
    session = SimSession(require_fixed_hash_seed=False)
    try:
        session.load(data, 0, None)
        session.observe(["agentview"], True)  # the old scene has its GL side
        old = session.backend
        session.stage(session.build(data, 1, None))
        assert session.load(data, 1, None).staged
        retired = session.take_retired()
        assert retired == [old] and session.take_retired() == []
        assert old._renderer._gl_scene is None and old.env.sim is not None  # GL handed over, the rest still open

        closer = threading.Thread(target=old.close)
        closer.start()  # robosuite's close (a full collection, the model freed) while the new scene renders
        taken = session.backend.observe(["agentview", "robot0_eye_in_hand"], depth=True)
        closer.join()
        assert session.backend._renderer.reused and old.env.sim is None

        session.stage(session.build(data, 2, None))
        session.load(data, 2, None)
        untaken = session.backend
        session.stage(session.build(data, 1, None))
        session.load(data, 1, None)  # the scene of seed 2 is retired; nobody takes it
        session.close()
        assert untaken.env.sim is None
    finally:
        session.close()

    render.free_parked()
    fresh_session = SimSession(require_fixed_hash_seed=False)
    try:
        fresh_session.load(data, 1, None)
        fresh = fresh_session.backend.observe(["agentview", "robot0_eye_in_hand"], depth=True)
        assert not fresh_session.backend._renderer.reused
    finally:
        fresh_session.close()
    for a, b in zip(taken, fresh, strict=True):
        assert a.rgb.std() > 5
        np.testing.assert_array_equal(a.rgb, b.rgb)
        np.testing.assert_array_equal(a.depth, b.depth)
    render.free_parked()
