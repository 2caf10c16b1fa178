"""Client skills for RLE-Bench's kitchen speed-run (levels L2 and L3): geometry from depth, motion, grasp.

Shipped into the participant's workspace with HARNESS_MANUAL.md; plain numpy, no model weights, no
simulator access: everything here works from what ``robot.observe()`` and ``robot.state()`` return
and acts only through ``robot.step_many``. ``robot`` is any object with those calls (``import robot``
in the sandbox). Conventions (PandaOmron, HYBRID_MOBILE_BASE; robot.spec() states them): the arm's
OSC_POSE delta is in the mobile base's frame (x forward, y left, z up), 1.0 = 0.05 m or 0.5 rad per
control step; grip -1 opens, +1 closes; mode <= 0 is arm mode. Quaternions from the robot are
(x, y, z, w); RoboCasa's object quaternions under L3's ``priv_obj_quat`` are (w, x, y, z).
"""

from __future__ import annotations

import numpy as np

ARM_SCALE_M = 0.05  # m per unit of the arm's translation command
ARM_SCALE_RAD = 0.5  # rad per unit of its rotation command


# ---- geometry ------------------------------------------------------------------------------------


def quat_xyzw_to_matrix(q) -> np.ndarray:
    x, y, z, w = (float(v) for v in q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def quat_wxyz_to_matrix(q) -> np.ndarray:
    w, x, y, z = (float(v) for v in q)
    return quat_xyzw_to_matrix([x, y, z, w])


def yaw_of(matrix: np.ndarray, axis: int = 0) -> float:
    """Heading (rad, about world z) of one of a rotation's axes."""
    v = matrix[:, axis]
    return float(np.arctan2(v[1], v[0]))


def wrap(angle: float, period: float = 2 * np.pi) -> float:
    """``angle`` wrapped into [-period/2, period/2)."""
    return float((angle + period / 2) % period - period / 2)


def world_to_base(vector, base_quat) -> np.ndarray:
    """A world-frame vector in the mobile base's frame (the arm's command frame)."""
    return quat_xyzw_to_matrix(base_quat).T @ np.asarray(vector, dtype=float)


def backproject(view: dict, stride: int = 2) -> np.ndarray:
    """World points (N x 3) of a camera view's depth (``robot.observe(depth=True)[camera]``); 0 depth dropped."""
    depth = np.asarray(view["depth"], dtype=float)[::stride, ::stride]
    h, w = depth.shape
    K = np.asarray(view["K"], dtype=float)
    us, vs = np.meshgrid(np.arange(w) * stride + 0.5, np.arange(h) * stride + 0.5)
    z = depth.ravel()
    keep = z > 0
    x = (us.ravel()[keep] - K[0, 2]) / K[0, 0] * z[keep]
    y = (vs.ravel()[keep] - K[1, 2]) / K[1, 1] * z[keep]
    cam = np.stack([x, y, z[keep], np.ones_like(x)])
    return (np.asarray(view["T_world_camera"], dtype=float) @ cam)[:3].T


def dominant_level(points: np.ndarray, low: float = 0.5, high: float = 1.3, bin_m: float = 0.01) -> float:
    """The height (m) of the most populated horizontal level between ``low`` and ``high``: a counter top."""
    z = points[(points[:, 2] > low) & (points[:, 2] < high), 2]
    if len(z) == 0:
        raise ValueError("no points between the heights given")
    hist, edges = np.histogram(z, bins=np.arange(low, high + bin_m, bin_m))
    i = int(np.argmax(hist))
    return float(edges[i] + bin_m / 2)


def blobs_above(points: np.ndarray, level: float, *, min_h: float = 0.015, max_h: float = 0.12,
                cell_m: float = 0.02, min_points: int = 6) -> list[np.ndarray]:
    """Clusters of points standing ``min_h``..``max_h`` above a level (objects on a counter), largest first;
    each as its points. Clustering is 4-connected on an x-y grid of ``cell_m``."""
    sel = points[(points[:, 2] > level + min_h) & (points[:, 2] < level + max_h)]
    if len(sel) == 0:
        return []
    cells = np.floor(sel[:, :2] / cell_m).astype(int)
    index: dict[tuple[int, int], list[int]] = {}
    for i, c in enumerate(map(tuple, cells)):
        index.setdefault(c, []).append(i)
    seen, clusters = set(), []
    for start in index:
        if start in seen:
            continue
        stack, members = [start], []
        seen.add(start)
        while stack:
            c = stack.pop()
            members += index[c]
            for d in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                n = (c[0] + d[0], c[1] + d[1])
                if n in index and n not in seen:
                    seen.add(n)
                    stack.append(n)
        if len(members) >= min_points:
            clusters.append(sel[members])
    return sorted(clusters, key=len, reverse=True)


# ---- motion and grasp ----------------------------------------------------------------------------


class Arm:
    """Closed-loop end-effector moves through ``robot.step_many`` (one batch per call, at most ``batch``)."""

    def __init__(self, robot, spec, *, batch: int = 1):
        names = [_field(c, "name") for c in _field(_field(spec, "action"), "components")]
        self.robot, self.dim, self.batch = robot, int(_field(spec, "action_dim")), batch
        self.i_arm = names.index("right.dx") if "right.dx" in names else 0
        self.i_grip = next((i for i, n in enumerate(names) if "grip" in n), 6)
        self.i_mode = names.index("mode") if "mode" in names else self.dim - 1
        self.grip = -1.0
        self.steps = 0
        self.state = robot.state()

    def row(self, arm=(0, 0, 0, 0, 0, 0)) -> list[float]:
        a = [0.0] * self.dim
        a[self.i_arm:self.i_arm + 6] = [float(np.clip(v, -1, 1)) for v in arm]
        a[self.i_grip] = self.grip
        a[self.i_mode] = -1.0
        return a

    def act(self, rows: list[list[float]]) -> dict:
        self.state = self.robot.step_many(rows)
        self.steps += len(rows)
        return self.state

    @property
    def eef(self) -> np.ndarray:
        return np.asarray(self.state["robot0_eef_pos"], dtype=float)

    def move_to(self, target, *, tol: float = 0.008, gain: float = 1.5, max_steps: int = 120, yaw: float | None = None) -> bool:
        """Move the gripper site to a world point (optionally turning its fingers to heading ``yaw``)."""
        target = np.asarray(target, dtype=float)
        for _ in range(max_steps):
            err = target - self.eef
            turn = 0.0
            if yaw is not None:
                turn = wrap(yaw - self.finger_yaw(), np.pi / 2)
            if np.linalg.norm(err) < tol and abs(turn) < 0.05:
                return True
            local = world_to_base(err, self.state["robot0_base_quat"])
            self.act([self.row([*(gain * local / ARM_SCALE_M), 0.0, 0.0, gain * turn / ARM_SCALE_RAD])])
        return False

    def finger_yaw(self) -> float:
        """Heading of the line between the fingers (world z)."""
        return yaw_of(quat_xyzw_to_matrix(self.state["robot0_eef_quat"]), axis=1)

    def hold(self, steps: int) -> None:
        for start in range(0, steps, max(1, self.batch)):
            self.act([self.row()] * min(self.batch, steps - start))

    def close(self, steps: int = 25) -> None:
        self.grip = 1.0
        self.hold(steps)

    def open(self, steps: int = 15) -> None:
        self.grip = -1.0
        self.hold(steps)

    def gripper_gap(self) -> float:
        q = np.asarray(self.state["robot0_gripper_qpos"], dtype=float)
        return float(abs(q[0]) + abs(q[-1]))


def _field(spec, name: str):
    """A field of ``robot.spec()``: a dict from the sandbox's ``import robot``, attributes from a TaskSpec."""
    return spec[name] if isinstance(spec, dict) else getattr(spec, name)


def box_corners(values) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """L3's ``priv_fixture_box`` / ``priv_fixture_interior`` (12 values) as its corners p0, px, py, pz."""
    v = np.asarray(values, dtype=float).reshape(4, 3)
    return v[0], v[1], v[2], v[3]
