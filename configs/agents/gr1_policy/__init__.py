"""Deterministic GR1 tabletop participants (seed 002) for the close-drawer stand-in: a scripted
policy answering action chunks (actions interface) and a scripted coding agent (code interface)."""

from ._agent import Gr1DrawerCoder as Gr1DrawerCoder
from ._agent import Gr1DrawerPolicy as Gr1DrawerPolicy
from ._agent import plan_rows as plan_rows
