"""The client's address behind the TLS proxy: taken from `X-Forwarded-For` only when the proxy itself sent it.

Behind nginx every connection comes from the proxy, so the login throttle (django-axes, by username and address)
would count every client as one and five bad logins would lock an operator out from anywhere. With
`HARNESS_BEHIND_TLS_PROXY` set, this ASGI middleware replaces the connection's address (which Django reads as
`REMOTE_ADDR`) with the one the proxy saw, for pages and websockets alike. It trusts the header only on a
connection from an address in `HARNESS_TRUSTED_PROXIES`, and reads it from the right: a client may send its own
`X-Forwarded-For`, but the proxy appends the address it really came from, so the rightmost entry that is not a
trusted proxy is the client. A connection from anywhere else keeps its own address and loses its forwarding
headers, so neither the throttle nor `SECURE_PROXY_SSL_HEADER` believes what it claims.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ("ProxiedClients", "trusted_networks")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
FORWARDED_FOR = b"x-forwarded-for"
# Headers only the proxy may set: dropped from a connection that does not come from it.
FORWARDING_HEADERS = frozenset({FORWARDED_FOR, b"x-forwarded-proto"})


def trusted_networks(addresses: Iterable[str]) -> tuple[Network, ...]:
    """Addresses or networks ("10.0.1.5", "10.0.1.0/24", "::1"); ValueError names one that does not parse."""
    return tuple(ipaddress.ip_network(address.strip(), strict=False) for address in addresses)


class ProxiedClients:
    """ASGI middleware setting `scope["client"]` to the address the trusted proxy forwarded."""

    def __init__(self, app: Any, *, trusted: Sequence[str]) -> None:
        self.app = app
        self.trusted = trusted_networks(trusted)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] in ("http", "websocket"):
            scope = self.rewritten(scope)
        return await self.app(scope, receive, send)

    def rewritten(self, scope: dict[str, Any]) -> dict[str, Any]:
        peer = scope.get("client")
        if not peer or not self._is_trusted(peer[0]):
            headers = [(name, value) for name, value in scope["headers"] if name.lower() not in FORWARDING_HEADERS]
            return {**scope, "headers": headers}
        chain = [
            entry.strip()
            for name, value in scope["headers"]
            if name.lower() == FORWARDED_FOR
            for entry in value.decode("latin-1").split(",")
        ]
        client = peer[0]
        for entry in reversed(chain):
            try:
                ipaddress.ip_address(entry)
            except ValueError:
                # Whatever stands left of a malformed entry was written by the client: the last good hop stays.
                break
            client = entry
            if not self._is_trusted(entry):
                break
        # The client's port is not forwarded.
        return scope if client == peer[0] else {**scope, "client": [client, 0]}

    def _is_trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        # A dual-stack socket reports an IPv4 peer as ::ffff:a.b.c.d.
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in network for network in self.trusted)
