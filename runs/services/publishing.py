"""Channels publication of committed timeline events and status changes.

Nothing is sent before its rows are durable: callers inside a transaction register the send with
`transaction.on_commit`, so a rolled-back batch is never seen by a browser. This module is the only place
that talks to the channel layer; a missing or unreachable layer never breaks a run (browsers catch up from
the database when they reconnect).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from runs.models import Execution, TimelineEvent

from .timeline import execution_status_message, frame_of

__all__ = ("execution_group", "publish_execution_status", "publish_timeline")

log = logging.getLogger(__name__)

THREADS_GROUP = "threads"


def execution_group(execution_pk: int) -> str:
    return f"execution-{execution_pk}"


def _send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:
        log.warning("could not publish %s to %s", message.get("type"), group, exc_info=True)


def publish_timeline(execution_pk: int, events: Sequence[TimelineEvent]) -> None:
    """After the surrounding transaction commits, send the events to the execution's group.

    Frames are built by the read side's `frame_of`, so live and replayed frames are identical.
    """
    if not events:
        return
    frames = [frame_of(event) for event in events]
    transaction.on_commit(lambda: _send(execution_group(execution_pk), {"type": "timeline.append", "frames": frames}))


def _status_messages(execution_pk: int) -> list[tuple[str, dict[str, Any]]]:
    execution = Execution.objects.filter(pk=execution_pk).first()
    if execution is None:
        return []
    return [
        (execution_group(execution.pk), execution_status_message(execution)),
        (
            THREADS_GROUP,
            {
                "type": "thread.status",
                "thread": execution.thread_id,
                "execution": execution.pk,
                "status": execution.status,
            },
        ),
    ]


def publish_execution_status(execution_pk: int) -> None:
    """After commit, send the execution's current status (read then, so it is the committed one)."""

    def send() -> None:
        for group, message in _status_messages(execution_pk):
            _send(group, message)

    transaction.on_commit(send)
