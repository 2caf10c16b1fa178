"""Stage predicates: what a composite task's stage records are made of, evaluated on the RoboCasa env.

Each is one conjunct of a composite's success, written with RoboCasa's own object utilities and the
thresholds of RoboCasa's atomic tasks, so a stage means what the atomic task's success means:

- ``obj_in_drawer``: PickPlaceCounterToDrawer's placement (inside the drawer's interior, touching no counter);
- ``obj_in_cabinet``: PickPlaceCounterToCabinet's placement;
- ``obj_on_counter``: PickPlaceCabinetToCounter's (contact with the task's counter);
- ``gripper_far``: the gripper more than 0.25 m from the object (the pick-place tasks' release);
- ``drawer_closed``: CloseDrawer's (every drawer joint at most 5 % open);
- ``cabinet_closed``: CloseCabinet's (the fixture's ``is_closed``: every door at most 0.5 % open).

The env is the trusted side's; nothing here is participant-visible during evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

DRAWER_CLOSED = 0.05  # CloseDrawer: a joint more open than this is not closed


def _ou():
    from robocasa.utils import object_utils

    return object_utils


def obj_in_drawer(env: Any) -> bool:
    ou = _ou()
    return bool(ou.obj_inside_of(env, "obj", env.drawer) and not ou.check_obj_any_counter_contact(env, "obj"))


def obj_in_cabinet(env: Any) -> bool:
    return bool(_ou().obj_inside_of(env, "obj", env.cab))


def obj_on_counter(env: Any) -> bool:
    return bool(_ou().check_obj_fixture_contact(env, "obj", env.counter))


def gripper_far(env: Any) -> bool:
    return bool(_ou().gripper_obj_far(env, "obj"))


def drawer_closed(env: Any) -> bool:
    return all(p <= DRAWER_CLOSED for p in env.drawer.get_door_state(env=env).values())


def cabinet_closed(env: Any) -> bool:
    return bool(env.cab.is_closed(env=env))


STAGES: dict[str, Callable[[Any], bool]] = {f.__name__: f for f in (
    obj_in_drawer, obj_in_cabinet, obj_on_counter, gripper_far, drawer_closed, cabinet_closed)}
"""A composite's ``stages`` name these."""


def stage_vector(env: Any, names: tuple[str, ...]) -> tuple[bool, ...]:
    return tuple(STAGES[n](env) for n in names)
