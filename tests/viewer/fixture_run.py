"""A real run database for viewer and report tests, until `roboswe run` writes them.

Everything is real except the participant's decisions, which are scripted: a robosuite
Lift scene is stepped for each trial's exec/wait operations, its per-step states are
stored as ControlTraces, workspace checkpoints are captured into real blobs, and the
videos are rendered from the recorded states by roboswe.records.video (real mp4 + sidecar index).
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import msgspec
from roboswe.protocol.participant import (
    DecisionRequest,
    ImagePart,
    OpaquePart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Turn,
    image_part,
)
from roboswe.protocol.recorder import (
    BlobRecord,
    CheckpointRecord,
    EventRecord,
    MessageRecord,
    OperationRecord,
    RunPins,
    RunRecord,
    SeriesRecord,
    SlideRecord,
    TrialEnded,
    TrialStarted,
    VerificationRecord,
)
from roboswe.sim.physics_state import control_trace

from roboswe.evaluation.observation import encode_png
from roboswe.records.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "fixture-run"
LIFT = "lift-panda"
STACK = "stack-panda"
BIG_TRIAL_OPS = 1500  # trial 5 of Lift: a chatty participant, to exercise lazy loading

SCRIPT_V1 = """import robot

for _ in range(20):
    robot.step([0.0, 0.0, -0.4, 0, 0, 0, -1])
"""
SCRIPT_V2 = """import robot

# go lower, then close the gripper
for _ in range(20):
    robot.step([0.1, 0.0, -0.5, 0, 0, 0, 1])
