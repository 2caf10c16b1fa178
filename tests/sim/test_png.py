"""sim/png.py: what it writes decodes to the same pixels in an independent decoder (Pillow), for both
row filters, odd sizes and values that wrap the Sub filter's modulo-256 differences."""

from io import BytesIO

import numpy as np
import pytest
from PIL import Image
from roboswe.sim import png


def _decoded(data: bytes) -> np.ndarray:
    with Image.open(BytesIO(data)) as im:
        assert im.format == "PNG" and im.mode == "RGB"
        return np.asarray(im)


@pytest.mark.parametrize("row_filter", [png.NONE, png.SUB])
@pytest.mark.parametrize("shape", [(1, 1, 3), (3, 5, 3), (64, 48, 3)])
def test_pixels_survive_an_independent_decoder(row_filter, shape):
    rgb = np.random.default_rng(sum(shape) + row_filter).integers(0, 256, shape, dtype=np.uint8)
    rgb[0, 0] = (255, 0, 255)  # differences that wrap modulo 256 under Sub
    assert np.array_equal(_decoded(png.encode_rgb(rgb, level=1, row_filter=row_filter)), rgb)


def test_same_pixels_same_bytes_and_the_filter_and_level_matter():
    y, x = np.mgrid[0:32, 0:32]
    rgb = np.stack([x * 8, y * 8, (x + y) * 4], axis=-1).astype(np.uint8)
    assert png.encode_rgb(rgb, level=9) == png.encode_rgb(rgb.copy(), level=9)
    # A smooth gradient compresses better once each pixel is stored as its step from the left neighbour.
    assert len(png.encode_rgb(rgb, level=9, row_filter=png.SUB)) < len(png.encode_rgb(rgb, level=9))
    assert np.array_equal(_decoded(png.encode_rgb(rgb, level=9, row_filter=png.SUB)), rgb)


@pytest.mark.parametrize("bad", [np.zeros((4, 4), np.uint8), np.zeros((4, 4, 4), np.uint8), np.zeros((0, 4, 3), np.uint8)])
def test_only_rgb_images_are_written(bad):
    with pytest.raises(ValueError, match="RGB image"):
        png.encode_rgb(bad, level=1)


def test_unknown_row_filter_is_refused():
    with pytest.raises(ValueError, match="row filter"):
        png.encode_rgb(np.zeros((2, 2, 3), np.uint8), level=1, row_filter=4)
