"""Rendering device and physics scaling on whatever machine this runs on (CPU here, GPU where lent).

Two steps, so the measuring side needs only mujoco and numpy (a lent GPU machine has no robosuite):

  python benchmarks/device.py prepare --out DIR [--task lift-panda] [--states 200]
      builds the task's scene through roboswe's robosuite backend, saves the compiled model as
      DIR/scene.mjb.gz (meshes and textures included) and DIR/states.npz (per-step physics states of
      a held-action rollout), which is what video rendering redraws from.
  python benchmarks/device.py measure --scene DIR [--frames 100] [--procs 1,2,4,8,16] [--json OUT]
      reports the GL vendor/renderer EGL gave (so a silent CPU fallback is visible), ms per 256x256
      RGB and RGB+depth frame redrawn from recorded states, raw mj_step time per control step, and
      the physics throughput of N independent processes (control steps per second, all processes
      together), the upper bound on how series workers scale on the machine's cores.

Prints a markdown table; docs/performance.md is pasted from it.
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import json
import multiprocessing
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

SIZE = 256


def prepare(out: Path, task: str, states: int) -> None:
    import mujoco
    import numpy as np

    from roboswe.sim.manifest import CONFIGS_DIR, load_manifest
    from roboswe.sim.robosuite.backend import RobosuiteBackend

    backend = RobosuiteBackend(load_manifest(CONFIGS_DIR / "tasks" / f"{task}.toml"))
    backend.reset(0)
    model, data = backend.env.sim.model._model, backend.env.sim.data._data
    out.mkdir(parents=True, exist_ok=True)
    raw = out / "scene.mjb"
    mujoco.mj_saveModel(model, str(raw), None)
    with raw.open("rb") as src, gzip.open(out / "scene.mjb.gz", "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)  # textures compress well; the GPU machine takes 64 MiB at most
    raw.unlink()
    rows = {"qpos": [], "qvel": [], "act": []}
    hold = backend.hold_action()
    for _ in range(states):
        backend.env.step(hold)
        for name in rows:
            rows[name].append(np.array(getattr(data, name), copy=True))
    substeps = int(round(backend.env.control_timestep / model.opt.timestep))
    cameras = [model.camera(i).name for i in range(model.ncam)]
    np.savez(out / "states.npz", substeps=substeps, cameras=np.array(cameras), **{k: np.stack(v) for k, v in rows.items()})
    backend.close()
    print(f"wrote {out}/scene.mjb.gz and states.npz ({states} states, {substeps} substeps per control step, cameras {cameras})")


def gl_strings() -> tuple[str, str]:
    """GL_VENDOR and GL_RENDERER of the current context (the device EGL actually chose)."""
    for name in ("libOpenGL.so.0", "libGL.so.1"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return "?", "?"
    lib.glGetString.restype = ctypes.c_char_p
    vendor, renderer = lib.glGetString(0x1F00), lib.glGetString(0x1F01)
    return (vendor or b"?").decode(), (renderer or b"?").decode()


def _physics_steps(path: str, steps: int, substeps: int, barrier=None, results=None) -> float:
    """Seconds for ``steps`` control steps of raw mj_step; with a barrier, timing starts when all have loaded."""
    import mujoco

    model = mujoco.MjModel.from_binary_path(path)
    data = mujoco.MjData(model)
    if barrier is not None:
        barrier.wait()
    t0 = time.perf_counter()
    for _ in range(steps * substeps):
        mujoco.mj_step(model, data)
    elapsed = time.perf_counter() - t0
    if results is not None:
        results.put(elapsed)
    return elapsed


def _concurrent(path: str, steps: int, substeps: int, n: int) -> float:
    """Control steps per second of n processes stepping at once (model loading excluded)."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_physics_steps, args=(path, steps, substeps, barrier, results)) for _ in range(n)]
    for p in procs:
        p.start()
    elapsed = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    return n * steps / max(elapsed)


def measure(scene: Path, frames: int, procs: list[int], steps: int) -> dict:
    import mujoco
    import numpy as np

    mjb = Path(tempfile.mkdtemp()) / "scene.mjb"
    with gzip.open(scene / "scene.mjb.gz", "rb") as src, mjb.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    model = mujoco.MjModel.from_binary_path(str(mjb))
    data = mujoco.MjData(model)
    rec = np.load(scene / "states.npz")
    substeps = int(rec["substeps"])
    camera = str(rec["cameras"][0])
    n_states = len(rec["qpos"])
    result: dict = {"host": platform.node(), "cpus": os.cpu_count(), "mujoco": mujoco.__version__,
                    "MUJOCO_GL": os.environ.get("MUJOCO_GL"), "camera": camera, "size": SIZE}

    renderer = mujoco.Renderer(model, SIZE, SIZE)
    result["gl_vendor"], result["gl_renderer"] = gl_strings()

    def redraw(i: int, depth: bool) -> None:
        data.qpos[:] = rec["qpos"][i % n_states]
        data.qvel[:] = rec["qvel"][i % n_states]
        if model.na:
            data.act[:] = rec["act"][i % n_states]
        mujoco.mj_forward(model, data)
        renderer.update_scene(data, camera=camera)
        renderer.render()
        if depth:
            renderer.enable_depth_rendering()
            renderer.update_scene(data, camera=camera)
            renderer.render()
            renderer.disable_depth_rendering()

    for depth, key in ((False, "rgb_ms"), (True, "rgbd_ms")):
        redraw(0, depth)  # first frame builds GL resources
        samples = []
        for i in range(frames):
            t0 = time.perf_counter()
            redraw(i, depth)
            samples.append((time.perf_counter() - t0) * 1000)
        result[key] = statistics.median(samples)
    renderer.close()

    per_step = _physics_steps(str(mjb), steps, substeps) / steps * 1000
    result["mj_step_per_control_step_ms"] = per_step
    scaling = [{"procs": n, "control_steps_per_s": _concurrent(str(mjb), steps, substeps, n)} for n in procs]
    base = scaling[0]["control_steps_per_s"] / procs[0]
    for row in scaling:
        row["speedup"] = row["control_steps_per_s"] / base
    result["scaling"] = scaling
    return result


def table(r: dict) -> str:
    lines = [f"host {r['host']} ({r['cpus']} CPUs), mujoco {r['mujoco']}, MUJOCO_GL={r['MUJOCO_GL']}",
             f"GL: {r['gl_vendor']} / {r['gl_renderer']}", "",
             "| measure | value |", "|---|---|",
             f"| {r['size']}² RGB frame from a recorded state ({r['camera']}) | {r['rgb_ms']:.2f} ms |",
             f"| {r['size']}² RGB + depth frame | {r['rgbd_ms']:.2f} ms |",
             f"| raw mj_step per control step | {r['mj_step_per_control_step_ms']:.3f} ms |", "",
             "| processes | control steps/s (all) | speedup |", "|---|---|---|"]
    lines += [f"| {s['procs']} | {s['control_steps_per_s']:.0f} | {s['speedup']:.2f}x |" for s in r["scaling"]]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--task", default="lift-panda")
    p.add_argument("--states", type=int, default=200)
    m = sub.add_parser("measure")
    m.add_argument("--scene", type=Path, required=True)
    m.add_argument("--frames", type=int, default=100)
    m.add_argument("--procs", default="1,2")
    m.add_argument("--steps", type=int, default=500, help="control steps per physics process")
    m.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.out, args.task, args.states)
        return 0
    result = measure(args.scene, args.frames, [int(x) for x in args.procs.split(",")], args.steps)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
