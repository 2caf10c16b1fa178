"""Deterministic RoboPaint participants (seed 004): three brush strokes per round, through the real operations.

``PaintDemoAgent`` writes and runs a script (code mode); ``PaintDirectAgent`` calls move_flange and
submit_painting directly (``[series] interface = "paint"``).
"""

from ._agent import PaintDemoAgent as PaintDemoAgent
from ._agent import script_source as script_source
from ._direct import PaintDirectAgent as PaintDirectAgent
