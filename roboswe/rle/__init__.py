"""RLE-Bench: develop → seal → hidden verification → reward report → index.

- ``manifest``: ``RleTask`` (instruction, development environment, budget, artifact contract, evaluation
  battery, scoring constants, protocol identity), ``load_task(name_or_path)``.
- ``ledger``: hash-chained rows (charge before dispatch, confirm after) and ``verify_chain``.
- ``seal``: ``seal_directory`` → ``SealedArtifact`` (the workspace filtered by the contract, every file hashed).
- ``seeds``: ``Salt``, hidden seeds as HMAC(salt, task, index), the plan commitment.
- ``report``: ``RewardReport`` (reward in [0, 1], status scored | gated | missing, gates, components).
- ``verifier``: ``python -m roboswe.rle.verifier``, the process that runs a sealed artifact in the sandbox.
- ``index``: ``rle_index(reports)``, the one function behind ``roboswe index`` and its ``--json``.
- ``pose``: family 06 (Blind Planar Pose Estimation): battery plan, scoring, reference estimator.
"""
