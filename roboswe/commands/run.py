"""`roboswe run` and `roboswe verify`: the supervisor starts the actors, the coordinator does the job.

The command checks its inputs (admitted file digest, run config, budgets), runs preflight
(roboswe/evaluation/preflight.py: keys, model id, sandbox, assets; exit 2 with one message
per problem, nothing written), writes RUN_DIR/job.json and a copy of the run config, starts the actors under the same
``Supervisor`` as `roboswe up`, and polls the coordinator for progress: a live display on
a terminal, plain log lines otherwise. When the coordinator reports the job done (or
failed) it stops the actors and prints the outcome table.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from roboswe.terminal import did_you_mean, echo, plain, terminal_console, terminal_safe

RUN_ACTORS = ("recorder", "simulator", "sandbox_bridge", "provider_client", "context_manager", "coordinator")
VERIFY_ACTORS = ("recorder", "simulator", "sandbox_bridge", "coordinator")


def add_arguments_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("admitted", metavar="ADMITTED.json", nargs="?", type=Path,
                        help="admission file from `roboswe admit` (optional with --resume)")
    parser.add_argument("--config", type=Path, default=None, help="run config TOML with a [provider] section (configs/runs/)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override any key of the config, e.g. --set provider.model=claude-sonnet-5 --set "
                             "series.trials=3 (a TOML value, else a string); recorded in the run's config. Repeatable")
    parser.add_argument("-e", "--engine", choices=["docker", "bwrap"], default=None,
                        help="sandbox backend (default: [series] backend, else docker when a daemon answers, else bwrap)")
    parser.add_argument("--sim", default=None, metavar="tcp://HOST:PORT", help="use a remote simulator (`roboswe sim serve`)")
    parser.add_argument("--keys", type=Path, default=None, metavar="DIR", help="CURVE keys for --sim (`roboswe keys generate`)")
    parser.add_argument("--out", type=Path, default=None, metavar="RUN_DIR", help="run directory (default ./runs/<timestamp>)")
    parser.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR", help="continue a stopped or killed run")
    parser.add_argument("--retry-incomplete", action="store_true",
                        help="with --resume: re-run each trial that ended incomplete for an infrastructure or provider "
                             "reason as a linked attempt (at most 2 re-runs per trial; a failure is never re-run)")
    parser.add_argument("--tasks", default=None, metavar="ID,...", help="only these admitted tasks (default: all admitted)")
    parser.add_argument("--no-verify", action="store_true", help="do not replay each series after it ends")
    parser.add_argument("--no-video", action="store_true",
                        help="render no trial videos (they can be rendered later from the recorded states)")
    parser.add_argument("--preflight", choices=["offline", "online"], default=None,
                        help="checks before any actor starts; online (the default for hosted providers) also asks "
                             "the provider once, for free, whether it knows the key and the model")
    parser.add_argument("--no-preflight", action="store_true",
                        help="skip the checks before start (keys, model id, sandbox image and backend, assets)")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="series at once, each with its own simulator and sandbox bridge "
                             "(default: [fleet] workers, else one per 2 cores and 3 GiB of memory; with --ray: "
                             "what its nodes hold, each worker on one node)")
    parser.add_argument("--ray", default=None, metavar="auto|HOST:PORT",
                        help="place each worker's simulator and sandbox bridge on a node of this Ray cluster "
                             "(default: [fleet] ray); the coordinator, recorder, provider client and context "
                             "managers stay here")


def add_arguments_verify(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a run directory written by `roboswe run`")
    parser.add_argument("--trials", default=None, metavar="TRIAL_ID,...", help="only these trial ids (default: every ended trial)")


class UsageError(Exception):
    """Bad input to the command; the message says what and what to do (exit code 2)."""


class NothingToResume(Exception):
    """--resume of a run that finished: nothing is started or written (exit code 0)."""


def _fail(command: str, message: str) -> int:
    echo(f"roboswe {command}: {message}", file=sys.stderr)
    return 2


def prepare_run(args: argparse.Namespace) -> tuple[Path, Any, Path]:
    """Check the inputs, run preflight and write RUN_DIR/job.json; returns (run dir, config, config copy).

    Raises UsageError (bad arguments) or PreflightRefused (the run could not work); both before anything is written.
    """
    overrides = getattr(args, "set", None) or []  # a Namespace built in code (the demo) may lack it
    if args.resume is not None:
        if overrides:
            raise UsageError("--set: a resumed run keeps the config it started with; drop --set")
        return _prepare_resume(args)
    if args.admitted is None:
        if args.config is not None and (config := _load(args.config)).rle is not None:  # an RLE-Bench run
            if overrides:
                raise UsageError("--set applies to a series run's config; edit the RLE run config instead")
            from roboswe.evaluation.job import CONFIG_COPY
            from roboswe.rle.run import prepare_rle_run

            run_dir = prepare_rle_run(args, config)
            return run_dir, config, run_dir / CONFIG_COPY
        raise UsageError("give ADMITTED.json (from `roboswe admit`), or --resume RUN_DIR, or an RLE run config")
    if getattr(args, "retry_incomplete", False):  # a Namespace built in code (the demo) may lack it
        raise UsageError("--retry-incomplete re-runs the incomplete trials of an existing run: "
                         "use it with --resume RUN_DIR")
    return _prepare_new(args)


def _load(path: Path | None, overrides: list[str] | None = None) -> Any:
    """The run config at ``path`` (None: the default config) with --set overrides; a bad one is a UsageError."""
    from roboswe.config import ConfigError, load_config

    try:
        return load_config(path, overrides or ())
    except ConfigError as e:
        raise UsageError(str(e)) from None


def _admitted(path: Path) -> Any:
    """The admission file at ``path``; a bad one is a UsageError."""
    from roboswe.evaluation.admission import AdmissionError, read_admitted

    try:
        return read_admitted(path)
    except AdmissionError as e:
        raise UsageError(str(e)) from None


def _prepare_resume(args: argparse.Namespace) -> tuple[Path, Any, Path]:
    """--resume: the run's own job, config copy and admitted file (checked against its digest), updated by the flags."""
    import msgspec

    from roboswe.evaluation.job import CONFIG_COPY, read_job, write_job

    run_dir = args.resume.resolve()
    try:
        job = read_job(run_dir)
    except (FileNotFoundError, ValueError) as e:
        raise UsageError(f"--resume {run_dir}: {e}") from None
    if job.rle:
        raise UsageError(f"--resume {run_dir}: an RLE-Bench run is not resumed; start a new one")
    config_path = run_dir / CONFIG_COPY
    if args.config is not None and args.config.read_bytes() != config_path.read_bytes():
        raise UsageError(f"--config {args.config} differs from the config this run started with ({config_path}); "
                         "a resumed run keeps its config: drop --config")
    admitted_path = args.admitted or Path(job.admitted_path)
    admitted = _admitted(admitted_path)
    if admitted.digest != job.admitted_sha256:
        raise UsageError(f"{admitted_path} is not the admitted file this run started with "
                         f"(digest {admitted.digest[:16]}… vs {job.admitted_sha256[:16]}…)")
    config = _load(config_path)
    flags = {"verify": job.verify and not args.no_verify, "videos": job.videos and not args.no_video,
             "retry_incomplete": getattr(args, "retry_incomplete", False)}
    _require_work_left(run_dir, msgspec.structs.replace(job, **flags), config)  # before preflight: nothing may start
    _preflight(args, config, config_path, [admitted.task(t).task_manifest() for t in job.tasks], job.backend,
               run_dir, remote_sim=bool(job.sim_endpoint))
    ray = getattr(args, "ray", None) or job.ray  # a resumed --ray run may name the cluster anew
    if args.workers is not None:
        workers = _workers(args, config, job.sim_endpoint, ray=ray, tasks=len(job.tasks))
    else:
        workers = job.workers
    job = msgspec.structs.replace(job, kind="run", admitted_path=str(admitted_path.resolve()), trials=[],
                                  workers=workers, ray=ray, **flags)
    write_job(run_dir, job)
    return run_dir, config, config_path


