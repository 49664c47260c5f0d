"""Websocket viewers for the viewers benchmark, in a process of their own (no Django here).

`python -m bench.viewer_clients <ws url> <origin> <cookie> <execution pk> <clients> <ramp s> <last position>`
opens `clients` viewers spread evenly over `ramp` seconds (0: all at once), each subscribing from the start
and reading until it has `last position`. The last line printed is JSON: per viewer, whether it was served,
the sha256 of every event frame it got (in order), and the receipt time of each frame that arrived after its
`ready` (the live ones); plus the first errors and the CPU time the process used.

The viewers are load generators sharing the server's two CPUs, so they do as little as a client can while the
run lasts: each is a bare asyncio protocol that splits what arrives into websocket frames, notes the receipt
time and keeps the payload; everything is decoded after the last frame. With the `websockets` client, which
parses each frame through its own protocol machinery and queues, the two client processes used 17–23 s of CPU
per repetition, as much as half of daphne's, and their receipt times included their own queueing. The
handshake is checked as RFC 6455 says (status 101 and the accept key); the server's frames are unmasked and
unfragmented, its pings are answered.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import struct
import sys
import time
from typing import Any
from urllib.parse import urlsplit

DEADLINE_SECONDS = 180
HANDSHAKE_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA
PIECE_PREFIX = b'{"type":"piece"'


def _client_frame(opcode: int, payload: bytes) -> bytes:
    """A masked, final frame (clients must mask, RFC 6455 5.3)."""
    mask = os.urandom(4)
    size = len(payload)
    if size < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    elif size < 2**16:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
    masked = bytes(byte ^ mask[n % 4] for n, byte in enumerate(payload))
    return header + mask + masked


class ViewerConnection(asyncio.Protocol):
    def __init__(self, request: bytes, key: bytes, end: bytes) -> None:
        self.request = request
        self.accept = base64.b64encode(hashlib.sha1(key + HANDSHAKE_GUID).digest())
        self.end = end
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.upgraded = False
        # Text payloads with their receipt times; a piece frame's whole message gets the time of its last piece.
        self.received: list[tuple[bytes, float]] = []
        self.pieces: list[str] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        at = time.time()
        self.buffer += data
        if not self.upgraded:
            head, separator, rest = self.buffer.partition(b"\r\n\r\n")
            if not separator:
                return
            lines = head.split(b"\r\n")
            headers = dict(line.split(b": ", 1) for line in lines[1:] if b": " in line)
            headers = {name.lower(): value for name, value in headers.items()}
            if b" 101 " not in lines[0] or headers.get(b"sec-websocket-accept") != self.accept:
                self._finish(RuntimeError(f"handshake refused: {lines[0]!r}"))
                return
            self.upgraded = True
            self.buffer = rest
            self._send(TEXT, b'{"type":"subscribe","after":null}')
        self._frames(at)

    def _frames(self, at: float) -> None:
        buffer = self.buffer
        start = 0
        while len(buffer) - start >= 2:
            opcode = buffer[start] & 0x0F
            size = buffer[start + 1] & 0x7F
            offset = start + 2
            if size == 126:
                if len(buffer) - offset < 2:
                    break
                (size,) = struct.unpack_from("!H", buffer, offset)
                offset += 2
            elif size == 127:
                if len(buffer) - offset < 8:
                    break
                (size,) = struct.unpack_from("!Q", buffer, offset)
                offset += 8
            if len(buffer) - offset < size:
                break
            payload = buffer[offset : offset + size]
            start = offset + size
            if opcode == TEXT:
                self._text(payload, at)
            elif opcode == PING:
                self._send(PONG, payload)
            elif opcode == CLOSE:
                self._finish(RuntimeError(f"closed by the server: {payload!r}"))
                return
        self.buffer = buffer[start:]

    def _text(self, payload: bytes, at: float) -> None:
        if payload.startswith(PIECE_PREFIX):
            piece = json.loads(payload)
            self.pieces.append(piece["data"])
            if len(self.pieces) < piece["count"]:
                return
            payload, self.pieces = "".join(self.pieces).encode(), []
        self.received.append((payload, at))
        if self.end in payload:
            self._finish(None)

    def _send(self, opcode: int, payload: bytes) -> None:
        assert self.transport is not None
        self.transport.write(_client_frame(opcode, payload))

    def _finish(self, error: Exception | None) -> None:
        if self.done.done():
            return
        if error is None:
            self.done.set_result(None)
        else:
            self.done.set_exception(error)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(exc or RuntimeError("the connection closed before the last frame"))


def _results(received: list[tuple[bytes, float]]) -> dict[str, Any]:
    """Decode what one viewer got: the digest of its event frames and the receipt times of the live ones."""
    frames: list[dict[str, Any]] = []
    live: list[tuple[int, float]] = []
    ready = False
    for payload, at in received:
        message = json.loads(payload)
        if message["type"] == "ready":
            ready = True
        elif message["type"] == "error":
            raise RuntimeError(f"refused: {message}")
        elif message["type"] in ("event", "events"):
            batch = message["events"] if message["type"] == "events" else [message]
            frames += batch
            if ready:
                live += [(frame["position"], at) for frame in batch]
    digest = hashlib.sha256(json.dumps(frames, sort_keys=True).encode()).hexdigest()
    return {"served": True, "digest": digest, "live": live}


async def _viewer(url: str, origin: str, cookie: str, last: int, delay: float) -> list[tuple[bytes, float]]:
    await asyncio.sleep(delay)
    parts = urlsplit(url)
    key = base64.b64encode(os.urandom(16))
    request = (
        f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key.decode()}\r\nSec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n"
        f"Cookie: {cookie}\r\n\r\n"
    ).encode()
    # A frame's position in the compact text is followed by a comma; `ready`'s is not.
    end = f'"position":{last},'.encode()
    loop = asyncio.get_running_loop()
    assert parts.hostname is not None and parts.port is not None, url
    _, viewer = await loop.create_connection(lambda: ViewerConnection(request, key, end), parts.hostname, parts.port)
    await viewer.done
    return viewer.received


async def main(ws_url: str, origin: str, cookie: str, execution_pk: int, clients: int, ramp: float, last: int) -> None:
    url = f"{ws_url}/ws/executions/{execution_pk}/"
    delays = [ramp * n / clients for n in range(clients)]
    outcomes = await asyncio.wait_for(
        asyncio.gather(*(_viewer(url, origin, cookie, last, d) for d in delays), return_exceptions=True),
        DEADLINE_SECONDS,
    )
    viewers: list[dict[str, Any]] = []
    errors: list[str] = []
    for outcome in outcomes:
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            viewers.append(_results(outcome))
        except Exception as error:
            errors.append(repr(error))
            viewers.append({"served": False, "digest": "", "live": []})
    summary = {"viewers": viewers, "errors": errors[:5], "cpu_s": time.process_time()}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    ws, origin, cookie, pk, count, ramp_seconds, last_position = sys.argv[1:8]
    asyncio.run(main(ws, origin, cookie, int(pk), int(count), float(ramp_seconds), int(last_position)))
