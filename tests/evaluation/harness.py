"""Every peer of the coordinator in one trio run, over real runtime links, around the fake simulator.

The simulator (``serve_simulator`` with the ``fake`` backend), the recorder, the context
manager and the provider client are the real actors' handlers, served by real ``Server``s on
ipc sockets in the test's directory. Only the sandbox bridge is a stand-in (``FakeBridge``):
instead of a Python program in a sandbox it runs a *plan file*, a JSON object
``{"actions": [[dx, dy, dz, grip], ...], "say": "text", "clock": false}``, through the
simulator's robot endpoint, with the bridge's rules: a trial must be open, a script path
must stay inside the workspace, at most the script's step limit is applied (then
``limit = "steps"``), an invalid action or an unreadable plan is a failing exit status.
A plan named ``sandbox-dies.json`` is answered with a sandbox Error, as a failed sandbox is.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import trio

from roboswe.actors import Client, Server
from roboswe.actors.context_manager import ContextService
from roboswe.actors.provider_client import provider_handler
from roboswe.actors.recorder import Recorder as RecorderService
from roboswe.actors.simulator import serve_simulator
from roboswe.evaluation.admission import AdmittedTask
from roboswe.evaluation.peers import Bridge, Context, Links, Provider, Recorder, Simulator
from roboswe.evaluation.plan import SeriesPlan
from roboswe.evaluation.series_config import SeriesConfig, effective_budgets
from roboswe.protocol import Decoded
from roboswe.protocol import recorder as rec
from roboswe.protocol import sim as simp
from roboswe.protocol.bridge import (
    BRIDGE_CODEC,
    CloseTrial,
    ExecFeedback,
    ExecScript,
    OpenTrial,
    ScriptException,
    ScriptLimits,
    TrialOpened,
    WorkspaceRequest,
)
from roboswe.bridge.workspaces import NodeWorkspaces
from roboswe.protocol.context import CONTEXT_CODEC
from roboswe.protocol.control import Error, Ok
from roboswe.protocol.provider import PROVIDER_CODEC
from roboswe.protocol.recorder import RECORDER_CODEC
from roboswe.providers import ProviderConfig
from roboswe.providers.local import PythonParticipant
from roboswe.records.reader import RunReader
from roboswe.records.store import RunStore
from roboswe.sandbox.checkpoints import BlobStore
from roboswe.sim.fake.backend import FakeBackend
from roboswe.sim.manifest import TaskManifest, load_manifest

ROOT = Path(__file__).resolve().parents[2]
FAKE_IMAGE = "sha256:" + "fa" * 32  # what the fake bridge reports as its sandbox image (it stands in for bwrap)
RUN_ID = "run"  # the run every in-process series belongs to


def reach_manifest(**budgets: Any) -> dict[str, Any]:
    """The lift-panda manifest re-pointed at the fake family: 4-D actions, gripper and target state."""
    m = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml").to_builtins()
    m["id"] = "fake-reach"
    m["instruction"] = "Move the gripper onto the red target and close it there."
    m["upstream"]["package"] = "fake"
    m["observation"]["proprio"] = ["robot0_eef_pos", "robot0_gripper_qpos"]
    m["observation"]["privileged"] = ["target_pos"]
    m["privileged"] = True
    m["success"]["interval"] = 3
    for key, value in budgets.items():
        scope, _, field = key.partition("_")
        m["budgets"][scope][field] = value
    return m


def admitted_task(manifest: dict[str, Any]) -> AdmittedTask:
    """An admitted task whose reference fingerprint is the fake scene's at the manifest's seed."""
    from roboswe.sim.manifest import manifest_from_builtins

    backend = FakeBackend(manifest_from_builtins(manifest))
    fp = backend.reset(manifest["seed"])
    return AdmittedTask(id=manifest["id"], status="admitted", manifest=manifest,
                        manifest_digest=manifest_from_builtins(manifest).digest(), privileged=True,
                        fingerprint={"digest": fp.digest, "seed": fp.seed})


def admitted_paint(manifest: TaskManifest) -> AdmittedTask:
    """A RoboPaint task admitted with its paint scene's reference fingerprint (no fake family: the real scene)."""
    from roboswe.sim.paint.backend import PaintBackend

    backend = PaintBackend(manifest)
    try:
        fp = backend.reset(manifest.seed)
    finally:
        backend.close()
    return AdmittedTask(id=manifest.id, status="admitted", manifest=manifest.to_builtins(), manifest_digest=manifest.digest(),
                        privileged=False, fingerprint={"digest": fp.digest, "seed": fp.seed})


