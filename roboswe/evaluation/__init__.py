"""The evaluation: admission, series of trials, verification by replay, and what they share.

``job`` is what the coordinator is asked to do and ``run`` does it (``run_job``, results.json);
``series`` runs T trials of one task; ``trial`` carries one out; ``verify`` replays ended
trials. ``peers`` is every other actor as the coordinator sees it (typed requests with their
deadlines); ``plan`` is what is fixed about a series; ``conversation`` is what the context
manager must hold; ``feedback`` is what the records keep of each operation (trial writes it,
verify reads it); ``progress`` is the job's live figures. ``workspace`` is the participant's
folder as the harness touches it; ``instructions`` is what the participant is told;
``admission`` decides which tasks may be run at all.
"""
