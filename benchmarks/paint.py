"""RoboPaint costs on this machine: physics, MoveFlange execution, canvas updates, one observation.

  python benchmarks/paint.py [--repeats 3] [--json OUT]

Figures (median of the repeats):
- raw physics ticks/s: bare ``mj_step`` on the paint model (500 Hz ticks), arm holding still;
- controlled ticks/s: ticks inside MoveFlange (PD torque, contact scan, deposition; IK every 5th tick);
- MoveFlange wall s per simulated s, for travel in the air and for the scripted painter's strokes (dip + stroke);
- canvas update: mean microseconds per deposit (one brush footprint blended into the 512x512 canvas),
  and its share of a painting batch's wall time;
- one observation: the 640x480 workspace camera, canvas texture upload included (EGL; first frame excluded).

Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

ROOT = Path(__file__).resolve().parent.parent


def measure_once() -> dict[str, float]:
    import mujoco
    from roboswe.sim.manifest import load_manifest
    from roboswe.sim.paint.backend import PaintBackend
    from roboswe.sim.paint.painter import DOWN, stroke_batch

    sim = PaintBackend(load_manifest(ROOT / "configs" / "tasks" / "paint-three-strokes.toml"))
    sim.reset(0)
    rig = sim.rig
    m, d = rig.model, rig.data
    scratch = mujoco.MjData(m)
    scratch.qpos[:] = d.qpos
    scratch.mocap_pos[:] = d.mocap_pos
    scratch.mocap_quat[:] = d.mocap_quat
    n = 5000
    t0 = time.perf_counter()
    for _ in range(n):
        scratch.ctrl[:7] = scratch.qfrc_bias[:7]
        mujoco.mj_step(m, scratch)
    raw_tps = n / (time.perf_counter() - t0)

    travel = [{"position": [x, 0.5, 0.3], "quaternion": list(DOWN), "duration_s": 1.0} for x in (0.15, -0.15, 0.15, -0.15, 0.0)]
    ticks0 = rig.physics_ticks
    t0 = time.perf_counter()
    r = sim.move_flange(travel)
    travel_wall = time.perf_counter() - t0
    travel_tps = (rig.physics_ticks - ticks0) / travel_wall

    canvas0, updates0, ticks0 = rig.canvas_seconds, rig.canvas.updates, rig.physics_ticks
    t0 = time.perf_counter()
    sim_s = 0.0
    for y in (0.07, 0.0, -0.07):
        r = sim.move_flange(stroke_batch(y, -0.09, 0.09, 0.008))
        sim_s += r.report.sim_time
    paint_wall = time.perf_counter() - t0
    canvas_s, updates = rig.canvas_seconds - canvas0, rig.canvas.updates - updates0

    sim.observe()  # the first frame builds the GL context
    frames = 5
    t0 = time.perf_counter()
    for _ in range(frames):
        sim.observe()
    observe_ms = (time.perf_counter() - t0) / frames * 1e3
    sim.close()
    return {
        "raw_ticks_per_s": raw_tps,
        "controlled_ticks_per_s": travel_tps,
        "travel_wall_per_sim_s": travel_wall / 5.0,
        "paint_wall_per_sim_s": paint_wall / sim_s,
        "paint_ticks_per_s": (rig.physics_ticks - ticks0) / paint_wall,
        "deposit_us": canvas_s / max(1, updates) * 1e6,
        "deposits_per_stroke_batch": updates / 3,
        "canvas_share": canvas_s / paint_wall,
        "observe_ms": observe_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs = [measure_once() for _ in range(args.repeats)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    import mujoco

    print(f"RoboPaint, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, MuJoCo {mujoco.__version__}, "
          f"median of {args.repeats}\n")
    rows = [
        ("physics ticks/s, bare mj_step (500 Hz ticks)", f"{med['raw_ticks_per_s']:,.0f}"),
        ("physics ticks/s inside MoveFlange, travel (PD, IK, contact scan)", f"{med['controlled_ticks_per_s']:,.0f}"),
        ("physics ticks/s inside MoveFlange, painting strokes", f"{med['paint_ticks_per_s']:,.0f}"),
        ("MoveFlange wall s per simulated s, travel", f"{med['travel_wall_per_sim_s']:.3f}"),
        ("MoveFlange wall s per simulated s, dip + stroke", f"{med['paint_wall_per_sim_s']:.3f}"),
        ("canvas update, us per deposit (one footprint)", f"{med['deposit_us']:.1f}"),
        ("canvas updates per stroke batch", f"{med['deposits_per_stroke_batch']:,.0f}"),
        ("canvas share of a stroke batch's wall time", f"{med['canvas_share']:.1%}"),
        ("one observation, 640x480 workspace (ms)", f"{med['observe_ms']:.1f}"),
    ]
    print("| measure | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "median": med}, indent=2))


if __name__ == "__main__":
    main()
