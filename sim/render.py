"""Offscreen camera rendering from a scratch copy of the physics state.

The live simulation data is never touched: the state (qpos, qvel, act, mocap) is copied into
a private MjData, kinematics are recomputed there, and the scene is drawn from it. Live
observations and video frames re-rendered from recorded states use this same path, so a
frame rendered from a recorded state is identical to the live frame at that step.
"""

from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import numpy as np
import structlog

from .physics_state import STATE_FIELDS

log = structlog.get_logger()

# MuJoCo cameras look along -z with +y up; OpenCV cameras look along +z with +y down.
_MJ_TO_CV = np.diag([1.0, -1.0, -1.0])


class CameraFrame(msgspec.Struct, frozen=True, kw_only=True):
    """One rendered camera: RGB right way up, optional depth (metres), optional calibration."""

    camera: str
    rgb: np.ndarray  # uint8 (H, W, 3), row 0 = top
    depth: np.ndarray | None = None  # float32 (H, W), metres along the optical axis
    K: np.ndarray | None = None  # 3x3 intrinsics (OpenCV)
    T_world_camera: np.ndarray | None = None  # 4x4 camera-to-world (OpenCV axes)


def depth_from_zbuffer(z: np.ndarray, model) -> np.ndarray:
    """Convert an OpenGL z-buffer in [0, 1] to metres with the model's near/far clip planes."""
    extent = model.stat.extent
    near = model.vis.map.znear * extent
    far = model.vis.map.zfar * extent
    return (near / (1.0 - z.astype(np.float64) * (1.0 - near / far))).astype(np.float32)


def intrinsics(model, cam_id: int, width: int, height: int) -> np.ndarray:
    """Pinhole K for a MuJoCo camera rendered at width x height (square pixels, vertical fovy)."""
    fovy = float(model.cam_fovy[cam_id])
    f = 0.5 * height / np.tan(np.deg2rad(fovy) / 2.0)
    return np.array([[f, 0.0, width / 2.0], [0.0, f, height / 2.0], [0.0, 0.0, 1.0]])


def camera_pose(data, cam_id: int) -> np.ndarray:
    """4x4 camera-to-world transform in OpenCV axes, from computed kinematics in ``data``."""
    T = np.eye(4)
    T[:3, :3] = data.cam_xmat[cam_id].reshape(3, 3) @ _MJ_TO_CV
    T[:3, 3] = data.cam_xpos[cam_id]
    return T


# Byte offset of mjrContext.fogRGBA in mujoco/include/mujoco/mjrender.h (after five floats:
# lineWidth, shadowClip, shadowScale, fogStart, fogEnd); checked at run time before use.
_FOG_RGBA_OFFSET = 20


def _libmujoco():
    """The MuJoCo shared library the bindings loaded (dlopen of the same file returns the same handle)."""
    import ctypes
    from pathlib import Path

    import mujoco

    path = Path(mujoco.__file__).parent / f"libmujoco.so.{mujoco.__version__}"
    lib = ctypes.CDLL(str(path))
    lib.mjr_makeContext.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    lib.mjr_makeContext.restype = None
    return lib


def _context_address(context) -> int | None:
    """The address of the mjrContext behind a bindings MjrContext, or None if its layout is not the expected one.

    The bindings expose no pointer, but ``fogRGBA`` is a numpy view into the struct. Distinct
    values written through the bindings must read back at the header's offsets, else None.
    """
    import ctypes

    fog = context.fogRGBA
    if fog.base is None or fog.dtype != np.float32:
        return None
    base = fog.__array_interface__["data"][0] - _FOG_RGBA_OFFSET
    saved = (context.lineWidth, context.shadowClip, context.fogEnd)
    context.lineWidth, context.shadowClip, context.fogEnd = 1.25, -2.5, 3.75
    seen = tuple(ctypes.c_float.from_address(base + off).value for off in (0, 4, 16))
    context.lineWidth, context.shadowClip, context.fogEnd = saved
    return base if seen == (1.25, -2.5, 3.75) else None


