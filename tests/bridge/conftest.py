"""The sandbox tests' fixtures (built image, traversable scratch dir) serve the bridge tests too."""

from tests.sandbox.conftest import image as image  # noqa: F401
from tests.sandbox.conftest import scratch as scratch  # noqa: F401
