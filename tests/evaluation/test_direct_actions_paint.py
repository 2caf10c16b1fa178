"""RoboPaint's direct-action tools (``[series] interface = "paint"``): parsing, the interface, schemas, one round.

Fast checks of move_flange / submit_painting as tool calls (decoding, what is refused before the
scene, the tool schema a hosted adapter sends), of the family-bound interface, and one round on
the real paint scene in process (tests/evaluation/harness.py; only the sandbox bridge is a
stand-in, and this interface never execs): a batch the harness's bounds check refuses is not an
action and is not replayed; one the scene rejects names its rule and waypoint, counts as an
action and is replayed; the replay reproduces the canvas hash. The three-round session through
``roboswe run`` is tests/series/test_paint_direct.py.
"""

from __future__ import annotations

import json
import os

import jsonschema
import pytest
import trio
from roboswe.protocol.participant import (
    INTERFACES,
    DecisionRequest,
    Finish,
    FlangeWaypoint,
    ImagePart,
    InvalidOperation,
    MoveFlange,
    SubmitPainting,
    TextPart,
    Turn,
    offered_tools,
    parse_operation,
    tool_spec,
)
from roboswe.sim.manifest import load_manifest

from roboswe.evaluation.actions import run_chunk
from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series import run_series
from roboswe.evaluation.series_config import (
    SeriesConfig,
    TrackRefused,
    effective_budgets,
)
from roboswe.evaluation.task_record import recorded
from roboswe.evaluation.verify import verify_series
from roboswe.records.reader import RunReader

from .agents import decided
from .harness import (
    ROOT,
    admitted_paint,
    peers,
    reach_manifest,
    reader_factory,
    record_run,
    series_plan,
)

os.environ.setdefault("MUJOCO_GL", "egl")  # the paint scene renders its observations (on the CPU here)

DOWN = [1.0, 0.0, 0.0, 0.0]
PAINT_TOML = ROOT / "configs" / "tasks" / "paint-three-strokes.toml"


def _waypoint(**kw) -> dict:
    return {"position": [0.0, 0.45, 0.3], "quaternion_xyzw": DOWN, "duration_s": 0.8, **kw}


def test_move_flange_decodes_to_one_row_per_waypoint_and_bad_calls_are_refused_naming_the_field():
    op = parse_operation("move_flange", json.dumps({"waypoints": [_waypoint(), _waypoint(duration_s=1)]}))
    assert isinstance(op, MoveFlange) and type(op).one_action
    assert op.chunk() == [[0.0, 0.45, 0.3, *DOWN, 0.8], [0.0, 0.45, 0.3, *DOWN, 1.0]]
    for bad, named in [({"waypoints": []}, "waypoints"),
                       ({"waypoints": [_waypoint(position=[0.0, 0.45])]}, "position"),
                       ({"waypoints": [_waypoint(quaternion_xyzw=[1, 0, 0])]}, "quaternion_xyzw"),
                       ({"waypoints": [{**_waypoint(), "speed": 1}]}, "speed"),
                       ({"waypoints": [{"position": [0, 0.45, 0.3], "duration_s": 1}]}, "quaternion_xyzw")]:
        with pytest.raises(InvalidOperation, match=named):
            parse_operation("move_flange", bad)
    submit = parse_operation("submit_painting", "{}")
    assert isinstance(submit, SubmitPainting) and isinstance(submit, Finish)  # ending the trial submits


def test_the_paint_interface_is_the_paint_familys_and_offers_no_code_execution():
    assert "exec" not in INTERFACES["paint"] and "act" not in INTERFACES["paint"]
    names = [t.name for t in offered_tools(search_history=True, interface="paint")]
    assert names == ["write_file", "read_file", "list_files", "observe", "move_flange", "search_history", "submit_painting"]
    paint = load_manifest(PAINT_TOML)
    budgets = effective_budgets(SeriesConfig(interface="paint"), paint)
    assert budgets.track == "horizon" and budgets.identity == f"paint/control-{paint.budgets.trial.steps}/v2"
    assert budgets.action_prefix is None  # no K: a MoveFlange is never cut
    with pytest.raises(TrackRefused, match="takes \\[series\\] interface = 'code' or 'paint', not 'actions'"):
        effective_budgets(SeriesConfig(interface="actions"), paint)  # act would send each waypoint as its own MoveFlange
    with pytest.raises(TrackRefused, match="counts action chunks"):
        effective_budgets(SeriesConfig(interface="paint", budget_mode="decisions"), paint)
    from roboswe.sim.manifest import manifest_from_builtins

    with pytest.raises(TrackRefused, match="'paint' is the paint family's"):
        effective_budgets(SeriesConfig(interface="paint"), manifest_from_builtins(reach_manifest()))


