"""Harness transfer end to end on the kit (RoboCasa, placeholder assets), through the actors: `roboswe rle demo
transfer` is `roboswe run` of configs/runs/rle-transfer-demo.toml (the scripted participant, kind = "python", its
scripts in the sandbox over `import robot`): the developer writes and seals its harness on the practice
composites, each fresh agent (a new conversation, the sealed harness alone restored into its workspace) attempts
the held-out composite in the hidden kitchen the simulator actor draws and serves, each control agent the same
kitchen with an empty workspace; the simulator writes the stage records, the verifier scores them.

One case in the default run: `--agents 1 --no-practice` (one fresh agent and one control agent, the developer
observing the practice tasks without practising; ~35 s on a quiet 2-core machine). Checked on what the recorder
holds: every request a fresh agent's participant was sent carries nothing of the developer's conversation and
no hidden kitchen's identity (nor does any request, nor the run's event log); a tampered ledger gates. The whole
demo (five and five) with ``roboswe verify``'s replay of every trial, and a trial's refusals, are exhaustive.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ...commands.test_preflight import runs  # noqa: F401 - run dirs the sandbox user reaches, used by name
from ...sandbox.conftest import image  # noqa: F401 - the sandbox image fixture (refused when stale), used by name

os.environ.setdefault("MUJOCO_GL", "egl")  # before MuJoCo is imported: the agents read depth

pytestmark = pytest.mark.skipif(importlib.util.find_spec("robocasa") is None, reason="robocasa is not installed here")

TASK = "transfer-kit-countertodrawer-close"
DEVELOPMENT_MARKERS = ("Practice tasks", "practice_task", "development budget", "developer's notes", "budget_left",
                       "notes.md", "PRACTICE ", "develop.py")
"""What only the developer was told or wrote outside agent_harness/: no fresh agent may be sent any of it."""


def _roboswe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "roboswe.cli", *args], capture_output=True, text=True, check=False)


def _demo(run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return _roboswe("rle", "demo", "transfer", "--out", str(run_dir), *extra)


def check_requests(run: Path, agents: list[str]) -> None:
    """On the recorded requests: each fresh agent is a new conversation (retain none) that was sent nothing of the
    developer's; no request of the run, nor its event log, names a hidden kitchen (its seed, the plan commitment)."""
    from roboswe.records.reader import RunReader

    from roboswe.rle import rundir

    report = rundir.read_report(run)
    hidden = [str(s) for s in report.revealed_seeds]
    with RunReader(run) as reader:
        series = {s.series_id.rsplit("-", 1)[-1] if s.mode == "none" else "developer": s for s in reader.series()}
        assert sorted(series) == sorted(["developer", *agents]) and series["developer"].mode == "retain"
        sent = {name: [m.request for t in reader.trials(s.series_id) for m in reader.messages(t.trial_id)]
                for name, s in series.items()}
    developer = b"\n".join(sent.pop("developer"))
    assert b"Practice tasks" in developer and b"developer's notes" in developer  # the markers are the developer's
    for agent, requests in sent.items():
        first = json.loads(requests[0])
        assert not any(turn["role"] == "assistant" for turn in first["conversation"]), agent  # a fresh context
        text = b"\n".join(requests).decode()
        assert first["system"] not in developer.decode()  # its own brief, not the developer's
        for marker in (*DEVELOPMENT_MARKERS, report.plan_commitment, *hidden):
            assert marker not in text, (agent, marker)
    assert all(seed.encode() not in developer for seed in hidden) and report.plan_commitment.encode() not in developer
    # the simulator's sim.reset log lines name a hidden kitchen's seed as "hidden" (the verifier reveals them later)
    resets = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines() if '"sim.reset"' in line]
    heldout = [e for e in resets if e.get("task") == "transfer-countertodrawer-close"]
    assert len(heldout) == len(agents) and {e["seed"] for e in heldout} == {"hidden"}
    assert not {str(e.get("seed")) for e in resets} & set(hidden)


