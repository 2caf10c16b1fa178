"""A RoboCasa kitchen's costs against the robosuite pilot (Lift): scene build, reset, steps.

Usage: python benchmarks/robocasa.py [--task kit-closedrawer] [--pilot lift-panda] [--steps 60]
                                     [--rounds 3] [--loads 3] [--cold] [--json OUT]

Per task, in a fresh simulator actor process (the way a run gets its scenes):
  first Load   the first scene of the process: imports, construction, reset (RoboCasa's numba
               functions load from NUMBA_CACHE_DIR, kept between runs: ROOT/.cache/numba)
  warm Load    each further Load in the same process: what every later trial of a series pays
               for its fresh scene
  actor step   Step over ipc, one action per request and 10 per request (both actors stay up:
               rounds alternate between the tasks, so background load hits both alike)
and in this process (after the actors, so they do not share the CPU):
  reset        backend.reset (RoboCasa rebuilds the whole kitchen model on every reset)
  env.step     the upstream env.step(hold) alone, and backend.step (validation, predicate, state log)
``--cold`` adds one first Load of the kitchen with an empty NUMBA_CACHE_DIR (numba compiles).
The kitchen runs on the offline kit (placeholder assets): indicative of RoboCasa's code path,
not of a real kitchen's meshes and textures. Prints a markdown table (docs/performance.md).
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
# This file is named robocasa.py: with its folder first on sys.path, `import robocasa` would find it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))


class Actor:
    """A fresh simulator actor process and a client link to it."""

    def __init__(self, numba_dir: str):
        self.run_dir = Path(tempfile.mkdtemp(prefix="casabench-"))
        env = {**os.environ, "PYTHONHASHSEED": "0", "NUMBA_CACHE_DIR": numba_dir}
        self.proc = subprocess.Popen([sys.executable, "-m", "roboswe.actors.simulator", "--run-dir", str(self.run_dir)],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def __aenter__(self):
        import trio
        from roboswe.actors import Client
        from roboswe.protocol.sim import SIM_CODEC

        sock = self.run_dir / "sock" / "simulator.sock"
        while not sock.exists():
            await trio.sleep(0.05)
        # building a kitchen holds the actor's loop for seconds: a long heartbeat keeps the link up
        self.client = Client("bench", f"ipc://{sock}", SIM_CODEC, heartbeat_interval=60)
        return await self.client.__aenter__()

    async def __aexit__(self, *exc):
        from roboswe.protocol.control import Shutdown

        try:
            await self.client.request(Shutdown(reason="benchmark done"))
        finally:
            await self.client.__aexit__(*exc)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            shutil.rmtree(self.run_dir, ignore_errors=True)


async def timed_load(sim, manifest) -> tuple[float, object]:
    import trio
    from roboswe.protocol.sim import Load, encode_manifest

    load = Load(manifest=encode_manifest(manifest), seed=manifest.seed, trial_steps=10**7)
    t0 = time.perf_counter()
    with trio.fail_after(900):
        reply = (await sim.request(load)).message
    return time.perf_counter() - t0, reply


async def actor_side(manifests: dict, *, steps: int, loads: int, rounds: int) -> dict:
    """Per task, in its own fresh simulator actor: Load times, then per-step costs in interleaved rounds."""
    from contextlib import AsyncExitStack

    from roboswe.protocol.control import StatisticsRequest
    from roboswe.protocol.sim import Step

    out = {name: {"loads_s": [], "actor_step_ms": [], "actor_inside_step_ms": [], "actor_chunk10_step_ms": []}
           for name in manifests}
    holds = {}
    async with AsyncExitStack() as stack:
        # one task at a time for the Loads, so each build has the CPU it would have in a run
        sims = {}
        for name, m in manifests.items():
            sims[name] = await stack.enter_async_context(Actor(os.environ["NUMBA_CACHE_DIR"]))
            for _ in range(loads):
                seconds, reply = await timed_load(sims[name], m)
                out[name]["loads_s"].append(seconds)
            holds[name] = reply.spec.action.hold
            await sims[name].request(Step(actions=[holds[name]] * 5))  # first steps warm caches
        for _ in range(rounds):  # interleaved: background load hits every task alike
            for name, sim in sims.items():
                zero = holds[name]
                before = (await sim.request(StatisticsRequest())).message
                t0 = time.perf_counter()
                for _ in range(steps):
                    await sim.request(Step(actions=[zero]))
                out[name]["actor_step_ms"].append((time.perf_counter() - t0) / steps * 1000)
                after = (await sim.request(StatisticsRequest())).message
                out[name]["actor_inside_step_ms"].append(
                    (after.extra["physics_seconds"] - before.extra["physics_seconds"]) / steps * 1000)
                t0 = time.perf_counter()
                for _ in range(steps // 10):
                    await sim.request(Step(actions=[zero] * 10))
                out[name]["actor_chunk10_step_ms"].append((time.perf_counter() - t0) / (steps // 10 * 10) * 1000)
    return out


async def cold_first_load(manifest) -> float:
    """A first Load with an empty NUMBA_CACHE_DIR: RoboCasa's numba functions compile."""
    with tempfile.TemporaryDirectory(prefix="numba-cold-") as cold:
        async with Actor(cold) as sim:
            return (await timed_load(sim, manifest))[0]


