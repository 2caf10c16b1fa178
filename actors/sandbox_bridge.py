"""The sandbox bridge actor: its message loop. Owns each trial's sandbox and the only door from authored
code to the robot; the trial itself (sandbox, bridge socket, door, feedback) is ``roboswe.bridge.trial``.

The coordinator sends OpenTrial / ExecScript / CloseTrial on the actor's endpoint; each open trial
is held by a task of the loop's nursery until its CloseTrial (or the actor's stop).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog
import trio
from roboswe.actors import Actor, actor_main, client_keys, robot_endpoint, robot_link
from roboswe.bridge.trial import TrialSandbox, open_trial
from roboswe.bridge.workspaces import NodeWorkspaces
from roboswe.protocol import Decoded, Message
from roboswe.protocol.bridge import (
    BRIDGE_CODEC,
    CaptureWorkspace,
    CloseTrial,
    DropWorkspace,
    ExecScript,
    FreshWorkspace,
    OpenTrial,
    RestoreWorkspace,
    TrialOpened,
    WorkspaceCarried,
    WorkspaceList,
    WorkspaceRead,
    WorkspaceWrite,
)
from roboswe.sandbox.workspace import WorkspaceError
from roboswe.protocol.control import Error, Ok
from roboswe.sandbox import SandboxError, remove_orphan_containers
from roboswe.sandbox.volume import WORKSPACE_MB
from roboswe.sandbox.volume import sweep as sweep_volumes

log = structlog.get_logger()


def _sim_curve(keys_dir: str | None) -> Any:
    """CURVE client keys for a remote simulator's robot endpoint (OpenTrial.sim_keys), or None."""
    return client_keys(keys_dir) if keys_dir else None


async def main(actor: Actor, *, workspace_mb: int | None = WORKSPACE_MB, workspace_root: Path | None = None) -> None:
    """The bridge's message loop; ``workspace_mb`` None: trials get no sized workspace volume (a fleet worker on
    another host than the coordinator: a loop mount there would hide the coordinator's writes to the shared run dir).
    ``workspace_root``: a fleet worker that keeps its workspaces on its own node (bridge/workspaces.py); an
    OpenTrial's workspace is then a name under it. None: the coordinator writes them, OpenTrial names a host path."""
    workspaces = NodeWorkspaces(workspace_root) if workspace_root is not None else None
    # trial id -> (its sandbox, set to close it, set once it is fully closed)
    trials: dict[str, tuple[TrialSandbox, trio.Event, trio.Event]] = {}
    # Containers and workspace volumes a crashed bridge or a killed `roboswe exec` left behind:
    # removed before serving.
    with trio.move_on_after(30):
        await trio.to_thread.run_sync(remove_orphan_containers, abandon_on_cancel=True)
        await trio.to_thread.run_sync(sweep_volumes, abandon_on_cancel=True)

    async with trio.open_nursery() as nursery:

        async def hold_trial(msg: OpenTrial, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
            close, closed = trio.Event(), trio.Event()
            endpoint = msg.sim_endpoint or robot_endpoint(actor.endpoints["simulator"])
            transport = actor.config.transport
            started = False
            try:
                async with robot_link(
                    endpoint, heartbeat_interval=transport.heartbeat_interval,
                    liveness=max(transport.heartbeat_liveness, 5), curve=_sim_curve(msg.sim_keys),
                ) as sim, open_trial(
                    msg.trial, workspaces.path(msg.workspace) if workspaces else Path(msg.workspace), sim, backend=msg.backend, limits=msg.limits, workspace_mb=workspace_mb,
                    resets=actor.config.rle is not None,  # an RLE-Bench run's development phase; never a series
                ) as t:  # fmt: skip
                    trials[msg.trial] = (t, close, closed)
                    started = True
                    task_status.started(t)
                    await close.wait()
            except Exception:
                if not started:
                    raise  # nursery.start hands it to the OpenTrial handler
                log.exception("trial_failed", trial=msg.trial)  # the actor keeps serving other trials
            finally:
                trials.pop(msg.trial, None)
                closed.set()

        async def handle(decoded: Decoded) -> Message:
            match decoded.message:
                case (FreshWorkspace() | RestoreWorkspace() | WorkspaceWrite() | WorkspaceRead() | WorkspaceList()
                      | CaptureWorkspace() | WorkspaceCarried() | DropWorkspace()) as msg:
                    if workspaces is None:
                        return Error(code="unsupported", detail="this bridge keeps no workspaces of its own: the "
                                                                "coordinator writes them ([fleet] workspaces = \"shared\")")
                    return await trio.to_thread.run_sync(workspaces.answer, msg, decoded.blobs)
                case OpenTrial() as msg:
                    if msg.trial in trials:
                        return Error(code="bad_request", detail=f"trial {msg.trial!r} is already open; close it first")
                    try:
                        t = await nursery.start(hold_trial, msg)
                    except WorkspaceError as e:
                        return Error(code="bad_request", detail=f"trial {msg.trial!r}: workspace {msg.workspace!r}: {e}")
                    except Exception as e:  # noqa: BLE001 - reported to the coordinator, the actor keeps serving
                        log.exception("trial_open_failed", trial=msg.trial)
                        return Error(code="sandbox", detail=f"could not open trial {msg.trial!r}: {e}")
                    return TrialOpened(trial=msg.trial, backend=t.backend.name, image_digest=t.backend.image.digest, bridge_dir=str(t.bridge_dir))
                case ExecScript(script=script, limits=limits, trial=trial):
                    if trial is None and len(trials) == 1:
                        trial = next(iter(trials))
                    if trial not in trials:
                        return Error(code="bad_request", detail=f"no open trial {trial!r}; open: {sorted(trials)}")
                    t = trials[trial][0]
                    try:
                        return await t.exec(script, limits)
                    except ValueError as e:
                        return Error(code="bad_request", detail=str(e))
                    except SandboxError as e:
                        log.error("sandbox_failed", trial=trial, script=script, error=str(e))
                        return Error(code="sandbox", detail=str(e))
                case CloseTrial(trial=trial):
                    entry = trials.get(trial)
                    if entry is None:
                        return Error(code="bad_request", detail=f"trial {trial!r} is not open")
                    _t, close, closed = entry
                    close.set()
                    with trio.move_on_after(60):
                        await closed.wait()  # the container is removed before the coordinator hears Ok
                    return Ok()
            return Error(code="unsupported", detail=f"sandbox_bridge does not handle {type(decoded.message).__name__}")

        await actor.serve(BRIDGE_CODEC, handle)
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    actor_main("sandbox_bridge", main)
