"""RLE-Bench family 02, RoboCasa Harness Transfer: one agent builds a harness (code and ``MANUAL.md``) on
three composite practice tasks; five fresh agents, each with only the sealed harness restored into an
empty workspace, attempt a held-out composite task in unseen kitchens; five more with an empty workspace
are the control. reward = mean over the five of 1 for a simulator-confirmed success, else the stage
credit (best stage count − reset count) / (total − reset count); missing trials 0.

- ``rules``: the manifest's ``[transfer]`` section (composites, caps), the trial score and the reward.
- ``stages``: the stage predicates a composite names (RoboCasa's own object and fixture utilities).
- ``scene``: ``CompositeScene`` (one composite in one kit kitchen, its stage vector) and the development
  scene over the practice composites (``DEVELOPMENT_SCENES["transfer"]``).
- ``plan``: the held-out task's hidden kitchens.
- ``trial``: the trusted side of one fresh agent's attempt (the simulator actor's, ``EVALUATIONS["transfer"]``);
  it writes the stage records.
- ``verify``: the reward report from committed evidence (ledger, handoff digests, stage records).
- ``runner``: after the development and the seal (roboswe/rle/run.py), each fresh agent and control agent as
  its own attempt through the actors (a new conversation, roboswe/rle/fresh.py's workspace), the verifier.
"""
