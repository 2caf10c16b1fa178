"""Sandbox backends (docker, bwrap) that run authored programs isolated from the host."""

from . import _bwrap as _bwrap  # noqa: F401 - registers "bwrap"
from . import _docker as _docker  # noqa: F401 - registers "docker" (the SDK is imported lazily)
from ._backend import ProcessOutcome as ProcessOutcome
from ._backend import SandboxBackend as SandboxBackend
from ._backend import SandboxError as SandboxError
from ._backend import backend_class as backend_class
from ._backend import backend_names as backend_names
from ._backend import choose_backend as choose_backend
from ._backend import sandbox_backend as sandbox_backend
from ._docker import remove_orphans as remove_orphan_containers
from ._output import Captured as Captured
from ._output import OutputBuffer as OutputBuffer
from ._output import terminal_safe as terminal_safe
from ._process import pid_alive as pid_alive
