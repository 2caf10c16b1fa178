"""A speed-run end to end on the trusted side: develop, seal, evaluate in the hidden kitchens, verify.

This is family 01's own small trusted runner, in one process: the scripted participant acts through
``KitchenRobot`` (the robot subset's messages answered by the ``DevelopmentSim`` with
``KitchenDevelopmentScene`` during development and by ``EvaluationSim`` during evaluation), not from a
sandboxed script through the actors; the evaluation phase does not run through the actors yet. The
run directory:

    rle.json task.json sealed.json artifact/ ledger.jsonl   (the development, sealed: rundir.write_submission)
    evaluation.json                                          (the trusted side's trial record)
    report.json                                              (verify.py's report, seeds revealed)
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np

from roboswe.protocol import sim as simp
from roboswe.protocol.control import Error

from .. import rundir
from ..ledger import Ledger, decode_rows, encode_rows
from ..manifest import RleTask
from ..report import RewardReport
from ..seal import seal_directory
from ..seeds import Salt
from .development import KitchenDevelopmentScene, workspace_files
from .evaluation import EVALUATION, EvaluationSim
from .plan import hidden_plan
from .verify import verify_run


class Refused(RuntimeError):
    """The simulator refused a call (``code``: reset, invalid_action, limit_reached, refused)."""

    def __init__(self, code: str, detail: str):
        super().__init__(f"{code}: {detail}")
        self.code = code


class KitchenRobot:
    """The participant's robot in either phase (the same calls ``import robot`` offers, plus the phase's)."""

    def __init__(self, sim, *, phase: str):
        self.sim, self.phase = sim, phase

    def _ask(self, message):
        reply, blobs = self.sim.answer(message)
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
        """One batch (1..200 rows, within the allowance; else refused whole)."""
        reply, _ = self._ask(simp.Step(actions=[[float(v) for v in row] for row in rows]))
        return {k: np.asarray(v, dtype=float) for k, v in reply.values.items()}

    def reset(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(v, dtype=float) for k, v in self._ask(simp.Reset())[0].values.items()}

    @property
    def trials(self) -> int:
        """The evaluation's trial count (the manifest's, public: RLE-Bench's five)."""
        return self.sim.rules.trials

    def finish_trial(self) -> str:
        return self.sim.finish_trial()

    def next_trial(self) -> str:
        return self.sim.next_trial()


class Participant:
    """What a scripted participant does in each phase; ``develop`` may write into its workspace."""

    def develop(self, robot: KitchenRobot, workspace: Path) -> dict: ...

    def evaluate(self, robot: KitchenRobot, workspace: Path) -> dict: ...


def run_speedrun(task: RleTask, participant: Participant, salt: Salt, run_dir: Path,
                 on_evaluation: Callable[[EvaluationSim], None] | None = None) -> tuple[RewardReport, dict]:
    """Develop, seal, evaluate, verify; the run directory written. Returns the report and the phases' figures."""
    from ..scene import DevelopmentSim

    run_dir.mkdir(parents=True, exist_ok=True)
    figures: dict = {}
    with tempfile.TemporaryDirectory(prefix="rle-speedrun-") as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        for name, data in workspace_files(task.kitchen.level).items():
            (workspace / name).write_bytes(data)
        live = run_dir / "ledger.live.jsonl"
        t0 = time.monotonic()
        scene = KitchenDevelopmentScene(task)
        sim = DevelopmentSim(task, record=live, scene=scene)
        figures["scene_build_seconds"] = round(time.monotonic() - t0, 2)
        try:
            t0 = time.monotonic()
            figures["develop"] = participant.develop(KitchenRobot(sim, phase="develop"), workspace)
            figures["develop_seconds"] = round(time.monotonic() - t0, 2)
        finally:
            sim.close()
        sealed, contents = seal_directory(workspace, task.artifact)
        ledger = Ledger.resume(decode_rows(live.read_bytes()) if live.exists() else [], task.budget.charged_steps)
        ledger.seal(sealed.digest)
        figures["development_steps"] = ledger.spent
        rundir.write_submission(run_dir, task, sealed, contents, encode_rows(ledger.rows))
        live.unlink(missing_ok=True)
        # the evaluation phase: the participant keeps its workspace (RLE-Bench: both steps share /workspace)
        t0 = time.monotonic()
        evaluation = EvaluationSim(task, hidden_plan(task, salt))
        try:
            figures["evaluate"] = participant.evaluate(KitchenRobot(evaluation, phase="evaluate"), workspace)
        finally:
            record = evaluation.close()
        figures["evaluate_seconds"] = round(time.monotonic() - t0, 2)
        if on_evaluation is not None:
            on_evaluation(evaluation)
    (run_dir / EVALUATION).write_bytes(msgspec.json.encode(record))
    t0 = time.monotonic()
    report, diffs = verify_run(run_dir, salt)
    figures["verify_seconds"] = round(time.monotonic() - t0, 2)
    figures["replay_differences"] = diffs
    rundir.write_report(run_dir, report)
    return report, figures


def fixed_hash_seed() -> bool:
    """RoboCasa's scene depends on set/dict order: live run and replay must share PYTHONHASHSEED=0."""
    return os.environ.get("PYTHONHASHSEED") == "0"
