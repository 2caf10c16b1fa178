"""Simulation: one folder per task family behind one seam, task manifests, fingerprints, rendering.

- ``families``: ``Family`` (what the coordinator needs of a family), ``family(name)``, ``families()``;
  each family is a folder (``robosuite/``, ``robocasa/``, ``gr1/``, ``paint/``, ``fake/``) exporting one
  ``FAMILY``, imported only when a manifest names it.
- ``manifest``: ``load_manifest``, ``load_dataset``, ``TaskManifest`` (typed TOML, strict).
- ``backend``: ``create_backend(family, manifest, trial_steps=, require_fixed_hash_seed=)`` returns a
  ``SimBackend`` (reset/spec/validate/step/wait/observe/state/success/take_states/close); errors are
  ``SimError`` subclasses (``InvalidAction``, ``ResetError``, ``NotLoaded``, ``PhysicsFailure``).
- ``render``: scratch-state offscreen rendering (RGB, depth in metres, K, T_world_camera).
- ``video``: ``VideoRenderer`` re-renders recorded per-step states; ``write_mp4``.
- ``fingerprint``: path-free digests of compiled scenes (model arrays, used asset files, XML placeholders).
- ``session``: ``SimSession``, the simulator actor's domain object speaking protocol/sim.py types.

Nothing here imports ZeroMQ; robosuite and mujoco are imported only when a backend is built.
"""

from .backend import InvalidAction as InvalidAction
from .backend import NotLoaded as NotLoaded
from .backend import PhysicsFailure as PhysicsFailure
from .backend import ResetError as ResetError
from .backend import SimBackend as SimBackend
from .backend import SimError as SimError
from .backend import create_backend as create_backend
from .families import Family as Family
from .families import family as family
from .manifest import ManifestError as ManifestError
from .manifest import TaskManifest as TaskManifest
from .manifest import load_dataset as load_dataset
from .manifest import load_manifest as load_manifest
