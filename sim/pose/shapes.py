"""The three blocks, as boxes in the block's own frame: origin at the footprint's area centroid, z up
from the block's bottom, yaw 0 along +x. None is symmetric under any rotation, so yaw is defined
over the whole circle; T and C are mirror-symmetric, F is not."""

from __future__ import annotations

import numpy as np

HEIGHT = 0.03  # metres, every block
SHAPES = ("T", "C", "F")

# footprint rectangles (x0, x1, y0, y1) in metres, before centring
_RECTS = {
    "T": [(0.050, 0.075, -0.050, 0.050), (0.000, 0.050, -0.0125, 0.0125)],
    "C": [(0.000, 0.025, -0.040, 0.040), (0.025, 0.070, 0.015, 0.040), (0.025, 0.070, -0.040, -0.015)],
    "F": [(0.000, 0.025, -0.050, 0.050), (0.025, 0.075, 0.025, 0.050), (0.025, 0.055, -0.0025, 0.0225)],
}


def boxes(shape: str) -> np.ndarray:
    """(n, 4) rows of (centre x, centre y, half x, half y), centred on the footprint's area centroid."""
    r = np.array(_RECTS[shape], dtype=float)
    cx, cy = (r[:, 0] + r[:, 1]) / 2, (r[:, 2] + r[:, 3]) / 2
    hx, hy = (r[:, 1] - r[:, 0]) / 2, (r[:, 3] - r[:, 2]) / 2
    area = 4 * hx * hy
    gx, gy = (cx * area).sum() / area.sum(), (cy * area).sum() / area.sum()
    return np.stack([cx - gx, cy - gy, hx, hy], axis=1)


def footprint_area(shape: str) -> float:
    b = boxes(shape)
    return float((4 * b[:, 2] * b[:, 3]).sum())


def contains(shape: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether block-frame points (x, y) lie in the footprint (for templates and tests)."""
    inside = np.zeros(np.broadcast(x, y).shape, dtype=bool)
    for cx, cy, hx, hy in boxes(shape):
        inside |= (np.abs(x - cx) <= hx) & (np.abs(y - cy) <= hy)
    return inside
