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

With ``--ray ADDRESS`` each run places its workers on that Ray cluster (`roboswe run --ray`,
``--ray-cpus`` per worker); ``--ray local`` starts a two-node cluster on loopback for the runs
(tests/fleet/ray_cluster.py) and stops it after. The span then also holds the placement of each
worker (its two processes' start-up on a node), which a local run does before its span begins.

Usage: .venv/bin/python benchmarks/fleet.py [--workers 1,2] [--series 4] [--trials 2] [-e bwrap|docker]
       [--ray ADDRESS|local] [--ray-cpus 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

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
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "roboswe.cli", "run", str(admitted), "--config", str(config),
                           "--out", str(run_dir), "--no-verify", "-e", engine, "--workers", str(workers),
                           *(["--ray", ray] if ray else [])],
                          check=False, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": "0"})
    command_wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"--workers {workers}: roboswe run exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    rows = trial_rows(run_dir)
    with RunReader(run_dir) as reader:
        views = [v for s in reader.series() for v in reader.trials(s.series_id)]
    span = max(v.end.ended_at for v in views) - min(v.start.started_at for v in views)
    summary = summarize(rows)
    return {"workers": workers, "trials": len(views), "span_s": span, "command_wall_s": command_wall,
            "trials_per_hour": len(views) / span * 3600, "mean_trial_wall_s": summary["mean_wall_s"],
            "overhead_per_trial_s": summary["total_overhead_s"] / len(rows),
            "overhead_share": summary["overhead_share"], "overhead_excl_load_share": summary["overhead_excl_load_share"],
            "load_per_trial_s": summary["total_load_s"] / len(rows), "successes": summary["successes"]}


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

    work = Path(tempfile.mkdtemp(prefix="rs-bench-fleet-", dir="/tmp"))
    work.chmod(0o755)  # the bwrap sandbox user traverses it to reach the workspaces
    cluster = None
    try:
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
    if args.json:
        print(json.dumps({"cores": len(os.sched_getaffinity(0)), "series": args.series, "trials": args.trials,
                          "ray": args.ray, "runs": results}, indent=2))
        return 0
    print(f"fleet: {args.series} series x {args.trials} trials of lift-panda (demo participant), sandbox {args.engine}, "
          f"{len(os.sched_getaffinity(0))} cores" + (f", Ray {args.ray} ({args.ray_cpus:g} CPU per worker)" if args.ray else ""))
    head = ("workers", "trials", "span s", "trials/h", "speed-up", "run wall s", "trial wall s", "overhead s",
            "share", "excl. load", "load s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in results:
        print("| " + " | ".join(str(x) for x in (
            r["workers"], r["trials"], f"{r['span_s']:.1f}", f"{r['trials_per_hour']:.0f}", f"{r['speedup']:.2f}",
            f"{r['command_wall_s']:.1f}", f"{r['mean_trial_wall_s']:.2f}", f"{r['overhead_per_trial_s']:.2f}",
            f"{r['overhead_share']:.1%}", f"{r['overhead_excl_load_share']:.1%}", f"{r['load_per_trial_s']:.2f}")) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
