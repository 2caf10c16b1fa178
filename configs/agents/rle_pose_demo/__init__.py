"""Deterministic RLE-Bench development participant for the pose family: it writes the reference
estimator into its workspace, checks it on labelled development renders with a few charged steps and
resets (scripts/develop_pose.py), and finishes; the coordinator seals what it wrote."""

from ._agent import PoseDemoAgent as PoseDemoAgent
