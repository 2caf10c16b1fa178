"""The evaluation: admission, series of trials, verification by replay, and what they share.

``job`` is what the coordinator is asked to do; ``series`` runs T trials of one task;
``trial`` carries one out; ``verify`` replays ended trials; ``workspace`` is the participant's
folder as the harness touches it; ``instructions`` is what the participant is told;
``admission`` decides which tasks may be run at all.
"""
