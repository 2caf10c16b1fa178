"""The visual cross-check (`roboswe judge`): a separate judge looks at camera views rendered from a trial's
recorded physics states and says, per observable condition of the task's predicate, whether the views
support it, contradict it or cannot show it. Only afterwards is each verdict compared with the trial's
mechanical record. Optional and supplementary: never the pass gate, never part of a score.

conditions: the per-task conditions and evidence guides, the judge config; views: the fixed view rule
and rendering; request: the judge's request, its one tool and the reading of the answer; compare: the
verdicts against the mechanical record; judging: a run's trials through a provider adapter into
``JudgementRecord`` rows; summary: what the report, results.json and the viewer show; scripted: the
offline pixel-rule judge.
"""
