"""RLE-Bench family 06, Blind Planar Pose Estimation: the hidden plan, the battery, the scoring rule
(``family``), and the reference estimator shipped as package data (``reference/estimator.py``)."""
