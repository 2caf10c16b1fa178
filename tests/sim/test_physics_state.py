"""sim/physics_state: the field order the fingerprint hashes, and both packings round-trip exactly."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from roboswe.protocol.sim import RecordedStates
from roboswe.sim.physics_state import (
    RECORD_FIELDS,
    STATE_FIELDS,
    PhysicsStates,
    StateLog,
    TraceError,
    control_trace,
    control_trace_from_states,
    fingerprint_bytes,
    snapshot,
    states_from_blobs,
    states_from_traces,
    states_to_blobs,
    trace_arrays,
)

# Lift/Panda seed 0 under the manifest's pinned robosuite/MuJoCo, measured before the field
# tuple moved into sim/physics_state.py (2026-11-30): a drift in the hashed bytes changes it.
LIFT_SEED0_INITIAL_STATE_SHA256 = "e19e5d248f04d665e18efb6e279cc4acfcd59354b9de42ea6ebb3d18ff94266d"


def _log(steps: int, nq: int = 3, nv: int = 2, na: int = 0) -> StateLog:
    rng = np.random.default_rng(7)
    log = StateLog()
    for s in range(steps):
        log.append(s, s * 0.05, {"qpos": rng.normal(size=nq), "qvel": rng.normal(size=nv), "act": np.zeros(na),
                                 "mocap_pos": rng.normal(size=3), "mocap_quat": rng.normal(size=4)})
    return log


def _assert_same(a: PhysicsStates, b: PhysicsStates) -> None:
    for name in RECORD_FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.step.dtype == b.step.dtype == np.int64


def test_fingerprint_hashes_the_state_fields_in_their_pinned_order():
    # Changing this tuple changes every admitted fingerprint: update admitted.json files with it.
    assert STATE_FIELDS == ("qpos", "qvel", "act", "mocap_pos", "mocap_quat")
    assert RECORD_FIELDS == ("step", "time", *STATE_FIELDS, "action")  # the action is recorded, never hashed
    state = {name: np.arange(i, i + 3, dtype=np.float64) for i, name in enumerate(STATE_FIELDS)}
    expected = b"".join(state[name].astype("<f8").tobytes() for name in STATE_FIELDS)
    assert fingerprint_bytes(state) == expected
    assert fingerprint_bytes(dict(reversed(state.items()))) == expected  # mapping order does not matter


def test_lift_initial_state_hash_is_unchanged(lift_panda):
    fingerprint = lift_panda.reset(0)
    state = snapshot(lift_panda.data)
    assert hashlib.sha256(fingerprint_bytes(state)).hexdigest() == fingerprint.initial_state_sha256
    assert fingerprint.initial_state_sha256 == LIFT_SEED0_INITIAL_STATE_SHA256


def test_snapshot_is_a_float64_copy():
    class Data:
        qpos = np.array([1, 2], dtype=np.float32)
        qvel = np.array([3.0])
        act = np.zeros(0)
        mocap_pos = np.zeros((1, 3))
        mocap_quat = np.ones((1, 4))

    data = Data()
    snap = snapshot(data)
    data.qvel[0] = 99.0
    assert snap["qvel"][0] == 3.0 and snap["qpos"].dtype == np.float64 and list(snap) == list(STATE_FIELDS)


def test_state_log_take_hands_over_and_starts_anew():
    log = _log(4)
    states = log.take()
    assert len(states) == 4 and states.qpos.shape == (4, 3) and states.act.shape == (4, 0)
    assert list(states.step) == [0, 1, 2, 3] and len(log) == 0
    assert len(log.take()) == 0


def test_blobs_round_trip_every_field():
    states = _log(5).take()
    fields, blobs = states_to_blobs(states)
    assert list(fields) == list(RECORD_FIELDS) and len(blobs) == len(RECORD_FIELDS)
    message = RecordedStates(fingerprint_digest="d", seed=0, count=len(states), fields=fields)
    _assert_same(states_from_blobs(message, [memoryview(b) for b in blobs]), states)


def test_empty_blobs_round_trip():
    fields, blobs = states_to_blobs(StateLog().take())
    back = states_from_blobs(RecordedStates(fingerprint_digest="", seed=-1, count=0, fields=fields), blobs)
    assert len(back) == 0


@pytest.mark.parametrize("damage, needle", [
    (lambda f, b: ({k: v for k, v in f.items() if k != "qvel"}, b), "lack ['qvel']"),
    (lambda f, b: (f, b[:-1]), "points at blob 7"),
    (lambda f, b: (f, [*b[:2], b[2][:-8], *b[3:]]), "'qpos': 14 values, expected 5 x 3"),
])
def test_blobs_that_do_not_match_the_message_are_refused(damage, needle):
    states = _log(5).take()
    fields, blobs = damage(*states_to_blobs(states))
    with pytest.raises(TraceError) as e:
        states_from_blobs(RecordedStates(fingerprint_digest="d", seed=0, count=5, fields=fields), blobs)
    assert needle in str(e.value)


def test_control_traces_join_back_into_the_recorded_states():
    log = _log(6)
    first = log.take()
    for s in range(6, 10):
        log.append(s, s * 0.05, first.row(0))
    second = log.take()
    traces = [control_trace_from_states("r/t1", 1, second), control_trace_from_states("r/t1", 0, first)]
    assert (traces[1].step_start, traces[1].step_end, list(traces[1].layout)) == (0, 6, ["time", "qpos", "qvel",
                                                                                       "mocap_pos", "mocap_quat"])
    joined = states_from_traces(traces)
    assert list(joined.step) == list(range(10))
    np.testing.assert_array_equal(joined.qpos[:6], first.qpos)
    np.testing.assert_array_equal(joined.qvel[6:], second.qvel)
    np.testing.assert_array_equal(joined.time, np.arange(10) * 0.05)
    assert joined.act.shape == (10, 0)


def test_trace_arrays_unpack_by_layout_and_refuse_short_data():
    qpos, qvel = np.arange(6.0).reshape(2, 3), np.arange(2.0)
    trace = control_trace("t", 0, 10, {"qpos": qpos, "qvel": qvel})
    arrays = trace_arrays(trace)
    assert (trace.step_start, trace.step_end, trace.layout) == (10, 12, {"qpos": 3, "qvel": 1})
    np.testing.assert_array_equal(arrays["qpos"], qpos)
    np.testing.assert_array_equal(arrays["qvel"][:, 0], qvel)
    with pytest.raises(ValueError, match="different step counts"):
        control_trace("t", 0, 0, {"qpos": qpos, "qvel": np.zeros(3)})
    with pytest.raises(ValueError, match="t#0: 7 values, expected 2 steps x 4 columns"):
        trace_arrays(type(trace)(**{**{f: getattr(trace, f) for f in trace.__struct_fields__}, "data": trace.data[:-8]}))


def test_states_from_traces_names_what_is_missing():
    with pytest.raises(TraceError, match="no control traces"):
        states_from_traces([])
    with pytest.raises(TraceError, match=r"t#3 lacks \['qvel'\]"):
        states_from_traces([control_trace("t", 3, 0, {"qpos": np.zeros((2, 3))})])


def test_actions_travel_beside_the_state_and_never_enter_the_fingerprint():
    log = StateLog()
    state = {name: np.arange(3, dtype=np.float64) for name in STATE_FIELDS}
    log.append(0, 0.0, state)  # the reset state: no action produced it
    log.append(1, 0.05, state, np.array([0.5, -1.0]))
    log.append(2, 0.10, state, [0.25, 1.0])
    states = log.take()
    np.testing.assert_array_equal(states.action, [[np.nan, np.nan], [0.5, -1.0], [0.25, 1.0]])
    assert fingerprint_bytes(states.row(1)) == fingerprint_bytes(state) and "action" not in states.row(1)
    fields, blobs = states_to_blobs(states)
    back = states_from_blobs(RecordedStates(fingerprint_digest="d", seed=0, count=3, fields=fields), blobs)
    _assert_same(back, states)
    # A simulator from before actions were recorded sends no action blob: the column is empty, not an error.
    old = {k: v for k, v in fields.items() if k != "action"}
    assert states_from_blobs(RecordedStates(fingerprint_digest="d", seed=0, count=3, fields=old), blobs).action.shape == (3, 0)
    trace = control_trace_from_states("r/t1", 0, states)
    assert trace.layout["action"] == 2
    # An older trace without the action column joins a newer one as NaN rows.
    older = control_trace("r/t1", 1, 3, {k: v[1:] for k, v in trace_arrays(trace).items() if k != "action"})
    joined = states_from_traces([trace, older])
    assert joined.action.shape == (5, 2)
    np.testing.assert_array_equal(joined.action[1:3], [[0.5, -1.0], [0.25, 1.0]])
    assert np.isnan(joined.action[0]).all() and np.isnan(joined.action[3:]).all()


def test_robosuite_records_the_commanded_action_of_every_step(lift_panda):
    lift_panda.reset(0)
    spec = lift_panda.action_spec()
    low, high = np.array(spec.low), np.array(spec.high)
    rng = np.random.default_rng(3)
    chunk = [low + (high - low) * rng.uniform(0.3, 0.7, size=len(low)) for _ in range(3)]
    lift_panda.step([a.tolist() for a in chunk])
    hold = lift_panda.hold_action()
    lift_panda.wait(2)
    states = lift_panda.take_states()
    assert list(states.step) == [0, 1, 2, 3, 4, 5] and states.action.shape == (6, spec.dim)
    assert np.isnan(states.action[0]).all()  # the reset state: no action produced it
    np.testing.assert_array_equal(states.action[1:4], np.array(chunk))
    np.testing.assert_array_equal(states.action[4:], np.tile(hold, (2, 1)))
