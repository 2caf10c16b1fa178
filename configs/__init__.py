"""The configs that ship with roboswe, as package data: task manifests (``tasks/``), datasets
(``datasets/``), run configs (``runs/``), contracts (``contracts/``) and catalogues (``catalogues/``).
The demo participants beside them (``agents/``) import as ``roboswe.agents``.

Found with importlib.resources, so a checkout (an editable install) and an installed wheel read
the same files; a file a user names by path is read from that path instead.
"""

from importlib.resources import files
from pathlib import Path

CONFIGS_DIR = Path(str(files(__name__)))
"""The shipped configs: the checkout's configs/, or roboswe/configs/ in site-packages."""