def _require_work_left(run_dir: Path, job: Any, config: Any) -> None:
    """Raise NothingToResume when the run finished: a resume would only start actors and rewrite results.json."""
    from roboswe.evaluation.run import work_left

    if not work_left(run_dir, job, config.series):
        raise NothingToResume(f"{run_dir} finished: every series ran its {config.series.trials} trial(s), "
                              "replays, videos and results.json are recorded; nothing to resume, nothing changed "
                              f"(roboswe report {run_dir})")


def _chosen_tasks(args: argparse.Namespace, config: Any, admitted: Any) -> list[str]:
    """--tasks (default: every admitted task), each admitted and within budgets the config does not loosen."""
    from roboswe.evaluation.series_config import BudgetLoosened, effective_budgets

    available = [t.id for t in admitted.admitted_tasks()]
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else available
    for t in tasks:
        if t not in available:
            raise UsageError(f"--tasks: {t!r} is not an admitted task of {args.admitted}{did_you_mean(t, available)}; admitted: {available}")
    if not tasks:
        raise UsageError(f"{args.admitted} admits no task; nothing to run")
    for t in tasks:
        try:
            effective_budgets(config.series, admitted.task(t).task_manifest())
        except BudgetLoosened as e:
            raise UsageError(f"{args.config}: {e}") from None
    return tasks