"""
OUTCOMES = {1: "failure", 2: "success", 3: "success", 4: "success", 5: "success"}
VERDICTS = {1: "verified", 2: "verified", 3: "verified", 4: "mismatch", 5: "verified"}
EXEC_STEPS, WAIT_STEPS = 20, 6
PRICE = {"input": 3.0, "output": 15.0, "currency": "USD"}  # per million tokens
SLIDE = {"before_units": 190_000, "after_units": 12_000, "removed": ["m1", "m2", "m3", "m4"]}  # on Lift trial 2
VIDEO_TRIALS = (2, 5)  # rendering costs ~0.1-0.2 s per frame on a shared CPU; the others show "no video"
SYSTEM = "You control a Panda arm through a sandboxed workspace. <b>Budgets</b> follow."
# Participant-controlled text with markup in it, on Lift trial 2's observe decision: the pages must show it as text.
HOSTILE = ('</textarea></pre><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
           "<!-- & ' \"")


def lift_manifest():
    from roboswe.sim.manifest import load_manifest

    return load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")


class _Builder:
    def __init__(self, run_dir: Path, store: RunStore):
        from roboswe.sandbox.checkpoints import BlobStore

        self.run_dir = run_dir
        self.store = store
        self.blobs = BlobStore(run_dir / "blobs")
        self.clock = 1_764_500_000.0
        self.msg_n = 0

    def tick(self, seconds: float = 0.5) -> float:
        self.clock += seconds
        return self.clock

    def checkpoint(self, trial_id: str, workspace: Path, label: str, op_seq: int | None) -> None:
        from roboswe.sandbox.checkpoints import capture

        cap = capture(workspace, self.blobs)
        now = self.tick(0.01)
        for sha, size in cap.new_blobs:
            self.store.put(BlobRecord(sha256=sha, size=size, stored_at=now))
        self.store.put(CheckpointRecord(
            checkpoint_id=f"{trial_id}/cp{op_seq if op_seq is not None else 'start'}", trial_id=trial_id,
            label=label, op_seq=op_seq, manifest_sha256=cap.manifest_sha256, files=len(cap.manifest.entries),
            total_bytes=cap.manifest.total_bytes, manifest=cap.manifest_bytes, created_at=now))

    def turn(self, trial_id: str, turn: Turn) -> None:
        """The turn event the trial loop records for each turn of the conversation (the transcript's source)."""
        self.store.put(EventRecord(run_id=RUN_ID, event="turn", at=self.tick(0.01), trial_id=trial_id,
                                   data={"turn": msgspec.to_builtins(turn)}))

    def message(self, trial_id: str, op_name: str, arguments: dict, *, hosted: bool = False, text: str = "") -> str:
        """A provider call deciding one operation: python participant Turn JSON, or Anthropic-shaped bytes;
        the request carries the system prompt as each provider's body does."""
        self.msg_n += 1
        mid = f"{trial_id}/m{self.msg_n}"
        requested = self.tick(0.2)
        if hosted:
            provider = "anthropic"
            response = json.dumps({
                "id": f"msg_{self.msg_n}", "type": "message", "role": "assistant", "model": "claude-fixture",
                "content": [
                    {"type": "thinking", "thinking": "The cube is below the gripper; I should descend first.",
                     "signature": "OPAQUE-SIGNATURE-never-shown"},
                    {"type": "text", "text": "I will rewrite the script to go lower and close the gripper."},
                    {"type": "tool_use", "id": f"toolu_{self.msg_n}", "name": op_name, "input": arguments},
                ],
                "usage": {"input_tokens": 1200, "output_tokens": 80},
            }).encode()
            request = json.dumps({"model": "claude-fixture", "system": SYSTEM, "messages": []}).encode()
            parts = [ReasoningPart(text="The cube is below the gripper; I should descend first."),
                     OpaquePart(provider="anthropic", kind="thinking", data=b'{"signature": "OPAQUE-SIGNATURE"}'),
                     TextPart(text="I will rewrite the script to go lower and close the gripper.")]
        else:
            provider = "python"
            parts = [TextPart(text=f"Next: {op_name}." + text)]
            response = msgspec.json.encode(Turn(id=f"turn-{self.msg_n}", role="assistant", provider="python", parts=[
                *parts, ToolCallPart(call_id=f"call-{self.msg_n}", name=op_name, arguments=json.dumps(arguments))]))
            request = msgspec.json.encode(DecisionRequest(system=SYSTEM, tools=[], conversation=[]))
        self.turn(trial_id, Turn(id=f"turn-{self.msg_n}", role="assistant", provider=provider, parts=[
            *parts, ToolCallPart(call_id=f"call-{self.msg_n}", name=op_name, arguments=json.dumps(arguments))]))
        self.store.put(MessageRecord(message_id=mid, trial_id=trial_id, provider=provider, model="fixture",
                                     request=request,
                                     response=response, requested_at=requested, responded_at=requested + 0.1,
                                     latency=0.1, usage={"input_tokens": 10}))
        return mid

    def op(self, trial_id: str, seq: int, name: str, arguments: dict, feedback: dict, steps: tuple[int, int],
           *, hosted: bool = False, text: str = "", images: tuple[ImagePart, ...] = ()) -> None:
        mid = self.message(trial_id, name, arguments, hosted=hosted, text=text)
        started = self.tick(0.05)
        self.store.put(OperationRecord(trial_id=trial_id, seq=seq, operation=name, arguments=arguments,
                                       feedback=feedback, step_start=steps[0], step_end=steps[1],
                                       started_at=started, ended_at=self.tick(0.3), message_id=mid))
        self.turn(trial_id, Turn(id=f"{trial_id}/u-{seq}", role="user", parts=[ToolResultPart(
            call_id=f"call-{self.msg_n}", text=str(feedback.get("text", "")), images=list(images))]))


def _save_recovery(run_dir: Path, trial_id: str) -> None:
    """`roboswe recovery`'s stored diagnostic for Lift trial 2, in its own shape (mishap_row, tally): the cube
    slipped during the exec and was lifted again, then slipped during the wait and stayed down (censored)."""
    from roboswe.records.recovery import (
        LABEL,
        STORED_NAME,
        Mishap,
        mishap_row,
        save_recovery,
        tally,
    )

    mishaps = [Mishap(rule="cube lifted", step=12, time=0.6, peak=0.04, level=0.0, recovered_step=18, recovered_time=0.9),
               Mishap(rule="cube lifted", step=22, time=1.1, peak=0.05, level=0.01, censored_at=EXEC_STEPS + WAIT_STEPS)]
    trial = {"trial_id": trial_id, "index": 2, "attempt": 0, "outcome": "success", "error": "",
             "last_step": EXEC_STEPS + WAIT_STEPS, "events": [mishap_row(m) for m in mishaps], **tally(mishaps)}
    save_recovery(run_dir, {"label": LABEL, "rules_file": STORED_NAME, "rules_sha256": "0" * 64, "run_id": RUN_ID,
                            "series": [{"series_id": f"{RUN_ID}/{LIFT}", "task": LIFT, "model": "fixture",
                                        "mode": "retain", "rules": ["cube lifted"], "trials": [trial], **tally(mishaps)}],
                            "without_rules": [STACK]})


def build_run(run_dir: str | Path, *, videos: bool = True, big_trial_ops: int = BIG_TRIAL_OPS) -> dict:
    """Write RUN_DIR/run.sqlite (+ blobs, videos); returns {'run_dir', 'run_id', 'lift': [trial ids], ...}."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    from roboswe.sim.backend import create_backend

    from roboswe.records.video import VideoWorker

    run_dir = Path(run_dir)
    manifest = lift_manifest()
    store = RunStore.open(run_dir, flush_interval=0.05)
    b = _Builder(run_dir, store)
    info: dict = {"run_dir": run_dir, "run_id": RUN_ID, "lift": [], "stack": []}
    store.put(RunRecord(run_id=RUN_ID, created_at=b.clock, config=RunPins(
        backend="bwrap",
        run_config={"provider": {"kind": "anthropic", "model": "claude-fixture", "context_window": 200_000,
                                 "max_output_tokens": 16_384, "price": PRICE}}),
                        admitted_sha256="ab" * 32, roboswe_version="0.1.0"))
    lift_series, stack_series = f"{RUN_ID}/{LIFT}", f"{RUN_ID}/{STACK}"
    store.put(SeriesRecord(series_id=lift_series, run_id=RUN_ID, task=LIFT, model="fixture", mode="retain",
                           created_at=b.tick(), pins={"manifest": manifest.digest()}))
    store.put(SeriesRecord(series_id=stack_series, run_id=RUN_ID, task=STACK, model="fixture", mode="retain",
                           created_at=b.tick()))
    sim = create_backend("robosuite", manifest)
    worker = VideoWorker() if videos else None  # the real path: rendering in another process
    pending = []
    workspace = run_dir.parent / f"{run_dir.name}-workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    try:
        for t in range(1, 6):
            trial_id = f"{lift_series}/t{t}a0"
            info["lift"].append(trial_id)
            fingerprint = sim.reset(manifest.seed + t)
            store.put(TrialStarted(trial_id=trial_id, series_id=lift_series, index=t, fingerprint=fingerprint.digest,
                                   started_at=b.tick()))
            b.checkpoint(trial_id, workspace, "trial_start", None)
            b.turn(trial_id, Turn(id=f"{trial_id}/u-open", role="user", trial=t, pinned=t == 1, parts=[TextPart(
                text=(f"Trial {t} of 5." if t == 1 else f"Trial {t} of 5. The previous trial ended: {OUTCOMES[t - 1]}.")
                + " Lift the cube.")]))
            seq = 0
            script = SCRIPT_V1 if t == 1 else SCRIPT_V2
            if t <= 2:
                (workspace / "lift.py").write_text(script)
                b.op(trial_id, seq, "write_file", {"path": "lift.py", "content": script},
                     {"text": f"wrote lift.py ({len(script)} bytes)"}, (0, 0), hosted=(t == 2))
                b.checkpoint(trial_id, workspace, "after_write", seq)
                seq += 1
            (frame,) = sim.observe(["agentview"], depth=False)
            png = encode_png(frame.rgb)
            part = image_part(png, "agentview")
            store.put(EventRecord(run_id=RUN_ID, event="image", at=b.tick(), trial_id=trial_id,
                                  data={"digest": part.digest, "camera": "agentview", "media_type": part.media_type,
                                        "data": base64.b64encode(png).decode()}))
            b.op(trial_id, seq, "observe", {"cameras": ["agentview"], "depth": False},
                 {"cameras": ["agentview"], "images": [part.digest], "text": "1 image (agentview 256x256)"}, (0, 0),
                 text=HOSTILE if t == 2 else "", images=(part,))
            seq += 1
            action = [0.0, 0.0, -0.4, 0, 0, 0, -1] if t == 1 else [0.1, 0.0, -0.5, 0, 0, 0, 1]
            out = sim.step([action] * EXEC_STEPS)
            (workspace / "notes.txt").write_text(f"trial {t}: descended {out.applied} steps\n")
            b.op(trial_id, seq, "exec", {"path": "lift.py"},
                 {"exit_status": 0, "stdout": f"stepped {out.applied}\n", "stderr": "", "steps": out.applied,
                  "text": f"exit 0 after {out.applied} control steps"}, (0, EXEC_STEPS))
            b.checkpoint(trial_id, workspace, "after_exec", seq)
            seq += 1
            sim.wait(WAIT_STEPS)
            b.op(trial_id, seq, "wait", {"steps": WAIT_STEPS}, {"text": f"waited {WAIT_STEPS} steps"},
                 (EXEC_STEPS, EXEC_STEPS + WAIT_STEPS))
            seq += 1
            if t == 2:  # a context slide before the next decision, and the count that led to it
                store.put(EventRecord(run_id=RUN_ID, event="request_count", at=b.tick(), trial_id=trial_id,
                                      data={"trial": t, "method": "anthropic.count_tokens:whole_request",
                                            "units": SLIDE["before_units"], "exact_tokens": SLIDE["before_units"]}))
                store.put(SlideRecord(trial_id=trial_id, seq=0, at=b.tick(), method="anthropic.count_tokens:whole_request",
                                      **{**SLIDE, "removed": [f"{trial_id}/u-open", f"{trial_id}/u-0", *SLIDE["removed"][2:]]}))
            if t == 5:
                for i in range(big_trial_ops):
                    name = "read_file" if i % 2 else "list_files"
                    args = {"path": "notes.txt"} if i % 2 else {}
                    started = b.tick(0.01)
                    store.put(OperationRecord(trial_id=trial_id, seq=seq, operation=name, arguments=args,
                                              feedback={"text": f"bulk result {i}"}, step_start=EXEC_STEPS + WAIT_STEPS,
                                              step_end=EXEC_STEPS + WAIT_STEPS, started_at=started,
                                              ended_at=b.tick(0.01)))
                    seq += 1
            b.op(trial_id, seq, "finish", {"reason": "done"}, {"text": "trial ends"},
                 (EXEC_STEPS + WAIT_STEPS, EXEC_STEPS + WAIT_STEPS))
            states = sim.take_states()
            store.put(control_trace(trial_id, 0, int(states.step[0]), {
                "step": states.step, "time": states.time, "qpos": states.qpos, "qvel": states.qvel,
                "act": states.act, "mocap_pos": states.mocap_pos, "mocap_quat": states.mocap_quat,
                "action": states.action}))
            steps = EXEC_STEPS + WAIT_STEPS
            outcome = OUTCOMES[t]
            ended = b.tick(2.0)
            store.put(TrialEnded(trial_id=trial_id, outcome=outcome, reason="finish", cause="finish",
                                 control_steps=steps, sim_time=steps / manifest.control_hz, active_time=4.0 + t,
                                 timing={"provider": 1.0 + 0.1 * t, "execution": 1.5, "transport": 0.05,
                                         "physics": 0.3, "rendering": 0.2, "waits": 0.1},
                                 success_interval=(16, 25) if outcome == "success" else None, ended_at=ended))
            verdict = VERDICTS[t]
            store.put(VerificationRecord(
                verification_id=f"{trial_id}/v0", trial_id=trial_id, verdict=verdict,
                outcome_reproduced=verdict == "verified",
                first_divergence="exec #2: steps 20 vs 19" if verdict == "mismatch" else "",
                detail={"execs": 1}, started_at=ended + 1, ended_at=ended + 3))
            if worker is not None and t in VIDEO_TRIALS:
                store.flush()  # the worker reads this trial's control traces from the database
                pending.append(worker.submit(run_dir, trial_id, manifest, run_id=RUN_ID))
            store.put(EventRecord(run_id=RUN_ID, event="trial_ended", at=ended, trial_id=trial_id,
                                  data={"outcome": outcome}))
        # a second task without videos: failure, incomplete (provider), pending (no replay), not started x2
        for t, outcome in ((1, "failure"), (2, "incomplete"), (3, "success")):
            trial_id = f"{stack_series}/t{t}a0"
            info["stack"].append(trial_id)
            store.put(TrialStarted(trial_id=trial_id, series_id=stack_series, index=t, fingerprint="f" * 64,
                                   started_at=b.tick()))
            store.put(TrialEnded(trial_id=trial_id, outcome=outcome,
                                 reason="provider: http_500 x3" if outcome == "incomplete" else "finish",
                                 cause="provider" if outcome == "incomplete" else "finish",
                                 detail="http_500 x3" if outcome == "incomplete" else "",
                                 control_steps=40 * t, sim_time=2.0 * t, active_time=3.0,
                                 timing={"provider": 2.0, "execution": 0.5}, ended_at=b.tick(3)))
            if outcome == "failure":
                store.put(VerificationRecord(verification_id=f"{trial_id}/v0", trial_id=trial_id, verdict="verified",
                                             outcome_reproduced=True, started_at=b.tick(), ended_at=b.tick(1)))
        for future in pending:
            for record in future.result(timeout=600):
                store.put(record)
        _save_recovery(run_dir, info["lift"][1])
    finally:
        if worker is not None:
            worker.close()
        sim.close()
        store.close()
    return info


if __name__ == "__main__":
    import sys

    t0 = time.time()
    print(build_run(Path(sys.argv[1])), f"{time.time() - t0:.1f}s")
