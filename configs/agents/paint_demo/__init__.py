"""Deterministic RoboPaint participant (seed 004): three brush strokes per round, through the real operations."""

from ._agent import PaintDemoAgent as PaintDemoAgent
from ._agent import script_source as script_source
