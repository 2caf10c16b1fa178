"""The RoboPaint scene: a Panda holding a soft brush on a compliant mount, a board with paper, a pigment dish.

Plain MuJoCo, no robosuite environment: the Panda's MJCF (meshes, joints, inertias) is loaded
from the installed robosuite package's assets with ``mujoco.MjSpec`` and our own world is
added around it. The world frame *is* the robot-base frame (x right, y forward, z up): the
Panda's base is turned 90 degrees so it faces +y.

The brush: a handle fixed to the flange, then a ferrule on a compliant mount (a sprung slide
joint along the tool axis and two sprung bending hinges), then bristles ending in a soft tip
sphere. Paper and pigment dish are mocap bodies, so the seed-dependent layout moves them
without recompiling the model (one compiled model, one fingerprint recipe for every seed).

The canvas is a 512x512 uint8 RGB array. Each 500 Hz physics tick in which the tip touches
the paper deposits pigment on a disc around the contact point: the disc's radius grows with
the contact force (bristles splay), its coverage with force and the brush's pigment load;
deposition spends load. Touching the pigment dish reloads the brush. Everything is computed
in float64 from MuJoCo's single-threaded fixed-step state, so the canvas bytes are a
function of the action log alone.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec
import numpy as np

from .. import png

PHYSICS_DT = 0.002  # s: 500 Hz physics
CONTROL_HZ = 100  # IK rate; 5 physics ticks per control step
TICKS_PER_CONTROL = 5
CANVAS_PX = 512
PAPER_SIZE = 0.30  # m, square paper
PIGMENT_RGB = np.array([22.0, 38.0, 92.0])  # dark ultramarine
PAPER_RGB = np.array([246.0, 243.0, 234.0])
ROBOT_XML = Path("models") / "assets" / "robots" / "panda" / "robot.xml"
FLANGE_BODY = "right_hand"  # robosuite's Panda flange frame: 0.1065 m past link7, turned -45 deg about its axis
JOINTS = tuple(f"joint{i}" for i in range(1, 8))
HOME_Q = np.array([0.0, -0.25, 0.0, -2.2, 0.0, 1.95, np.pi / 4])  # a posture above the board; IK polishes it at reset

# Joint PD at 500 Hz on the Panda's torque motors, plus gravity/Coriolis compensation.
KP = np.array([900.0, 900.0, 900.0, 900.0, 400.0, 250.0, 100.0])
KD = np.array([60.0, 60.0, 60.0, 60.0, 25.0, 18.0, 8.0])

# Brush geometry and compliance (tool axis = flange +z).
HANDLE_LEN = 0.07
BRISTLE_LEN = 0.045
TIP_RADIUS = 0.006
MOUNT_STIFFNESS = 250.0  # N/m along the tool axis
MOUNT_TRAVEL = 0.025  # m the ferrule can retract before it bottoms out
BEND_STIFFNESS = 1.5  # N m / rad
# Deposition model.
SPLAY_MIN, SPLAY_MAX, SPLAY_FULL_N = 0.0015, 0.009, 5.0  # footprint radius (m) from min to max at SPLAY_FULL_N
COVER_RATE = 30.0  # coverage per second at full load and >= PRESSURE_FULL_N
PRESSURE_FULL_N = 2.0
LOAD_SPENT_PER_PIXEL = 1.0 / 30000.0  # load spent per pixel-unit of coverage
RELOAD_RATE = 3.0  # 1/s while dipped with > RELOAD_MIN_N
RELOAD_MIN_N = 0.2


class Layout(msgspec.Struct, frozen=True, kw_only=True):
    """The seed-dependent physical setup of one round: where the paper and dish lie."""

    paper_xy: tuple[float, float]
    paper_yaw: float  # rad about +z
    dish_xy: tuple[float, float]

    @classmethod
    def from_seed(cls, seed: int) -> Layout:
        rng = np.random.default_rng(seed)
        px, py = 0.0 + rng.uniform(-0.02, 0.02), 0.50 + rng.uniform(-0.02, 0.02)
        return cls(paper_xy=(float(px), float(py)), paper_yaw=float(rng.uniform(-0.05, 0.05)),
                   dish_xy=(float(0.27 + rng.uniform(-0.01, 0.01)), float(0.42 + rng.uniform(-0.01, 0.01))))


def robot_xml_path() -> Path:
    """The Panda MJCF shipped with the installed robosuite package (located without importing robosuite)."""
    import importlib.util

    spec = importlib.util.find_spec("robosuite")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("robosuite is not installed; the paint scene uses its Panda model (pip install praxis-robosuite)")
    return Path(next(iter(spec.submodule_search_locations))) / ROBOT_XML


def _add_world(spec, mujoco) -> None:
    """Floor, table, board, paper, pigment dish, lights and cameras; the brush on the flange."""
    spec.option.timestep = PHYSICS_DT
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.visual.global_.offwidth = 640
    spec.visual.global_.offheight = 480
    base = spec.body("base")
    base.quat = [np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)]  # Panda faces +y: x right, y forward
    world = spec.worldbody
    # Robot links collide with the environment (contype 2 / conaffinity 1) but not with each other.
    for geom in spec.geoms:
        if geom.contype or geom.conaffinity:
            geom.contype, geom.conaffinity = 2, 1
    spec.add_texture(name="grid", type=mujoco.mjtTexture.mjTEXTURE_2D, builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
                     rgb1=[0.35, 0.37, 0.4], rgb2=[0.3, 0.32, 0.35], width=256, height=256)
    spec.add_material(name="floor", textures=["", "grid"], texrepeat=[8, 8])
    spec.add_texture(name="canvas", type=mujoco.mjtTexture.mjTEXTURE_2D, builtin=mujoco.mjtBuiltin.mjBUILTIN_FLAT,
                     rgb1=list(PAPER_RGB / 255), rgb2=list(PAPER_RGB / 255), width=CANVAS_PX, height=CANVAS_PX)
    spec.add_material(name="canvas", textures=["", "canvas"], texuniform=False, texrepeat=[1, 1])
    world.add_light(name="key", pos=[0.3, -0.3, 1.5], dir=[-0.2, 0.5, -1], diffuse=[0.8, 0.8, 0.8], castshadow=False)
    world.add_light(name="fill", pos=[-0.5, 0.8, 1.2], dir=[0.3, -0.3, -1], diffuse=[0.4, 0.4, 0.4], castshadow=False)
    world.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[2, 2, 0.1], pos=[0, 0, -0.75], material="floor",
                   contype=1, conaffinity=1)
    world.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.55, 0.35, 0.01], pos=[0, 0.55, 0.0],
                   rgba=[0.55, 0.42, 0.3, 1], contype=1, conaffinity=1)
    world.add_geom(name="pedestal", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.12, 0.37, 0], pos=[0, 0, -0.38],
                   rgba=[0.2, 0.2, 0.22, 1], contype=0, conaffinity=0)
    board = world.add_body(name="board", mocap=True, pos=[0, 0.5, 0.01])
    board.add_geom(name="board", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.19, 0.19, 0.0075], pos=[0, 0, 0.0075],
                   rgba=[0.25, 0.22, 0.2, 1], contype=1, conaffinity=1)
    board.add_geom(name="paper", type=mujoco.mjtGeom.mjGEOM_BOX, size=[PAPER_SIZE / 2, PAPER_SIZE / 2, 0.001],
                   pos=[0, 0, 0.016], material="canvas", contype=1, conaffinity=1, condim=3, friction=[0.4, 0.005, 0.0001])
    dish = world.add_body(name="dish", mocap=True, pos=[0.27, 0.42, 0.01])
    dish.add_geom(name="dish", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.05, 0.008, 0], pos=[0, 0, 0.008],
                  rgba=[0.85, 0.85, 0.85, 1], contype=1, conaffinity=1)
    dish.add_geom(name="pigment", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.042, 0.0025, 0], pos=[0, 0, 0.0165],
                  rgba=[*(PIGMENT_RGB / 255), 1], contype=1, conaffinity=1, friction=[0.3, 0.005, 0.0001])
    # Seen from the front-right corner of the table, so the arm rarely hides the paper.
    world.add_camera(name="workspace", pos=[0.55, 1.05, 0.80], xyaxes=[-0.7071, 0.7071, 0, -0.5007, -0.5007, 0.7061], fovy=45)
    world.add_camera(name="overhead", pos=[0.0, 0.5, 1.1], xyaxes=[1, 0, 0, 0, 1, 0], fovy=22)  # image up = +y
    # The brush on the flange.
    hand = spec.body(FLANGE_BODY)
    brush = hand.add_body(name="brush_handle", pos=[0, 0, 0])
    brush.add_geom(name="flange_disc", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.03, 0.006, 0], pos=[0, 0, 0.006],
                   rgba=[0.3, 0.3, 0.32, 1], mass=0.1, contype=2, conaffinity=1)
    brush.add_geom(name="handle", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[0.007, HANDLE_LEN / 2, 0],
                   pos=[0, 0, 0.012 + HANDLE_LEN / 2], rgba=[0.6, 0.35, 0.15, 1], mass=0.05, contype=2, conaffinity=1)
    brush.add_camera(name="brushcam", pos=[0.15, 0, 0.05], xyaxes=[0, -1, 0, -0.5145, 0, -0.8575], fovy=60)  # looks at the tip
    ferrule = brush.add_body(name="brush_ferrule", pos=[0, 0, 0.012 + HANDLE_LEN])
    ferrule.add_joint(name="mount_slide", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[0, 0, 1], range=[-MOUNT_TRAVEL, 0.001],
                      limited=mujoco.mjtLimited.mjLIMITED_TRUE, stiffness=MOUNT_STIFFNESS, damping=6.0, armature=0.01)
    ferrule.add_joint(name="mount_bend_x", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[1, 0, 0], range=[-0.4, 0.4],
                      limited=mujoco.mjtLimited.mjLIMITED_TRUE, stiffness=BEND_STIFFNESS, damping=0.05, armature=0.001)
    ferrule.add_joint(name="mount_bend_y", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0], range=[-0.4, 0.4],
                      limited=mujoco.mjtLimited.mjLIMITED_TRUE, stiffness=BEND_STIFFNESS, damping=0.05, armature=0.001)
    ferrule.add_geom(name="ferrule", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.008, 0.008, 0], pos=[0, 0, 0.008],
                     rgba=[0.75, 0.75, 0.78, 1], mass=0.02, contype=0, conaffinity=0)
    ferrule.add_geom(name="bristles", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[0.0055, BRISTLE_LEN / 2, 0],
                     pos=[0, 0, 0.016 + BRISTLE_LEN / 2], rgba=[0.15, 0.12, 0.1, 1], mass=0.005, contype=0, conaffinity=0)
    # The tip: soft contact (long time constant, wide impedance) so it sinks a little under load.
    ferrule.add_geom(name="tip", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[TIP_RADIUS, 0, 0],
                     pos=[0, 0, 0.016 + BRISTLE_LEN], rgba=[0.1, 0.08, 0.07, 1], mass=0.002, contype=2, conaffinity=1,
                     solref=[0.01, 1.0], solimp=[0.5, 0.95, 0.004, 0.5, 2], friction=[0.3, 0.005, 0.0001])


class CompiledScene(msgspec.Struct, frozen=True, kw_only=True):
    xml: str  # our scene's MJCF, asset directory replaced by a placeholder (same text wherever robosuite lives)
    xml_sha256: str


def build_model():
    """Compile the paint scene; returns (MjModel, CompiledScene). Raises FileNotFoundError without robosuite."""
    import mujoco

    path = robot_xml_path()
    spec = mujoco.MjSpec.from_file(str(path))
    spec.modelname = "robopaint"
    _add_world(spec, mujoco)
    model = spec.compile()
    xml = spec.to_xml().replace(str(path.parent), "$ROBOSUITE_PANDA")
    return model, CompiledScene(xml=xml, xml_sha256=hashlib.sha256(xml.encode()).hexdigest())


# ---- canvas --------------------------------------------------------------------------------------


def canvas_sha256(rgb: np.ndarray) -> str:
    """SHA-256 over the shape header and the raw RGB bytes: ``b"uint8 HxWx3\\n" + rgb.tobytes()``."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    header = f"uint8 {'x'.join(str(n) for n in rgb.shape)}\n".encode()
    return hashlib.sha256(header + rgb.tobytes()).hexdigest()


