"""RLE-Bench family 01, RoboCasa Speed-Run: develop a kitchen skill against a metered simulator, then
act in five hidden kitchens; reward = success_rate × (0.80 + 0.20 × (1 − development_steps / budget)).

- ``rules``: the manifest's ``[kitchen]`` section, the harness levels, the reward formula, the batch rule
  (light: roboswe/rle/manifest.py imports it).
- ``plan``: the hidden kitchens (layout variant and RoboCasa seed) from the hidden plan's seeds.
- ``development``: ``KitchenDevelopmentScene``, the family's development scene (roboswe/rle/scene.py's
  seam): RoboCasa's own task class and predicate through sim/robocasa on public seeds.
- ``evaluation``: the trusted evaluation simulator (hidden kitchens, per-trial caps, no reset,
  ``finish_trial``/``next_trial``), the simulator actor's phase during a LoadEvaluation, and the evidence it commits.
- ``runner``: the evaluation phase through the actors, the coordinator's side (after the sealed development).
- ``verify``: the reward report from committed evidence only (ledger chain, replayed trials), its own process.
- ``skills`` and ``MANUAL.md``: the L2/L3 client skills shipped into the sandbox with the task.
"""
