"""Fleet throughput: trials per hour and harness overhead per trial against `roboswe run --workers N`.

Runs `roboswe run` for real (supervisor, actors per worker, robosuite, the sandbox) on K copies
of admitted lift-panda under their own ids (one admission), with configs/runs/demo.toml's
participant and T trials per series, without replay, once per worker count. From each run's
database:

    span           first trial start to last trial end (actor start-up and result writing excluded)
    trials/hour    trials / span
    command wall   the whole `roboswe run`, start-up of every actor included
    overhead       per trial, as benchmarks/series.py: wall - (participant + physics + rendering);
                   its share of trial wall, and the same without the fresh-scene load

With more workers than free cores the trials slow each other down (the figures say by how
much: compare mean trial wall); the speed-up is span(1) / span(N).

CPU time decides how far workers scale: one worker keeps X = CPU s per trial / wall s per trial
cores busy, so N workers run side by side at full speed from N x X cores. Each `roboswe run` runs
in a cgroup of its own where one can be made (benchmarks/machine.py; else its process tree is
sampled from /proc), over the span: its CPU time, and how long its tasks waited for a CPU (the
group's pressure, some and full). Under load a trial's wall holds that wait, so X is taken from
the 1-worker run's wall with the wait taken off: a range, since the trial's own critical path
waited somewhere between the two. The benchmark prints the range, the core count from which a
second (and each further) worker pays off, and the speed-up that rule predicts on the cores the
other processes left free, beside the measured one. The machine (cores, CPU model, memory) and the
load during each run (load average, cores busy outside the run) come with the figures: under
load, trial wall and harness share are upper bounds and trials/hour a lower bound.

With ``--ray ADDRESS`` each run places its workers on that Ray cluster (`roboswe run --ray`,
``--ray-cpus`` per worker); ``--ray local`` starts a two-node cluster on loopback for the runs
(tests/fleet/ray_cluster.py) and stops it after. The span then also holds the placement of each
worker (its two processes' start-up on a node), which a local run does before its span begins.

Usage: .venv/bin/python benchmarks/fleet.py [--workers 1,2] [--series 4] [--trials 2] [-e bwrap|docker]
       [--ray ADDRESS|local] [--ray-cpus 1] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import CommandGroup, CpuMeter, describe  # benchmarks/machine.py: the machine, the run's CPU time
from series import (  # benchmarks/series.py: the per-trial overhead rows
    summarize,
    trial_rows,
)


def admit_copies(work: Path, copies: int) -> tuple[Path, list[str]]:
    from roboswe.sim.manifest import load_manifest

    from roboswe.evaluation.admission import (
        FORMAT,
        Admitted,
        admit_task,
        write_admitted,
    )

    manifest = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")
    task = admit_task(manifest)
    if task.status != "admitted":
        raise SystemExit(f"lift-panda was not admitted: {task.reason}")
    ids = [f"lift-{n}" for n in range(1, copies + 1)]
    tasks = []
    for task_id in ids:
        renamed = msgspec.structs.replace(manifest, id=task_id)
        tasks.append(msgspec.structs.replace(task, id=task_id, manifest=renamed.to_builtins(),
                                             manifest_digest=renamed.digest()))
    path = work / "admitted.json"
    write_admitted(Admitted(format=FORMAT, dataset={"id": "fleet-benchmark", "tasks": ids}, created_at="benchmark",
                            host={}, run_config_sha256=None, tasks=tasks), path)
    return path, ids


def run_once(work: Path, admitted: Path, config: Path, workers: int, engine: str, ray: str | None = None) -> dict:
    from roboswe.records.reader import RunReader

    run_dir = work / f"run-w{workers}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    group = CommandGroup.create("rs-bench-fleet")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "roboswe.cli", "run", str(admitted), "--config", str(config),
                             "--out", str(run_dir), "--no-verify", "-e", engine, "--workers", str(workers),
                             *(["--ray", ray] if ray else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONHASHSEED": "0"}, preexec_fn=group and group.join)
    meter = CpuMeter(proc.pid, group).start()
    try:
        stdout, stderr = proc.communicate()
    finally:
        meter.stop()
        if group is not None:
            group.remove()
    command_wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"--workers {workers}: roboswe run exited {proc.returncode}\n{stdout[-3000:]}\n{stderr[-3000:]}")
    rows = trial_rows(run_dir)
    with RunReader(run_dir) as reader:
        views = [v for s in reader.series() for v in reader.trials(s.series_id)]
    start, end = min(v.start.started_at for v in views), max(v.end.ended_at for v in views)
    span, trials = end - start, len(views)
    used = meter.between(start, end)
    summary = summarize(rows)
    return {"workers": workers, "trials": trials, "span_s": span, "command_wall_s": command_wall,
            "trials_per_hour": trials / span * 3600, "mean_trial_wall_s": summary["mean_wall_s"],
            "overhead_per_trial_s": summary["total_overhead_s"] / len(rows),
            "overhead_share": summary["overhead_share"], "overhead_excl_load_share": summary["overhead_excl_load_share"],
            "load_per_trial_s": summary["total_load_s"] / len(rows), "successes": summary["successes"],
            "control_steps_per_trial": summary["mean_steps"],
            "physics_per_trial_s": summary["total_physics_s"] / len(rows),
            "rendering_per_trial_s": summary["total_rendering_s"] / len(rows),
            # CPU over the span of the trials (start-up and result writing excluded), then over the whole command
            "cpu_per_trial_s": used.cpu_s / trials,
            "wait_some_per_trial_s": None if used.wait_some_s is None else used.wait_some_s / trials,
            "wait_full_per_trial_s": None if used.wait_full_s is None else used.wait_full_s / trials,
            "cores_busy": used.cpu_s / span, "others_cores": used.others_cores, "steal_cores": used.steal_cores,
            "load1_mean": used.load1_mean, "load1_max": used.load1_max,
            "command_cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "command_cpu_sampled_s": meter.samples[-1].cpu_s - meter.samples[0].cpu_s,
            "cpu_measured_by": "cgroup" if group is not None else "process tree",
            "peak_memory_gib": meter.peak_memory_gib}


def cores_per_worker(cpu_s: float, wall_s: float, wait_some_s: float | None,
                     wait_full_s: float | None) -> tuple[float, float]:
    """The cores one worker keeps busy on a machine to itself: CPU over the wall with the wait for a CPU taken off.

    The trial's critical path waited at least as long as all of the run's runnable tasks did (full) and at most
    as long as any of them did (some), so the quiet wall lies between wall - some and wall - full: the low figure
    takes full off, the high one some. Without wait figures both are CPU over the wall as measured, which under
    load is too low (the wall holds the wait). A wait that leaves no wall gives no estimate: the next one stands.
    """
    measured = cpu_s / wall_s

    def quiet(wait: float | None, fallback: float) -> float:
        return cpu_s / (wall_s - wait) if wait is not None and wall_s - wait > 0.05 * wall_s else fallback

    low = quiet(wait_full_s, measured)
    return low, quiet(wait_some_s, low)


def pays_off_from(cores_each: float, workers: int) -> int:
    """The core count from which N workers, each keeping `cores_each` busy, all run at full speed."""
    return max(1, math.ceil(workers * cores_each - 1e-9))


def predicted_speedup(workers: int, cores: float, cores_each: float, base_cores: float | None = None) -> float:
    """Throughput of N workers on `cores` over one worker's on `base_cores` (default: the same): a worker runs
    at full speed while there is room, and the cores bind once N x cores_each exceeds them."""
    def rate(n: int, free: float) -> float:
        return min(float(n), free / cores_each)
    base = rate(1, cores if base_cores is None else base_cores)
    return rate(workers, cores) / base if base > 0 else 0.0


def cpu_per_trial_and_idle(runs: list[dict]) -> tuple[float, float] | None:
    """A least-squares line through the runs' (trials per second, cores busy): its slope is the CPU-s a trial
    costs, its intercept the cores the run's processes take while no trial runs (heartbeats, polling). Runs at
    higher throughput spread that idle share over more trials, so CPU-s per trial alone falls with it. The
    idle share grows a little with the workers, which the slope takes as trial cost: an upper bound on it."""
    points = [(r["trials"] / r["span_s"], r["cores_busy"]) for r in runs if r.get("cpu_per_trial_s") is not None]
    if len(points) < 2:
        return None
    mx, my = (sum(p[i] for p in points) / len(points) for i in (0, 1))
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return slope, my - slope * mx


def _cores(low: int, high: int) -> str:
    return f"{low} cores" if low == high else f"{low}-{high} cores"


# Cores busy outside the run, on average over a run's span, above which its figures are called "under load".
SHARED_ABOVE = 0.2


def scaling(runs: list[dict], cores: int) -> dict | None:
    """From the 1-worker run's CPU and wall per trial: the cores a worker keeps busy, from what core count
    N workers pay off, the speed-up that predicts for each run on the cores left free, and the conclusion."""
    base = next((r for r in runs if r["workers"] == 1 and r.get("cpu_per_trial_s") is not None), None)
    if base is None:
        return None
    wall = base["span_s"] / base["trials"]  # one worker's wall per trial, the step to its next trial included
    low, high = cores_per_worker(base["cpu_per_trial_s"], wall, base["wait_some_per_trial_s"],
                                 base["wait_full_per_trial_s"])
    counts = sorted({2, *(r["workers"] for r in runs if r["workers"] > 1)})
    pays = {n: (pays_off_from(low, n), pays_off_from(high, n)) for n in counts}
    base_free = max(0.0, cores - base["others_cores"])
    checks = [{"workers": r["workers"], "free_cores": (free := max(0.0, cores - r["others_cores"])),
               "others_cores": r["others_cores"], "load1_mean": r["load1_mean"],
               "predicted_speedup": (predicted_speedup(r["workers"], free, high, base_free),
                                     predicted_speedup(r["workers"], free, low, base_free)),
               "measured_speedup": base["span_s"] / r["span_s"]} for r in runs]
    idle = {n: (predicted_speedup(n, cores, high), predicted_speedup(n, cores, low)) for n in counts}
    further = "".join(f", {n} workers from {_cores(*pays[n])}" for n in counts if n > 2)
    waited = ("" if base["wait_some_per_trial_s"] is None else
              f", of which its tasks waited for a CPU {base['wait_full_per_trial_s']:.2f} s (all) to "
              f"{base['wait_some_per_trial_s']:.2f} s (some)")
    lines = [f"one worker keeps {low:.2f}-{high:.2f} cores busy on a machine to itself: {base['cpu_per_trial_s']:.2f} "
             f"CPU-s per trial over {wall:.2f} s of wall per trial (1 worker){waited}",
             f"N workers run side by side at full speed from N x that many cores: a second worker pays off from "
             f"{_cores(*pays[2])}{further}"]
    if cores >= pays[2][1]:
        lines.append(f"this machine's {cores} cores hold two workers at full speed")
    else:
        lines.append(f"on this machine's {cores} cores a second worker does not pay off fully: two need "
                     f"{2 * low:.1f}-{2 * high:.1f} cores; on {cores} idle cores the rule predicts "
                     + ", ".join(f"x{a:.2f}-{b:.2f} for {n}" for n, (a, b) in idle.items()))
    for c in checks[1:] if len(checks) > 1 else []:
        lines.append(f"{c['workers']} workers: others kept {c['others_cores']:.1f} cores busy (load {c['load1_mean']:.1f}); "
                     f"predicted x{c['predicted_speedup'][0]:.2f}-{c['predicted_speedup'][1]:.2f} on the "
                     f"{c['free_cores']:.1f} cores left, measured x{c['measured_speedup']:.2f}"
                     + (" (above the rule: each worker's first trial is outside the span, and the trial's CPU falls "
                        "with throughput, see below)" if c["measured_speedup"] > 1.25 * c["predicted_speedup"][1] else ""))
    fit = cpu_per_trial_and_idle(runs)
    if fit is not None:
        lines.append(f"over the runs, a trial costs {fit[0]:.2f} CPU-s and the run's processes take {fit[1]:.2f} cores "
                     f"with no trial running (CPU-s per trial falls as trials/hour rises: the idle share is spread "
                     f"over more trials)")
    extra = [(r["peak_memory_gib"] - base["peak_memory_gib"]) / (r["workers"] - 1) for r in runs
             if r["workers"] > 1 and r.get("peak_memory_gib")]
    if extra and base.get("peak_memory_gib"):
        lines.append(f"memory (Pss of the run's processes, at its peak): {base['peak_memory_gib']:.1f} GiB with one worker, "
                     f"{min(extra):.2f}-{max(extra):.2f} GiB more for each further worker")
    if max(r["others_cores"] for r in runs) > SHARED_ABOVE:
        lines.append(f"measured under load (others used up to {max(r['others_cores'] for r in runs):.1f} of {cores} "
                     f"cores): trial wall and harness share are upper bounds, trials/hour lower bounds; the CPU-s a "
                     f"trial costs depends on the load least")
    return {"cores_per_worker": (low, high), "wall_per_trial_s": wall, "pays_off_from": pays,
            "memory_per_further_worker_gib": extra, "cpu_per_trial_and_idle_cores": fit,
            "idle_predicted_speedup": idle, "checks": checks, "conclusion": lines}


def print_report(report: dict) -> None:
    m = report["machine"]
    print(f"machine: {m['cores']} cores ({m['cpu_model']}, {m['cpu_mhz']:.0f} MHz), {m['memory_gib']} GiB, Linux "
          f"{m['kernel']}; load average {report['load_before'][0]:.2f} / {report['load_before'][1]:.2f} / "
          f"{report['load_before'][2]:.2f} (1 / 5 / 15 min) before the runs")
    print(f"fleet: {report['series']} series x {report['trials']} trials of lift-panda (demo participant), sandbox "
          f"{report['engine']}" + (f", Ray {report['ray']} ({report['ray_cpus']:g} CPU per worker)" if report["ray"] else ""))
    head = ("workers", "trials", "span s", "trials/h", "speed-up", "run wall s", "trial wall s", "harness s",
            "harness share", "excl. load", "load s", "CPU s/trial", "cores busy", "others' cores", "load avg",
            "peak GiB")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in report["runs"]:
        print("| " + " | ".join(str(x) for x in (
            r["workers"], r["trials"], f"{r['span_s']:.1f}", f"{r['trials_per_hour']:.0f}", f"{r['speedup']:.2f}",
            f"{r['command_wall_s']:.1f}", f"{r['mean_trial_wall_s']:.2f}", f"{r['overhead_per_trial_s']:.2f}",
            f"{r['overhead_share']:.1%}", f"{r['overhead_excl_load_share']:.1%}", f"{r['load_per_trial_s']:.2f}",
            "-" if r["cpu_per_trial_s"] is None else f"{r['cpu_per_trial_s']:.2f}", f"{r['cores_busy']:.2f}",
            f"{r['others_cores']:.2f}",
            f"{r['load1_mean']:.1f} (max {r['load1_max']:.1f})", f"{r['peak_memory_gib']:.1f}")) + " |")
    if report["scaling"] is None:
        print("no conclusion on cores: it needs a 1-worker run measured on this machine (local, not --ray)")
        return
    for line in report["scaling"]["conclusion"]:
        print(f"- {line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts to compare, e.g. 1,2,4")
    parser.add_argument("--series", type=int, default=4, help="series in each run (copies of lift-panda)")
    parser.add_argument("--trials", type=int, default=2, help="trials per series")
    parser.add_argument("-e", "--engine", choices=["bwrap", "docker"], default="bwrap")
    parser.add_argument("--ray", default=None, metavar="ADDRESS|local", help="place the workers on this Ray cluster")
    parser.add_argument("--ray-cpus", type=float, default=1.0, help="CPUs each worker requests from Ray")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))

    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="rs-bench-fleet-", dir="/tmp"))
    work.chmod(0o755)  # the bwrap sandbox user traverses it to reach the workspaces
    cluster = None
    try:
        with contextlib.redirect_stdout(sys.stderr):  # admission logs: stdout is the report's (--json)
            admitted, _ = admit_copies(work, args.series)
        config = work / "bench.toml"
        config.write_text((ROOT / "configs" / "runs" / "demo.toml").read_text()
                          .replace("trials = 5", f"trials = {args.trials}")
                          + (f"\n[fleet]\nray_cpus = {args.ray_cpus}\nray_memory_gib = 1.0\n" if args.ray else ""))
        ray = args.ray
        if ray == "local":
            sys.path.insert(0, str(ROOT))
            from tests.fleet.ray_cluster import LocalCluster

            cluster = LocalCluster(head_cpus=max(counts), node_cpus=max(counts))
            os.environ.update(cluster.env)
            ray = cluster.address
        results = [run_once(work, admitted, config, w, args.engine, ray) for w in counts]
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    base = results[0]["span_s"]
    for r in results:
        r["speedup"] = base / r["span_s"]
        if args.ray:  # the workers' processes are the raylets' children, outside the measured tree
            r["cpu_per_trial_s"] = r["wait_some_per_trial_s"] = r["wait_full_per_trial_s"] = None
    machine = describe()
    report = {"machine": machine, "load_before": load_before, "series": args.series, "trials": args.trials,
              "engine": args.engine, "ray": args.ray, "ray_cpus": args.ray_cpus, "runs": results,
              "scaling": scaling(results, machine["cores"])}
    if report["scaling"] and args.engine == "docker":
        report["scaling"]["conclusion"].append("docker: the scripts in the containers (dockerd's children) are not "
                                               "in the measured CPU, so cores per worker is a lower bound")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
