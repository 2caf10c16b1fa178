"""The evidence of a run: the run database, artifacts (videos, results.json), metrics and report.

``schema`` holds the tables of RUN_DIR/run.sqlite, ``store`` its single writer and ``reader``
its read API; ``artifacts`` stores
files with a read-back receipt; ``metrics`` scores series from the records; ``report`` prints
a run's summary; ``video`` renders trial videos from recorded physics states.
"""
