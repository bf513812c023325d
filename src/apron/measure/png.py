"""A PNG with a known answer, written with the standard library (zlib + struct): no Pillow."""

from __future__ import annotations

import base64
import struct
import zlib

# Colours a vision model names without hesitation; each far from the others in RGB.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 20, 20),
    "green": (20, 170, 40),
    "blue": (20, 60, 220),
    "yellow": (245, 220, 20),
    "black": (0, 0, 0),
    "white": (255, 255, 255),
}


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def solid_png(rgb: tuple[int, int, int], size_pixels: int = 224) -> bytes:
    """An 8-bit RGB image of one colour (filter byte 0 on every row)."""
    row = b"\x00" + bytes(rgb) * size_pixels
    header = struct.pack(">IIBBBBB", size_pixels, size_pixels, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(row * size_pixels, 9))
        + _chunk(b"IEND", b"")
    )


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
