"""A hosted model in the harness-transfer run, against the strict local fake of its API: each fresh agent is a
fresh conversation of the same model.

`roboswe run` of a transfer run config whose provider is the Anthropic adapter pointed at the loopback fake
(tests/providers/fakes.py: it refuses any request the real service documents as invalid), on the task with one
fresh agent and one control. The model writes a one-line harness manual and finishes; each fresh agent lists
its workspace, ends its trial and finishes; agent_1 also searches its history for the developer's manual text
(search_history: nothing archived, its conversation is its own). Every generation request is checked: the first of each fresh agent opens a new
conversation (no earlier turn of its own, nothing of the developer's), to the same model.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from roboswe.rle.manifest import TASKS_DIR

from ...commands.test_preflight import runs  # noqa: F401 - run dirs the sandbox user reaches, used by name
from ...sandbox.conftest import image  # noqa: F401 - the sandbox image fixture (refused when stale), used by name
from ..test_demo_hosted import KEY_ENV, _hosted_run  # the strict Anthropic fake behind `roboswe run`

pytestmark = pytest.mark.skipif(importlib.util.find_spec("robocasa") is None, reason="robocasa is not installed here")

TASK = "transfer-kit-countertodrawer-close"
MANUAL = "# agent_harness\nThe drawer is in front of the robot.\n"
DEVELOPER = [("write_file", {"path": "agent_harness/MANUAL.md", "content": MANUAL}),
             ("finish", {"reason": "the developer's harness is written"})]
ATTEMPT = [("list_files", {}), ("finish_trial", {}), ("finish", {"reason": "the attempt is over"})]
SEARCH = ("search_history", {"query": "drawer is in front"})  # the developer wrote it; agent_1 never read the file


@pytest.mark.slow
@pytest.mark.exhaustive
@pytest.mark.timeout(900)
def test_each_fresh_agent_is_a_new_conversation_of_the_same_hosted_model(image, runs, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv(KEY_ENV, "fake-key-not-secret")
    task = tmp_path / f"{TASK}.toml"
    task.write_text((TASKS_DIR / f"{TASK}.toml").read_text().replace("[transfer]\nagents = 5\n", "[transfer]\nagents = 1\n"))
    run = runs / "run"
    plan = [*DEVELOPER, ATTEMPT[0], SEARCH, *ATTEMPT[1:], *ATTEMPT]  # the developer, agent_1, control_1
    _, generations = _hosted_run(run, task, plan, tmp_path)  # exit 0, every request one the real API accepts
    requests = [g.json() for g in generations]
    assert len(requests) == len(plan)
    developer, agent, control = requests[:2], requests[2:6], requests[6:]
    assert {r["model"] for r in requests} == {"fake-anthropic-model"}
    seen_by_developer = json.dumps(developer)
    assert "Practice tasks" in seen_by_developer
    for name, attempt in (("agent_1", agent), ("control_1", control)):
        first = attempt[0]
        assert [m["role"] for m in first["messages"]] == ["user"], name  # a new conversation: only its opening
        text = json.dumps(attempt)
        assert "Practice tasks" not in text and "the developer's harness is written" not in text, name
    assert "agent_harness/MANUAL.md" in json.dumps(agent[1]) and "agent_harness" not in json.dumps(control[1])
    # its history is this conversation alone: nothing archived to search (the developer's turns are another series')
    assert "there has been no slide yet" in json.dumps(agent[2]["messages"][-1])
    record = json.loads((run / "transfer.json").read_text())
    assert [(t["agent"], t["ended"], t["handoff_digest"] != "") for t in record["trials"]] == [
        ("agent_1", "finish_trial", True), ("control_1", "finish_trial", False)]
    report = json.loads((run / "report.json").read_text())
    assert report["status"] == "scored" and report["reward"] == 0.0
