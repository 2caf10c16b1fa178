"""Workspaces kept on a worker's node ([fleet] workspaces = "node"): the file operations there, checkpoints carried.

The carrying (sandbox/carry.py) is checked on its own: what a node sends is refused whole when any blob's
bytes, size or name disagree with the manifest or its sha256, and nothing is stored then; the node drops
its copy of a blob only on the head's receipt. Then whole series in one process (tests/evaluation/harness.py,
the fake simulator, the real recorder and the real NodeWorkspaces behind the stand-in bridge) whose
workspaces never touch RUN_DIR: checkpoints at the head, replays verified, a lost node's workspace restored
over the link, and a node that forges a checkpoint costing its trial, never the run.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec
import pytest
import trio

from roboswe.bridge.workspaces import NodeWorkspaces
from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series import run_series
from roboswe.evaluation.verify import verify_series
from roboswe.protocol.bridge import (
    CaptureWorkspace,
    FreshWorkspace,
    RestoreWorkspace,
    WorkspaceCaptured,
    WorkspaceCarried,
    WorkspaceFile,
    WorkspaceListing,
    WorkspaceList,
    WorkspaceRead,
    WorkspaceWrite,
)
from roboswe.protocol.control import Error, Ok
from roboswe.protocol.recorder import CarriedBlob
from roboswe.records.reader import RunReader
from roboswe.sandbox.carry import CarryRefused, receive
from roboswe.sandbox.checkpoints import BlobStore, Manifest, ManifestEntry, load_manifest, restore
from tests.evaluation.agents import ReachAgent
from tests.evaluation.harness import admitted_task, peers, reach_manifest, reader_factory, record_run, series_plan

W = "workspaces/run-t"


def _node(tmp_path: Path) -> NodeWorkspaces:
    node = NodeWorkspaces(tmp_path / "node")
    assert node.answer(FreshWorkspace(workspace=W), ()) == Ok()
    return node


def _capture(node: NodeWorkspaces, trial: str = "t1") -> tuple[WorkspaceCaptured, bytes]:
    reply, frames = node.answer(CaptureWorkspace(workspace=W, trial=trial), ())
    assert isinstance(reply, WorkspaceCaptured), reply
    return reply, frames[0]


def _staged(node: NodeWorkspaces) -> list[Path]:
    return [p for p in (node.root / "blobs").rglob("*") if p.is_file()]


def test_a_checkpoint_carried_to_the_head_restores_bit_for_bit_and_the_node_keeps_no_copy(tmp_path):
    node = _node(tmp_path)
    assert node.answer(WorkspaceWrite(workspace=W, path="lift.py", content="print(1)\n"), ()) == WorkspaceFile(size=9)
    assert node.answer(WorkspaceWrite(workspace=W, path="lib/same.txt", content="print(1)\n"), ()).size == 9
    (node.path(W) / "data.bin").write_bytes(os.urandom(100_000))
    captured, frame = _capture(node)
    assert len(captured.blobs) == 2 and len(frame) == 100_009  # one blob per content, however many names
    head = BlobStore(tmp_path / "head" / "blobs")
    capture, read_back = receive(captured.manifest, captured.manifest_sha256, captured.blobs, frame, head, "t1")
    assert sorted(read_back) == sorted(b.sha256 for b in captured.blobs)
    assert capture.manifest_sha256 == hashlib.sha256(captured.manifest).hexdigest() == captured.manifest_sha256
    assert _staged(node)  # until the receipt, the node keeps what it sent
    assert node.answer(WorkspaceCarried(workspace=W, sha256=read_back), ()) == Ok()
    assert not _staged(node)
    restore(load_manifest(captured.manifest), head, tmp_path / "restored")
    for name in ("lift.py", "lib/same.txt", "data.bin"):
        assert (tmp_path / "restored" / name).read_bytes() == (node.path(W) / name).read_bytes()

    # The next checkpoint carries only what changed; what the head acknowledged is not staged again.
    node.answer(WorkspaceWrite(workspace=W, path="lift.py", content="print(2)\n"), ())
    again, frame = _capture(node)
    assert [b.size for b in again.blobs] == [9] and frame == b"print(2)\n"
    _, read_back = receive(again.manifest, again.manifest_sha256, again.blobs, frame, head, "t1")
    node.answer(WorkspaceCarried(workspace=W, sha256=read_back), ())
    assert not _staged(node) and head.new_bytes["t1"] == 100_000 + 9 + 9

    # A restore the head sends arrives checked and leaves nothing staged either.
    assert node.answer(FreshWorkspace(workspace="replays/r"), ()) == Ok()
    manifest = load_manifest(again.manifest)
    shas = list(dict.fromkeys(e.sha256 for e in manifest.entries))
    blobs = [CarriedBlob(sha256=s, size=len(head.get(s))) for s in shas]
    assert node.answer(RestoreWorkspace(workspace="replays/r", manifest=again.manifest, blobs=blobs),
                       (b"".join(head.get(s) for s in shas),)) == Ok()
    assert (node.path("replays/r") / "lift.py").read_text() == "print(2)\n" and not _staged(node)


def _carried(tmp_path: Path) -> tuple[WorkspaceCaptured, bytes, BlobStore]:
    node = _node(tmp_path)
    node.answer(WorkspaceWrite(workspace=W, path="a.py", content="a = 1\n"), ())
    node.answer(WorkspaceWrite(workspace=W, path="b.py", content="b = 2\n"), ())
    captured, frame = _capture(node)
    return captured, frame, BlobStore(tmp_path / "head" / "blobs")


def _forged_manifest(**entry) -> bytes:
    base = {"path": "a.py", "sha256": hashlib.sha256(b"a = 1\n").hexdigest(), "size": 6, "mode": 0o644, "mtime_ns": 0}
    return Manifest(entries=[ManifestEntry(**{**base, **entry})]).encode()


@pytest.mark.parametrize("forgery, refused", [
    ("flipped byte", "hash to"),
    ("size claimed", "the manifest says"),
    ("frame short", "the frame holds"),
    ("not in manifest", "is not in the manifest"),
    ("carried twice", "carried twice"),
    ("manifest sha", "not the claimed"),
    ("blob withheld", "neither carried nor held"),
    ("path escapes", "contains '..'"),
    ("absolute path", "absolute path"),
    ("huge size", "over the checkpoint cap"),
    ("not a manifest", "not a checkpoint manifest"),
])
def test_a_carried_checkpoint_that_does_not_hold_together_is_refused_and_nothing_is_stored(tmp_path, forgery, refused):
    captured, frame, head = _carried(tmp_path)
    manifest, sha, blobs = captured.manifest, captured.manifest_sha256, list(captured.blobs)
    match forgery:
        case "flipped byte":
            frame = bytes([frame[0] ^ 1]) + frame[1:]
        case "size claimed":
            blobs[0] = CarriedBlob(sha256=blobs[0].sha256, size=blobs[0].size + 1)
            frame += b"x"
        case "frame short":
            frame = frame[:-1]
        case "not in manifest":
            blobs.append(CarriedBlob(sha256=hashlib.sha256(b"zz").hexdigest(), size=2))
            frame += b"zz"
        case "carried twice":
            blobs.append(blobs[0])
            frame += frame[:blobs[0].size]
        case "manifest sha":
            sha = "0" * 64
        case "blob withheld":
            blobs, frame = blobs[:1], frame[:blobs[0].size]
    forged = {"path escapes": {"path": "../outside.py"}, "absolute path": {"path": "/etc/cron.d/x"},
              "huge size": {"size": 1 << 40}}
    if forgery in forged:
        manifest = _forged_manifest(**forged[forgery])
        sha = hashlib.sha256(manifest).hexdigest()
        blobs, frame = [], b""
    if forgery == "not a manifest":
        manifest, sha = b'{"entries": 5}', hashlib.sha256(b'{"entries": 5}').hexdigest()
    with pytest.raises(CarryRefused, match=refused):
        receive(manifest, sha, blobs, frame, head, "t1")
    assert not [p for p in head.root.rglob("*") if p.is_file()]  # refused whole: nothing under any name


def test_the_recorder_answers_a_forged_carry_with_an_error_and_keeps_serving(tmp_path):
    from roboswe.actors.recorder import Recorder
    from roboswe.protocol import Decoded
    from roboswe.protocol.recorder import CarryCheckpoint, CheckpointCaptured, RunRecord, SeriesRecord, TrialStarted
    from roboswe.records.store import RunStore

    captured, frame, _ = _carried(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    store = RunStore.open(run_dir)
    recorder = Recorder(run_dir, store, BlobStore(run_dir / "blobs"))

    def carry(frames, **change):
        message = CarryCheckpoint(checkpoint_id="t1/cstart", trial_id="t1", label="trial_start", manifest=captured.manifest,
                                  manifest_sha256=captured.manifest_sha256, blobs=captured.blobs)
        return Decoded(envelope=None, message=msgspec.structs.replace(message, **change), blobs=tuple(frames))

    async def main():
        await recorder._durable([RunRecord(run_id="r", created_at=0.0, admitted_sha256="0" * 64, config={}),
                                 SeriesRecord(series_id="s", run_id="r", task="x", model="m", mode="retain", trials=1,
                                              created_at=0.0),
                                 TrialStarted(trial_id="t1", series_id="s", index=1, attempt=0, fingerprint="f",
                                              started_at=0.0)], 3)
        bad = await recorder.handle(carry([b"X" + frame[1:]]))
        assert isinstance(bad, Error) and bad.code == "checkpoint" and "hash to" in bad.detail, bad
        two = await recorder.handle(carry([frame, b""]))
        assert isinstance(two, Error) and "one frame" in two.detail
        good = await recorder.handle(carry([frame]))
        assert isinstance(good, CheckpointCaptured) and sorted(good.carried) == sorted(b.sha256 for b in captured.blobs)
        assert good.files == 2 and good.new_blobs == 2

    try:
        trio.run(main)
    finally:
        store.close()
    with RunReader(run_dir) as reader:
        (point,) = reader.checkpoints("t1")
        assert point.manifest_sha256 == captured.manifest_sha256


def test_what_the_sandbox_user_plants_on_the_node_is_refused_per_entry_or_per_request_never_raised(tmp_path):
    node = _node(tmp_path)
    ws = node.path(W)
    (ws / "ok.py").write_text("x = 1\n")
    os.symlink("/etc/passwd", ws / "passwd")
    os.mkfifo(ws / "pipe")
    (ws / os.fsdecode(b"bad-\xff-name")).write_bytes(b"x")
    with open(ws / "sparse.bin", "wb") as f:
        f.truncate(64 << 20)
    captured, frame = _capture(node)
    manifest = load_manifest(captured.manifest)
    assert [e.path for e in manifest.entries] == ["ok.py"]
    assert {r.path.split("/")[-1] for r in manifest.refused} >= {"passwd", "pipe", "sparse.bin"}
    receive(captured.manifest, captured.manifest_sha256, captured.blobs, frame, BlobStore(tmp_path / "head"), "t1")
    for request, said in ((WorkspaceRead(workspace=W, path="passwd", max_bytes=100), "symlink"),
                          (WorkspaceRead(workspace=W, path="pipe", max_bytes=100), "not a regular file"),
                          (WorkspaceRead(workspace=W, path="../../etc/passwd", max_bytes=100), "'..'"),
                          (WorkspaceWrite(workspace=W, path="passwd/x", content=""), "not a directory"),
                          (WorkspaceWrite(workspace=W, path="big", content="x" * (5 << 20)), "the limit is"),
                          (WorkspaceList(workspace="../elsewhere"), "'..'"),
                          (WorkspaceCarried(workspace=W, sha256=["../../x"]), "not a lowercase hex sha256"),
                          (RestoreWorkspace(workspace=W, manifest=b"garbage"), "not a checkpoint manifest")):
        reply = node.answer(request, ())
        assert isinstance(reply, Error) and said in reply.detail, (request, reply)
        assert reply.code in ("workspace", "checkpoint")
    listing = node.answer(WorkspaceList(workspace=W), ())
    assert isinstance(listing, WorkspaceListing) and "ok.py (6 bytes)" in listing.text
    assert Path("/etc/passwd").read_text()  # nothing followed the link


async def _series(run_dir: Path, node_dir: Path, trials: int, agent=None, verify: bool = True):
    manifest = reach_manifest()
    plan = series_plan(run_dir, admitted_task(manifest), trials=trials)
    with trio.fail_after(60):
        async with peers(run_dir, agent or ReachAgent(), node_dir=node_dir) as links:
            if not (run_dir / "run.sqlite").exists() or trials <= 2:
                await record_run(links)
            ends = await run_series(links, plan, Progress(), reader_factory(run_dir))
            verdicts = []
            if verify:
                await links.recorder.flush()
                with RunReader(run_dir) as reader:
                    verdicts = await verify_series(links, reader, Progress(), run_dir, plan.series_id, manifest,
                                                   plan.reference_fingerprint)
    return plan, ends, verdicts


async def test_a_series_on_node_workspaces_records_checkpoints_at_the_head_and_replays_verified(tmp_path):
    run_dir, node_a, node_b = tmp_path / "run", tmp_path / "node-a", tmp_path / "node-b"
    run_dir.mkdir()
    plan, ends, verdicts = await _series(run_dir, node_a, trials=2)
    assert [e.outcome for e in ends] == ["success"] * 2 and [v.verdict for v in verdicts] == ["verified"] * 2
    assert not (run_dir / "workspaces").exists() and not (run_dir / "replays").exists()  # never under RUN_DIR
    assert (node_a / "w" / "workspaces").is_dir()
    assert not [p for p in (node_a / "blobs").rglob("*") if p.is_file() and p.parent.name != "tmp"]  # all acknowledged
    with RunReader(run_dir) as reader:
        points = [c for t in reader.trials(plan.series_id) for c in reader.checkpoints(t.trial_id)]
        assert {c.label for c in points} >= {"trial_start", "after_write", "after_exec"}
        head = BlobStore(run_dir / "blobs")
        for c in points:
            assert all(head.verify(e.sha256) for e in load_manifest(c.manifest).entries)
        assert any(load_manifest(c.manifest).entries for c in points)

    # The node is lost: a third trial on another node goes on from the workspace restored over the link.
    plan, ends, _ = await _series(run_dir, node_b, trials=3, verify=False)
    assert [e.outcome for e in ends] == ["success"]
    with RunReader(run_dir) as reader:
        third = reader.trials(plan.series_id)[-1]
        first = reader.operations(third.trial_id)[0]
        assert first.operation == "list_files" and "reach.json" in first.feedback["text"], first.feedback


async def test_a_node_that_forges_a_checkpoint_costs_its_trial_never_the_run(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    real = NodeWorkspaces.answer

    def forging(self, message, blobs):
        reply = real(self, message, blobs)
        if isinstance(message, CaptureWorkspace) and reply[0].blobs:
            return reply[0], [b"\x00" + reply[1][0][1:]]  # the first byte is not the file's
        return reply

    monkeypatch.setattr(NodeWorkspaces, "answer", forging)
    plan, ends, _ = await _series(run_dir, tmp_path / "node", trials=1, verify=False)
    (end,) = ends
    assert (end.outcome, end.cause) == ("incomplete", "infrastructure") and "hash to" in end.detail, end
    with RunReader(run_dir) as reader:
        (trial,) = reader.trials(plan.series_id)
        assert all(c.label == "trial_start" for c in reader.checkpoints(trial.trial_id))  # the empty start: no blob


async def test_a_receipt_that_does_not_name_what_was_carried_ends_the_trial_and_the_node_keeps_its_copies(tmp_path, monkeypatch):
    from roboswe.evaluation.peers import Recorder

    run_dir, node_dir = tmp_path / "run", tmp_path / "node"
    run_dir.mkdir()
    real = Recorder.carry_checkpoint

    async def short_receipt(self, carry, frame):
        receipt = await real(self, carry, frame)
        return msgspec.structs.replace(receipt, carried=receipt.carried[1:])  # one blob not acknowledged

    monkeypatch.setattr(Recorder, "carry_checkpoint", short_receipt)
    _, ends, _ = await _series(run_dir, node_dir, trials=1, verify=False)
    (end,) = ends
    assert (end.outcome, end.cause) == ("incomplete", "infrastructure") and "the node keeps its copies" in end.detail
    assert [p for p in (node_dir / "blobs").rglob("*") if p.is_file() and p.parent.name != "tmp"]  # nothing dropped
