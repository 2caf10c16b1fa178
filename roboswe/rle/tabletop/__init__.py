"""RLE-Bench family 03, Tabletop Physical Reasoning (tower, cantilever, balance, hidden COM): one continuous,
ledger-metered attempt per task on a hidden instance, scored by the trusted side from recorded physics.

- ``rules``: the manifest's ``[tabletop]`` section (light: roboswe/rle/manifest.py imports it).
- ``plan``: the hidden instance from the hidden plan's seed (HMAC of the salt).
- ``attempt``: ``TabletopScene``, the family's development scene (roboswe/rle/scene.py's seam) over the
  hidden instance; it records every row and the physics states the score reads.
- ``scoring``: the rewards from recorded states (pure functions).
- ``participants``: the scripted calibration participants; ``runner``: an attempt end to end, its
  run directory and its replay; ``demo``: `roboswe rle demo tabletop`.

The scene itself (MuJoCo, robosuite's Panda arm and gripper) is sim/tabletop_physics/.
"""