def make_context(model, fontscale: int):
    """An MjrContext for ``model`` built with the GIL released.

    mjr_makeContext uploads every texture and mesh of the scene to the GL context: ~0.55 s
    for Lift/Panda on Mesa llvmpipe, seconds on a loaded machine. The bindings' MjrContext(model)
    holds the GIL throughout, so the simulator actor's trio loop could not answer heartbeats
    while a scene was built. A ctypes call into the same library releases the GIL for its
    duration, so the loop keeps running. Falls back to the bindings (logged) when the
    library or the struct layout is not what this code expects.
    Caveat: a MuJoCo error inside this one call (a GL driver that cannot allocate the
    offscreen buffer) ends the process with MuJoCo's message on stderr instead of raising.
    """
    import mujoco

    context = mujoco.MjrContext()  # mjr_defaultContext: nothing allocated yet
    try:
        lib = _libmujoco()
        model_address = int(model._address)
        address = _context_address(context)
    except (OSError, AttributeError) as e:
        lib, address = None, None
        log.warning("render.context_with_gil", reason=f"{type(e).__name__}: {e}")
    if lib is None or address is None:
        if lib is not None:
            log.warning("render.context_with_gil", reason="unexpected mjrContext layout")
        return mujoco.MjrContext(model, fontscale)
    lib.mjr_makeContext(model_address, address, fontscale)  # ctypes drops the GIL during the call
    if context.ntexture != model.ntex or context.offWidth != model.vis.global_.offwidth:
        raise RuntimeError(f"mjr_makeContext via ctypes left an inconsistent context (ntexture {context.ntexture}, "
                           f"model has {model.ntex}); MuJoCo {mujoco.__version__} may have changed mjrContext")
    return context


# --- which device renders ----------------------------------------------------------------------

_SOFTWARE_EGL = "EGL_MESA_device_software"  # Mesa's llvmpipe device: rendering on the CPU
_chosen: dict[str, str | None] = {}
_device: str | None = None


def gpu_present() -> bool:
    """Whether this host exposes a GPU to processes (NVIDIA's device nodes, or a DRM render node)."""
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia/gpus").is_dir() or any(Path("/dev/dri").glob("renderD*"))


def choose_egl_device() -> str | None:
    """Pick the EGL device MuJoCo renders on, explicitly, before its first GL context (once per process).

    MuJoCo's EGL backend takes the first device that initializes when MUJOCO_EGL_DEVICE_ID is
    unset, which on a host with Mesa installed can be the software (llvmpipe) device even with a
    GPU present. So with MUJOCO_GL=egl and no MUJOCO_EGL_DEVICE_ID, the first hardware device is
    set in MUJOCO_EGL_DEVICE_ID; a host with a GPU but only a software EGL device is an error
    event (``render.gpu_not_used``), never a silent CPU fallback. Returns the id used, or None
    when nothing was chosen here (not EGL, or the variable was already set, or CPU only).
    """
    if "id" in _chosen:
        return _chosen["id"]
    _chosen["id"] = None
    if os.environ.get("MUJOCO_GL", "").lower() != "egl" or "MUJOCO_EGL_DEVICE_ID" in os.environ:
        return None
    try:
        devices = _egl_devices()
    except Exception as e:  # noqa: BLE001 - MuJoCo's own choice still applies; say why we could not choose
        log.warning("render.egl_devices_unreadable", error=f"{type(e).__name__}: {e}")
        return None
    hardware = [i for i, extensions in enumerate(devices) if _SOFTWARE_EGL not in extensions]
    if hardware:
        os.environ["MUJOCO_EGL_DEVICE_ID"] = str(hardware[0])
        _chosen["id"] = str(hardware[0])
        log.info("render.egl_device_chosen", device_id=hardware[0], devices=len(devices))
    elif gpu_present():
        log.error("render.gpu_not_used", devices=len(devices),
                  detail="a GPU is present but EGL offers only the software device: rendering runs on the CPU; "
                         "install the GPU's EGL vendor library (e.g. NVIDIA's libEGL_nvidia) or set MUJOCO_EGL_DEVICE_ID")
    return _chosen["id"]


def _egl_devices() -> list[str]:
    """Each EGL device's extension string, in MuJoCo's order (the index MUJOCO_EGL_DEVICE_ID takes)."""
    import ctypes

    from mujoco.egl import egl_ext as EGL

    query = ctypes.CFUNCTYPE(ctypes.c_char_p, EGL.EGLDeviceEXT, EGL.EGLint)(EGL.eglGetProcAddress("eglQueryDeviceStringEXT"))
    return [(query(device, EGL.EGL_EXTENSIONS) or b"").decode() for device in EGL.eglQueryDevicesEXT()]


