"""The scene fingerprint covers every input it names (DESIGN.md section 1: model XML, compiled model, initial
state, seed, package versions): the digest is the hash of exactly those, and changing one changes it."""

from __future__ import annotations

import hashlib
import json

import msgspec


def _digest(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def test_the_digest_is_the_hash_of_every_named_input_and_nothing_is_left_out(lift_panda):
    fp = lift_panda.reset(0)
    parts = {"model_xml_sha256": fp.model_xml_sha256, "compiled_model_sha256": fp.compiled_model_sha256,
             "initial_state_sha256": fp.initial_state_sha256, "seed": fp.seed, "versions": fp.versions}
    assert fp.seed == 0 and all(len(parts[k]) == 64 for k in ("model_xml_sha256", "compiled_model_sha256",
                                                               "initial_state_sha256"))
    assert {"mujoco", "numpy"} <= set(fp.versions) and any("robosuite" in k for k in fp.versions), fp.versions
    assert fp.digest == _digest(parts)
    # each input moves the digest: none of them is decoration
    for key, other in (("model_xml_sha256", "0" * 64), ("compiled_model_sha256", "0" * 64),
                       ("initial_state_sha256", "0" * 64), ("seed", 1), ("versions", {**fp.versions, "mujoco": "0"})):
        assert _digest({**parts, key: other}) != fp.digest, key


def test_a_different_package_version_gives_a_different_fingerprint(lift_panda, monkeypatch):
    before = lift_panda.reset(0)
    monkeypatch.setattr(lift_panda, "_versions", {**lift_panda._versions, "mujoco": "0.0.0-test"})
    after = lift_panda.reset(0)
    assert after.initial_state_sha256 == before.initial_state_sha256 and after.digest != before.digest
    monkeypatch.undo()
    assert lift_panda.reset(0).digest == before.digest
    assert msgspec.to_builtins(lift_panda.reset(1))["digest"] != before.digest
