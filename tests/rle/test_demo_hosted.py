"""A hosted model develops an RLE-Bench artifact through the actors, against the strict local fake of its API.

`roboswe run` of an RLE run config whose provider is the Anthropic adapter, pointed at the loopback fake
(tests/providers/fakes.py: it refuses any request the real service documents as invalid). The model
writes a constant estimator and a development script, runs it (a reset and three charged steps), and the
manifest's token budget, charged from the usage the fake reports, ends the phase after the third decision,
or, with 4 charged steps, the script spends the ledger and ends it; the participant is shown what is left
after each operation. Then the seal and the verifier on a small battery.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from roboswe.rle.ledger import decode_rows
from roboswe.rle.manifest import TASKS_DIR

from ..commands.test_preflight import runs  # noqa: F401 - run dirs the sandbox user reaches, used by name
from ..providers.fakes import REPLY, FakeProvider
from ..sandbox.conftest import image  # noqa: F401 - the sandbox image fixture (refused when stale), used by name

KEY_ENV = "ROBOSWE_RLE_FAKE_KEY"
USAGE = (1200, 80)  # what the fake reports per decision: 1280 tokens charged each
# (how the phase ends, charged steps, tokens): 3000 tokens are left 1720, 440, 0 after each decision, so
# the phase ends before a fourth; 4 charged steps are spent by the script's reset and three steps.
ENDS = {"tokens": (20000, 3000), "budget": (4, 100000)}
SCRIPT = """import robot
state = robot.reset()
robot.step_many([[0.01, 0.0]] * 3)
print("LEFT", int(robot.state()["budget_left"][0]), int(state["resets_left"][0]))
"""
ESTIMATOR = """def make_estimator():
    class Constant:
        def reset(self):
            pass

        def estimate(self, obs):
            return {"x": 0.0, "y": 0.0, "yaw": 0.0, "shape": "T"}
    return Constant()
