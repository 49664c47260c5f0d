"""daphne's TCP connections write at once when nothing is waiting, as asyncio's transports do.

Twisted's transports never write in `write()`: they buffer, register the socket with the reactor for writability
and send on the next loop round, then unregister it (Twisted issue #5303, open since 2011). For a server that
fans one message out to a thousand sockets, that is two `epoll_ctl` calls, a selector-key copy and a callback
dispatch per socket and message on top of the `send` itself: about a third of daphne's event loop at 20,000
websocket writes a second (bench/findings.md, section 12). Here a write on a plain TCP connection with nothing
buffered goes straight to Twisted's own `writeSomeData`, which limits the size and treats a full socket buffer
as "nothing sent"; whatever it did not send, and every write while something is buffered, takes Twisted's usual
path, so bytes keep their order and a lost connection is still found and reported by the reactor. Connections
that started TLS on the transport, closing, aborted or half-closed ones, and ones with a pull producer (which
Twisted asks for more data only when its buffer drains) are left to Twisted. A TLS endpoint wraps the protocol
instead, so what comes here is already encrypted. An eagerly written connection gets `TCP_NODELAY`, as asyncio
gives every TCP connection: two small writes in one loop round are no longer one send, and without it the second
could wait for the peer's delayed acknowledgement.

Twisted is pinned to the versions this was checked against (pyproject.toml); `tests/web/test_eager_writes.py`
drives a real socket pair through the patched transport.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet import tcp

__all__ = ("install",)

_buffered_write: Callable[[tcp.Connection, bytes], None] = tcp.Connection.write


def _write(self: tcp.Connection, data: bytes) -> None:
    if (
        data
        and type(data) is bytes
        and self.connected
        and not self.disconnecting
        and not self._aborting
        and not self._writeDisconnected
        and not self.TLS
        and (self.producer is None or self.streamingProducer)
        and not self._tempDataBuffer
        and self.offset == len(self.dataBuffer)
    ):
        if not getattr(self, "_nodelay_set", False):
            self._nodelay_set = True  # type: ignore[attr-defined]  # our marker on Twisted's connection
            self.setTcpNoDelay(True)
        sent = self.writeSomeData(data)
        # An exception instance means the connection is gone: the buffered path lets the reactor report it.
        if isinstance(sent, int):
            if sent == len(data):
                return
            data = data[sent:]
    _buffered_write(self, data)


def install() -> None:
    """Make every Twisted TCP connection of this process write eagerly (idempotent)."""
    # Replacing the method is the point (see above); `_write` needs a Connection, where the base class says mixin.
    tcp.Connection.write = _write  # type: ignore[method-assign,assignment]