async def test_a_hosted_adapter_sends_move_flange_with_a_self_contained_schema_and_decodes_its_call(monkeypatch):
    from roboswe.providers import ProviderConfig, create_participant

    from ..providers.fakes import REPLY, FakeProvider

    schema = tool_spec("move_flange").parameters
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"waypoints": [_waypoint()]})
    for bad in ({"waypoints": []}, {"waypoints": [_waypoint(position=[0, 1])]}, {"waypoints": [{**_waypoint(), "x": 1}]}, {}):
        assert not validator.is_valid(bad), bad
    assert "$ref" not in json.dumps(schema) and "$defs" not in json.dumps(schema)  # a tool's schema travels alone
    args = {"waypoints": [_waypoint()]}
    monkeypatch.setenv("ROBOSWE_TEST_PROVIDER_KEY", "sk-test-0123456789")
    for wire in ("openai", "anthropic"):
        with FakeProvider(wire) as fake:
            participant = create_participant(ProviderConfig(
                kind=wire, model="fake-model-2026-01-01", api_key_env="ROBOSWE_TEST_PROVIDER_KEY", base_url=fake.base_url,
                timeout_s=5.0, attempts=1))
            fake.queue(REPLY[wire](tool=("move_flange", args)))
            request = DecisionRequest(system="Paint.", tools=offered_tools(search_history=False, interface="paint"),
                                      conversation=[Turn(id="u0", role="user", trial=1, parts=[TextPart(text="Round 1.")])],
                                      trial=1)
            decision = await participant.decide(request)
            assert decision.operation == parse_operation("move_flange", args), decision.invalid
            body = fake.seen[-1].json()
            sent = {t.get("name") or t.get("function", {}).get("name"): t for t in body["tools"]}
            assert set(sent) == set(INTERFACES["paint"]) - {"search_history"}
            assert (sent["move_flange"].get("parameters") or sent["move_flange"].get("input_schema")) == schema
            await participant.aclose()


# --- one round on the real paint scene, in process ------------------------------------------------------


def _probe(duration_s: float, position=(0.27, 0.42, 0.26)) -> MoveFlange:
    return MoveFlange(waypoints=[FlangeWaypoint(position=list(position), quaternion_xyzw=DOWN, duration_s=duration_s)])


ROUND = [
    _probe(0.05),  # under the 0.08 s bound: refused by the harness's check, never reaches the scene
    _probe(0.1),  # 3 m/s to the dish: the scene rejects it (linear_speed), a counted action
    _probe(0.8, (0.0, 0.45, 0.3)),  # accepted: 80 control steps
    SubmitPainting(reason="done"),
]


class RoundAgent:
    def __init__(self, script=ROUND):
        self.script = script
        self.systems: list[str] = []
        self.openings: list[tuple[Turn, dict[str, bytes]]] = []  # each round's first message, with the request's images

    def decide(self, request: DecisionRequest):
        self.systems.append(request.system)
        if not decided(request):
            (first, *_) = [t for t in request.conversation if t.trial == request.trial and t.role == "user"]
            self.openings.append((first, request.images))
        return self.script[min(decided(request), len(self.script) - 1)]


def _opening_images(opening: tuple[Turn, dict[str, bytes]]) -> list[tuple[ImagePart, bytes]]:
    turn, images = opening
    return [(p, images[p.digest]) for p in turn.parts if isinstance(p, ImagePart)]