def _prepare_new(args: argparse.Namespace) -> tuple[Path, Any, Path]:
    """A new run: check config, admitted file, tasks and flags, run preflight, then write the run directory."""
    from roboswe.commands.run_dirs import new_run_dir
    from roboswe.evaluation.job import CONFIG_COPY, Job, write_job

    from roboswe.config import config_text

    overrides = getattr(args, "set", None) or []
    config = _load(args.config, overrides)
    if config.provider is None:
        raise UsageError(f"{args.config or 'the default config'} has no [provider] section: say who decides, "
                         "e.g. configs/runs/demo.toml (kind = \"python\")")
    admitted = _admitted(args.admitted)
    tasks = _chosen_tasks(args, config, admitted)
    run_dir = (args.out or new_run_dir()).resolve()
    if args.sim and not args.sim.startswith("tcp://"):
        raise UsageError(f"--sim {args.sim!r}: expected tcp://HOST:PORT of `roboswe sim serve`")
    if args.keys and not args.sim:
        raise UsageError("--keys only applies with --sim")
    if (run_dir / "run.sqlite").exists():
        raise UsageError(f"{run_dir} already holds a run; continue it with --resume {run_dir} or choose another --out")
    ray = getattr(args, "ray", None) or config.fleet.ray
    if ray and args.sim:
        raise UsageError("--ray places each worker's own simulator on the cluster; drop --sim")
    workers = _workers(args, config, args.sim, ray=ray, tasks=len(tasks))
    _preflight(args, config, args.config or "the default config", [admitted.task(t).task_manifest() for t in tasks],
               args.engine or config.series.backend, run_dir, remote_sim=bool(args.sim))
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir.chmod(0o755)  # the bwrap sandbox user traverses it to reach the workspaces
    config_path = run_dir / CONFIG_COPY
    config_bytes = config_text(args.config, overrides)  # with --set: the merged config, as the run records it
    config_path.write_bytes(config_bytes)
    job = Job(kind="run", run_id=run_dir.name, admitted_path=str(args.admitted.resolve()), admitted_sha256=admitted.digest,
              tasks=tasks, backend=args.engine or config.series.backend, verify=config.series.verify and not args.no_verify,
              videos=not args.no_video, sim_endpoint=args.sim, sim_keys=str(args.keys.resolve()) if args.keys else None,
              config_sha256=hashlib.sha256(config_bytes).hexdigest(), workers=workers, ray=ray)
    write_job(run_dir, job)
    return run_dir, config, config_path