def device() -> str | None:
    """The GL renderer this process's contexts draw with (GL_RENDERER, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
    or "NVIDIA H200/PCIe/SSE2"); None before the first SceneRenderer. One EGL display per process, so one device."""
    return _device


def _read_gl_renderer() -> str:
    try:
        from OpenGL import GL

        raw = GL.glGetString(GL.GL_RENDERER)
        return raw.decode() if isinstance(raw, bytes) else str(raw)
    except Exception as e:  # noqa: BLE001 - reported as unknown, never a failed scene
        return f"unknown ({type(e).__name__})"


class _GLScene(NamedTuple):
    """A GL context and everything ``mjr_makeContext`` uploaded into it for one compiled model."""

    gl: Any  # mujoco.GLContext
    context: Any  # mujoco.MjrContext

    def make_current(self) -> None:
        self.gl.make_current()

    def release(self) -> bool:
        """Leave this context current on no thread, so another thread can take it over (EGL answers
        EGL_BAD_ACCESS to making a context current that is current elsewhere). False: not EGL, keep nothing."""
        if type(self.gl).__module__ != "mujoco.egl":  # the EGL module is loaded only where it made this context
            return False
        import mujoco.egl
        from mujoco.egl import egl_ext as EGL

        if mujoco.egl.EGL_DISPLAY is None:
            return False
        try:
            return bool(EGL.eglMakeCurrent(mujoco.egl.EGL_DISPLAY, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT))
        except Exception as e:  # noqa: BLE001 - then it is freed instead of kept
            log.warning("render.release_failed", error=f"{type(e).__name__}: {e}")
            return False

    def free(self) -> None:
        """Free the GL resources; a driver error while freeing is logged, never raised.

        mjr_freeContext deletes GL objects by id in whichever context is current: with a staged
        scene's renderer built after this one, that would be the staged scene's textures and
        framebuffer (its frames came out wrong), so this context is made current first.
        """
        for free in (self.gl.make_current, self.context.free, self.gl.free):
            try:
                free()
            except Exception as e:  # noqa: BLE001  (closing must always finish)
                log.warning("render.free_failed", error=f"{type(e).__name__}: {e}")


# The GL scene of the last closed renderer whose compiled model was known, kept for the next fresh
# scene of the same model (the next trial of a series): uploading Lift's textures and meshes again
# costs ~0.55 s per trial on llvmpipe, more for a kitchen. At most one is kept; a renderer for
# another model frees it. Only GL state is reused: every frame is drawn from the new scene's state.
_parked: tuple[str, _GLScene] | None = None
_parked_lock = threading.Lock()
_at_exit: list[bool] = []


def _take_parked(model_digest: str | None) -> _GLScene | None:
    global _parked
    with _parked_lock:
        parked, _parked = _parked, None
    if parked is None:
        return None
    if model_digest is not None and parked[0] == model_digest:
        return parked[1]
    parked[1].free()
    return None


def _park(model_digest: str, scene: _GLScene) -> None:
    global _parked
    with _parked_lock:
        previous, _parked = _parked, (model_digest, scene)
        if not _at_exit:  # registered after mujoco.egl's own hook (a context exists), so it runs before that one
            atexit.register(free_parked)
            _at_exit.append(True)
    if previous is not None:
        previous[1].free()


def free_parked() -> None:
    """Free the kept GL scene, if any (at exit, before MuJoCo's EGL display goes; tests)."""
    if (parked := _take_parked(None)) is not None:
        parked.free()


