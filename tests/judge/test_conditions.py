"""The shipped conditions and judge configs, the view rule, the reading of answers and the comparison table."""

from __future__ import annotations

import json
import tomllib

import pytest
from roboswe.protocol.participant import Decision, ToolCallPart, Turn
from roboswe.sim.manifest import load_manifest

from roboswe.judge.compare import compare
from roboswe.judge.conditions import (
    CONDITIONS_DIR,
    JudgeError,
    load_conditions,
    load_judge_config,
)
from roboswe.judge.request import TOOL, ConditionVerdict, MalformedAnswer, read_answer
from roboswe.judge.views import view_rows

from ..conftest import ROOT
from .golden import CONDITIONS, asked

DATASETS = ("robosuite-pilot", "robocasa-kit", "gr1-tabletop-standin")


def dataset_tasks() -> list[str]:
    return [t for d in DATASETS for t in tomllib.loads((ROOT / "configs" / "datasets" / f"{d}.toml").read_text())["tasks"]]


@pytest.mark.parametrize("task", dataset_tasks())
def test_every_pilot_kit_and_standin_task_has_conditions_with_a_guide_for_each_camera(task):
    conditions, digest = load_conditions(task)
    manifest = load_manifest(ROOT / "configs" / "tasks" / f"{task}.toml")
    cameras = conditions.cameras or list(manifest.video.cameras)
    assert set(cameras) <= set(conditions.evidence), (task, cameras)
    assert len(digest) == 64 and all(c.text and c.part for c in conditions.conditions)


def test_a_task_without_conditions_and_a_broken_file(tmp_path):
    assert load_conditions("paint-three-strokes") is None
    (tmp_path / "x.toml").write_text('task = "y"\npredicate = "p"\n[evidence]\n[[conditions]]\nid = "a"\ntext = "t"\npart = "p"\n')
    with pytest.raises(JudgeError, match="task must be 'x'"):
        load_conditions("x", tmp_path)
    (tmp_path / "z.toml").write_text('task = "z"\npredicate = "p"\ncameras = ["c"]\n[evidence]\n[[conditions]]\nid = "a"\ntext = "t"\npart = "p"\n')
    with pytest.raises(JudgeError, match="no \\[evidence\\] line"):
        load_conditions("z", tmp_path)


def test_the_shipped_judge_configs_load():
    for path in sorted((CONDITIONS_DIR.parent).glob("*.toml")):
        config, _ = load_judge_config(path)
        assert config.judge.views >= 2


@pytest.mark.parametrize(("recorded", "count", "rows"), [
    (21, 3, [0, 10, 20]), (100, 4, [0, 33, 66, 99]), (2, 3, [0, 1]), (1, 3, [0]), (0, 3, []), (5, 5, [0, 1, 2, 3, 4])])
def test_the_view_rule_is_the_final_state_and_evenly_spaced_ones_from_the_length_alone(recorded, count, rows):
    assert view_rows(recorded, count) == rows


def decision(*calls: tuple[str, object]) -> Decision:
    parts = [ToolCallPart(call_id=f"c{i}", name=n, arguments=a if isinstance(a, str) else json.dumps(a))
             for i, (n, a) in enumerate(calls)]
    return Decision(turn=Turn(id="a", role="assistant", parts=parts), operation=None)


GOOD = {"id": "drawer_shut", "verdict": "supported", "evidence": "shut", "views": ["t3/sideview"]}
LABELS = ["t1/sideview", "t3/sideview"]


@pytest.mark.parametrize(("calls", "why"), [
    ((), "no tool call"),
    (((TOOL, {"conditions": [GOOD]}), (TOOL, {"conditions": [GOOD]})), "expected one call"),
    ((("finish", {"conditions": [GOOD]}),), "expected one call"),
    (((TOOL, "{not json"),), "do not fit its schema"),
    (((TOOL, {"conditions": [{**GOOD, "verdict": "yes"}]}),), "do not fit its schema"),
    (((TOOL, {"conditions": [{**GOOD, "confidence": 1}]}),), "do not fit its schema"),
    (((TOOL, {"conditions": []}),), "exactly once"),
    (((TOOL, {"conditions": [GOOD, GOOD]}),), "exactly once"),
    (((TOOL, {"conditions": [{**GOOD, "id": "door_open"}]}),), "exactly once"),
    (((TOOL, {"conditions": [{**GOOD, "views": ["t9/birdview"]}]}),), "were not shown"),
    (((TOOL, {"conditions": [{**GOOD, "evidence": " "}]}),), "evidence"),
])
def test_a_malformed_answer_is_refused_with_the_reason(calls, why):
    with pytest.raises(MalformedAnswer, match=why):
        read_answer(decision(*calls), CONDITIONS, LABELS)


def test_a_well_formed_answer_is_read():
    (v,) = read_answer(decision((TOOL, {"conditions": [GOOD]})), CONDITIONS, LABELS)
    assert (v.id, v.verdict, v.views) == ("drawer_shut", "supported", ["t3/sideview"])


def test_the_tool_schema_forces_one_entry_per_condition_and_the_closed_verdicts():
    (spec,) = asked("success").request.tools
    items = spec.parameters["properties"]["conditions"]
    assert items["minItems"] == items["maxItems"] == 1
    entry = items["items"]
    assert entry["properties"]["verdict"]["enum"] == ["supported", "contradicted", "unobservable"]
    assert set(entry["required"]) == {"id", "verdict", "evidence", "views"} and entry["additionalProperties"] is False
    assert entry["properties"]["views"]["items"]["enum"][-1] == "t3/sideview"


def test_the_comparison_table():
    three = load_conditions("gr1-standin-cuptotray")[0]

    def verdicts(*vs):
        return [ConditionVerdict(id=c.id, verdict=v, evidence="e", views=[]) for c, v in zip(three.conditions, vs)]

    def table(outcome, *vs):
        return [r["comparison"] for r in compare(verdicts(*vs), three, outcome)]

    assert table("success", "supported", "contradicted", "unobservable") == ["agree", "contradiction", "unresolved"]
    # a failure means some part failed: a supported part alone proves nothing, all supported contradicts it
    assert table("failure", "supported", "contradicted", "unobservable") == ["unresolved", "agree", "unresolved"]
    assert table("failure", "supported", "supported", "supported") == ["contradiction"] * 3
    with pytest.raises(ValueError, match="incomplete"):
        compare(verdicts("supported"), three, "incomplete")
