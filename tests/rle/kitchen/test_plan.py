"""The hidden kitchens: five distinct per task, one plan for the three levels, drawn from the salt."""

from __future__ import annotations

import pytest

from roboswe.rle.kitchen.plan import at_level, hidden_plan, kit_variant
from roboswe.rle.manifest import load_task
from roboswe.rle.seeds import Salt, public_salt


def test_five_distinct_hidden_kitchens_the_same_at_every_level_and_new_with_a_new_salt():
    task = load_task("speedrun-kit-pickplacecountertodrawer")
    plan = hidden_plan(task, public_salt())
    assert len(plan.kitchens) == 5
    assert len({(k.stack_order, k.stack_start_x, k.wall_shift_x, k.seed) for k in plan.kitchens}) == 5
    assert len({k.stack_order for k in plan.kitchens}) == 5  # distinct layouts, not only distinct seeds
    for level in ("L2", "L3"):
        other = at_level(task, level)
        assert other.id == f"{task.id}-{level.lower()}" and other.kitchen.level == level
        assert hidden_plan(other, public_salt()).commitment == plan.commitment
    assert at_level(at_level(task, "L3"), "L1").id == task.id
    other_salt = hidden_plan(task, Salt(secret=b"x" * 32, label="private"))
    assert other_salt.commitment != plan.commitment
    assert {k.seed for k in other_salt.kitchens}.isdisjoint({k.seed for k in plan.kitchens})
    with pytest.raises(ValueError):
        at_level(task, "L4")


def test_a_kit_variant_reorders_the_base_stacks_and_keeps_every_fixture():
    task = load_task("speedrun-kit-closecabinet")
    kitchens = hidden_plan(task, public_salt()).kitchens
    layouts = [kit_variant(k) for k in kitchens]
    orders = [[s["name"] for s in layout["main_group"]["bottom_row_cabinets"]] for layout in layouts]
    assert len({tuple(o) for o in orders}) == 5 and all(sorted(o) == ["stack_1", "stack_2", "stack_3"] for o in orders)
    for layout, kitchen in zip(layouts, kitchens):
        first, *rest = layout["main_group"]["bottom_row_cabinets"]
        assert "pos" in first and all("pos" not in s and s["align_to"] for s in rest)
        assert first["pos"][0] - first["size"][0] / 2 == pytest.approx(kitchen.stack_start_x)


def test_real_asset_kitchens_come_from_robocasas_test_split():
    plan = hidden_plan(load_task("speedrun-close-cabinet"), public_salt())
    assert all(1 <= k.layout <= 10 and 1 <= k.style <= 10 and not k.stack_order for k in plan.kitchens)
