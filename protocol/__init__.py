"""Typed messages between roboswe actors, one module per boundary, and the codec.

Naming rule: each boundary module builds its codec once as ``<BOUNDARY>_CODEC`` (``SIM_CODEC``,
``BRIDGE_CODEC``, ``RECORDER_CODEC``, ...); a boundary with a second endpoint names that one
``<BOUNDARY>_<ENDPOINT>_CODEC`` (``SIM_ROBOT_CODEC``, ``BRIDGE_ROBOT_CODEC``). The names are
unique across modules, so they import without aliases.

Schema evolution: add fields with defaults; never change an existing field's wire type.
"""

from ._base import PROTOCOL_VERSION as PROTOCOL_VERSION
from ._base import Envelope as Envelope
from ._base import Message as Message
from ._codec import Codec as Codec
from ._codec import Decoded as Decoded
from ._codec import DecodeError as DecodeError
