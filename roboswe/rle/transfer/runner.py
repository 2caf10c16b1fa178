"""A harness-transfer run end to end on the trusted side: develop, seal, the fresh agents and the control, verify.

Family 02's own small trusted runner, in one process, as family 01's is (roboswe/rle/kitchen/runner.py):
the scripted participants act through ``TransferRobot`` (the robot subset's messages answered by the
``DevelopmentSim`` with the practice scene during development, and by one ``TransferTrialSim`` per fresh
agent), not from sandboxed scripts through the actors. The fresh-agent step is the protocol's
(roboswe/rle/fresh.py): a new participant per attempt, a new workspace holding only the sealed harness
(or nothing, for the control), removed afterwards. The run directory:

    rle.json task.json sealed.json artifact/ ledger.jsonl   (the development, sealed: rundir.write_submission)
    development.messages.jsonl                              (what the developer was told, every answer as JSON)
    agents/<agent>.messages.jsonl                           (what each fresh agent was told)
    transfer.json                                           (the trusted side's stage records, one per agent)
    report.json                                             (verify.py's report, seeds revealed)
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import msgspec
import numpy as np

from roboswe.protocol import sim as simp
from roboswe.protocol.control import Error

from .. import rundir
from ..fresh import run_fresh
from ..ledger import Ledger, decode_rows, encode_rows
from ..manifest import RleTask
from ..report import RewardReport
from ..seal import seal_directory
from ..seeds import Salt
from .plan import hidden_plan
from .trial import TRANSFER, StageRecord, TransferRecord, TransferTrialSim
from .verify import verify_run

DEVELOPER_MESSAGES = "development.messages.jsonl"
AGENTS = "agents"


class Refused(RuntimeError):
    """The simulator refused a call (``code``: reset, invalid_action, limit_reached, refused)."""

    def __init__(self, code: str, detail: str):
        super().__init__(f"{code}: {detail}")
        self.code = code


class TransferRobot:
    """What ``import robot`` offers a participant here: the robot calls, and ``finish_trial`` in a trial."""

    def __init__(self, sim: Any, seen: list[str] | None = None):
        self.sim, self.seen = sim, seen  # seen: where a simulator without its own record keeps the answers

    def _ask(self, message):
        reply, blobs = self.sim.answer(message)
        if self.seen is not None:
            self.seen.append(msgspec.json.encode(reply).decode())
        if isinstance(reply, Error):
            raise Refused(reply.code, reply.detail)
        return reply, blobs

    def spec(self) -> simp.TaskSpec:
        return self._ask(simp.GetSpec())[0]

    def state(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(v, dtype=float) for k, v in self._ask(simp.GetState())[0].values.items()}

    def observe(self, depth: bool = True) -> dict[str, dict[str, np.ndarray]]:
        obs, blobs = self._ask(simp.Observe(depth=depth))
        out = {}
        for im in obs.images:
            view = {"rgb": np.frombuffer(blobs[im.rgb_blob], np.uint8).reshape(im.height, im.width, 3),
                    "K": np.asarray(im.K), "T_world_camera": np.asarray(im.T_world_camera)}
            if im.depth_blob is not None:
                view["depth"] = np.frombuffer(blobs[im.depth_blob], "<f4").reshape(im.height, im.width)
            out[im.camera] = view
        return out

    def step_many(self, rows) -> dict[str, np.ndarray]:
        reply, _ = self._ask(simp.Step(actions=[[float(v) for v in row] for row in rows]))
        return {k: np.asarray(v, dtype=float) for k, v in reply.values.items()}

    def reset(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(v, dtype=float) for k, v in self._ask(simp.Reset())[0].values.items()}

    def finish_trial(self) -> str:
        if not hasattr(self.sim, "finish_trial"):
            raise Refused("refused", "there is no trial to finish in development")
        return self.sim.finish_trial()


class Developer(Protocol):
    def develop(self, robot: TransferRobot, workspace: Path, brief: str) -> dict: ...


class FreshAgent(Protocol):
    def attempt(self, robot: TransferRobot, workspace: Path, brief: str) -> dict: ...


def _write_messages(path: Path, messages: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(msgspec.json.encode(m) + b"\n" for m in messages))


def read_messages(path: Path) -> list[str]:
    return [msgspec.json.decode(line) for line in path.read_bytes().splitlines() if line.strip()]


def develop_and_seal(task: RleTask, developer: Developer, run_dir: Path, figures: dict) -> None:
    """The development phase on the practice composites, then the harness sealed and the ledger closed over it."""
    from ..scene import DevelopmentSim
    from .scene import TransferDevelopmentScene

    with tempfile.TemporaryDirectory(prefix="rle-transfer-dev-") as tmp:
        workspace = Path(tmp)
        live = run_dir / "ledger.live.jsonl"
        t0 = time.monotonic()
        sim = DevelopmentSim(task, record=live, scene=TransferDevelopmentScene(task))
        seen: list[str] = []
        try:
            brief = sim.spec().instruction
            seen.append(brief)
            figures["develop"] = developer.develop(TransferRobot(sim, seen), workspace, brief)
        finally:
            sim.close()
        figures["develop_seconds"] = round(time.monotonic() - t0, 2)
        _write_messages(run_dir / DEVELOPER_MESSAGES, seen)
        sealed, contents = seal_directory(workspace, task.artifact)
    ledger = Ledger.resume(decode_rows(live.read_bytes()) if live.exists() else [], task.budget.charged_steps)
    ledger.seal(sealed.digest)
    figures["development_steps"] = ledger.spent
    figures["sealed_files"] = [f.path for f in sealed.files]
    rundir.write_submission(run_dir, task, sealed, contents, encode_rows(ledger.rows))
    live.unlink(missing_ok=True)


def _attempt(task: RleTask, plan, run_dir: Path, arm: str, figures: dict) -> Callable[..., StageRecord]:
    """One fresh agent's trial: its hidden kitchen, its brief, its attempt; an agent's exception is its failure."""
    def attempt(name: str, agent: FreshAgent, workspace: Path, handoff: str) -> StageRecord:
        kitchen = plan.kitchens[int(name.rsplit("_", 1)[1]) - 1]
        sim = TransferTrialSim(task, kitchen, agent=name, arm=arm, handoff_digest=handoff)
        files = sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file())
        error, outcome = None, None
        try:
            outcome = agent.attempt(TransferRobot(sim), workspace, sim.brief(files))
        except Exception as e:  # noqa: BLE001 - the agent's code failing is that trial's failure, not the harness's
            error = f"{type(e).__name__}: {e}"
        record = sim.close(error)
        _write_messages(run_dir / AGENTS / f"{name}.messages.jsonl", sim.visible)
        figures.setdefault("agents", {})[name] = {"outcome": outcome, "error": error, "ended": record.ended,
                                                  "actions": len(record.rows), "seconds": record.seconds}
        return record
    return attempt


def run_transfer(task: RleTask, developer: Developer, make_agent: Callable[[], FreshAgent], salt: Salt, run_dir: Path,
                 make_control: Callable[[], FreshAgent] | None = None) -> tuple[RewardReport, dict]:
    """Develop, seal, the fresh agents with the harness and (``make_control``, default ``make_agent``) the control
    agents with an empty workspace, verify. Returns the report and the phases' figures."""
    run_dir.mkdir(parents=True, exist_ok=True)
    figures: dict = {}
    develop_and_seal(task, developer, run_dir, figures)
    plan, rules = hidden_plan(task, salt), task.transfer
    trials: list[StageRecord] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rle-transfer-fresh-") as tmp:
        names = [f"agent_{k + 1}" for k in range(rules.agents)]
        trials += run_fresh(names, make_agent, _attempt(task, plan, run_dir, "harness", figures),
                            root=Path(tmp) / "harness", restore_from=run_dir)
        figures["harness_seconds"] = round(time.monotonic() - t0, 2)
        if rules.control:
            t0 = time.monotonic()
            names = [f"control_{k + 1}" for k in range(rules.agents)]
            trials += run_fresh(names, make_control or make_agent, _attempt(task, plan, run_dir, "control", figures),
                                root=Path(tmp) / "control", restore_from=None)
            figures["control_seconds"] = round(time.monotonic() - t0, 2)
    record = TransferRecord(task=task.id, heldout=rules.heldout.name, plan_commitment=plan.commitment, trials=tuple(trials))
    (run_dir / TRANSFER).write_bytes(msgspec.json.encode(record))
    t0 = time.monotonic()
    report = verify_run(run_dir, salt)
    figures["verify_seconds"] = round(time.monotonic() - t0, 2)
    rundir.write_report(run_dir, report)
    return report, figures
