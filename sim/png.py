"""The one PNG writer: plain 8-bit RGB, no metadata, a fixed zlib level and row filter, so the same
pixels give the same bytes wherever zlib is the same (RoboPaint's goal images and canvases are
recorded by the SHA-256 of these bytes)."""

from __future__ import annotations

import zlib

import numpy as np

NONE, SUB = 0, 1  # PNG row filter types: raw bytes, or each byte minus the same channel one pixel left


def encode_rgb(rgb: np.ndarray, *, level: int, row_filter: int = NONE) -> bytes:
    """``rgb`` (height, width, 3) uint8 as a PNG file's bytes, every row with ``row_filter``."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or 0 in rgb.shape:
        raise ValueError(f"an RGB image is (height, width, 3) with both sides > 0, got {rgb.shape}")
    h, w = rgb.shape[:2]
    rows = rgb.reshape(h, w * 3)
    raw = np.empty((h, w * 3 + 1), np.uint8)
    raw[:, 0] = row_filter
    if row_filter == SUB:
        raw[:, 1:4] = rows[:, :3]
        np.subtract(rows[:, 3:], rows[:, :-3], out=raw[:, 4:])  # uint8 wraps modulo 256, as the filter does
    elif row_filter == NONE:
        raw[:, 1:] = rows
    else:
        raise ValueError(f"row filter {row_filter} is not one this writer uses (NONE or SUB)")

    def chunk(kind: bytes, body: bytes) -> bytes:
        return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")

    header = w.to_bytes(4, "big") + h.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw.tobytes(), level))
            + chunk(b"IEND", b""))
