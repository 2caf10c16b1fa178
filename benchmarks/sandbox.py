"""Sandbox costs: script start latency per backend, and the per-control-step round trip from
inside the sandbox (robot.step -> bridge -> simulator actor) against an in-process env.step.

Usage: python benchmarks/sandbox.py [--task lift-panda] [--starts 20] [--steps 100] [--rounds 3] [--json OUT]

Everything is measured in one run, interleaved in rounds so background load hits all sides alike:
  start      wall time of an empty script as the bridge reports it (process start to exit), and the
             whole exec as the coordinator sees it (including docker's cleanup exec)
  env.step   robosuite env.step(hold action) in this process (the upstream cost)
  robot.step robot.step(hold) timed inside the sandbox: sandbox -> bridge -> simulator -> back
  step_many  robot.step_many of 10-row chunks, per control step
  overhead   robot.step against a stand-in simulator with no physics (tests/sandbox/stand_in_sim.py):
             the sandbox -> bridge -> simulator -> back cost alone, which robot.step adds to env.step;
             "legacy": the same against a stand-in that answers Step without the new state (as
             simulators before StepResult.values did), so the bridge asks GetState after each step
Prints a markdown table (the README's Performance section is pasted from it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MUJOCO_GL", "egl")

STEP_SCRIPT = """
import json, time, robot, numpy as np
hold = np.asarray(robot.spec()["action"]["hold"])
n = {n}
t0 = time.perf_counter()
for _ in range(n):
    robot.step(hold)
