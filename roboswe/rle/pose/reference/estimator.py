"""Reference estimator for RLE-Bench pose (RGB and RGB-D): classical CV, numpy only.

It knows the three footprints (templates.json, the same boxes the scene builds; a test pins them) and
the camera it is given. Per frame: red pixels of the block's top face (by depth above the table in
RGB-D, by brightness in RGB) are cast onto the plane of the top face; their footprint, rasterised at
2 mm, is matched (a Tversky index that forgives hidden parts) against every shape at every 1.5° of yaw, then refined over shift
(the stick may hide part of the block). Within an episode the shape is the running vote.
"""

import json
import math
from pathlib import Path

import numpy as np

RES = 0.002  # metres per footprint cell
N = 64  # cells per side (12.8 cm: the largest block at any yaw, with margin)
COARSE = np.deg2rad(np.arange(0, 360, 1.5))
SHIFT = 5  # cells searched each way around the observed centroid

_spec = json.loads((Path(__file__).parent / "templates.json").read_text())
HEIGHT = _spec["height"]
SHAPES = tuple(_spec["boxes"])
_grid = (np.arange(N) - N / 2 + 0.5) * RES
GX, GY = np.meshgrid(_grid, _grid)  # row = y, column = x


def _template(shape, yaw):
    c, s = math.cos(yaw), math.sin(yaw)
    bx, by = c * GX + s * GY, -s * GX + c * GY  # table offsets into the block frame
    inside = np.zeros(GX.shape, dtype=bool)
    for cx, cy, hx, hy in _spec["boxes"][shape]:
        inside |= (np.abs(bx - cx) <= hx) & (np.abs(by - cy) <= hy)
    return inside


_TEMPLATES = {s: np.stack([_template(s, y).ravel() for y in COARSE]).astype(np.float32) for s in SHAPES}
_SHIFTS = [(dy, dx) for dy in range(-SHIFT, SHIFT + 1) for dx in range(-SHIFT, SHIFT + 1)]


MISSED = 0.4  # weight of template cells not seen red: they may be hidden by the stick


def _match(inter, observed, template):
    """Tversky index: red outside the template counts fully against a match, template unseen only partly."""
    return inter / (inter + (observed - inter) + MISSED * (template - inter))


class Estimator:
    def __init__(self):
        self.reset()

    def reset(self):
        self.votes = {s: 0.0 for s in SHAPES}
        self.last = None  # the previous frame's centre: an episode moves a few mm per frame, stills jump
        self.last_yaw = None

    def _top_points(self, obs):
        rgb = obs["rgb"].astype(np.int16)
        red = rgb[..., 0] - np.maximum(rgb[..., 1], rgb[..., 2])
        K = np.asarray(obs["camera"]["K"], dtype=float)
        T = np.asarray(obs["camera"]["table_from_camera"], dtype=float)
        if "depth" in obs:
            v, u = np.nonzero(red > 40)
            rays = np.linalg.solve(K, np.stack([u + 0.5, v + 0.5, np.ones(len(u))]))
            pts = T[:3, :3] @ (rays * obs["depth"][v, u]) + T[:3, 3:4]
            keep = pts[2] > HEIGHT - 0.006
            return pts[:2, keep].T
        v, u = np.nonzero((red > 40) & (rgb[..., 0] > 190))  # the top face is the brightly lit one
        rays = T[:3, :3] @ np.linalg.solve(K, np.stack([u + 0.5, v + 0.5, np.ones(len(u))]))
        t = (HEIGHT - T[2, 3]) / rays[2]
        return (T[:2, 3:4] + rays[:2] * t).T

    def _raster(self, pts, centre):
        idx = np.floor((pts - centre) / RES + N / 2).astype(int)
        ok = (idx >= 0).all(1) & (idx < N).all(1)
        grid = np.zeros((N, N), dtype=np.float32)
        grid[idx[ok, 1], idx[ok, 0]] = 1.0
        # close single-cell gaps between projected pixels (a 3x3 majority)
        padded = np.pad(grid, 1)
        neigh = sum(padded[i : i + N, j : j + N] for i in range(3) for j in range(3))
        return np.maximum(grid, (neigh >= 5).astype(np.float32))

    def estimate(self, obs):
        pts = self._top_points(obs)
        if len(pts) < 10:
            return {"x": 0.0, "y": 0.0, "yaw": 0.0, "shape": max(self.votes, key=self.votes.get)}
        centre = pts.mean(0)
        following = self.last is not None and np.hypot(*(centre - self.last)) <= 0.03
        if not following:
            self.votes = {s: 0.0 for s in SHAPES}  # not the block we were following
            self.last_yaw = None
        self.last = centre
        obs_grid = self._raster(pts, centre)
        o = obs_grid.ravel()
        best = None
        for shape in SHAPES:
            tm = _TEMPLATES[shape]
            inter = tm @ o
            iou = _match(inter, o.sum(), tm.sum(1))
            k = int(np.argmax(iou))
            if best is None or iou[k] > best[0]:
                best = (float(iou[k]), shape, COARSE[k])
            self.votes[shape] = self.votes[shape] * 0.9 + float(iou[k])
        shape = max(self.votes, key=self.votes.get)
        score, yaw, (dx, dy) = self._refine(obs_grid, shape, best[2] if shape == best[1] else None)
        if following and self.last_yaw is not None:
            # a pushed block turns a few degrees a frame: prefer the pose near the last one unless clearly worse
            near = self._refine(obs_grid, shape, self.last_yaw)
            if near[0] > score - 0.05:
                score, yaw, (dx, dy) = near
        self.last_yaw = yaw
        x, y = centre[0] + dx * RES, centre[1] + dy * RES
        return {"x": float(x), "y": float(y), "yaw": float(math.atan2(math.sin(yaw), math.cos(yaw))), "shape": shape}

    def _refine(self, grid, shape, yaw0):
        """Best (score, yaw, shift in cells) over the yaws next to yaw0 (every yaw when None) and template shifts."""
        n = len(COARSE)
        if yaw0 is None:
            ks = range(n)
        else:
            k0 = round((yaw0 % (2 * math.pi)) / (COARSE[1] - COARSE[0])) % n
            ks = [(k0 + d) % n for d in (-2, -1, 0, 1, 2)]
        area = grid.sum()
        F = np.fft.rfft2(grid, s=(2 * N, 2 * N))
        best = (-1.0, 0.0, (0, 0))
        for k in ks:
            tm = _TEMPLATES[shape][k].reshape(N, N)
            # cross-correlation of the observation with the template over every shift
            corr = np.fft.irfft2(F * np.conj(np.fft.rfft2(tm, s=(2 * N, 2 * N))), s=(2 * N, 2 * N))
            inter = np.array([corr[dy % (2 * N), dx % (2 * N)] for dy, dx in _SHIFTS])
            score = _match(inter, area, tm.sum())
            i = int(np.argmax(score))
            if score[i] > best[0]:
                best = (float(score[i]), float(COARSE[k]), (_SHIFTS[i][1], _SHIFTS[i][0]))
        return best


def make_estimator():
    return Estimator()
