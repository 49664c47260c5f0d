"""Sockets live only as long as their login session: logging out closes them, and so does an ended session."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.sessions.models import Session
from django.http import HttpRequest
from django.test import Client
from playwright.sync_api import expect
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from harness_site.asgi import application
from runs.models import Membership, TeamRole
from runs.protocol import CLOSE_NOT_FOUND
from tests.support import factories
from tests.support.browser import log_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def logged_in(redis_settings, django_user_model):
    django_user_model.objects.create_user("sessions", password="pw-sessions-1")
    client = Client()
    assert client.login(request=HttpRequest(), username="sessions", password="pw-sessions-1")
    return client


async def open_socket(client: Client, path: str) -> WebsocketCommunicator:
    """A socket through the whole websocket stack (origin check, session cookie, auth), as a browser opens it."""
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    communicator = WebsocketCommunicator(
        application, path, headers=[(b"cookie", cookie), (b"origin", b"http://localhost"), (b"host", b"localhost")]
    )
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def expect_session_ended(communicator: WebsocketCommunicator) -> None:
    assert (await communicator.receive_json_from(timeout=10))["code"] == "session_ended"
    assert await communicator.receive_output(timeout=10) == {"type": "websocket.close", "code": 4401}


async def test_logging_out_closes_the_sessions_sockets(logged_in):
    execution = await sync_to_async(factories.make_execution)()
    timeline_socket = await open_socket(logged_in, f"/ws/executions/{execution.pk}/")
    threads_socket = await open_socket(logged_in, "/ws/threads/")
    await threads_socket.send_json_to({"type": "subscribe", "threads": []})
    assert await threads_socket.receive_json_from() == {"type": "ready"}

    await sync_to_async(logged_in.logout)()

    await expect_session_ended(timeline_socket)
    await expect_session_ended(threads_socket)


async def test_logging_out_leaves_other_sessions_sockets_open(logged_in):
    other = Client()
    await sync_to_async(other.login)(request=HttpRequest(), username="sessions", password="pw-sessions-1")
    staying = await open_socket(other, "/ws/threads/")

    await sync_to_async(logged_in.logout)()

    await staying.send_json_to({"type": "subscribe", "threads": []})
    assert await staying.receive_json_from(timeout=10) == {"type": "ready"}
    await staying.disconnect()


async def test_a_session_that_ends_without_logging_out_is_noticed_at_the_next_check(logged_in, settings):
    settings.HARNESS_SOCKET_SESSION_CHECK_SECONDS = 0.2
    socket = await open_socket(logged_in, "/ws/threads/")
    await socket.send_json_to({"type": "subscribe", "threads": []})
    assert await socket.receive_json_from() == {"type": "ready"}

    # As if it expired and was cleared, or an administrator deleted it: no logout signal is sent.
    await sync_to_async(Session.objects.all().delete)()

    await expect_session_ended(socket)


async def test_a_changed_password_ends_the_sockets_of_older_sessions(logged_in, settings, django_user_model):
    settings.HARNESS_SOCKET_SESSION_CHECK_SECONDS = 0.2
    socket = await open_socket(logged_in, "/ws/threads/")

    def change_password() -> None:
        user = django_user_model.objects.get(username="sessions")
        user.set_password("pw-sessions-2")
        user.save()

    await sync_to_async(change_password)()

    await expect_session_ended(socket)


@pytest.mark.parametrize("path", ["/ws/executions/-1/", "/ws/executions/abc/", f"/ws/executions/{2**70}/"])
def test_daphne_answers_an_unknown_socket_address_with_4404_not_a_500(live_stack, operator_user, path):
    client = Client()
    client.force_login(operator_user)

    async def closed_with() -> tuple[dict, int | None]:
        async with connect(
            live_stack.ws_url + path,
            origin=live_stack.base_url,
            additional_headers={"Cookie": f"sessionid={client.cookies['sessionid'].value}"},
        ) as socket:
            error = json.loads(await socket.recv())
            with contextlib.suppress(ConnectionClosed):
                await socket.recv()
            return error, socket.close_code

    error, code = asyncio.run(asyncio.wait_for(closed_with(), timeout=30))
    assert error["code"] == "not_found"
    assert code == 4404


def test_a_logged_out_sessions_socket_closes_in_the_browser(live_stack, operator_user, page):
    log_in(page, live_stack.base_url, "op", "op-password-1")
    expect(page.locator("body")).to_have_attribute("data-live-status", "live")

    other_tab = page.context.new_page()
    other_tab.goto(f"{live_stack.base_url}/approvals/")
    other_tab.get_by_role("button", name="Log out").click()
    expect(other_tab).to_have_url(f"{live_stack.base_url}/login/")

    expect(page.locator("body")).to_have_attribute("data-live-status", "logged-out")


async def test_a_member_removed_from_the_team_while_watching_loses_the_execution_and_its_requests(
    logged_in, settings, django_user_model
):
    settings.HARNESS_SOCKET_SESSION_CHECK_SECONDS = 0.2
    settings.HARNESS_SOCKET_REFRESH_SECONDS = 0.2

    def approver_and_waiting_execution():
        Membership.objects.filter(user__username="sessions").update(role=TeamRole.APPROVER)
        return factories.suspended_execution().execution

    execution = await sync_to_async(approver_and_waiting_execution)()
    timeline = await open_socket(logged_in, f"/ws/executions/{execution.pk}/")
    await timeline.send_json_to({"type": "subscribe", "after": None})
    assert (await timeline.receive_json_from(timeout=10))["type"] == "status"
    approvals = await open_socket(logged_in, "/ws/approvals/")
    await approvals.send_json_to({"type": "subscribe"})
    assert (await approvals.receive_json_from(timeout=10))["count"] == 2

    await sync_to_async(Membership.objects.filter(user__username="sessions").delete)()

    # At the next session check the timeline closes as for an execution that does not exist ...
    frame = await timeline.receive_json_from(timeout=10)
    while frame["type"] != "error":
        frame = await timeline.receive_json_from(timeout=10)
    assert frame["code"] == "not_found"
    assert await timeline.receive_output(timeout=10) == {"type": "websocket.close", "code": CLOSE_NOT_FOUND}
    # ... and at the next refresh the badge's socket counts none of the team's requests.
    assert await approvals.receive_json_from(timeout=10) == {"type": "approvals", "count": 0, "requests": []}
    await approvals.disconnect()