def _workers(args: argparse.Namespace, config: Any, remote_sim: str | None, *, ray: str | None = None,
             tasks: int = 64) -> int:
    """Series at once: --workers, else [fleet] workers, else the machine's (or the Ray cluster's) default, printed."""
    from roboswe.config import default_workers

    if args.workers is not None:
        if not 1 <= args.workers <= 64:
            raise UsageError(f"--workers {args.workers}: expected 1 to 64 series at once")
        workers, source = args.workers, "--workers"
    elif config.fleet.workers is not None:
        workers, source = config.fleet.workers, "[fleet] workers"
    if ray:  # every count is checked against what one node holds: Ray never splits a worker across nodes
        asked = workers if args.workers is not None or config.fleet.workers is not None else None
        workers, rule = _cluster_workers(ray, config.fleet, tasks, asked)
        source = rule if asked is None else f"{source}; {rule}"
    elif args.workers is None and config.fleet.workers is None:
        workers, rule = default_workers()
        source = f"default: {rule}"
    if remote_sim and workers > 1:
        if args.workers is not None:
            raise UsageError(f"--workers {workers} with --sim: a remote simulator serves one series at a time; "
                             "drop --workers or use --workers 1")
        workers, source = 1, "--sim: a remote simulator serves one series at a time"
    echo(f"roboswe run: {workers} worker(s) ({source})", file=sys.stderr)
    return workers


def _cluster_workers(address: str, fleet: Any, tasks: int, asked: int | None) -> tuple[int, str]:
    """Workers the Ray cluster's nodes hold (each worker on one node, at most one per task); refuses
    (UsageError) when Ray is missing, the cluster does not answer, or no node can hold one worker."""
    from roboswe.fleet.capacity import Infeasible, plan_workers
    from roboswe.fleet.ray_pool import FleetUnavailable, cluster_nodes

    try:
        return plan_workers(cluster_nodes(address), fleet, tasks, asked)
    except FleetUnavailable as e:
        raise UsageError(str(e)) from None
    except Infeasible as e:
        raise UsageError(f"--ray {address}: no node can hold a worker: {e}") from None


def fleet_actors(actors: tuple[str, ...], workers: int) -> tuple[str, ...]:
    """The actor names of a run with ``workers`` workers: one of each worker kind per worker."""
    from roboswe.config import WORKER_ACTORS, worker_name

    return tuple(worker_name(a, k, workers) if a in WORKER_ACTORS else a
                 for a in actors for k in (range(1, workers + 1) if a in WORKER_ACTORS else (1,)))


def _preflight(args: argparse.Namespace, config: Any, source: Any, manifests: list[Any], backend: str | None,
               run_dir: Path, *, remote_sim: bool) -> None:
    """Refuse (PreflightRefused) before anything starts when the run cannot work; print the notes."""
    from roboswe.evaluation.preflight import HOSTED, preflight

    if getattr(args, "no_preflight", False):
        return
    mode = getattr(args, "preflight", None)
    online = config.provider is not None and config.provider.kind in HOSTED if mode is None else mode == "online"
    where = "-e/--engine" if getattr(args, "engine", None) else f"{source} [series] backend"
    outcome = preflight(provider=config.provider, source=str(source), manifests=manifests, backend=backend,
                        backend_source=where, run_dir=run_dir, remote_sim=remote_sim, online=online)
    for note in outcome.notes:
        echo(f"roboswe run: {note}", file=sys.stderr)
    outcome.raise_for_problems()


def _entry_environment() -> None:
    # Entry-point configuration for the actor processes: headless EGL rendering, numba's cache kept.
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "roboswe" / "numba"))


