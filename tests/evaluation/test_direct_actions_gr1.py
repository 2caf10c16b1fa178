"""GR1 tabletop end to end: both participant kinds close the drawer stand-in through `roboswe run`.

The real supervisor and actors, the GR1 stand-in scene, the bwrap sandbox. One run per kind:
the scripted policy (interface ``actions``, decisions track D = 200, K = 5) answers each
observation with an ``act`` chunk; the scripted coder (interface ``code``, horizon track)
writes close_drawer.py and runs it through ``robot``. Each completes the task and the replay
verifies it; the records carry the track identity and the policy's evidence, and the
script's first exec lists what the sandbox can receive (the allowlist, nothing else).
"""

from __future__ import annotations

import json
import re

import pytest

from roboswe.records.reader import RunReader

from ..series.conftest import ROOT, roboswe, write_config

pytestmark = pytest.mark.slow
TASK = "gr1-standin-closedrawer"


@pytest.fixture(scope="module")
def gr1_admitted():
    import importlib.util
    import shutil
    import tempfile
    from pathlib import Path

    if importlib.util.find_spec("robocasa_gr1") is None:
        pytest.skip("robocasa_gr1 is not installed")
    from roboswe.sandbox.images import ImageError, load_image

    try:
        load_image()
    except ImageError as e:
        pytest.skip(f"{e} (setup.sh builds it)")
    from roboswe.evaluation.admission import FORMAT, Admitted, admit_task, write_admitted
    from roboswe.sim.manifest import load_manifest

    work = Path(tempfile.mkdtemp(prefix="rs-gr1-", dir="/tmp"))  # the sandbox user must traverse the run dirs
    work.chmod(0o755)
    task = admit_task(load_manifest(ROOT / "configs" / "tasks" / f"{TASK}.toml"))
    assert task.status == "admitted", task.reason
    path = work / "admitted.json"
    write_admitted(Admitted(format=FORMAT, dataset={"id": "gr1-direct-actions", "tasks": [TASK]}, created_at="test",
                            host={}, run_config_sha256=None, tasks=[task]), path)
    yield work, path
    shutil.rmtree(work, ignore_errors=True)


def _run(gr1_admitted, name: str, agent: str, series: str, *extra: str):
    work, admitted = gr1_admitted
    config = write_config(work, name, agent=f'agent = "roboswe.agents.gr1_policy:{agent}"', series=f"trials = 1\n{series}")
    run_dir = work / name
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), *extra, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return run_dir


def test_the_scripted_policy_closes_the_drawer_with_act_chunks_and_replays_verified(gr1_admitted):
    run_dir = _run(gr1_admitted, "policy", "Gr1DrawerPolicy", 'interface = "actions"')
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        (view,) = reader.trials(series.series_id)
        ops = reader.operations(view.trial_id)
        (evidence,) = [e.data for _, e in reader.events(trial_id=view.trial_id) if e.event == "action_evidence"]
        videos = [a for a in reader.artifacts() if a.artifact == "video" and a.trial_id == view.trial_id]
    assert view.end.outcome == "success" and view.end.reason == "success_interval", view.end.reason
    assert view.verification.verdict == "verified" and view.verification.outcome_reproduced, view.verification
    identity = "gr1-tabletop-offline-standin/rgb256-qpos29/decision-200-prefix-5/v1"
    assert series.pins["budgets"]["identity"] == identity and evidence["identity"] == identity
    assert {o.operation for o in ops} == {"act"} and all(len(o.arguments["actions"]) == 5 for o in ops)
    assert all(len(row) == 29 for o in ops for row in o.arguments["actions"])
    # Success stopped the last chunk where it completed: first-success control and call are the trial's end.
    last = ops[-1].feedback
    assert last["stopped"] == "success" and evidence["first_success_control"] == view.end.control_steps
    assert evidence["first_success_call"] == len(ops) - 1 == evidence["policy_calls"] - 1
    assert evidence["executed_prefixes"] == [5] * (len(ops) - 1) + [last["executed"]]
    assert view.verification.detail["states"]["max_abs_qpos_diff"] == 0.0
    assert videos, "the policy trial has no video"


# A second GR1 end-to-end run (the policy run above is the default one); the allowlist is also checked at the
# simulator boundary by tests/sim/gr1/test_backend.py by default.
@pytest.mark.exhaustive
def test_the_scripted_coder_closes_the_drawer_through_robot_which_offers_only_the_allowlist(gr1_admitted):
    run_dir = _run(gr1_admitted, "coder", "Gr1DrawerCoder", "", "--no-video")  # videos: the policy run
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        (view,) = reader.trials(series.series_id)
        execs = [o for o in reader.operations(view.trial_id) if o.operation == "exec"]
    assert view.end.outcome == "success", view.end.reason
    assert view.verification.verdict == "verified" and view.verification.outcome_reproduced, view.verification
    assert series.pins["budgets"]["identity"] == "gr1-tabletop-offline-standin/rgb256-qpos29/control-1000/v2"
    # Everything a script can receive: 29 encoders, one 256x256 RGB egoview (depth asked for, none given), 29-D actions.
    received = json.loads(re.search(r"receives: (.*)", execs[0].feedback["stdout"]).group(1))
    assert received == {"state": {"joint_encoders": [29]},
                        "cameras": {"ego_view_bg_crop_pad_res256_freq20": {"rgb": [256, 256, 3]}}, "action_dim": 29}