def series_plan(run_dir: Path, task: AdmittedTask, *, trials: int = 3, retain: str = "retain",
                **config: Any) -> SeriesPlan:
    budgets = effective_budgets(SeriesConfig(trials=trials, retain=retain, **config), task.task_manifest())
    return SeriesPlan(run_id=RUN_ID, series_id=f"{RUN_ID}/{task.id}" + ("" if retain == "retain" else "/fresh"), task=task,
                      budgets=budgets, trials=trials, retain=retain, backend=None, model="python:test",
                      run_dir=str(run_dir))


class FakeBridge:
    """The sandbox bridge's coordinator side, running plan files (see the module docs) instead of programs.

    With ``node_dir`` it keeps the workspaces itself, as a fleet worker's bridge on its node does (the real
    ``bridge.workspaces.NodeWorkspaces``): an OpenTrial names one under it, the workspace requests are its.
    """

    def __init__(self, robot: Client, node_dir: Path | None = None):
        self.robot = robot
        self.trials: dict[str, tuple[Path, ScriptLimits]] = {}
        self.executed: list[str] = []
        self.workspaces = NodeWorkspaces(node_dir) if node_dir is not None else None

    async def handle(self, decoded: Decoded[Any]) -> Any:
        if self.workspaces is not None and isinstance(decoded.message, WorkspaceRequest.__args__):
            return await trio.to_thread.run_sync(self.workspaces.answer, decoded.message, decoded.blobs)
        match decoded.message:
            case OpenTrial(trial=trial, workspace=workspace, limits=limits):
                if trial in self.trials:
                    return Error(code="bad_request", detail=f"trial {trial!r} is already open; close it first")
                where = self.workspaces.path(workspace) if self.workspaces is not None else Path(workspace)
                self.trials[trial] = (where, limits)
                return TrialOpened(trial=trial, backend="bwrap", image_digest=FAKE_IMAGE, bridge_dir="")
            case ExecScript(script=script, trial=trial):
                if trial not in self.trials:
                    return Error(code="bad_request", detail=f"no open trial {trial!r}; open: {sorted(self.trials)}")
                path = PurePosixPath(script)
                if path.is_absolute() or ".." in path.parts:
                    return Error(code="bad_request", detail=f"script {script!r} must be a path relative to the workspace")
                workspace, limits = self.trials[trial]
                self.executed.append(script)
                if path.name == "sandbox-dies.json":  # stands in for a sandbox that fails under the script
                    return Error(code="sandbox", detail="the sandbox died under the script")
                return await self._run(workspace / path, script, limits)
            case CloseTrial(trial=trial):
                if self.trials.pop(trial, None) is None:
                    return Error(code="bad_request", detail=f"trial {trial!r} is not open")
                return Ok()
        return Error(code="unsupported", detail=f"fake bridge does not handle {type(decoded.message).__name__}")

    async def _run(self, file: Path, script: str, limits: ScriptLimits) -> ExecFeedback:
        t0 = time.monotonic()
        steps, limit, stdout, exception = 0, None, "", None
        try:
            plan = json.loads(file.read_text())
            actions = plan.get("actions", [])
            if len(actions) > limits.steps:
                actions, limit = actions[:limits.steps], "steps"
            if actions:
                result = (await self.robot.request(simp.Step(actions=actions))).message
                steps = result.applied
                if result.error is not None:
                    raise ValueError(result.error.detail)
            stdout = f"{plan.get('say', '')}\napplied {steps}\n"
            if plan.get("clock"):
                stdout += f"now {time.time_ns()}\n"  # differs in every run: a replay cannot agree
        except (OSError, ValueError, AttributeError) as e:
            exception = ScriptException(type=type(e).__name__, message=str(e), traceback="")
        return ExecFeedback(script=script, exit_status=1 if exception else 0, stdout=stdout,
                            stderr=f"{exception.type}: {exception.message}\n" if exception else "",
                            stdout_bytes=len(stdout), stderr_bytes=0, stdout_truncated=False, stderr_truncated=False,
                            exception=exception, steps=steps, wall_seconds=time.monotonic() - t0, limit=limit,
                            backend="bwrap")


