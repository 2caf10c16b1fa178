"""Harness overhead per trial with the demo participant: wall time minus (participant + physics + rendering).

Runs `roboswe run` for real (supervisor, six actors, robosuite, the sandbox) on admitted
lift-panda with configs/runs/demo.toml's participant, without replay, then reads each
trial's recorded timing from the run database:

    wall         the trial from the fresh scene's Load request to its recorded end
    active       the part of it after the participant's first input (what the budget counts)
    participant  decision latency + the scripts' own run time (exec wall minus the physics and
                 rendering the scripts asked for); sandbox start-up is part of the exec wall, so it
                 counts here as participant time
    physics, rendering   the simulator's own accounts
    overhead     wall - (participant + physics + rendering): scene load, checkpoints, recording,
                 context manager, transport, operation handling

Usage: .venv/bin/python benchmarks/series.py [--trials 5] [-e bwrap|docker] [--admitted FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def admit(work: Path) -> Path:
    from roboswe.sim.manifest import load_manifest

    from roboswe.evaluation.admission import (
        FORMAT,
        Admitted,
        admit_task,
        write_admitted,
    )

    task = admit_task(load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml"))
    if task.status != "admitted":
        raise SystemExit(f"lift-panda was not admitted: {task.reason}")
    path = work / "admitted.json"
    write_admitted(Admitted(format=FORMAT, dataset={"id": "benchmark"}, created_at="benchmark", host={},
                            run_config_sha256=None, tasks=[task]), path)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("-e", "--engine", choices=["bwrap", "docker"], default="bwrap")
    parser.add_argument("--admitted", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))

    work = Path(tempfile.mkdtemp(prefix="rs-bench-series-", dir="/tmp"))
    work.chmod(0o755)
    try:
        admitted = args.admitted or admit(work)
        config = work / "bench.toml"
        demo = (ROOT / "configs" / "runs" / "demo.toml").read_text().replace("trials = 5", f"trials = {args.trials}")
        config.write_text(demo)
        run_dir = work / "run"
        proc = subprocess.run([sys.executable, "-m", "roboswe.cli", "run", str(admitted), "--config", str(config),
                               "--out", str(run_dir), "--no-verify", "-e", args.engine],
                              check=False, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": "0"})
        if proc.returncode != 0:
            print(proc.stdout, proc.stderr, file=sys.stderr)
            return 1
        rows = trial_rows(run_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(rows)
    if args.json:
        print(json.dumps({"trials": rows, "summary": summary}, indent=2))
    else:
        print_table(rows, summary, args.engine)
    return 0


def trial_rows(run_dir: Path) -> list[dict]:
    from roboswe.records.reader import RunReader

    rows = []
    with RunReader(run_dir) as reader:
        for s in reader.series():
            for v in reader.trials(s.series_id):
                t = v.end.timing
                participant = t["provider_http"] + max(0.0, t["execution"] - t["script_sim"])
                sim = t["physics"] + t["rendering"]
                overhead = t["wall"] - participant - sim
                rows.append({
                    "trial": v.start.index, "outcome": v.end.outcome, "steps": v.end.control_steps,
                    "operations": len(reader.operations(v.trial_id)), "wall_s": t["wall"], "active_s": v.end.active_time,
                    "participant_s": participant, "physics_s": t["physics"], "rendering_s": t["rendering"],
                    "load_s": t["load"], "overhead_s": overhead, "overhead_share": overhead / t["wall"],
                    "overhead_excl_load_share": (overhead - t["load"]) / (t["wall"] - t["load"]),
                    "recording_s": t["recording"], "context_s": t["context"], "transport_s": t["transport"],
                })
    return rows


# Trials one worker's simulator process serves in its life, for the amortized share: one demo series, and
# one worker's part of a full evaluation (83 tasks x 5 trials) on 1 and on 8 workers.
AMORTIZED_OVER = (5, 52, 415)


def summarize(rows: list[dict]) -> dict:
    n = len(rows)
    total = {k: sum(r[k] for r in rows) for k in ("wall_s", "participant_s", "physics_s", "rendering_s", "load_s",
                                                   "overhead_s", "recording_s", "context_s", "transport_s")}
    summary = {
        "trials": n, "successes": sum(r["outcome"] == "success" for r in rows),
        "mean_wall_s": total["wall_s"] / n, "mean_steps": sum(r["steps"] for r in rows) / n,
        "overhead_share": total["overhead_s"] / total["wall_s"],
        "overhead_excl_load_share": (total["overhead_s"] - total["load_s"]) / (total["wall_s"] - total["load_s"]),
        **{f"total_{k}": v for k, v in total.items()},
    }
    later = [r for r in rows if r["trial"] > 1]
    if later:
        # Trial 1 runs in a fresh simulator process: imports, MuJoCo decoding the robot's meshes, the first GL
        # context. A worker's process pays that once, then serves series after series like trials 2..n.
        wall, overhead = (sum(r[k] for r in later) / len(later) for k in ("wall_s", "overhead_s"))
        first = rows[0]
        extra = first["overhead_s"] - overhead
        summary.update({
            "steady_overhead_share": overhead / wall,
            "steady_overhead_shares": [r["overhead_share"] for r in later],
            "steady_mean_overhead_s": overhead, "steady_mean_wall_s": wall,
            "first_trial_extra_s": extra,
            "amortized_overhead_share": {k: (k * overhead + extra) / (k * wall + extra) for k in AMORTIZED_OVER},
        })
    return summary


def print_table(rows: list[dict], s: dict, engine: str) -> None:
    print(f"demo series, sandbox {engine}: {s['trials']} trials, {s['successes']} successes, "
          f"mean {s['mean_steps']:.0f} control steps, mean trial wall {s['mean_wall_s']:.2f} s")
    head = ("trial", "wall s", "active s", "particip. s", "physics s", "render s", "load s", "overhead s", "share", "excl. load")
    print(" ".join(f"{h:>11}" for h in head))
    for r in rows:
        print(" ".join(f"{x:>11}" for x in (
            r["trial"], f"{r['wall_s']:.2f}", f"{r['active_s']:.2f}", f"{r['participant_s']:.2f}", f"{r['physics_s']:.2f}",
            f"{r['rendering_s']:.2f}", f"{r['load_s']:.2f}", f"{r['overhead_s']:.2f}", f"{r['overhead_share']:.1%}",
            f"{r['overhead_excl_load_share']:.1%}")))
    print(f"overall overhead share {s['overhead_share']:.1%} of trial wall; {s['overhead_excl_load_share']:.1%} "
          f"excluding the fresh-scene load (recording {s['total_recording_s']:.2f} s, context {s['total_context_s']:.2f} s, "
          f"transport {s['total_transport_s']:.2f} s in total)")
    if "steady_overhead_share" in s:
        shares = ", ".join(f"{x:.1%}" for x in s["steady_overhead_shares"])
        amortized = ", ".join(f"{k} trials {v:.1%}" for k, v in s["amortized_overhead_share"].items())
        print(f"trials 2-{s['trials']} (the process warm): overhead {s['steady_overhead_share']:.1%} of their wall "
              f"({shares}), {s['steady_mean_overhead_s']:.2f} s of {s['steady_mean_wall_s']:.2f} s per trial; trial 1 "
              f"(a fresh simulator process) costs {s['first_trial_extra_s']:.2f} s more; per worker process, amortized "
              f"over {amortized}")


if __name__ == "__main__":
    sys.exit(main())
