"""Sandbox costs: script start latency per backend, and the per-control-step round trip from
inside the sandbox (robot.step -> bridge -> simulator actor) against an in-process env.step.

Usage: python benchmarks/sandbox.py [--task lift-panda] [--starts 20] [--steps 100] [--rounds 3] [--json OUT]

Everything is measured in one run, interleaved in rounds so background load hits all sides alike:
  start      wall time of an empty script as the bridge reports it (process start to exit), and the
             whole exec as the coordinator sees it (including docker's cleanup exec)
  env.step   robosuite env.step(hold action) in this process (the upstream cost)
  robot.step robot.step(hold) timed inside the sandbox: sandbox -> bridge -> simulator -> back
  step_many  robot.step_many of 10-row chunks, per control step
  mj_step    raw MuJoCo mj_step x substeps per control step on the same model (the physics floor: what
             robosuite's env.step adds on top of it is robosuite's own cost)
  hops       where one robot.step's time goes, from CLOCK_MONOTONIC stamps every side takes (the
             request's and reply's envelopes, the bridge's, the simulator's Statistics hop.* accounts):
             runner -> bridge -> simulator -> physics -> reply, per control step
  overhead   robot.step against a stand-in simulator with no physics (tests/sandbox/stand_in_sim.py):
             the sandbox -> bridge -> simulator -> back cost alone, which robot.step adds to env.step;
             "legacy": the same against a stand-in that answers Step without the new state (as
             simulators before StepResult.values did), so the bridge asks GetState after each step
Prints a markdown table (docs/performance.md is pasted from it).
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
robot.step(hold)  # the first call connects
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

# The accounting's rows, in the order a step's time passes through them.
HOPS = [
    ("runner_to_bridge", "sandbox -> bridge (robot module's send to the bridge's read)"),
    ("bridge_in", "bridge: allow-list, token, action checks, encode for the simulator"),
    ("bridge_to_sim", "bridge -> simulator handler (transport, decode; over ZeroMQ: I/O threads, in-order queue)"),
    ("sim_before_physics", "simulator: scene lock (over ZeroMQ: hand-over to the scene thread)"),
    ("physics", "physics: backend.step + allowed state"),
    ("sim_after_physics", "simulator: reply built (over ZeroMQ: back from the scene thread)"),
    ("sim_reply", "simulator: reply encoded and sent"),
    ("sim_to_bridge", "simulator -> bridge (transport, decode)"),
    ("bridge_out", "bridge: reply built, encoded, written to the sandbox socket"),
    ("to_runner", "bridge -> sandbox, robot module decode (the rest of the measured call)"),
]


def hop_accounting(bridge: dict, sim: dict, call_ms: float, per_call_steps: int) -> dict[str, float]:
    """ms per control step for each of HOPS, from one exec's summed bridge and simulator stamps."""
    n = bridge.get("count", 0)
    if not n or not sim.get("count"):
        return {}
    b = {k: v / n * 1000 for k, v in bridge.items() if k != "count"}
    s = {k: v / sim["count"] * 1000 for k, v in sim.items() if k != "count"}
    out = {k: b[k] for k in ("runner_to_bridge", "bridge_in")}
    out.update({k: s[k] for k in ("bridge_to_sim", "sim_before_physics", "physics", "sim_after_physics")})
    out["sim_to_bridge"] = b["sim_to_bridge"]
    out["sim_reply"] = b["sim_round_trip"] - sum(out[k] for k in ("bridge_to_sim", "sim_before_physics", "physics",
                                                                 "sim_after_physics", "sim_to_bridge"))
    out["bridge_out"] = b["bridge_out"]
    out["to_runner"] = call_ms * per_call_steps - sum(out.values())
    return {k: v / per_call_steps for k, v in out.items()}


def _sim_hops(before: dict, after: dict, prefix: str) -> dict[str, float]:
    return {k[len(prefix):]: after[k] - before.get(k, 0.0) for k in after if k.startswith(prefix)}