async def test_one_round_refused_rejected_and_accepted_batches_are_recorded_replayed_and_verified(tmp_path):
    manifest = load_manifest(PAINT_TOML)
    task = admitted_paint(manifest)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    plan = series_plan(run_dir, task, trials=1, interface="paint")
    agent = RoundAgent()
    with trio.fail_after(120):
        async with peers(run_dir, agent) as links:
            await record_run(links)
            (end,) = await run_series(links, plan, Progress(), reader_factory(run_dir))
            await links.recorder.flush()
            with RunReader(run_dir) as reader:
                (record,) = await verify_series(links, reader, Progress(), run_dir, plan.series_id, plan.manifest,
                                                plan.reference_fingerprint)
            # K never cuts a one-action chunk: both waypoints go in one Step
            spec = (await links.sim.load(plan.manifest, manifest.seed, 10_000)).spec
            assert spec.action.chunk_is_one_action and spec.action.duration_component == 7  # the door never cuts it
            chunk = _probe(0.8, (0.0, 0.45, 0.3)).chunk() * 2
            run = await run_chunk(links.sim, spec, chunk, 1, one_action=True)
            assert (run.executed, run.controls, run.stopped) == (2, 160, "done")
            assert not links.fake_bridge.executed  # nothing ran in the sandbox

    assert end.outcome == "success" and end.reason == "finish"  # submitted: the task reward is integrity only
    system = agent.systems[0]
    assert "ONE environment action" in system and "1..32 waypoints" in system and "96 actions per round" in system
    assert "`robot` module" not in system
    # The image goal opens the round: the goal PNG first (exactly the manifest's and the gallery's), then the camera.
    from roboswe.sim.paint.goals import goal_image

    drawn = goal_image(manifest.paint.goal.image)
    (goal, goal_png), (camera, _) = _opening_images(agent.openings[0])
    assert goal_png == drawn.png and goal.digest == drawn.sha256 == manifest.paint.goal.image_sha256
    assert (goal.camera, goal.width, goal.height, camera.camera) == ("goal", 1280, 800, "workspace")
    text = agent.openings[0][0].parts[0].text
    assert "Goal image (attached first): goal, 1280x800 PNG." in text and "Trial 1 of 1 begins" in text
    with RunReader(run_dir) as reader:
        (view,) = reader.trials(plan.series_id)
        ops = reader.operations(view.trial_id)
        assert [o.operation for o in ops] == ["move_flange"] * 3 + ["submit_painting"]
        refused, rejected, accepted = (o.feedback for o in ops[:3])
        assert "duration_s" in refused["error"] and "not counted as an action" in refused["text"]
        assert rejected["stopped"] == "invalid_action" and rejected["one_action"] and rejected["controls"] == 0
        assert "rejected (linear_speed) at waypoint 0" in rejected["text"] and "It counts as an action" in rejected["text"]
        assert "action 1 of 96" in rejected["text"] and rejected["is_error"]
        assert accepted["stopped"] == "done" and accepted["controls"] == 80 and accepted["executed"] == 1
        assert "action 2 of 96: 1 of 1 waypoints in 80 control steps" in accepted["text"] and "94 actions left" in accepted["text"]
        data = recorded(reader, view.trial_id)
        ((_, stated),) = reader.events(trial_id=view.trial_id, event="goal")  # the goal's hash, recorded with the trial
        assert stated.data["images"] == [{"name": "goal", "sha256": drawn.sha256, "width": 1280, "height": 800,
                                          "media_type": "image/png"}]
        assert [a["kind"] for a in data["actions"]] == ["move_flange", "move_flange", "submit_painting"]
        assert data["actions"][0]["result"]["rule"] == "linear_speed" and data["actions"][0]["result"]["waypoint_index"] == 0
        assert data["actions_used"] == 3 and data["canvas"]["ended_by"] == "submitted"
    assert record.verdict == "verified", (record.first_divergence, record.detail.get("cause"))
    assert record.detail["chunks"] == [{"seq": 1, "controls": [0, 0], "rejected": [True, True]},
                                       {"seq": 2, "controls": [80, 80], "rejected": [False, False]}]
    for how in ("operations", "action_log"):
        assert record.detail["task_record"][how]["canvas_sha256"] == [data["canvas"]["sha256"]] * 2


async def test_a_text_goal_round_opens_with_the_camera_images_only(tmp_path):
    manifest = load_manifest(ROOT / "configs" / "tasks" / "paint-text-pelican.toml")
    assert manifest.paint.goal.kind == "text"
    task = admitted_paint(manifest)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    plan = series_plan(run_dir, task, trials=1, interface="paint")
    agent = RoundAgent([SubmitPainting(reason="done")])
    with trio.fail_after(120):
        async with peers(run_dir, agent) as links:
            await record_run(links)
            (end,) = await run_series(links, plan, Progress(), reader_factory(run_dir))
            await links.recorder.flush()
    assert end.outcome == "success"
    ((turn, _),) = agent.openings
    assert [p.camera for p, _ in _opening_images(agent.openings[0])] == ["workspace"]
    assert "Goal image" not in turn.parts[0].text and manifest.instruction in turn.parts[0].text
    with RunReader(run_dir) as reader:
        assert not reader.events(event="goal")
