"""Participants: hosted-model adapters (openai, anthropic, google, openrouter) and the local
`python` kind, all behind `Participant` (``_registry``, where every provider kind is named once).

Build one with `create_participant(ProviderConfig(...))`; SDKs load only when a kind is used.
"""

from ._config import SAFETY_ALLOWANCE as SAFETY_ALLOWANCE
from ._config import MissingKey as MissingKey
from ._config import MissingSDK as MissingSDK
from ._config import ProviderConfig as ProviderConfig
from ._config import decode_provider_config as decode_provider_config
from ._config import images_per_request as images_per_request
from ._estimate import estimate_request as estimate_request
from ._registry import Participant as Participant
from ._registry import create_participant as create_participant