async def bench(args, manifest, inproc, results: dict) -> None:
    import trio
    from roboswe.actors import Client, robot_endpoint, robot_link
    from roboswe.bridge.trial import open_trial
    from roboswe.protocol.bridge import ScriptLimits
    from roboswe.protocol.control import Shutdown, StatisticsRequest
    from roboswe.protocol.sim import SIM_CODEC, Load, encode_manifest
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
        # The in-process env.step rounds block this loop for seconds: a link that expects heartbeats
        # would declare the simulator dead meanwhile.
        async with Client("bench", f"ipc://{sock}", SIM_CODEC, liveness=10**6) as sim:
            await sim.request(Load(manifest=encode_manifest(manifest), seed=0, trial_steps=10**7))
            for backend in backends:
                ws = run_dir / f"ws-{backend}"
                ws.mkdir()
                (ws / "empty.py").write_text("")
                (ws / "steps.py").write_text(STEP_SCRIPT.format(n=args.steps))
                r = results["backends"].setdefault(backend, {"start_ms": [], "exec_ms": []})
                for key in ("step_ms", "step_many_ms", "ratio", "ratio_many", "hops", "hops_many"):
                    r[key], r[key + "_zmq"] = [], []
                endpoint = robot_endpoint(f"ipc://{sock}")
                async with robot_link(endpoint) as link, robot_link(endpoint, transport="zmq") as zmq_link, \
                        open_trial("bench", ws, link, backend=backend, image=image) as t, \
                        open_trial("bench-zmq", ws, zmq_link, backend=backend, image=image) as tz:
                    await t.exec("empty.py")  # warm caches
                    for _ in range(args.starts):
                        t0 = time.perf_counter()
                        fb = await t.exec("empty.py", limits)
                        r["exec_ms"].append((time.perf_counter() - t0) * 1000)
                        r["start_ms"].append(fb.wall_seconds * 1000)
                    for _ in range(args.rounds):
                        # each round: env.step in process, then robot.step over the stream (now) and over
                        # ZeroMQ (before), so load hits all three alike
                        env_ms = _env_step_ms(inproc, args.steps)
                        results["env_step_ms"].append(env_ms)
                        results["mj_step_ms"].append(_mj_step_ms(inproc, args.steps))
                        for suffix, trial in (("", t), ("_zmq", tz)):
                            trial.hops.clear()
                            before = (await sim.request(StatisticsRequest())).message.extra
                            fb = await trial.exec("steps.py", limits)
                            assert fb.exit_status == 0, fb.stderr
                            after = (await sim.request(StatisticsRequest())).message.extra
                            m = json.loads(fb.stdout)
                            r["step_ms" + suffix].append(m["step_ms"])
                            r["step_many_ms" + suffix].append(m["step_many_ms"])
                            r["ratio" + suffix].append(m["step_ms"] / env_ms)
                            r["ratio_many" + suffix].append(m["step_many_ms"] / env_ms)
                            r["hops" + suffix].append(hop_accounting(dict(trial.hops["Step"]), _sim_hops(before, after, "hop.step1."),
                                                                     m["step_ms"], 1))
                            r["hops_many" + suffix].append(hop_accounting(dict(trial.hops["StepMany"]),
                                                                          _sim_hops(before, after, "hop.stepN."), m["step_many_ms"], 10))
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
    from roboswe.actors import robot_link
    from roboswe.bridge.trial import open_trial
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
            async with robot_link(endpoints[False]) as link, robot_link(endpoints[True]) as legacy_link, \
                    open_trial("toy", ws, link, backend=backend, image=image) as t, \
                    open_trial("toy-legacy", ws, legacy_link, backend=backend, image=image) as legacy_t:
                for _ in range(args.rounds):  # interleaved, so load hits both alike
                    for key, trial in (("overhead_ms", t), ("overhead_legacy_ms", legacy_t)):
                        fb = await trial.exec("steps.py", limits)
                        assert fb.exit_status == 0, fb.stderr
                        results["backends"][backend].setdefault(key, []).append(json.loads(fb.stdout)["step_ms"])
        nursery.cancel_scope.cancel()


def _mj_step_ms(inproc, n: int) -> float:
    """Raw mj_step per control step (control_dt / timestep substeps) on a copy of the in-process scene's state."""
    import mujoco

    model = inproc.model
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = inproc.data.qpos, inproc.data.qvel
    data.ctrl[:] = inproc.data.ctrl
    substeps = max(1, round(inproc.control_dt / model.opt.timestep))
    t0 = time.perf_counter()
    for _ in range(n * substeps):
        mujoco.mj_step(model, data)
    return (time.perf_counter() - t0) / n * 1000


def _env_step_ms(inproc, n: int) -> float:
    hold = inproc.hold_action()
    t0 = time.perf_counter()
    for _ in range(n):
        inproc.env.step(hold)
    return (time.perf_counter() - t0) / n * 1000


def _print_hops(results: dict) -> None:
    """The per-hop accounting: median over rounds, ms per control step."""
    cols = [(b, key) for b in results["backends"] for key in ("hops_zmq", "hops", "hops_many_zmq", "hops_many")]
    cols = [(b, key) for b, key in cols if any(results["backends"][b][key])]
    if not cols:
        return
    print("\n| hop (ms per control step, median of rounds) | " + " | ".join(
        f"{b} {'robot.step' if key.startswith('hops_zmq') or key == 'hops' else 'step_many/10'}"
        f"{' before (zmq)' if key.endswith('_zmq') else ' now'}" for b, key in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name, what in HOPS:
        cells = []
        for b, key in cols:
            rounds = [h[name] for h in results["backends"][b][key] if h]
            cells.append(f"{statistics.median(rounds):.3f}" if rounds else "-")
        print(f"| {what} | " + " | ".join(cells) + " |")
    totals = []
    for b, key in cols:
        rounds = [sum(v for k, v in h.items() if k != "physics") for h in results["backends"][b][key] if h]
        totals.append(f"{statistics.median(rounds):.3f}" if rounds else "-")
    print("| **all but physics** | " + " | ".join(totals) + " |")


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
    results: dict = {"env_step_ms": [], "mj_step_ms": [], "backends": {}}
    trio.run(bench, args, manifest, inproc, results)
    env = statistics.median(results["env_step_ms"])
    floor = statistics.median(results["mj_step_ms"])
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"task {args.task}; {args.starts} empty-script starts, {args.rounds} rounds of {args.steps} steps; in-process env.step {env:.2f} ms (median), "
          f"raw mj_step per control step {floor:.2f} ms (the physics floor; robosuite adds {env - floor:.2f} ms)\n")
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
    print("\nRatios per round (each round's robot.step against the env.step measured just before it), median:")
    for b, r in results["backends"].items():
        for suffix, label in (("", "unix stream to the simulator (now)"), ("_zmq", "ZeroMQ to the simulator (before)")):
            print(f"- {b}, {label}: robot.step {statistics.median(r['ratio' + suffix]):.2f}x "
                  f"(rounds {', '.join(f'{x:.2f}' for x in r['ratio' + suffix])}), "
                  f"step_many {statistics.median(r['ratio_many' + suffix]):.2f}x")
    _print_hops(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
