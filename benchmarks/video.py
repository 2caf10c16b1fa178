"""Does video cost the control loop anything? A trial's control loop with video off, on (worker), and inline.

Run: .venv/bin/python benchmarks/video.py [--steps 200] [--repeats 3]

The control loop is what the simulator does per control step: apply one action to a real
robosuite Lift/Panda scene (the backend logs the per-step physics state on every step,
video or not). Three ways, alternated per repeat to spread machine noise:

- off:    no video at all.
- worker: roboswe.records.video.VideoWorker renders the previous trial's videos (2 cameras, 10 fps)
          from its recorded states in another process *while* this loop runs (the design).
- inline: the loop itself renders the 2 video cameras every 2nd step (what the design avoids).

It also reports the control-path cost of the state log (one snapshot per step) and the
worker's rendering throughput. Prints a Markdown table for docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))


def control_loop(sim, steps: int, inline_video: tuple[list[str], int, int, int] | None = None) -> list[float]:
    """Seconds per control step for ``steps`` steps of a gentle scripted motion."""
    per_step = []
    renderer = sim._renderer
    for i in range(steps):
        action = [0.2 * np.sin(i / 15), 0.2 * np.cos(i / 15), -0.1 * np.sin(i / 30), 0, 0, 0, -1]
        t0 = time.perf_counter()
        sim.step([action])
        if inline_video is not None:
            cameras, every, width, height = inline_video
            if sim.control_step % every == 0:
                renderer.load_state(sim._states._rows[-1][2])
                for cam in cameras:
                    renderer.render(cam, width, height, depth=False, calibration=False)
        per_step.append(time.perf_counter() - t0)
    return per_step


def summarize(samples: list[float]) -> dict[str, float]:
    ms = sorted(1000 * s for s in samples)
    return {"mean": statistics.fmean(ms), "p50": ms[len(ms) // 2], "p95": ms[int(0.95 * (len(ms) - 1))],
            "trial_s": sum(samples)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="control steps per trial (default 200)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from roboswe.sim.backend import create_backend
    from roboswe.sim.manifest import load_manifest
    from roboswe.sim.render import snapshot

    from roboswe.records.video import VideoWorker

    manifest = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")
    video = manifest.video
    every = manifest.control_hz // video.fps
    sim = create_backend("robosuite", manifest)
    sim.reset(manifest.seed)
    control_loop(sim, 20)  # warm up (numba, caches)
    sim.reset(manifest.seed)
    control_loop(sim, args.steps)
    recorded = sim.take_states()  # "the previous trial": what the worker renders during the worker runs

    t0 = time.perf_counter()
    for _ in range(2000):
        snapshot(sim.data)
    snapshot_us = 1e6 * (time.perf_counter() - t0) / 2000

    results: dict[str, list[float]] = {"off": [], "worker": [], "inline": []}
    overlapped, render_seconds = [], []
    with tempfile.TemporaryDirectory() as tmp, VideoWorker() as worker:
        warm = worker.submit(tmp, "warmup", manifest, _slice(recorded, 3), run_id="bench")
        warm.result(timeout=900)  # scene built in the worker before anything is timed
        for r in range(args.repeats):
            for mode in ("off", "worker", "inline") if r == 0 else ("off", "worker"):  # inline once: it is slow
                sim.reset(manifest.seed)
                sim.take_states()
                future = None
                if mode == "worker":
                    started = time.perf_counter()
                    future = worker.submit(tmp, f"trial{r}", manifest, recorded, run_id="bench")
                    time.sleep(0.5)  # let the worker get going: measure the loop while it renders
                inline = (list(video.cameras), every, video.width, video.height) if mode == "inline" else None
                samples = control_loop(sim, args.steps, inline)
                results[mode] += samples
                if future is not None:
                    overlapped.append(not future.done())
                    future.result(timeout=900)
                    render_seconds.append(time.perf_counter() - started)
    sim.close()

    frames = len(range(0, args.steps + 1, every)) * len(video.cameras)
    rows = {mode: summarize(s) for mode, s in results.items()}
    cpu = platform.processor() or platform.machine()
    print(f"# video benchmark: Lift/Panda, {args.steps} control steps per trial x {args.repeats} repeats "
          "(inline: 1), "
          f"{len(video.cameras)} cameras {video.width}x{video.height} at {video.fps} fps; "
          f"{os.cpu_count()} CPUs ({cpu}), Python {sys.version.split()[0]}, MUJOCO_GL={os.environ['MUJOCO_GL']}")
    print()
    print("| video | per control step, mean | p50 | p95 | control loop per trial | vs off |")
    print("|---|---|---|---|---|---|")
    n = {mode: len(s) / args.steps for mode, s in results.items()}
    base = rows["off"]["trial_s"] / n["off"]
    labels = {"off": "off", "worker": "on: worker process renders meanwhile", "inline": "inline in the loop (avoided)"}
    for mode, row in rows.items():
        print(f"| {labels[mode]} | {row['mean']:.2f} ms | {row['p50']:.2f} ms | {row['p95']:.2f} ms | "
              f"{row['trial_s'] / n[mode]:.2f} s | {row['trial_s'] / n[mode] / base:.2f}x |")
    print()
    print(f"- state log on the control path (always on): {snapshot_us:.1f} us per step")
    print(f"- worker: {frames} frames per trial video set in {statistics.fmean(render_seconds):.1f} s "
          f"({frames / statistics.fmean(render_seconds):.1f} frames/s incl. encode + sha256 readback); "
          f"still rendering when the loop ended in {sum(overlapped)}/{len(overlapped)} repeats")
    return 0


def _slice(states, n: int):
    from roboswe.sim.backend import PhysicsStates

    return PhysicsStates(**{f: getattr(states, f)[:n] for f in PhysicsStates.__struct_fields__})


if __name__ == "__main__":
    sys.exit(main())
