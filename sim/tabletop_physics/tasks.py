"""The four tasks' public geometry and the layouts their instances build (the hidden values come in the
instance: roboswe/rle/tabletop/plan.py draws them from the hidden plan's seed).

All lengths in metres, table frame: origin at the table top's centre, z up. What a participant is told
is in each task's instruction (configs/tasks/rle/tabletop-*.toml) and ``public_geometry``.
"""

from __future__ import annotations

import math

import msgspec

from .scene import Beam, FreeBody, Geom, Layout

COLOURS = ("0.80 0.20 0.20 1", "0.20 0.60 0.25 1", "0.20 0.35 0.80 1", "0.85 0.75 0.15 1",
           "0.60 0.25 0.70 1", "0.15 0.70 0.70 1", "0.90 0.50 0.20 1", "0.50 0.50 0.55 1")
_OVERVIEW = ("overview", (0.0, -0.75, 0.65), (0.0, 0.0, 0.08))
_SIDE = ("side", (0.75, 0.0, 0.35), (0.0, 0.0, 0.1))
# The arm's base per task (x, y, yaw; scene.Layout.base): a Panda reaches a top-down tool-centre point at table
# height between about 0.3 and 0.75 m from its base, so each task's base faces its own workspace.
TOWER_BASE = (0.0, 0.3, -math.pi / 2)
CANTILEVER_BASE = (-0.3, 0.35, -math.pi / 4)
BALANCE_BASE = (-0.45, -0.05, math.radians(10))
COM_BASE = (-0.4, 0.35, -math.radians(41))

# Tower: cubes in a row of slots; edges drawn per instance.
TOWER_SLOTS_X0, TOWER_SLOT_PITCH, TOWER_SLOT_Y = -0.28, 0.08, -0.2
TOWER_EDGE_RANGE = (0.04, 0.05)
TOWER_COUNT_RANGE = (5, 8)
TOWER_DENSITY = 500.0

# Cantilever: equal blocks (length along x) in one pile; the table ends at CANTILEVER_EDGE_X.
CANTILEVER_EDGE_X = 0.2
CANTILEVER_BLOCK = (0.12, 0.05, 0.03)  # length (x), width (y), height (z)
CANTILEVER_PILE = (-0.2, -0.2)
CANTILEVER_COUNT_RANGE = (4, 6)
CANTILEVER_MASS = 0.09

# Balance: a pendulum scale; the load's and the cubes' masses are hidden.
BALANCE_PIVOT = (0.0, 0.15, 0.15)
BALANCE_HALF_LENGTH, BALANCE_HALF_WIDTH = 0.25, 0.04
BALANCE_KEEL = (3.0, 0.1)  # kg, metres below the pivot
BALANCE_LOAD_X, BALANCE_LOAD_HALF = -0.2, 0.02
BALANCE_CUBE_HALF = 0.02
BALANCE_SLOTS = ((-0.1, -0.15), (0.0, -0.15), (0.1, -0.15))
BALANCE_LOAD_RANGE = (0.10, 0.25)
BALANCE_CUBE_RANGE = (0.05, 0.20)
BALANCE_ARMS = (0.22, 0.17, 0.12)  # the cubes' outermost non-overlapping places on the right arm (x of their centres)

# Hidden COM: a closed box whose ballast (hidden place on its floor) moves its centre of mass.
COM_BOX_HALF = (0.035, 0.035, 0.025)
COM_SHELL_MASS, COM_BALLAST_MASS, COM_BALLAST_HALF = 0.15, 0.30, 0.01
COM_BALLAST_RANGE = 0.02  # the ballast's centre lies in [-r, r]^2 of the box frame
COM_BOXES = 3
COM_BOX_POS = (0.0, 0.0)
COM_CAMERAS = (("tilt_x", (0.0, -0.55, 0.27), (0.0, 0.0, 0.27)), ("tilt_y", (0.55, 0.0, 0.27), (0.0, 0.0, 0.27)), _OVERVIEW)


class TowerInstance(msgspec.Struct, frozen=True, kw_only=True, tag="tower"):
    edges: tuple[float, ...]  # slot i holds a cube of edge edges[i]


class CantileverInstance(msgspec.Struct, frozen=True, kw_only=True, tag="cantilever"):
    count: int  # blocks in slots 0..count-1


class BalanceInstance(msgspec.Struct, frozen=True, kw_only=True, tag="balance"):
    load_mass: float
    masses: tuple[float, ...]  # the cube in slot i


