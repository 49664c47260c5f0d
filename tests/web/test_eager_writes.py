"""daphne's eager TCP writes: sent at once when nothing waits, in order behind what does, errors left to Twisted.

A real loopback TCP connection under Twisted's transport; the reactor is Twisted's `MemoryReactorClock`, so a test sees
whether a write went out at once or was left for the reactor's next round (the socket registered as a writer).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from twisted.internet import error, tcp
from twisted.internet.protocol import Protocol
from twisted.internet.testing import MemoryReactorClock

from harness_site import eager_writes


@pytest.fixture(autouse=True)
def installed(monkeypatch) -> None:
    monkeypatch.setattr(tcp.Connection, "write", tcp.Connection.write)
    eager_writes.install()


@pytest.fixture
def pair() -> Iterator[tuple[tcp.Connection, socket.socket, MemoryReactorClock]]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        peer = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
    reactor = MemoryReactorClock()
    # Twisted declares its interfaces with zope's @implementer, which mypy sees only through the mypy-zope plugin.
    connection = tcp.Connection(accepted, Protocol(), reactor)  # type: ignore[arg-type]
    connection.connected = True
    peer.settimeout(5)
    yield connection, peer, reactor
    peer.close()
    accepted.close()


def _receive(peer: socket.socket, size: int) -> bytes:
    received = b""
    while len(received) < size:
        chunk = peer.recv(size - len(received))
        assert chunk, "the connection closed early"
        received += chunk
    return received


def test_a_write_with_nothing_buffered_is_sent_at_once_without_nagles_delay(pair) -> None:
    connection, peer, reactor = pair
    assert not connection.getTcpNoDelay()
    connection.write(b"live message")
    assert _receive(peer, 12) == b"live message"
    assert reactor.getWriters() == []
    assert connection.getTcpNoDelay()


def test_what_the_socket_cannot_take_is_buffered_and_later_writes_queue_behind_it(pair) -> None:
    connection, peer, reactor = pair
    large = bytes(range(256)) * (16 * 1024)  # 4 MiB: more than loopback's socket buffers hold unread
    connection.write(large)
    assert reactor.getWriters() == [connection]
    connection.write(b"queued")
    assert connection.doWrite() is None  # the socket is still full: the rest moves to Twisted's send buffer
    connection.write(b"after")
    received = b""
    while len(received) < len(large) + 11:
        received += peer.recv(1 << 20)
        assert connection.doWrite() is None
    assert received == large + b"queued" + b"after"


def test_a_write_on_a_connection_the_peer_reset_leaves_the_loss_to_the_reactor(pair) -> None:
    connection, peer, reactor = pair
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    peer.close()  # with a zero linger: a reset, so the next send fails
    for _ in range(100):
        connection.write(b"to nobody")
        if reactor.getWriters():
            break
    assert reactor.getWriters() == [connection]
    assert isinstance(connection.doWrite(), error.ConnectionLost)


def test_a_closing_connection_keeps_twisteds_buffered_path(pair) -> None:
    connection, _peer, reactor = pair
    connection.disconnecting = True
    connection.write(b"last words")
    assert reactor.getWriters() == [connection]


@pytest.mark.parametrize("end", ["abortConnection", "loseWriteConnection"])
def test_nothing_is_sent_after_an_abort_or_a_half_close(pair, end) -> None:
    connection, peer, _reactor = pair
    getattr(connection, end)()
    if end == "loseWriteConnection":
        assert connection.doWrite() is None  # Twisted shuts the write side down on its next round
    connection.write(b"too late")
    peer.settimeout(0.2)
    received = b""
    with contextlib.suppress(TimeoutError):
        while chunk := peer.recv(100):
            received += chunk
    assert received == b""


def test_a_connection_with_a_pull_producer_keeps_twisteds_buffered_path(pair) -> None:
    """Twisted asks a pull producer for more only when the buffer drains, on the reactor's round."""
    connection, _peer, reactor = pair

    class Pull:
        resumed = 0

        def resumeProducing(self) -> None:
            self.resumed += 1

        def stopProducing(self) -> None:
            pass

    producer = Pull()
    connection.registerProducer(producer, False)
    connection.write(b"a chunk")
    assert reactor.getWriters() == [connection]
    connection.doWrite()
    assert producer.resumed == 2


@pytest.mark.services
def test_the_asgi_application_installs_it() -> None:
    # A fresh process: this one installed it already (the fixture).
    check = (
        "import harness_site.asgi, harness_site.eager_writes as e, twisted.internet.tcp as t; "
        "print(t.Connection.write is e._write)"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip().splitlines()[-1] == "True"
