"""The evidence of a run: the run database, artifacts (videos, results.json), metrics and report.

``schema`` holds the tables of RUN_DIR/run.sqlite, ``store`` its single writer and ``reader``
its read API; ``artifacts`` stores
files with a read-back receipt; ``metrics`` scores each series from the records and ``scoring``
aggregates them (the one scoring function behind report, results.json and viewer); ``compare``
pairs runs by task; ``usage`` totals tokens and cost; ``context_evidence`` reads the context
policy and slides; ``report`` prints a run's summary; ``video`` renders trial videos from
recorded physics states.
"""
