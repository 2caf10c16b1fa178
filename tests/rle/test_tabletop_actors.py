"""A family 03 attempt as an RLE run through the actors: `roboswe run` of configs/runs/rle-tabletop-demo.toml
(the scripted balance participant, kind = "python", as a sandbox script over `import robot`), the simulator
actor serving the hidden instance and ending the attempt on its side (protocol.sim.EndAttempt), then
`roboswe verify` and `roboswe index` on the run directory it leaves."""

from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import pytest
from roboswe.protocol import sim as simp
from roboswe.protocol._codec import DecodeError
from roboswe.protocol.control import Error

from roboswe.rle import rundir
from roboswe.rle.ledger import LedgerRow, decode_rows, verify_chain
from roboswe.rle.manifest import load_task
from roboswe.rle.scene import DevelopmentSim
from roboswe.rle.seeds import load_salt, public_salt
from roboswe.rle.tabletop.attempt import AttemptRecord
from roboswe.rle.tabletop.plan import make_plan
from roboswe.rle.tabletop.runner import ATTEMPT, ScoredAttempt, judge, record_digest

from ..commands.test_preflight import runs  # noqa: F401 - run dirs the sandbox user reaches, used by name
from ..sandbox.conftest import image  # noqa: F401 - the sandbox image fixture (refused when stale), used by name

CONFIG = "configs/runs/rle-tabletop-demo.toml"


def test_end_attempt_scores_once_on_the_trusted_side_and_nothing_moves_after():
    """EndAttempt gives the run directory's files; after it the scene answers nothing, a second EndAttempt is
    refused, a family whose development ends in a sealed workspace refuses it, and the sandbox's robot
    endpoint cannot even decode it."""
    task = load_task("tabletop-balance")
    sim = DevelopmentSim(task, scene=ScoredAttempt(task))
    assert sim.step([[0.0, 0.0, -0.01, 0.0, 0.0]] * 5).applied == 5
    reply, blobs = sim.end_attempt()
    files = {name: bytes(blobs[i]) for name, i in reply.files.items()}
    assert set(files) == {rundir.MARKER, rundir.TASK, ATTEMPT, rundir.REPORT, rundir.LEDGER}
    rows = decode_rows(files[rundir.LEDGER])
    record = msgspec.json.decode(files[ATTEMPT], type=AttemptRecord)
    assert [r.operation for r in rows] == ["step", "step", "seal"] and rows[-1].detail == record_digest(record)
    assert record.events[1:] == [[1.0, 0.0, 0.0, -0.01, 0.0, 0.0]] * 5 and record.settled is not None
    for message in (simp.GetState(), simp.Step(actions=[[0.0] * 5]), simp.Reset()):
        refused, _ = sim.answer(message)
        assert isinstance(refused, Error) and "has ended" in refused.detail
    again, _ = sim.end_attempt()
    assert isinstance(again, Error) and "already ended" in again.detail
    assert len(sim.ledger.rows) == 2  # the seal is the record's, not a row charged on the simulator's ledger

    class Sealed:  # a scene without end_attempt (as the pose family's): its development ends in a sealed workspace
        def load(self, seed: int) -> None: ...

    refused, _ = DevelopmentSim(task, scene=Sealed()).end_attempt()
    assert isinstance(refused, Error) and "sealed workspace" in refused.detail
    _, frames = simp.SIM_CODEC.encode(simp.EndAttempt(), sender="coordinator")
    with pytest.raises(DecodeError):
        simp.SIM_ROBOT_CODEC.decode(frames)


def _roboswe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "roboswe.cli", *args], capture_output=True, text=True, check=False)


def _with_salt(runs, salt_file: str):
    """The demo's run config with ``[rle] salt_file``."""
    config = runs / "rle-salted.toml"
    text = open(CONFIG).read()
    config.write_text(text.replace("[rle]\n", f"[rle]\nsalt_file = {json.dumps(salt_file)}\n", 1))
    return config


def test_a_relative_or_short_salt_file_is_refused_before_anything_starts(runs):  # noqa: F811
    (runs / "short").write_text("too short")
    for salt_file, why in (("salt.txt", "must be an absolute path"), (str(runs / "short"), "at least 16")):
        done = _roboswe("run", "--config", str(_with_salt(runs, salt_file)), "--out", str(runs / "never"))
        assert done.returncode == 2 and why in done.stderr, done.stderr[-2000:]
        assert not (runs / "never").exists()


