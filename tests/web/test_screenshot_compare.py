"""The screenshot tests' own tools, in process: PNG files read and written with the standard library, and the
comparison that counts changed pixels (tests/support/png.py, tests/support/screenshots.py)."""

from __future__ import annotations

import struct
import zlib

import pytest

from tests.support import png
from tests.support.screenshots import compare

RED = b"\xff\x00\x00"


def image(*rows: bytes, channels: int = 3) -> png.Image:
    return png.Image(len(rows[0]) // channels, len(rows), channels, rows)


def by_hand(rows: list[bytes], filters: list[int], channels: int) -> bytes:
    """A PNG whose rows use the given filters (Average and Paeth included), written the long way."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    def paeth(a: int, b: int, c: int) -> int:
        p = a + b - c
        return min((abs(p - a), 0, a), (abs(p - b), 1, b), (abs(p - c), 2, c))[2]

    body, prior = b"", bytes(len(rows[0]))
    for row, kind in zip(rows, filters, strict=True):
        out = bytearray()
        for i, x in enumerate(row):
            left = i >= channels
            a, b, c = row[i - channels] if left else 0, prior[i], prior[i - channels] if left else 0
            predictor = [0, a, b, (a + b) // 2, paeth(a, b, c)][kind]
            out.append((x - predictor) & 255)
        body += bytes([kind]) + bytes(out)
        prior = row
    colour = 6 if channels == 4 else 2
    header = struct.pack(">IIBBBBB", len(rows[0]) // channels, len(rows), 8, colour, 0, 0, 0)
    return png.SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(body)) + chunk(b"IEND", b"")


def test_every_row_filter_reads_back_the_pixels():
    rows = [bytes((x * 37 + y * 91 + c * 13) % 256 for x in range(5) for c in range(4)) for y in range(5)]
    data = by_hand(rows, [0, 1, 2, 3, 4], channels=4)
    assert png.read(data) == image(*rows, channels=4)


def test_a_written_file_reads_back_and_drops_an_opaque_alpha():
    rows = [bytes((x * 11 + y * 7) % 256 if i % 4 != 3 else 255 for x in range(6) for i in range(4)) for y in range(4)]
    written = png.read(png.write(image(*rows, channels=4)))
    assert written.channels == 3
    assert written.rows == tuple(bytes(b for i, b in enumerate(row) if i % 4 != 3) for row in rows)


def test_a_file_of_another_kind_is_refused():
    with pytest.raises(ValueError, match="not a PNG"):
        png.read(b"GIF89a")


def test_changes_within_the_threshold_do_not_count_and_the_diff_marks_the_others():
    before = image(b"\x10\x10\x10" * 3, b"\x10\x10\x10" * 3)
    after = image(b"\x10\x10\x10\x30\x10\x10\x10\x10\x10", b"\x10\x10\x10\x10\x10\x10\xf0\x10\x10")
    result = compare(before, after, threshold=32)
    assert (result.changed, result.total) == (1, 6)
    assert result.diff.rows[1][6:9] == RED
    assert result.diff.rows[0][3:6] != RED


def test_a_size_change_counts_every_pixel_outside_the_other_picture():
    small = image(b"\x00\x00\x00" * 2)
    large = image(b"\x00\x00\x00" * 3, b"\x00\x00\x00" * 3)
    result = compare(small, large, threshold=32)
    assert (result.changed, result.total) == (4, 6)
    assert result.diff.rows[1] == RED * 3


def test_a_palette_file_keeps_the_256_commonest_colours_and_gives_the_rest_the_nearest():
    common = [bytes((n, n, 255 - n)) for n in range(256)]
    rows = [b"".join(common) * 2, b"".join(common[:255]) + b"\x05\x06\xfb"]
    written = png.read(png.write_palette(image(*rows)))
    assert written.rows[0] == rows[0]
    assert written.rows[1][-3:] == b"\x05\x05\xfa"