class ComInstance(msgspec.Struct, frozen=True, kw_only=True, tag="com"):
    ballast: tuple[tuple[float, float], ...]  # per box, the ballast's (x, y) in the box frame


Instance = TowerInstance | CantileverInstance | BalanceInstance | ComInstance


def tower_layout(inst: TowerInstance) -> Layout:
    bodies = tuple(
        FreeBody(name=f"block{i}", pos=(TOWER_SLOTS_X0 + TOWER_SLOT_PITCH * i, TOWER_SLOT_Y, e / 2),
                 geoms=(Geom(half=(e / 2,) * 3, mass=round(TOWER_DENSITY * e ** 3, 6), rgba=COLOURS[i % len(COLOURS)]),))
        for i, e in enumerate(inst.edges))
    return Layout(bodies=bodies, base=TOWER_BASE, cameras=(_OVERVIEW, _SIDE))


def cantilever_layout(inst: CantileverInstance) -> Layout:
    length, width, height = CANTILEVER_BLOCK
    bodies = tuple(
        FreeBody(name=f"block{i}", pos=(*CANTILEVER_PILE, height / 2 + height * i),  # touching: a drop kicks a stiff pile
                 geoms=(Geom(half=(length / 2, width / 2, height / 2), mass=CANTILEVER_MASS, rgba=COLOURS[i % len(COLOURS)]),))
        for i in range(inst.count))
    return Layout(table_x=(-0.5, CANTILEVER_EDGE_X), bodies=bodies, base=CANTILEVER_BASE, cameras=(_OVERVIEW, _SIDE))


def balance_layout(inst: BalanceInstance) -> Layout:
    h = BALANCE_CUBE_HALF
    bodies = tuple(FreeBody(name=f"cube{i}", pos=(x, y, h), geoms=(Geom(half=(h, h, h), mass=m, rgba=COLOURS[i]),))
                   for i, ((x, y), m) in enumerate(zip(BALANCE_SLOTS, inst.masses)))
    beam = Beam(pivot=BALANCE_PIVOT, half_length=BALANCE_HALF_LENGTH, half_width=BALANCE_HALF_WIDTH,
                keel_mass=BALANCE_KEEL[0], keel_depth=BALANCE_KEEL[1], load_x=BALANCE_LOAD_X, load_half=BALANCE_LOAD_HALF,
                load_mass=inst.load_mass)
    return Layout(bodies=bodies, beam=beam, base=BALANCE_BASE, cameras=(_OVERVIEW, _SIDE))


def com_layout(inst: ComInstance, box: int) -> Layout:
    """Box ``box`` of the instance alone on the table: the shell and its hidden ballast (neither rendered nor
    colliding: it is inside the shell)."""
    hx, hy, hz = COM_BOX_HALF
    bx, by = inst.ballast[box]
    r = COM_BALLAST_HALF
    geoms = (Geom(half=(hx, hy, hz), mass=COM_SHELL_MASS, rgba="0.92 0.45 0.08 1"),
             Geom(half=(r, r, r), pos=(bx, by, -hz + 0.002 + r), mass=COM_BALLAST_MASS, hidden=True))
    body = FreeBody(name="box", pos=(COM_BOX_POS[0], COM_BOX_POS[1], hz), geoms=geoms, damping=0.004)
    return Layout(bodies=(body,), base=COM_BASE, cameras=COM_CAMERAS)


def com_offset(inst: ComInstance, box: int) -> tuple[float, float]:
    """The box's centre of mass in its frame, from the masses (what the compiled model's body COM must equal)."""
    bx, by = inst.ballast[box]
    share = COM_BALLAST_MASS / (COM_SHELL_MASS + COM_BALLAST_MASS)
    return share * bx, share * by


def com_depth_below(z_pinch: float) -> float:
    """How far the box's centre of mass lies below a pinch at height ``z_pinch`` of the box frame (public: the
    masses and the ballast's height are public, only its place on the floor is hidden)."""
    hz, r = COM_BOX_HALF[2], COM_BALLAST_HALF
    z = (COM_BALLAST_MASS * (-hz + 0.002 + r)) / (COM_SHELL_MASS + COM_BALLAST_MASS)
    return z_pinch - z


def harmonic(n: int) -> float:
    return sum(1.0 / k for k in range(1, n + 1))


def cantilever_optimum(count: int) -> float:
    """The harmonic stack's overhang for ``count`` equal blocks of length L, one per level: (L/2)·H_n."""
    return CANTILEVER_BLOCK[0] / 2 * harmonic(count)
