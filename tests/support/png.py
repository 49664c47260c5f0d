"""PNG reading and writing with the standard library (the venv has no Pillow): 8-bit RGB, RGBA and palette, not
interlaced, which is what Chromium's screenshots are. Enough for the screenshot tests to compare pixels and write a
diff, and for the docs' pictures to be stored small."""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"
COLOUR_TYPES = {2: 3, 6: 4}  # RGB, RGBA: bytes per pixel at 8 bits a channel
PALETTE = 3


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    channels: int
    rows: tuple[bytes, ...]


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG file")
    chunks, offset = [], len(SIGNATURE)
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        chunks.append((kind, data[offset + 8 : offset + 8 + length]))
        offset += 12 + length
    return chunks


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _unfilter(kind: int, line: bytes, prior: bytes, step: int) -> bytes:
    if kind == 0:
        return line
    if kind == 2:
        return bytes((x + b) & 255 for x, b in zip(line, prior, strict=True))
    out = bytearray(line)
    for i in range(len(out)):
        a = out[i - step] if i >= step else 0
        if kind == 1:
            out[i] = (out[i] + a) & 255
        elif kind == 3:
            out[i] = (out[i] + ((a + prior[i]) >> 1)) & 255
        elif kind == 4:
            out[i] = (out[i] + _paeth(a, prior[i], prior[i - step] if i >= step else 0)) & 255
        else:
            raise ValueError(f"unknown PNG row filter {kind}")
    return bytes(out)


def read(data: bytes) -> Image:
    chunks = _chunks(data)
    header = next(body for kind, body in chunks if kind == b"IHDR")
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour not in (*COLOUR_TYPES, PALETTE) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    channels = COLOUR_TYPES.get(colour, 1)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = width * channels
    rows: list[bytes] = []
    prior = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        prior = _unfilter(raw[start], raw[start + 1 : start + 1 + stride], prior, channels)
        rows.append(prior)
    if colour == PALETTE:
        plte = next(body for kind, body in chunks if kind == b"PLTE")
        colours = [plte[i : i + 3] for i in range(0, len(plte), 3)]
        return Image(width, height, 3, tuple(b"".join(colours[n] for n in row) for row in rows))
    return Image(width, height, channels, tuple(rows))


def _filtered(line: bytes, prior: bytes, step: int) -> bytes:
    """The row under whichever of None, Sub and Up leaves the smallest sum of bytes (as signed), a cheap guess at
    what compresses best."""
    sub = bytes((line[i] - (line[i - step] if i >= step else 0)) & 255 for i in range(len(line)))
    up = bytes((x - b) & 255 for x, b in zip(line, prior, strict=True))
    options = [b"\x00" + line, b"\x01" + sub, b"\x02" + up]
    return min(options, key=lambda row: sum(v if v < 128 else 256 - v for v in row[1:]))


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def _opaque(image: Image) -> Image:
    if image.channels == 3 or any(row[3::4] != b"\xff" * image.width for row in image.rows):
        return image
    return Image(
        image.width, image.height, 3, tuple(bytes(b for i, b in enumerate(row) if i % 4 != 3) for row in image.rows)
    )


def write(image: Image) -> bytes:
    """An optimised lossless file: RGB when every pixel is opaque, a filter chosen per row, the strongest
    compression."""
    image = _opaque(image)
    channels = image.channels
    prior = bytes(image.width * channels)
    body = bytearray()
    for row in image.rows:
        body += _filtered(row, prior, channels)
        prior = row
    colour = next(kind for kind, size in COLOUR_TYPES.items() if size == channels)
    header = struct.pack(">IIBBBBB", image.width, image.height, 8, colour, 0, 0, 0)
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(bytes(body), 9)) + _chunk(b"IEND", b"")


def write_palette(image: Image) -> bytes:
    """A small file for the docs, a few times smaller than the lossless one: the 256 commonest colours of an opaque
    picture, every other pixel (a few in a hundred: edges of smoothed text) given the nearest of them."""
    image = _opaque(image)
    if image.channels != 3:
        raise ValueError("a palette picture needs every pixel opaque")
    counts = Counter(row[i : i + 3] for row in image.rows for i in range(0, len(row), 3))
    palette = [colour for colour, _ in counts.most_common(256)]
    index = {colour: n for n, colour in enumerate(palette)}
    for colour in counts:
        if colour not in index:
            index[colour] = min(
                range(len(palette)), key=lambda n: sum((a - b) ** 2 for a, b in zip(colour, palette[n], strict=True))
            )
    body = b"".join(b"\x00" + bytes(index[row[i : i + 3]] for i in range(0, len(row), 3)) for row in image.rows)
    header = struct.pack(">IIBBBBB", image.width, image.height, 8, 3, 0, 0, 0)
    return (
        SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"PLTE", b"".join(palette))
        + _chunk(b"IDAT", zlib.compress(body, 9))
        + _chunk(b"IEND", b"")
    )