@pytest.mark.timeout(900)
def test_a_fresh_agent_with_the_sealed_harness_beats_the_control_through_the_actors(image, runs):  # noqa: F811
    from roboswe.rle import rundir
    from roboswe.rle.ledger import decode_rows, verify_chain
    from roboswe.rle.seeds import public_salt
    from roboswe.rle.transfer.rules import trial_score, transfer_reward
    from roboswe.rle.transfer.trial import best_vector
    from roboswe.rle.transfer.verify import read_record, verify_run

    run = runs / "run"
    demo = _demo(run, "--agents", "1", "--no-practice")
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "control_1" in demo.stdout and "placeholder" in demo.stdout and "RLE Index" in demo.stdout
    assert "kitchen 1: agent_1" in demo.stdout
    report = rundir.read_report(run)
    assert report.status == "scored" and report.placeholder, report.gates
    sealed = sorted(f.path for f in rundir.read_sealed_record(run).files)
    assert sealed == ["agent_harness/MANUAL.md", "agent_harness/drawer.py", "agent_harness/geometry.py",
                      "agent_harness/pickplace.py"]  # the developer's notes.md and develop.py stayed behind
    # the reward from the stage records the simulator wrote, by the formula
    record = read_record(run)
    by_agent = {t.agent: t for t in record.trials}
    assert set(by_agent) == {"agent_1", "control_1"} and record.retain == "none"
    assert [t.ended for t in record.trials] == ["finish_trial"] * 2
    scores = {a: trial_score(t.reset, best_vector(t), t.success) for a, t in by_agent.items()}
    parts = {c.name: c.value for c in report.components}
    assert report.reward == transfer_reward([scores["agent_1"]], 1) == parts["agent_1"]
    assert parts["control"] == parts["control_1"] == scores["control_1"]
    assert scores["agent_1"] > scores["control_1"], demo.stdout
    assert by_agent["agent_1"].handoff_digest == report.artifact_digest and by_agent["control_1"].handoff_digest == ""
    spent = verify_chain(decode_rows((run / rundir.LEDGER).read_bytes())).spent
    assert parts["development_steps"] == spent == 2  # the two resets between practice tasks, nothing else charged
    # each fresh agent's workspace went with its attempt; the developer's stays for the record
    assert [p.name for p in (run / "workspaces").iterdir()] == ["run_transfer-kit-countertodrawer-close"]
    check_requests(run, ["agent_1", "control_1"])
    from roboswe.records.reader import RunReader

    with RunReader(run) as reader:  # the recorder holds each stage record as well
        events = [e.data for _, e in reader.events(event="rle_transfer_attempt")]
    assert [(e["attempt"], e["success"], e["changes"]) for e in events] == [
        (t.agent, t.success, [[c.step, list(c.stages)] for c in t.changes]) for t in record.trials]
    index = json.loads(_roboswe("index", str(run), "--json").stdout)
    (entry,) = [e for e in index["tasks"] if e["task"] == report.task]
    assert entry["reward"] == report.reward and entry["components"]["control"] == parts["control"] and index["placeholder"]
    # an edited ledger row gates the same evidence
    rows = (run / rundir.LEDGER).read_bytes().splitlines()
    first = json.loads(rows[0])
    first["cost"] += 1
    (run / rundir.LEDGER).write_bytes(b"\n".join([json.dumps(first).encode(), *rows[1:]]) + b"\n")
    gated = verify_run(run, public_salt())
    assert gated.status == "gated" and gated.reward == 0.0 and gated.gates[0].name == "ledger"


@pytest.mark.exhaustive
@pytest.mark.timeout(2400)
def test_the_demo_five_fresh_agents_and_five_controls_and_verify_replays_every_trial(image, runs):  # noqa: F811
    from roboswe.rle import rundir

    run = runs / "run"
    demo = _demo(run)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "control_5" in demo.stdout and "RLE Index" in demo.stdout and "placeholder" in demo.stdout
    report = rundir.read_report(run)
    parts = {c.name: c.value for c in report.components}
    assert report.status == "scored" and report.reward > parts["control"]
    check_requests(run, [f"{a}_{k}" for a in ("agent", "control") for k in range(1, 6)])
    again = _roboswe("verify", str(run))
    assert again.returncode == 0 and "reproduced" in again.stdout, again.stderr[-3000:]


@pytest.mark.exhaustive
def test_a_trial_refuses_reset_and_oversized_batches_and_ends_at_its_action_cap():
    import msgspec

    from roboswe.protocol import sim as simp
    from roboswe.protocol.control import Error
    from roboswe.rle.manifest import load_task
    from roboswe.rle.seeds import public_salt
    from roboswe.rle.transfer.trial import SPEC_TASK_ID, STAGE_RECORD, StageRecord, open_trial

    task = load_task(TASK)
    task = msgspec.structs.replace(task, transfer=msgspec.structs.replace(task.transfer, agent_actions=30))
    sim = open_trial(task, public_salt(), "agent_1", "")
    spec = sim.answer(simp.GetSpec())[0]
    assert spec.task_id == SPEC_TASK_ID and "stages" not in spec.state_keys and "practice_task" not in spec.state_keys
    hold = [0.0] * spec.action_dim
    for message, code in ((simp.Reset(), "reset"), (simp.Step(actions=[hold] * 201), "invalid_action"),
                          (simp.Step(actions=[hold] * 31), "limit_reached")):
        reply = sim.answer(message)[0]
        assert isinstance(reply, Error) and reply.code == code, reply
    assert sim.answer(simp.Step(actions=[hold] * 30))[0].applied == 30
    assert isinstance(sim.answer(simp.Step(actions=[hold]))[0], Error)
    assert "no next trial" in sim.move_trial(simp.NextTrial()).text
    reply, blobs = sim.end_attempt()
    record = msgspec.json.decode(blobs[reply.files[STAGE_RECORD]], type=StageRecord)
    assert record.ended == "actions" and len(record.rows) == 30 and record.reset == (False, True, False)
    assert reply.data["plan_commitment"] and isinstance(sim.end_attempt()[0], Error)  # once
