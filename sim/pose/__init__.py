"""Blind Planar Pose Estimation (RLE-Bench family 06): the scene, its battery and its development renders.

- ``shapes``: the three asymmetric blocks T, C, F as box primitives (our own geometry), each with its
  frame at the footprint's area centroid and yaw 0 along the block's +x.
- ``scene``: ``PoseScene`` (MuJoCo: table, a robot-mounted pushing stick on a mocap body, the block,
  one fixed oblique camera): ``frame`` renders a still, ``push`` simulates a push episode.
- ``battery``: a group/episode spec from a seed, the rendered battery, labelled development renders.

Light on import (the sim registry imports family folders): MuJoCo is imported when a scene is built.
This folder is not a series ``Family``: RLE tasks are run by roboswe.rle, not by the trial loop.
"""