one = (time.perf_counter() - t0) / n * 1000
chunk = np.tile(hold, (10, 1))
t0 = time.perf_counter()
for _ in range(n // 10):
    robot.step_many(chunk)
many = (time.perf_counter() - t0) / (n // 10 * 10) * 1000
print(json.dumps({{"step_ms": one, "step_many_ms": many}}))
"""


async def bench(args, manifest, inproc, results: dict) -> None:
    import trio
    from roboswe.actors import Client
    from roboswe.actors.sandbox_bridge import open_trial
    from roboswe.actors.simulator import robot_endpoint
    from roboswe.protocol.bridge import ScriptLimits
    from roboswe.protocol.control import Shutdown
    from roboswe.protocol.sim import SIM_CODEC, Load
    from roboswe.sandbox import backend_class
    from roboswe.sandbox.images import load_image

    image = load_image()
    backends = [b for b in ("bwrap", "docker") if backend_class(b).available() is None and (b != "docker" or image.docker_tag)]
    run_dir = Path(tempfile.mkdtemp(prefix="sandboxbench-", dir="/tmp"))
    os.chmod(run_dir, 0o755)
    proc = subprocess.Popen([sys.executable, "-m", "roboswe.actors.simulator", "--run-dir", str(run_dir / "sim")],
                            env={**os.environ, "PYTHONHASHSEED": "0"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    sock = run_dir / "sim" / "sock" / "simulator.sock"
    while not sock.exists():
        await trio.sleep(0.05)
    limits = ScriptLimits(steps=args.steps * 2 + 10, seconds=600)
    try:
        async with Client("bench", f"ipc://{sock}", SIM_CODEC) as sim:
            await sim.request(Load(manifest=manifest.to_builtins(), seed=0, trial_steps=10**7))
            for backend in backends:
                ws = run_dir / f"ws-{backend}"
                ws.mkdir()
                (ws / "empty.py").write_text("")
                (ws / "steps.py").write_text(STEP_SCRIPT.format(n=args.steps))
                r = results["backends"].setdefault(backend, {"start_ms": [], "exec_ms": [], "step_ms": [], "step_many_ms": []})
                async with open_trial("bench", ws, robot_endpoint(f"ipc://{sock}"), backend=backend, image=image) as t:
                    await t.exec("empty.py")  # warm caches
                    for _ in range(args.starts):
                        t0 = time.perf_counter()
                        fb = await t.exec("empty.py", limits)
                        r["exec_ms"].append((time.perf_counter() - t0) * 1000)
                        r["start_ms"].append(fb.wall_seconds * 1000)
                    for _ in range(args.rounds):
                        results["env_step_ms"].append(_env_step_ms(inproc, args.steps))
                        fb = await t.exec("steps.py", limits)
                        assert fb.exit_status == 0, fb.stderr
                        m = json.loads(fb.stdout)
                        r["step_ms"].append(m["step_ms"])
                        r["step_many_ms"].append(m["step_many_ms"])
            await sim.request(Shutdown(reason="benchmark done"))
        await _overhead(args, image, backends, run_dir, results)
    finally:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(run_dir, ignore_errors=True)


async def _overhead(args, image, backends, run_dir: Path, results: dict) -> None:
    import trio
    from roboswe.actors.sandbox_bridge import open_trial
    from roboswe.protocol.bridge import ScriptLimits

    sys.path.insert(0, str(ROOT))
    from tests.sandbox.stand_in_sim import ToyRobot, serve_toy_robot

    limits = ScriptLimits(steps=args.steps * 2 + 10, seconds=600)
    async with trio.open_nursery() as nursery:
        endpoints = {}
        for legacy in (False, True):
            endpoints[legacy] = f"ipc://{run_dir}/toy-{int(legacy)}.sock"
            await nursery.start(serve_toy_robot, endpoints[legacy], ToyRobot(trial_steps=10**7, legacy=legacy))
        for backend in backends:
            ws = run_dir / f"toy-{backend}"
            ws.mkdir()
            (ws / "steps.py").write_text(STEP_SCRIPT.format(n=args.steps))
            async with open_trial("toy", ws, endpoints[False], backend=backend, image=image) as t, \
                    open_trial("toy-legacy", ws, endpoints[True], backend=backend, image=image) as legacy_t:
                for _ in range(args.rounds):  # interleaved, so load hits both alike
                    for key, trial in (("overhead_ms", t), ("overhead_legacy_ms", legacy_t)):
                        fb = await trial.exec("steps.py", limits)
                        assert fb.exit_status == 0, fb.stderr
                        results["backends"][backend].setdefault(key, []).append(json.loads(fb.stdout)["step_ms"])
        nursery.cancel_scope.cancel()


def _env_step_ms(inproc, n: int) -> float:
    hold = inproc.hold_action()
    t0 = time.perf_counter()
    for _ in range(n):
        inproc.env.step(hold)
    return (time.perf_counter() - t0) / n * 1000


def main() -> None:
    import trio
    from roboswe.sim.backend import create_backend
    from roboswe.sim.manifest import load_manifest

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="lift-panda")
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    manifest = load_manifest(ROOT / "configs" / "tasks" / f"{args.task}.toml")
    inproc = create_backend("robosuite", manifest, trial_steps=10**7)
    results: dict = {"env_step_ms": [], "backends": {}}
    trio.run(bench, args, manifest, inproc, results)
    env = statistics.median(results["env_step_ms"])
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"task {args.task}; {args.starts} empty-script starts, {args.rounds} rounds of {args.steps} steps; in-process env.step {env:.2f} ms (median)\n")
    print("| backend | empty script p50 (p90) | exec round trip p50 | robot.step | step_many (10/chunk) | robot.step / env.step | bridge overhead per step | same, with a GetState per step (before) |")
    print("|---|---|---|---|---|---|---|---|")
    for backend, r in results["backends"].items():
        start = sorted(r["start_ms"])
        p90 = start[int(0.9 * (len(start) - 1))]
        step = statistics.median(r["step_ms"])
        many = statistics.median(r["step_many_ms"])
        print(f"| {backend} | {statistics.median(start):.0f} ms ({p90:.0f} ms) | {statistics.median(r['exec_ms']):.0f} ms | "
              f"{step:.2f} ms | {many:.2f} ms | {step / env:.2f}x (step_many {many / env:.2f}x) | "
              f"{statistics.median(r['overhead_ms']):.2f} ms ({statistics.median(r['overhead_ms']) / env:.1%} of env.step) | "
              f"{statistics.median(r['overhead_legacy_ms']):.2f} ms ({statistics.median(r['overhead_legacy_ms']) / env:.1%}) |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