def png_bytes(rgb: np.ndarray) -> bytes:
    """The canvas or goal as PNG bytes: unfiltered rows at zlib level 9 (the goal manifests pin their SHA-256)."""
    return png.encode_rgb(rgb, level=9)


class Canvas:
    """The paper's pigment layer: float64 colour per pixel; ``rgb()`` rounds it to the uint8 canvas."""

    def __init__(self) -> None:
        self.colour = np.empty((CANVAS_PX, CANVAS_PX, 3))
        self.clear()
        self.updates = 0
        self.pixels_touched = 0

    def clear(self) -> None:
        self.colour[...] = PAPER_RGB

    def rgb(self) -> np.ndarray:
        return np.clip(np.rint(self.colour), 0, 255).astype(np.uint8)

    def deposit(self, row: float, col: float, radius_px: float, coverage: float) -> float:
        """Blend pigment over a disc (soft edge of one pixel); returns the pixel-units of coverage laid down."""
        r0, r1 = max(0, int(np.floor(row - radius_px - 1))), min(CANVAS_PX, int(np.ceil(row + radius_px + 2)))
        c0, c1 = max(0, int(np.floor(col - radius_px - 1))), min(CANVAS_PX, int(np.ceil(col + radius_px + 2)))
        if r0 >= r1 or c0 >= c1 or coverage <= 0:
            return 0.0
        rr = np.arange(r0, r1, dtype=np.float64)[:, None] + 0.5 - row
        cc = np.arange(c0, c1, dtype=np.float64)[None, :] + 0.5 - col
        weight = np.clip(radius_px + 0.5 - np.sqrt(rr * rr + cc * cc), 0.0, 1.0) * coverage
        patch = self.colour[r0:r1, c0:c1]
        patch += weight[..., None] * (PIGMENT_RGB - patch)
        self.updates += 1
        self.pixels_touched += int(np.count_nonzero(weight))
        return float(weight.sum())
