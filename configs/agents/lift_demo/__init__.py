"""Deterministic demo participant that solves robosuite Lift (Panda) from RGB-D through the
real operations and the `robot` API; its authored script lives in scripts/lift_cube.py."""

from ._agent import LiftDemoAgent as LiftDemoAgent
from ._agent import script_source as script_source