def in_process(manifests: dict, *, steps: int, resets: int, rounds: int) -> dict:
    """Construction, reset and step costs of each backend in this process, steps in interleaved rounds."""
    from roboswe.sim.backend import create_backend

    out, sims = {}, {}
    for name, m in manifests.items():
        t0 = time.perf_counter()
        sims[name] = create_backend(m.upstream.package, m, trial_steps=10**7)
        out[name] = {"construct_s": time.perf_counter() - t0, "reset_s": [], "env_step_ms": [], "backend_step_ms": []}
        for _ in range(resets):
            t0 = time.perf_counter()
            sims[name].reset(m.seed)
            out[name]["reset_s"].append(time.perf_counter() - t0)
        sims[name].wait(5)
        model = sims[name].model
        out[name].update(nq=int(model.nq), nbody=int(model.nbody), ngeom=int(model.ngeom))
    for _ in range(rounds):
        for name, sim in sims.items():
            hold = sim.hold_action()
            t0 = time.perf_counter()
            for _ in range(steps):
                sim.env.step(hold)
            out[name]["env_step_ms"].append((time.perf_counter() - t0) / steps * 1000)
            zero = [hold.tolist()]
            t0 = time.perf_counter()
            for _ in range(steps):
                sim.step(zero)
            out[name]["backend_step_ms"].append((time.perf_counter() - t0) / steps * 1000)
    for sim in sims.values():
        sim.close()
    return out


def main() -> int:
    import trio
    from roboswe.sim.manifest import load_manifest

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="kit-closedrawer")
    p.add_argument("--pilot", default="lift-panda")
    p.add_argument("--steps", type=int, default=60, help="control steps per timed round")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds of step timing (the best one is shown)")
    p.add_argument("--loads", type=int, default=3, help="Loads per actor process (the first, then warm ones)")
    p.add_argument("--cold", action="store_true", help="also time a first kitchen Load with an empty NUMBA_CACHE_DIR")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    names = (args.task, args.pilot)
    manifests = {name: load_manifest(ROOT / "configs" / "tasks" / f"{name}.toml") for name in names}
    results: dict = {"cpu_count": os.cpu_count(), "load_average_before": os.getloadavg()}
    results["actor"] = trio.run(lambda: actor_side(manifests, steps=args.steps, loads=args.loads, rounds=args.rounds))
    if args.cold:
        results["cold_first_load_s"] = trio.run(cold_first_load, manifests[args.task])
    results["in_process"] = in_process(manifests, steps=args.steps, resets=args.loads, rounds=args.rounds)
    results["load_average_after"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))

    def row(label: str, fn, unit: str, spec: str = ".2f") -> None:
        a, b = (fn(results["actor"][n], results["in_process"][n]) for n in names)
        print(f"| {label} | {a:{spec}} {unit} | {b:{spec}} {unit} | {a / b:.1f}x |")

    print(f"\n{args.task} (RoboCasa, placeholder kit) vs {args.pilot} (robosuite); {os.cpu_count()} CPUs, load average "
          f"{results['load_average_before'][0]:.1f} before, {results['load_average_after'][0]:.1f} after; steps: best "
          f"of {args.rounds} interleaved rounds of {args.steps}\n")
    print(f"| | {args.task} | {args.pilot} | ratio |")
    print("|---|---|---|---|")
    row("first Load in a fresh simulator process", lambda a, i: a["loads_s"][0], "s", ".1f")
    row("warm Load (each later trial's fresh scene), median", lambda a, i: statistics.median(a["loads_s"][1:]), "s")
    row("reset in process, median", lambda a, i: statistics.median(i["reset_s"]), "s")
    row("env.step (hold), in process", lambda a, i: min(i["env_step_ms"]), "ms")
    row("backend.step, in process", lambda a, i: min(i["backend_step_ms"]), "ms")
    row("actor step over ipc, 1 action per Step", lambda a, i: min(a["actor_step_ms"]), "ms")
    row("actor step over ipc, 10 actions per Step", lambda a, i: min(a["actor_chunk10_step_ms"]), "ms")
    kit, pilot = (results["in_process"][n] for n in names)
    print(f"\nModel size: {kit['nbody']} bodies / {kit['ngeom']} geoms / nq {kit['nq']} vs "
          f"{pilot['nbody']} / {pilot['ngeom']} / {pilot['nq']}.")
    if "cold_first_load_s" in results:
        print(f"First kitchen Load with an empty NUMBA_CACHE_DIR: {results['cold_first_load_s']:.1f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
