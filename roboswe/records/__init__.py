"""The evidence of a run: the run database, artifacts (videos, results.json), metrics and report.

``store`` is the single writer and the readers of RUN_DIR/run.sqlite; ``artifacts`` stores
files with a read-back receipt; ``metrics`` scores series from the records; ``report`` prints
a run's summary; ``video`` renders trial videos from recorded physics states.
"""