@pytest.mark.exhaustive
def test_a_balance_attempt_through_the_actors_is_scored_by_the_simulator_and_replays(image, runs):  # noqa: F811
    """On a private salt: the simulator draws the hidden instance from it; the run holds only its hash."""
    run = runs / "run"
    secret = b"a-private-salt-for-this-test-" + bytes(runs.name, "ascii")
    (runs / "hidden.salt").write_bytes(secret)
    done = _roboswe("run", "--config", str(_with_salt(runs, str(runs / "hidden.salt"))), "--out", str(run))
    assert done.returncode == 0, done.stderr[-3000:]
    task = load_task("tabletop-balance")
    record = msgspec.json.decode((run / ATTEMPT).read_bytes(), type=AttemptRecord)
    report = json.loads((run / "report.json").read_text())
    # scored on the trusted side from its own snapshots of the hidden instance, never from the workspace
    salt = load_salt(runs / "hidden.salt")
    assert record.plan == make_plan(task, salt) != make_plan(task, public_salt()) and record.submitted
    assert (report["salt_label"], report["salt_sha256"]) == ("hidden.salt", salt.sha256)
    leaked = [p for p in run.rglob("*") if p.is_file() and secret in p.read_bytes()]
    assert not leaked, leaked
    assert record.released is not None and record.settled.time - record.released.time == pytest.approx(3.0, abs=1e-6)
    reward, components, gates = judge(task, record)
    assert report["status"] == "scored" and report["reward"] == reward == 1.0 and gates == []
    assert report["artifact_digest"] == record_digest(record)
    assert report["components"] == list(msgspec.to_builtins(components))
    # the ledger: the simulator's rows, sealed over the attempt record's digest
    rows = decode_rows((run / "ledger.jsonl").read_bytes())
    verdict = verify_chain(rows, budget=task.budget.charged_steps, artifact_digest=record_digest(record))
    assert verdict.ok and report["ledger"]["ok"] and rows[-1].operation == "seal"
    development = json.loads((run / "development.json").read_text())
    operations = ["list_files", "write_file", "exec", "finish"]
    assert development["ended"] == "finished" and [o["operation"] for o in development["operations"]] == operations
    assert development["spent"] == verdict.spent == development["control_steps"] > 0
    assert development["ledger_head"] == rows[-1].hash
    assert '"pointer_deg"' in development["finish_reason"]  # the script's own summary, through the sandbox
    # the run database: the attempt is the development trial, its operations, the ledger and the report
    from roboswe.records.reader import RunReader

    with RunReader(run) as reader:
        (series,) = reader.series()
        (trial,) = reader.trials(series.series_id)
        assert (trial.end.outcome, trial.end.cause, trial.end.control_steps) == ("failure", "finish", verdict.spent)
        assert [o.operation for o in reader.operations(trial.trial_id)] == operations
        [(_, ledger)] = reader.events(trial_id=trial.trial_id, event="task_record")
        [(_, recorded)] = reader.events(trial_id=trial.trial_id, event="rle_report")
        opening = reader.events(trial_id=trial.trial_id, event="turn")[0][1].data
    assert msgspec.convert(ledger.data["ledger"], list[LedgerRow]) == rows[:-1]
    assert recorded.data["reward"] == report["reward"]
    guide = json.dumps(opening)
    assert "The attempt: scripts you exec" in guide and "public seeds" not in guide and "sealed" not in guide
    verified = _roboswe("verify", str(run))
    assert verified.returncode == 0 and "reproduced" in verified.stdout, verified.stderr
    index = json.loads(_roboswe("index", str(run), "--json").stdout)
    assert next(t for t in index["tasks"] if t["task"] == task.id)["reward"] == report["reward"]


def test_every_attempt_script_defines_what_its_code_names():
    """The shipped participant writes participants.py's code for each task as a sandbox script: every global
    the strategy and its helpers read (nested functions included) is defined there, so no attempt dies on a
    NameError before its first summary (as Hidden COM's did when a helper was left out)."""
    import builtins
    import dis
    import types

    from roboswe.agents.rle_tabletop_demo._agent import STRATEGIES, script_source

    def globals_read(code: types.CodeType) -> set[str]:
        read = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        return read.union(*(globals_read(c) for c in code.co_consts if isinstance(c, types.CodeType)))

    for kind, functions in STRATEGIES.items():
        body, main = script_source(kind).rsplit("\n\n", 1)
        assert main.startswith("print(") and functions[0] in main
        namespace: dict = {}
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(sys.modules, "robot", types.ModuleType("robot"))
            exec(compile(body, f"attempt-{kind}.py", "exec"), namespace)
        hand = [f for f in vars(namespace["Hand"]).values() if isinstance(f, types.FunctionType)]
        for f in [namespace[name] for name in functions] + hand:
            missing = {n for n in globals_read(f.__code__) if n not in namespace and not hasattr(builtins, n)}
            assert not missing, f"{kind}: {f.__qualname__} reads {sorted(missing)}, which its script does not define"