def run_run(args: argparse.Namespace, *, outcome: bool = True) -> int:
    """``outcome``: print the trial tables at the end (the demo prints its report instead)."""
    from roboswe.evaluation.preflight import PreflightRefused

    try:
        run_dir, config, config_path = prepare_run(args)
    except UsageError as e:
        return _fail("run", str(e))
    except NothingToResume as e:
        echo(f"roboswe run: {e}")
        return 0
    except PreflightRefused as e:
        echo(e.report("run"), file=sys.stderr)
        return 2
    from roboswe.evaluation.job import read_job

    job = read_job(run_dir)
    actors = fleet_actors(tuple(a for a in RUN_ACTORS if a not in _elsewhere(job)), job.workers)
    code, progress = drive(run_dir, config, config_path, actors, "run")
    if outcome and job.rle:
        from roboswe.rle.run import print_rle_outcome

        print_rle_outcome(run_dir)
    elif outcome:
        print_outcome(run_dir)
    return code


def run_verify(args: argparse.Namespace) -> int:
    from roboswe.rle.rundir import is_rle_run

    if is_rle_run(args.run_dir):  # an RLE-Bench run: its own verifier replays it
        from roboswe.rle.commands import verify_rle_run

        return verify_rle_run(args.run_dir)
    import msgspec

    from roboswe.actors.supervisor import run_active
    from roboswe.config import ConfigError, load_config
    from roboswe.evaluation.job import CONFIG_COPY, read_job, write_job

    run_dir = args.run_dir.resolve()
    try:
        job = read_job(run_dir)
        config = load_config(run_dir / CONFIG_COPY)
        active = run_active(run_dir)
    except (FileNotFoundError, ValueError, ConfigError) as e:
        return _fail("verify", str(e))
    if active:
        return _fail("verify", f"{run_dir} is still running (supervisor.json); verify it after the run stops")
    trials = [t.strip() for t in args.trials.split(",")] if args.trials else []
    write_job(run_dir, msgspec.structs.replace(job, kind="verify", trials=trials))
    actors = fleet_actors(tuple(a for a in VERIFY_ACTORS if a not in _elsewhere(job)), job.workers)
    code, progress = drive(run_dir, config, run_dir / CONFIG_COPY, actors, "verify")
    verdicts = print_outcome(run_dir)
    if code == 0 and any(v != "verified" for v in verdicts):
        return 1
    return code


def _elsewhere(job: Any) -> tuple[str, ...]:
    """The actors this machine does not start: a remote simulator (--sim), or each worker's pair on Ray nodes."""
    if job.ray:
        return ("simulator", "sandbox_bridge")
    return ("simulator",) if job.sim_endpoint else ()


def drive(run_dir: Path, config: Any, config_path: Path, actors: tuple[str, ...], command: str) -> tuple[int, Any]:
    """Run the supervisor with ``actors`` until the coordinator's job ends; returns (exit code, last progress)."""
    import trio

    from roboswe.actors.supervisor import Supervisor
    from roboswe.logs import bind_context, configure_logging

    _entry_environment()
    configure_logging(run_dir=run_dir, actor=command, level=config.logging.level, console=False)
    bind_context(run=run_dir.name)
    supervisor = Supervisor(run_dir, config, config_path, actors=actors)
    display = Display(sys.stdout.isatty(), command, run_dir)
    last: list[Any] = [None]
    stopped_for: list[ConfigurationStop | None] = [None]

    async def main() -> int:
        code = [1]
        ready = trio.Event()
        async with trio.open_nursery() as nursery:

            async def supervise() -> None:
                code[0] = await supervisor.run(lambda _s: ready.set())
                nursery.cancel_scope.cancel()

            nursery.start_soon(supervise)
            await ready.wait()
            display.say(f"actors ready ({len(actors)}), run dir {run_dir}")
            last[0], stopped_for[0] = await follow(supervisor, display, stop_on_configuration=command == "run")
            if stopped_for[0] is not None:
                supervisor.request_stop(f"trial {stopped_for[0].trial} ended incomplete for a configuration problem")
            elif last[0] is not None and last[0].state == "done":
                supervisor.request_stop()
            else:
                supervisor.request_stop(last[0].detail if last[0] is not None else "coordinator unreachable")
        return code[0]

    with display:
        code = trio.run(main)
    if stopped_for[0] is not None:
        echo(stopped_for[0].report(run_dir), file=sys.stderr)
        return code or 1, last[0]
    if supervisor.failure:
        echo(f"roboswe {command}: stopped: {supervisor.failure}", file=sys.stderr)
    finished = last[0] is not None and last[0].state in ("done", "failed")
    if not finished:
        echo(f"roboswe {command}: stopped before the job finished; continue with "
             f"`roboswe run --resume {run_dir}`" if command == "run" else f"roboswe {command}: stopped before the job finished",
             file=sys.stderr)
        code = code or 130
    return code, last[0]