@asynccontextmanager
async def peers(run_dir: Path, agent: Any, *, context_window: int = 200_000,
                node_dir: Path | None = None) -> AsyncIterator[Links]:
    """Serve every peer in this trio run and yield the coordinator's Links to them.

    ``node_dir``: the bridge keeps the workspaces there, as a Ray worker's does on its node ([fleet] workspaces = "node").
    """
    sock = run_dir / "sock"
    sock.mkdir(parents=True, exist_ok=True)
    ep = {name: f"ipc://{sock}/{name}.sock" for name in ("simulator", "robot", "recorder", "context", "provider", "bridge")}
    config = ProviderConfig(kind="python", context_window=context_window, max_output_tokens=4096)
    participant = PythonParticipant(config, agent=agent)

    async def count(request):
        return await participant.count_tokens(request)

    store = RunStore.open(run_dir)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: serve_simulator(
                "simulator", ep["simulator"], ep["robot"], require_fixed_hash_seed=False, task_status=task_status))
            servers = [
                Server("recorder", ep["recorder"], RECORDER_CODEC, RecorderService(run_dir, store, BlobStore(run_dir / "blobs")).handle,
                       concurrent=False),
                Server("context_manager", ep["context"], CONTEXT_CODEC, ContextService(config, count).handle, concurrent=False),
                Server("provider_client", ep["provider"], PROVIDER_CODEC, provider_handler(participant)),
            ]
            for server in servers:
                await nursery.start(server.serve)
            async with Client("fake_bridge", ep["robot"], simp.SIM_ROBOT_CODEC) as robot:
                bridge = FakeBridge(robot, node_dir)
                await nursery.start(Server("sandbox_bridge", ep["bridge"], BRIDGE_CODEC, bridge.handle).serve)
                async with (
                    Client("coordinator", ep["simulator"], simp.SIM_CODEC) as sim,
                    Client("coordinator", ep["bridge"], BRIDGE_CODEC) as bridge_link,
                    Client("coordinator", ep["recorder"], RECORDER_CODEC) as recorder,
                    Client("coordinator", ep["provider"], PROVIDER_CODEC) as provider,
                    Client("coordinator", ep["context"], CONTEXT_CODEC) as context,
                ):
                    links = Links(sim=Simulator(sim), bridge=Bridge(bridge_link), recorder=Recorder(recorder, RUN_ID),
                                  provider=Provider(provider), context=Context(context),
                                  node_workspaces=run_dir if node_dir is not None else None)
                    links.fake_bridge = bridge  # type: ignore[attr-defined]  (tests look at what it ran)
                    yield links
                    await links.recorder.flush()
            nursery.cancel_scope.cancel()
    finally:
        store.close()


async def record_run(links: Links) -> None:
    """The run's row, written durably before a series: the series and trial rows refer to it."""
    await links.recorder.durable(rec.RunRecord(run_id=RUN_ID, created_at=time.time(), admitted_sha256="0" * 64, config={}))


def reader_factory(run_dir: Path) -> Callable[[], RunReader]:
    return lambda: RunReader(run_dir)
