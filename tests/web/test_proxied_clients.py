"""Behind the TLS proxy each client is throttled at its own address, and a forged X-Forwarded-For counts for nothing.

The login tests drive a real daphne over HTTP from 127.0.0.1, which plays the proxy: with
`HARNESS_BEHIND_TLS_PROXY` it is trusted (the default `HARNESS_TRUSTED_PROXIES` is this machine), without it the
header is a client's claim like any other.
"""

from __future__ import annotations

import pytest

from harness_site.proxied_clients import ProxiedClients
from tests.http_session import HIDDEN_FIELD, HttpSession
from tests.services import DaphneServer, running, service_env

PROXY = "10.0.1.2"


def scope_through(peer: str, forwarded: str | None = None, **extra_headers: str) -> dict:
    headers = [(name.replace("_", "-").encode(), value.encode()) for name, value in extra_headers.items()]
    if forwarded is not None:
        headers.append((b"x-forwarded-for", forwarded.encode()))
    return {"type": "http", "client": [peer, 50123], "headers": headers}


def seen(scope: dict, trusted: tuple[str, ...] = (PROXY, "10.0.2.0/24")) -> dict:
    return ProxiedClients(None, trusted=trusted).rewritten(scope)


@pytest.mark.parametrize(
    ("forwarded", "client"),
    [
        ("203.0.113.5", "203.0.113.5"),
        # nginx appends the address it saw: what the client wrote itself stands to its left.
        ("198.51.100.66, 203.0.113.5", "203.0.113.5"),
        # Proxies of our own (10.0.2.0/24) in the chain are skipped.
        ("198.51.100.66, 203.0.113.5, 10.0.2.9", "203.0.113.5"),
        ("not-an-address, 10.0.2.9", "10.0.2.9"),
        ("2001:db8::7", "2001:db8::7"),
    ],
)
def test_the_trusted_proxy_s_header_names_the_client_read_from_the_right(forwarded, client):
    assert seen(scope_through(PROXY, forwarded))["client"] == [client, 0]


def test_the_proxy_s_own_connection_without_the_header_keeps_its_address():
    assert seen(scope_through(PROXY))["client"] == [PROXY, 50123]
    assert seen(scope_through(f"::ffff:{PROXY}", "203.0.113.5"))["client"] == ["203.0.113.5", 0]


def test_anyone_else_keeps_their_address_and_loses_the_forwarding_headers():
    scope = seen(scope_through("192.0.2.77", "203.0.113.5", x_forwarded_proto="https", accept="text/html"))
    assert scope["client"] == ["192.0.2.77", 50123]
    assert scope["headers"] == [(b"accept", b"text/html")]


@pytest.fixture
def guarded(django_user_model):
    return django_user_model.objects.create_user("guarded", password="right-password-1")


def daphne_env(redis_url: str, database: str, **extra: str) -> dict[str, str]:
    env = service_env(redis_url=redis_url, database_name=database)
    env.pop("HARNESS_BEHIND_TLS_PROXY", None)
    return env | extra


def login(base_url: str, forwarded_for: str, password: str) -> int:
    session = HttpSession(base_url, headers={"X-Forwarded-For": forwarded_for})
    fields = dict(HIDDEN_FIELD.findall(session.get("/login/").body))
    return session.post("/login/", {**fields, "username": "guarded", "password": password}).status


def lock_out_and_try_elsewhere(base_url: str, limit: int) -> tuple[int, int]:
    """Fail `limit` times as one forwarded client, then log in with the right password as that client and as
    another one; their statuses."""
    for _ in range(limit):
        assert login(base_url, "203.0.113.10", "wrong") in (200, 429)
    return login(base_url, "203.0.113.10", "right-password-1"), login(base_url, "198.51.100.20", "right-password-1")


def test_behind_the_proxy_one_client_s_lockout_does_not_lock_out_another(
    transactional_db, redis_settings, settings, guarded
):
    env = daphne_env(redis_settings.url, settings.DATABASES["default"]["NAME"], HARNESS_BEHIND_TLS_PROXY="1")
    with running(DaphneServer(env)) as daphne:
        locked, elsewhere = lock_out_and_try_elsewhere(daphne.base_url, settings.AXES_FAILURE_LIMIT)
    assert (locked, elsewhere) == (429, 302)


def test_without_the_proxy_setting_a_forged_forwarded_address_is_ignored(
    transactional_db, redis_settings, settings, guarded
):
    env = daphne_env(redis_settings.url, settings.DATABASES["default"]["NAME"])
    with running(DaphneServer(env)) as daphne:
        locked, elsewhere = lock_out_and_try_elsewhere(daphne.base_url, settings.AXES_FAILURE_LIMIT)
    # Both "clients" are the one connection address they really came from.
    assert (locked, elsewhere) == (429, 429)