class ConfigurationStop:
    """A trial ended incomplete for a cause every later trial would repeat (a refused key, an unknown model)."""

    def __init__(self, trial: int, reason: str):
        self.trial = trial
        self.reason = reason

    @classmethod
    def from_progress(cls, progress: Any) -> ConfigurationStop | None:
        """The stop the coordinator's latest trial end calls for (its typed ``last_end``), or None."""
        end = progress.last_end
        if end is None or end.cause != "configuration":
            return None
        return cls(end.trial, end.detail)

    def report(self, run_dir: Path) -> str:
        return (f"roboswe run: stopped after trial {self.trial}: it ended incomplete for a configuration problem that "
                f"every later trial would repeat:\n  {terminal_safe(self.reason, multiline=False)}\n"
                "fix the provider settings (key variable, model id, base_url), check with `roboswe doctor` and a run's "
                "--preflight online, then start a new run; if only the environment changed (e.g. the key), continue "
                f"this one with `roboswe run --resume {run_dir}`")


async def follow(supervisor: Any, display: Display, *, stop_on_configuration: bool = False) -> tuple[Any, ConfigurationStop | None]:
    """Poll the coordinator until its job is done or failed; tolerates a coordinator restart.

    Returns (last progress, None), or with ``stop_on_configuration`` (progress, stop) as soon as a
    trial ends incomplete for a configuration cause, so the run stops after the first such trial.
    """
    import trio

    from roboswe.actors import Client, PeerDead, ProtocolError, RemoteError
    from roboswe.protocol.coordinator import COORDINATOR_CODEC, GetProgress

    endpoint = supervisor.slots["coordinator"].endpoint
    after = 0
    progress = None
    while True:
        try:
            async with Client("front", endpoint, COORDINATOR_CODEC, peer="coordinator") as link:
                while True:
                    with trio.fail_after(30):
                        progress = (await link.request(GetProgress(after=after))).message
                    if progress.line_count < after:  # a restarted coordinator starts its log afresh
                        after = 0
                        continue
                    after = progress.line_count
                    display.update(progress)
                    stop = ConfigurationStop.from_progress(progress) if stop_on_configuration else None
                    if stop is not None:
                        return progress, stop
                    if progress.state in ("done", "failed"):
                        return progress, None
                    await trio.sleep(0.5)
        except (PeerDead, ProtocolError, RemoteError, trio.TooSlowError) as e:
            display.say(f"coordinator not answering ({type(e).__name__}); waiting for it")
            await trio.sleep(1.0)


