"""Tabletop Physical Reasoning (RLE-Bench family 03): the scene and the four tasks' public geometry.

- ``scene``: ``Scene`` (MuJoCo: a table, robosuite's Panda arm with its gripper, the instance's free bodies, a
  balance beam where the task has one); ``build_model``, the grasp rules.
- ``arm``: the Panda assembled from robosuite's models, its inverse kinematics and its torque controller.
- ``tasks``: each task's public geometry, its instance type (the hidden values) and the layout an
  instance builds; the analytic optima (the harmonic stack).

Light on import (the sim registry imports family folders): MuJoCo is imported when a scene is built.
This folder is not a series ``Family``: RLE tasks are run by roboswe.rle, not by the trial loop.
"""
