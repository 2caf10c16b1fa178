"""The speed-run end to end on the kit, through the actors: `roboswe run` of configs/runs/rle-speedrun-demo.toml
(the scripted participant, kind = "python", its scripts in the sandbox over `import robot`) develops on public
kitchens, is sealed, acts in the five hidden kitchens the simulator actor draws and serves (LoadEvaluation,
finish_trial/next_trial as operations), and is verified by replay (RoboCasa, placeholder assets).

One case in the default run (L3: privileged state, at least 3 of 5 kitchens solved); L1 (depth only, 3 of 5
measured with the public salt) is exhaustive. Each checks what the participant was sent (every recorded
request) for the hidden kitchens' identity, a reset and an oversized batch refused in the evaluation phase
from inside the sandbox, the L2/L3 skills in the workspace, the reward against the formula from the recorded
counts, and the index entry.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from ...commands.test_preflight import runs  # noqa: F401 - run dirs the sandbox user reaches, used by name
from ...sandbox.conftest import image  # noqa: F401 - the sandbox image fixture (refused when stale), used by name

pytestmark = pytest.mark.skipif(importlib.util.find_spec("robocasa") is None, reason="robocasa is not installed here")

TASK = "speedrun-kit-pickplacecountertodrawer"
CONFIG = Path("configs/runs/rle-speedrun-demo.toml")


def _roboswe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "roboswe.cli", *args], capture_output=True, text=True, check=False)


def _speedrun(runs, task_id: str) -> Path:  # noqa: F811
    """`roboswe run` of the demo config for ``task_id``, its participant probing the evaluation's refusals first."""
    config = runs / "speedrun.toml"
    config.write_text(CONFIG.read_text().replace('SpeedrunAgent"\n', 'SpeedrunAgent"\noptions = { probe = true }\n', 1))
    run = runs / "run"
    done = _roboswe("run", "--config", str(config), "--tasks", f"rle/{task_id}", "--out", str(run))
    assert done.returncode == 0 and (run / "report.json").exists(), done.stderr[-3000:]
    return run


def check_run(run: Path, task_id: str, solved: int) -> dict:
    """What every speed-run through the actors must show; returns the report (also used on a run made by hand)."""
    from roboswe.records.reader import RunReader

    from roboswe.rle import rundir
    from roboswe.rle.kitchen.evaluation import EVALUATION, EvaluationRecord
    from roboswe.rle.kitchen.plan import hidden_plan
    from roboswe.rle.kitchen.rules import speedrun_reward
    from roboswe.rle.ledger import decode_rows, verify_chain
    from roboswe.rle.manifest import load_task
    from roboswe.rle.seeds import public_salt

    task = load_task(task_id)
    report = json.loads((run / "report.json").read_text())
    parts = {c["name"]: c["value"] for c in report["components"]}
    assert report["status"] == "scored" and report["placeholder"] and report["gates"] == []
    successes = round(parts["success_rate"] * task.kitchen.trials)
    assert successes >= solved, parts
    spent = verify_chain(decode_rows((run / rundir.LEDGER).read_bytes())).spent  # the recorded count
    assert parts["development_steps"] == spent > 0 and parts["budget"] == task.budget.charged_steps == 50_000
    assert report["reward"] == speedrun_reward(task.kitchen, successes, spent, task.budget.charged_steps)
    record = msgspec.json.decode((run / EVALUATION).read_bytes(), type=EvaluationRecord)
    assert [t.ended for t in record.trials] == ["finish_trial"] * 5 and all(len(t.rows) <= 1000 for t in record.trials)
    plan = hidden_plan(task, public_salt())
    assert record.plan_commitment == plan.commitment and sorted(report["revealed_seeds"]) == sorted(k.seed for k in plan.kitchens)
    with RunReader(run) as reader:
        development, evaluation = (reader.trials(s.series_id)[0] for s in reader.series())
        requests = b"\n".join(m.request for t in (development, evaluation) for m in reader.messages(t.trial_id))
        ops = [(o.operation, o.feedback.get("text", "")) for o in reader.operations(evaluation.trial_id)]
        listing = reader.operations(development.trial_id)[0].feedback["text"]
    # the hidden kitchens' identity never reached the participant: nothing it was sent names one
    assert len(requests) > 10_000
    for kitchen in plan.kitchens:
        assert str(kitchen.seed).encode() not in requests
    assert plan.commitment.encode() not in requests and b"stack_" not in requests
    # nor the run's own log before the reveal: the evaluation's scene resets say seed=hidden
    resets = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines() if '"sim.reset"' in line]
    hidden = [e for e in resets if e.get("seed") == "hidden"]
    assert len(hidden) >= task.kitchen.trials, resets
    assert not {e.get("seed") for e in resets} & {k.seed for k in plan.kitchens}, resets
    # the evaluation's operations, the probe's refusals seen from inside the sandbox
    assert [name for name, _ in ops] == ["write_file", "exec", *(["exec", "finish_trial", "next_trial"] * 5)[:-1], "finish"]
    probe = json.loads(next(line for line in ops[1][1].splitlines() if line.startswith("PROBE "))[6:])
    assert probe["reset"].startswith("ResetRefused: there is no reset in the evaluation phase"), probe
    assert probe["batch_201"].startswith("InvalidAction: a batch holds 1..200 actions"), probe
    assert probe["actions_left"] == 1000.0  # nothing of the refused batch was applied
    assert "trial 2 of 5 is open" in ops[4][1] and "finished after" in ops[3][1]
    assert ("kitchen_skills.py" in listing) == (task.kitchen.level != "L1")  # L2/L3: the harness's skills and manual
    index = json.loads(_roboswe("index", str(run), "--json").stdout)
    (entry,) = [e for e in index["tasks"] if (e["task"], e["harness_level"]) == (TASK, task.kitchen.level)]
    assert entry["reward"] == report["reward"] and index["placeholder"] is True
    assert {k: entry["components"][k] for k in ("success_rate", "development_steps", "budget")} == {
        "success_rate": parts["success_rate"], "development_steps": spent, "budget": 50_000}
    return report


@pytest.mark.timeout(1500)  # ~9 min with load average 7-10 on the 2 shared cores, over 10 at 15
def test_the_l3_participant_reads_privileged_state_solves_three_hidden_kitchens_through_the_actors(image, runs):  # noqa: F811
    report = check_run(_speedrun(runs, f"{TASK}-l3"), f"{TASK}-l3", solved=3)
    assert "priv_obj_pos" in report["privileged"] and "priv_fixture_interior" in report["privileged"]


@pytest.mark.exhaustive
@pytest.mark.timeout(2400)
def test_the_l1_participant_acts_from_depth_only_and_roboswe_verify_reproduces(image, runs):  # noqa: F811
    run = _speedrun(runs, TASK)
    assert check_run(run, TASK, solved=3)["privileged"] == []
    again = _roboswe("verify", str(run))
    assert again.returncode == 0 and "reproduced" in again.stdout, again.stderr
