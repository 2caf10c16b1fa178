"""Deterministic demo participant that closes the open drawer of a RoboCasa kitchen (CloseDrawer,
PandaOmron) from RGB-D through the real operations and the `robot` API; its authored script
lives in scripts/close_drawer.py."""

from ._agent import KitchenDemoAgent as KitchenDemoAgent
from ._agent import script_source as script_source
