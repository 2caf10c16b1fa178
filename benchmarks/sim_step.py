"""Per control step: the simulator actor driven over ipc vs an in-process robosuite loop.

Usage: python benchmarks/sim_step.py [--task lift-panda] [--steps 200] [--rounds 3] [--json OUT]

Measured in one run, interleaved in rounds so background load hits both sides alike:
  raw        robosuite env.step(action) in this process (the upstream cost)
  backend    RobosuiteBackend.step (validation, success predicate, state record) in this process
  actor      Step request/reply over ipc to a simulator actor process, one action per request
  actor x10  Step with a chunk of 10 actions per request (cost per control step)
and observe latency per allowed camera (RGB + depth where exposed), in process and over ipc.
Prints a markdown table (docs/performance.md is pasted from it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))


def ms_per(fn, n: int) -> float:
    t0 = time.perf_counter()
    fn(n)
    return (time.perf_counter() - t0) / n * 1000


async def actor_side(manifest, steps: int, rounds: int, observe_reps: int, results: dict, inproc) -> None:
    import trio
    from roboswe.actors import Client
    from roboswe.protocol.control import Shutdown, StatisticsRequest
    from roboswe.protocol.sim import SIM_CODEC, Load, Observe, Step, encode_manifest

    run_dir = Path(tempfile.mkdtemp(prefix="simbench-"))
    proc = subprocess.Popen([sys.executable, "-m", "roboswe.actors.simulator", "--run-dir", str(run_dir)],  # noqa: ASYNC220  (once, before timing)
                            env={**os.environ, "PYTHONHASHSEED": "0"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sock = run_dir / "sock" / "simulator.sock"
    while not sock.exists():
        await trio.sleep(0.05)
    try:
        # in-process rounds block this loop for seconds: give the link a long heartbeat so it is not declared dead
        async with Client("bench", f"ipc://{sock}", SIM_CODEC, heartbeat_interval=30) as sim:
            await sim.request(Load(manifest=encode_manifest(manifest), seed=0, trial_steps=10**7))
            zero = [0.0] * inproc.action_spec().dim
            for _ in range(rounds):
                # in-process sides first, then the actor, inside the same round
                results["raw"].append(ms_per(lambda n: [inproc.env.step(inproc.hold_action()) for _ in range(n)], steps))
                results["backend"].append(ms_per(lambda n: [inproc.step([zero]) for _ in range(n)], steps))
                before = (await sim.request(StatisticsRequest())).message
                physics0 = before.extra.get("physics_seconds", 0.0)
                t0 = time.perf_counter()
                for _ in range(steps):
                    await sim.request(Step(actions=[zero]))
                wall = (time.perf_counter() - t0) / steps * 1000
                after = (await sim.request(StatisticsRequest())).message
                physics1 = after.extra["physics_seconds"]
                # handling = from dispatch to reply inside the actor (includes the scene-thread hop)
                handling = (after.handling.get("Step", 0.0) - before.handling.get("Step", 0.0)) / steps * 1000
                results["actor_handling"].append(handling)
                results["actor"].append(wall)
                # the same steps as timed inside the actor: the rest is transport + dispatch + thread hop
                results["actor_overhead"].append(wall - (physics1 - physics0) / steps * 1000)
                results["actor_physics"].append((physics1 - physics0) / steps * 1000)
                t0 = time.perf_counter()
                for _ in range(steps // 10):
                    await sim.request(Step(actions=[zero] * 10))
                results["actor_chunk10"].append((time.perf_counter() - t0) / (steps // 10 * 10) * 1000)
            # Full request path without physics: an out-of-bounds action is rejected in the scene thread.
            bad = [2.0] + zero[1:]
            null = []
            for _ in range(steps):
                t0 = time.perf_counter()
                await sim.request(Step(actions=[bad]))
                null.append((time.perf_counter() - t0) * 1000)
            results["null_step_ms"] = statistics.median(null)
            results["null_step_p90_ms"] = sorted(null)[int(0.9 * len(null))]
            for cam in manifest.observation.cameras:
                local, remote = [], []
                for _ in range(observe_reps):
                    t0 = time.perf_counter()
                    inproc.observe([cam.name], depth=cam.depth)
                    local.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    await sim.request(Observe(cameras=[cam.name], depth=cam.depth))
                    remote.append((time.perf_counter() - t0) * 1000)
                results["observe"][cam.name] = {"in_process_ms": statistics.median(local), "actor_ms": statistics.median(remote),
                                                "depth": cam.depth, "size": f"{cam.width}x{cam.height}"}
            await sim.request(Shutdown(reason="benchmark done"))
    finally:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> int:
    import trio
    from roboswe.sim.backend import create_backend
    from roboswe.sim.manifest import load_manifest

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="lift-panda")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--observe-reps", type=int, default=5)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    manifest = load_manifest(ROOT / "configs" / "tasks" / f"{args.task}.toml")
    inproc = create_backend("robosuite", manifest, trial_steps=10**7)
    inproc.reset(0)
    inproc.wait(20)  # warm numba and caches
    results: dict = {"raw": [], "backend": [], "actor": [], "actor_chunk10": [], "actor_overhead": [],
                     "actor_physics": [], "actor_handling": [], "observe": {}}
    trio.run(actor_side, manifest, args.steps, args.rounds, args.observe_reps, results, inproc)
    inproc.close()
    # Best round: the machine is shared, and the least-disturbed round is the cleanest estimate of cost.
    med = {k: min(results[k]) for k in ("raw", "backend", "actor", "actor_chunk10")}
    medians = {k: statistics.median(results[k]) for k in med}
    overhead = statistics.median(results["actor_overhead"])
    inside = statistics.median(results["actor_physics"])
    handling = statistics.median(results["actor_handling"])
    summary = {
        "task": args.task, "steps_per_round": args.steps, "rounds": args.rounds, "cpu_count": os.cpu_count(),
        "ms_per_step_best_round": med, "ms_per_step_median": medians,
        "actor_overhead_vs_raw_pct": (med["actor"] / med["raw"] - 1) * 100,
        "actor_overhead_vs_backend_pct": (med["actor"] / med["backend"] - 1) * 100,
        "actor_chunk10_overhead_vs_backend_pct": (med["actor_chunk10"] / med["backend"] - 1) * 100,
        "actor_overhead_ms_median": overhead, "actor_handling_ms_median": handling, "null_step_ms_median": results["null_step_ms"],
        "null_step_ms_p90": results["null_step_p90_ms"], "actor_inside_step_ms_median": inside,
        "actor_overhead_pct_of_inside_step": overhead / inside * 100,
        "observe": results["observe"], "samples": {k: results[k] for k in med},
    }
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    print(f"\n{args.task}, {args.steps} steps x {args.rounds} rounds (best round; medians in --json), {os.cpu_count()} CPUs\n")
    print("| path | ms per control step | vs in-process |")
    print("|---|---|---|")
    print(f"| robosuite env.step, in process | {med['raw']:.2f} | - |")
    print(f"| backend.step (validate + predicate + state record), in process | {med['backend']:.2f} | {(med['backend'] / med['raw'] - 1) * 100:+.1f}% vs env.step |")
    print(f"| simulator actor over ipc, 1 action per Step | {med['actor']:.2f} | {summary['actor_overhead_vs_backend_pct']:+.1f}% vs backend, {summary['actor_overhead_vs_raw_pct']:+.1f}% vs env.step |")
    print(f"| simulator actor over ipc, 10 actions per Step | {med['actor_chunk10']:.2f} | {summary['actor_chunk10_overhead_vs_backend_pct']:+.1f}% vs backend |")
    print(f"\nActor overhead per Step request (wall minus the actor's own step time, same requests, median): "
          f"{overhead:.3f} ms = {overhead / inside * 100:.1f}% of the {inside:.2f} ms step inside the actor.")
    print(f"Of that: {handling - inside:.3f} ms inside the actor outside physics (dispatch, scene-thread hop, "
          f"validation, reply), {overhead - (handling - inside):.3f} ms between the processes (ipc, codec, client).")
    print(f"A Step request that does no physics (rejected action, same path incl. the scene thread): "
          f"p50 {results['null_step_ms']:.3f} ms, p90 {results['null_step_p90_ms']:.3f} ms.")
    print("\n| camera | size | depth | observe in process (ms) | observe via actor (ms) |")
    print("|---|---|---|---|---|")
    for cam, o in results["observe"].items():
        print(f"| {cam} | {o['size']} | {'yes' if o['depth'] else 'no'} | {o['in_process_ms']:.1f} | {o['actor_ms']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