class Display:
    """A rich live panel on a terminal; plain timestamped lines otherwise.

    Every line and figure the coordinator sends is printed as one line of text: escaped, never markup.
    """

    def __init__(self, live: bool, command: str, run_dir: Path):
        self.live = live
        self.command = command
        self.run_dir = run_dir
        self.lines: list[str] = []
        self._live = None
        self._progress = None

    def __enter__(self) -> Display:
        if self.live:
            from rich.live import Live

            self._live = Live(self._render(), console=terminal_console(), refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(*exc)

    def say(self, line: str) -> None:
        line = terminal_safe(f"{time.strftime('%H:%M:%S')} {line}", multiline=False)
        self.lines.append(line)
        if self._live is None:
            echo(f"roboswe {self.command}: {line}", flush=True)
        else:
            self._live.update(self._render())

    def update(self, p: Any) -> None:
        self._progress = p
        for line in p.lines:
            line = terminal_safe(line, multiline=False)  # a trial's reason, a divergence naming a script
            self.lines.append(line)
            if self._live is None:
                echo(f"roboswe {self.command}: {line}", flush=True)
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        from roboswe.evaluation.progress import job_figures

        table = Table(show_header=False, box=None, padding=(0, 1))
        p = self._progress
        if p is not None:
            table.add_row("series", plain(f"{p.series_done}/{p.series_total}  {p.task} ({p.mode})", multiline=False))
            table.add_row("trial", f"{p.trial}/{p.trials}")
            table.add_row("operation", plain(p.operation or "-", multiline=False))
            table.add_row("control steps", f"{p.steps_used} / {p.steps_budget}")
            table.add_row("active time", f"{p.active_s:.0f} s / {p.active_budget_s:.0f} s")
            table.add_row("last outcome", plain(p.last_outcome or "-", multiline=False))  # a trial's reason
            so_far = job_figures(p)
            if so_far:
                table.add_row("job", plain(so_far + (f" ({p.cost_note})" if p.cost is None and p.input_tokens else ""),
                                           multiline=False))
            for w in p.running:  # with --workers N > 1: every running series
                table.add_row(f"worker {w.worker}", plain(f"{w.task} trial {w.trial}/{w.trials}  {w.operation or '-'}  "
                                                          f"{w.steps_used}/{w.steps_budget} steps  {w.active_s:.0f} s active",
                                                          multiline=False))
        title = plain(f"roboswe {self.command}  {self.run_dir}", style="bold")
        return Group(title, table, Text("\n".join(self.lines[-10:])))


REASON_WIDTH = 22


def _print_failed_artifacts(reader: Any) -> None:
    """A video the run could not make is a warning with its reason, on stderr, after the tables."""
    from roboswe.records.artifacts import failed_artifact_line, failed_artifacts

    failures = failed_artifacts(reader)
    if failures:
        echo("", file=sys.stderr)
    for failure in failures:
        echo(failed_artifact_line(failure), file=sys.stderr, multiline=False)


def print_outcome(run_dir: Path) -> list[str]:
    """Print each series' trials (outcome, steps, active time, replay verdict); returns the verdicts shown."""
    from roboswe.evaluation.verify import summary
    from roboswe.records.reader import RunReader

    verdicts: list[str] = []
    try:
        reader = RunReader(run_dir)
    except Exception as e:  # noqa: BLE001 - nothing recorded yet
        echo(f"no records in {run_dir}: {e}")
        return verdicts
    with reader:
        for s in reader.series():
            echo(f"\nseries {s.series_id}  task {s.task}  model {s.model}  mode {s.mode}")
            echo(f"  {'trial':>5} {'att':>3} {'outcome':<11} {'reason':<{REASON_WIDTH}} {'steps':>6} {'active s':>8}  replay")
            cut: list[tuple[Any, Any, str]] = []
            for row in summary(reader, s.series_id):
                if row["outcome"] in ("success", "failure"):
                    verdicts.append(row["verdict"] or "unverified")
                reason = terminal_safe(row["reason"] or "", multiline=False)  # cut as it is shown
                if len(reason) > REASON_WIDTH:
                    cut.append((row["trial"], row["attempt"], reason))
                    reason = reason[:REASON_WIDTH - 1] + "…"
                echo(f"  {row['trial']:>5} {row['attempt']:>3} {row['outcome']:<11} {reason:<{REASON_WIDTH}} "
                     f"{row['steps']:>6} {row['active_s']:>8}  {row['verdict'] or '-'}", multiline=False)
            # The reason that matters is often the long one (a provider's error): never only cut off in the table.
            for trial, attempt, reason in cut:
                echo(f"  trial {trial} attempt {attempt}: {reason}", multiline=False)
        _print_failed_artifacts(reader)
    echo(f"\nrun dir: {run_dir}  (roboswe report {run_dir})")
    return verdicts

