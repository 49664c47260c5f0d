"""Messages over daphne's 1 MiB websocket limit reach the viewer in pieces; a failed replay closes with 4500."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from ag_ui.core import TextMessageContentEvent
from django.db import connection, transaction
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from runs.protocol import PIECE_CHARS, pieces
from runs.services.timeline import publish_frames, read_side
from tests.support import factories
from tests.support.sockets import cookie_of, frames_of, receive_message, stored_frames
from tests.support.timeline_page import dom_positions, wait_until_drawn

THREE_MIB = 3 * 1024 * 1024


def test_a_small_message_travels_whole_and_a_large_one_in_pieces_that_join_to_it():
    assert pieces('{"type": "ready"}', 1) == ['{"type": "ready"}']
    text = json.dumps({"type": "event", "delta": "x" * THREE_MIB})
    sent = [json.loads(piece) for piece in pieces(text, 7)]
    assert len(sent) == -(-len(text) // PIECE_CHARS)
    assert {(piece["type"], piece["id"], piece["count"]) for piece in sent} == {("piece", 7, len(sent))}
    assert "".join(piece["data"] for piece in sent) == text


@pytest.fixture
def big_execution(live_stack):
    """An execution whose stored timeline holds one 3 MiB text delta (a single event over the limit)."""
    run = factories.make_run(factories.make_execution())
    factories.append_events(run, factories.text_run_events(run, ["start ", "y" * THREE_MIB, " end"], finish=False))
    return run


def open_socket(stack, user, execution_pk: int):
    # The client keeps websockets' own 1 MiB limit: every message the server sends must fit it.
    return connect(
        f"{stack.ws_url}/ws/executions/{execution_pk}/",
        origin=Origin(stack.base_url),
        additional_headers={"Cookie": cookie_of(user)},
        max_size=2**20,
    )


def test_an_execution_with_a_3_mib_event_replays_and_streams_live(live_stack, operator_user, big_execution):
    run = big_execution
    stored = stored_frames(run.execution_id)

    async def watch() -> tuple[list[dict], list[dict]]:
        async with open_socket(live_stack, operator_user, run.execution_id) as socket:
            await socket.send(json.dumps({"type": "subscribe", "after": None}))
            replayed: list[dict[str, Any]] = []
            while (message := await receive_message(socket))["type"] != "ready":
                replayed += frames_of(message)
            await asyncio.to_thread(append_and_publish_a_big_event)
            live: list[dict[str, Any]] = []
            while not live:
                live += frames_of(await receive_message(socket))
            return replayed, live

    def append_and_publish_a_big_event() -> None:
        with transaction.atomic():
            (row,) = factories.append_events(run, [TextMessageContentEvent(message_id="m1", delta="z" * THREE_MIB)])
            publish_frames(run.execution_id, [read_side.frame_of(row)])

    replayed, live = asyncio.run(asyncio.wait_for(watch(), timeout=60))
    assert replayed == stored
    assert [frame["position"] for frame in live] == [len(stored) + 1]
    assert live[0]["event"]["delta"] == "z" * THREE_MIB


def test_a_failed_replay_closes_with_a_code_daphne_can_send(live_stack, operator_user, big_execution):
    with connection.cursor() as cursor:
        # A stored row that is not UTF-8 (valid JSON to SQLite) makes the replay's read fail inside daphne.
        cursor.execute(
            "UPDATE runs_timelineevent SET event = CAST(X'7B2261223A2280FF227D' AS TEXT) "
            "WHERE execution_id = %s AND position = 2",
            [big_execution.execution_id],
        )

    async def subscribe() -> int:
        async with open_socket(live_stack, operator_user, big_execution.execution_id) as socket:
            await socket.send(json.dumps({"type": "subscribe", "after": None}))
            try:
                while True:
                    await socket.recv()
            except ConnectionClosed as closed:
                assert closed.rcvd is not None, "the server closed with a close frame"
                return closed.rcvd.code

    assert asyncio.run(asyncio.wait_for(subscribe(), timeout=30)) == 4500


def test_the_page_draws_an_execution_with_a_3_mib_event(operator_page, live_stack, big_execution):
    execution = big_execution.execution
    operator_page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    stored = wait_until_drawn(operator_page, execution, timeout=30_000)
    assert dom_positions(operator_page) == stored