class SceneRenderer:
    """Owns a GL context and a scratch MjData for a model; draws fixed cameras on request.

    The GL side is built on first use, not with the scene: a trial's scene is built (or staged)
    before anyone asks for a picture, and a scene that is never observed never uploads its
    textures. Once ``model_digest`` is set (the compiled model's digest from the scene's
    fingerprint), closing keeps the GL scene for the next renderer of the same compiled model.
    Not thread-safe: call it from the single thread that owns the GL work.
    """

    def __init__(self, model, max_width: int = 256, max_height: int = 256):
        import mujoco

        self._mj = mujoco
        self.model = model
        # The offscreen buffer is sized from the model's visual settings; grow it if needed. This changes
        # the compiled model, so it happens here, before the scene's fingerprint is taken.
        model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), max_width)
        model.vis.global_.offheight = max(int(model.vis.global_.offheight), max_height)
        self.model_digest: str | None = None
        self.reused = False  # whether the GL scene came from the previous renderer of this model
        self._gl_scene: _GLScene | None = None
        self._option = mujoco.MjvOption()
        self._perturb = mujoco.MjvPerturb()
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._data = mujoco.MjData(model)

    @property
    def device(self) -> str | None:
        return _device

    def _gl(self) -> _GLScene:
        """This renderer's GL scene, current on the calling thread (built or taken over on first use)."""
        if (scene := self._gl_scene) is not None:
            scene.make_current()
            return scene
        mj, model = self._mj, self.model
        choose_egl_device()
        scene = _take_parked(self.model_digest)
        self.reused = scene is not None
        if scene is None:
            gl = mj.GLContext(int(model.vis.global_.offwidth), int(model.vis.global_.offheight))
            gl.make_current()
            global _device
            if _device is None:
                _device = _read_gl_renderer()
                log.info("render.device", renderer=_device, egl_device_id=os.environ.get("MUJOCO_EGL_DEVICE_ID"),
                         mujoco_gl=os.environ.get("MUJOCO_GL"))
            try:
                scene = _GLScene(gl, make_context(model, int(mj.mjtFontScale.mjFONTSCALE_150)))
            except BaseException:
                gl.free()
                raise
        scene.make_current()
        mj.mjr_setBuffer(mj.mjtFramebuffer.mjFB_OFFSCREEN, scene.context)
        self._scene = mj.MjvScene(model, maxgeom=10000)
        self._gl_scene = scene
        return scene

    def ready(self) -> None:
        """Build (or take over) the GL side now: callers time their rendering after this, so a scene's
        one-off GL setup counts as building the scene, not as rendering."""
        self._gl()

    def upload_texture(self, texid: int) -> None:
        """Send a texture the scene changed (a painted canvas) to the GL side."""
        self._mj.mjr_uploadTexture(self.model, self._gl().context, texid)

    def camera_id(self, name: str) -> int:
        cam_id = self._mj.mj_name2id(self.model, self._mj.mjtObj.mjOBJ_CAMERA, name)
        if cam_id < 0:
            names = [self._mj.mj_id2name(self.model, self._mj.mjtObj.mjOBJ_CAMERA, i) for i in range(self.model.ncam)]
            raise KeyError(f"camera {name!r} is not in the model; cameras: {names}")
        return cam_id

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Set the scratch data to a recorded state and recompute kinematics there."""
        for name in STATE_FIELDS:
            target = getattr(self._data, name)
            target[...] = np.asarray(state[name]).reshape(target.shape)
        self._mj.mj_forward(self.model, self._data)

    def render(self, camera: str, width: int, height: int, *, depth: bool, calibration: bool) -> CameraFrame:
        """Draw one camera from the state last given to load_state."""
        mj = self._mj
        if width > self.model.vis.global_.offwidth or height > self.model.vis.global_.offheight:
            raise ValueError(f"{width}x{height} exceeds the offscreen buffer; build the renderer with larger max size")
        cam_id = self.camera_id(camera)
        context = self._gl().context
        self._camera.fixedcamid = cam_id
        mj.mjv_updateScene(self.model, self._data, self._option, self._perturb, self._camera, mj.mjtCatBit.mjCAT_ALL, self._scene)
        viewport = mj.MjrRect(0, 0, width, height)
        mj.mjr_render(viewport, self._scene, context)
        rgb = np.empty((height, width, 3), dtype=np.uint8)
        zbuf = np.empty((height, width), dtype=np.float32) if depth else None
        mj.mjr_readPixels(rgb, zbuf, viewport, context)
        # OpenGL rows start at the bottom; images start at the top.
        rgb = np.ascontiguousarray(rgb[::-1])
        metres = np.ascontiguousarray(depth_from_zbuffer(zbuf[::-1], self.model)) if depth else None
        K = T = None
        if calibration:
            K = intrinsics(self.model, cam_id, width, height)
            T = camera_pose(self._data, cam_id)
        return CameraFrame(camera=camera, rgb=rgb, depth=metres, K=K, T_world_camera=T)

    def close(self) -> None:
        """Free the GL scene, or keep it for the next renderer of the same compiled model (``model_digest``)."""
        scene, self._gl_scene = self._gl_scene, None
        if scene is None:
            return
        if self.model_digest is not None and scene.release():
            _park(self.model_digest, scene)
        else:
            scene.free()