"""
PLAN = [("write_file", {"path": "estimator.py", "content": ESTIMATOR}),
        ("write_file", {"path": "develop.py", "content": SCRIPT}), ("exec", {"path": "develop.py"})]


def small_task_toml(dest: Path, steps: int, tokens: int) -> Path:
    """pose-rgbd with these budgets and a 2-still, 3-frame battery (the verifier runs in seconds)."""
    text = (TASKS_DIR / "pose-rgbd.toml").read_text()
    assert "tokens" not in tomllib.loads(text)["budget"]
    text = text.replace("charged_steps = 20000", f"charged_steps = {steps}\ntokens = {tokens}").replace("stage_a_groups = 10", "stage_a_groups = 1")
    text = text.replace("stage_a_frames_per_group = 10", "stage_a_frames_per_group = 2")
    text = text.replace("stage_b_episodes = 10", "stage_b_episodes = 1").replace("stage_b_frames = 60", "stage_b_frames = 3")
    dest.write_text(text)
    return dest


def _hosted_run(run: Path, task: Path, plan: list[tuple[str, dict]], tmp_path: Path) -> tuple:
    """`roboswe run` of an RLE config whose Anthropic provider replies ``plan`` from the strict fake; checks that
    it exited 0 and that every request was one the real API accepts; returns (the process, the generations)."""
    with FakeProvider("anthropic") as fake:
        fake.queue(*[REPLY["anthropic"](tool=step, usage=USAGE, thinking=False) for step in plan])
        config = tmp_path / "rle-hosted.toml"
        config.write_text(f'[rle]\ntasks = ["{task}"]\n\n[provider]\nkind = "anthropic"\nmodel = "fake-anthropic-model"\n'
                          f'api_key_env = "{KEY_ENV}"\nbase_url = "{fake.base_url}"\nattempts = 1\n\n'
                          "[supervisor]\nheartbeat_liveness = 5\n\n[transport]\nheartbeat_liveness = 5\n")
        proc = subprocess.run([sys.executable, "-m", "roboswe.cli", "run", "--config", str(config), "--out", str(run),
                               "--no-preflight", "-e", "bwrap"], env=dict(os.environ), capture_output=True, text=True,
                              check=False, timeout=900)
        generations, rejected = fake.generations(), list(fake.rejected)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert rejected == []
    return proc, generations


@pytest.mark.slow
@pytest.mark.exhaustive  # more developments through the actors (the demo is the default suite's)
@pytest.mark.parametrize("ended", list(ENDS))
def test_a_hosted_model_develops_through_the_actors_until_a_budget_ends_the_phase(ended, image, artifact_image,  # noqa: F811
                                                                                  runs, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv(KEY_ENV, "fake-key-not-secret")
    steps, tokens = ENDS[ended]
    task = small_task_toml(tmp_path / "pose-budgets.toml", steps, tokens)
    run = runs / "run"
    proc, generations = _hosted_run(run, task, PLAN, tmp_path)
    assert len(generations) == len(PLAN)  # no fourth
    record = json.loads((run / "development.json").read_text())
    assert (record["ended"], record["tokens"], record["token_budget"]) == (ended, 3 * sum(USAGE), tokens)
    assert [o["operation"] for o in record["operations"]] == ["write_file", "write_file", "exec"]
    # the participant sees what is left of its budgets after each operation, and its script saw the ledger
    third = json.dumps(generations[2].json())
    assert f"development budget left: {steps} charged steps, 200 resets, {tokens - 2 * sum(USAGE)} tokens" in third
    assert f"LEFT {steps - 4} 199" in record["operations"][2]["text"]
    rows = decode_rows((run / "ledger.jsonl").read_bytes())
    assert [(r.kind, r.operation, r.cost) for r in rows if r.kind == "charge"] == [("charge", "reset", 1), ("charge", "step", 3)]
    report = json.loads((run / "report.json").read_text())
    assert report["status"] == "scored" and report["ledger"]["ok"] and report["reward"] <= 0.05
    assert f"development: {ended} after 3 operations" in proc.stdout


@pytest.mark.slow
@pytest.mark.exhaustive
def test_the_diagnostic_evaluator_scores_public_seeds_six_times_and_refuses_the_seventh(image, artifact_image,  # noqa: F811
                                                                                       runs, tmp_path, monkeypatch):  # noqa: F811
    from roboswe.records.reader import RunReader

    monkeypatch.setenv(KEY_ENV, "fake-key-not-secret")
    task = small_task_toml(tmp_path / "pose-diagnostic.toml", 20000, 100000)
    run = runs / "run"
    plan = [PLAN[0], *[("exec", {"path": "DIAGNOSE"})] * 7, ("finish", {"reason": "done"})]
    _, generations = _hosted_run(run, task, plan, tmp_path)
    record = json.loads((run / "development.json").read_text())
    assert record["ended"] == "finished" and len(generations) == len(plan)
    texts = [o["text"] for o in record["operations"][1:8]]
    assert all(t.startswith(f"diagnostic call {n} of 6 (public diagnostic seeds") for n, t in enumerate(texts[:6], 1))
    assert texts[6].startswith("the development phase's 6 diagnostic calls are used up") and record["operations"][7]["error"]
    with RunReader(run) as reader:
        (series,) = reader.series()
        (trial,) = reader.trials(series.series_id)
        calls = [e.data for _, e in reader.events(trial_id=trial.trial_id, event="rle_diagnostic")]
    assert [c.get("n") for c in calls] == [1, 2, 3, 4, 5, 6, None] and "used up" in calls[6]["refused"]
    final = json.loads((run / "report.json").read_text())
    for call in calls[:6]:  # scored like the artifact, on public diagnostic seeds: never the verification's
        assert call["report"]["status"] == "scored" and call["report"]["salt_label"] == "diagnostic"
        assert not set(call["report"]["revealed_seeds"]) & set(final["revealed_seeds"])
    assert final["salt_label"] == "public" and final["status"] == "scored"
