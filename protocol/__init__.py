"""Typed messages between roboswe actors, one module per boundary, and the codec."""

from ._base import PROTOCOL_VERSION as PROTOCOL_VERSION
from ._base import Envelope as Envelope
from ._base import Message as Message
from ._codec import Codec as Codec
from ._codec import Decoded as Decoded
from ._codec import DecodeError as DecodeError
