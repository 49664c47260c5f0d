"""The protocol of the Host's websockets, typed: every message each side sends, the codes, the one timeline frame.

`docs/architecture.md` ("Websocket protocol") describes it for people; this module is its only definition in
code. The read side, the projection writer, publishing, the consumers and the SSE endpoint build and read
timeline frames through `timeline_frame` and `event_frame_text` (a socket keeps a frame's text beside it, in an
`EncodedFrame`, never in it); the page scripts get the codes they need from here through `json_script` configs
(`page_constants`, and the timeline's `CURSOR_ERRORS`), never by repeating them.

Three kinds of message:

- client messages, which the browser sends: frozen pydantic models, because they are parsed and checked
  (strict integers, extra fields forbidden, bounded sizes), and anything that does not fit is refused;
- server frames, which the sockets send: `TypedDict`s, built here or in the consumers;
- group messages, which Host processes send each other over the Channels layer and each consumer handles by
  its `type` (`timeline.append` → `timeline_append`): `TypedDict`s, built by `runs.services.timeline.publishing`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Final, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field

# pydantic validates only typing_extensions' TypedDict on Python 3.11 (the tests check frames against these).
from typing_extensions import TypedDict

from runs.validators import MAX_DB_INTEGER

__all__ = (
    "CLOSE_BAD_REQUEST",
    "CLOSE_INTERNAL_ERROR",
    "CLOSE_NOT_FOUND",
    "CLOSE_UNAUTHENTICATED",
    "CURSOR_ERRORS",
    "FINAL_CLOSE_CODES",
    "MAX_MESSAGE_CHARS",
    "MAX_SUBSCRIBED_THREADS",
    "PIECE_CHARS",
    "ApprovalsChanged",
    "ApprovalsFrame",
    "ApprovalsSubscribe",
    "EncodedFrame",
    "ErrorCode",
    "ErrorFrame",
    "EventFrame",
    "EventsFrame",
    "ExecutionStatusMessage",
    "GroupMessage",
    "Origin",
    "PieceFrame",
    "ReadyFrame",
    "RunSummary",
    "SessionEnded",
    "StatusFrame",
    "ThreadStatus",
    "ThreadsSubscribe",
    "TimelineAppend",
    "TimelineFrame",
    "TimelineSubscribe",
    "Tokens",
    "encode_event",
    "event_frame_text",
    "message_texts",
    "page_constants",
    "pieces",
    "timeline_frame",
)


# Why the server closed a socket. Plain ints: autobahn (daphne) refuses any other type, an IntEnum included, and
# sends only 1000 and 3000–4999, so an internal error is 4500 rather than 1011.
CLOSE_BAD_REQUEST: Final = 4400
# Not logged in, or the session ended (logged out, expired, password changed).
CLOSE_UNAUTHENTICATED: Final = 4401
# No such execution, or no socket at this address.
CLOSE_NOT_FOUND: Final = 4404
# The replay or refresh task failed; the client reconnects and resumes from its cursor.
CLOSE_INTERNAL_ERROR: Final = 4500

FINAL_CLOSE_CODES: Final = (CLOSE_UNAUTHENTICATED, CLOSE_NOT_FOUND)
"""After these the page does not reconnect: trying again cannot help."""


class ErrorCode(StrEnum):
    """The `code` of an error frame; the socket closes right after it."""

    BAD_REQUEST = "bad_request"
    TOO_LARGE = "too_large"
    ALREADY_SUBSCRIBED = "already_subscribed"
    BAD_CURSOR = "bad_cursor"
    CURSOR_BEYOND_END = "cursor_beyond_end"
    CURSOR_EXECUTION_MISMATCH = "cursor_execution_mismatch"
    NOT_FOUND = "not_found"
    SESSION_ENDED = "session_ended"


CURSOR_ERRORS: Final = (ErrorCode.CURSOR_BEYOND_END, ErrorCode.CURSOR_EXECUTION_MISMATCH, ErrorCode.BAD_CURSOR)
"""The client's cursor does not fit this timeline: the page starts over from nothing (a few times at most)."""

MAX_MESSAGE_CHARS: Final = 8192
"""A subscription is a few hundred characters; a larger text frame is refused before it is parsed."""

MAX_SUBSCRIBED_THREADS: Final = 500

PIECE_CHARS: Final = 256 * 1024
"""A message text over this is sent in pieces. daphne refuses (and only logs) a websocket message over 1 MiB;
texts are ASCII (JSON with `ensure_ascii`), and quoting a piece as a JSON string at most doubles it."""


# Client messages --------------------------------------------------------------------------------------------

RecordPk = Annotated[int, Field(strict=True, ge=1, le=MAX_DB_INTEGER)]
Position = Annotated[int, Field(strict=True, ge=0, le=MAX_DB_INTEGER)]


class TimelineSubscribe(BaseModel):
    """`/ws/executions/<pk>/`: start the replay after `after` (null: from the start)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["subscribe"]
    after: Position | None = None
    execution: RecordPk | None = None


class ThreadsSubscribe(BaseModel):
    """`/ws/threads/`: send the current status of these threads, then live ones."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["subscribe"]
    threads: Annotated[list[RecordPk], Field(max_length=MAX_SUBSCRIBED_THREADS)]


class ApprovalsSubscribe(BaseModel):
    """`/ws/approvals/`: send the open requests now, then whenever they change."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["subscribe"]


# Timeline frames --------------------------------------------------------------------------------------------

Origin = Literal["run", "host"]
"""Whose item an event is (`runs.models.TimelineOrigin`): `run`, an event of that run's AG-UI stream; `host`, an
item the Host adds beside the runs (a decision), which AG-UI clients of one run's stream leave out."""


class _Placed(TypedDict):
    """Where a stored event stands: its position in the execution, its lane (`run`, the Run's pk) and the lane's
    harness run id and number, its inline child run (empty at the root), and whose item it is."""

    position: int
    run_id: str
    run: int
    run_number: int
    subagent_run_id: str
    origin: Origin


class TimelineFrame(_Placed):
    """A stored event as the Host passes it on: published to the execution's group and read by a replay. The event
    stays the JSON text it was stored as (`event_json`); only the socket's message text splices it in."""

    event_json: str


def timeline_frame(
    *, position: int, run: int, run_id: str, run_number: int, subagent_run_id: str, origin: Origin, event_json: str
) -> TimelineFrame:
    """The one constructor of a timeline frame; `run` is the Run's pk (its lane), `run_id` the harness run id."""
    return TimelineFrame(
        position=position,
        run_id=run_id,
        run=run,
        run_number=run_number,
        subagent_run_id=subagent_run_id,
        origin=origin,
        event_json=event_json,
    )


def encode_event(dumped: dict[str, Any]) -> str:
    """An event's stored and sent JSON text: compact and ASCII only (a piece is cut by characters)."""
    return _COMPACT.encode(dumped)


# `json.dumps` with other than its default options builds an encoder for every call; every event is encoded once.
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def event_frame_text(frame: TimelineFrame) -> str:
    """A frame as the socket's `event` message text (`EventFrame`), the event's JSON text spliced in as it is.

    Stored text is ASCII unless the database rewrote it (PostgreSQL's jsonb renders non-ASCII characters as they
    are); that is escaped, since pieces are cut by characters.
    """
    event = frame["event_json"]
    if not event.isascii():
        event = json.dumps(json.loads(event))
    return (
        f'{{"type":"event","position":{int(frame["position"])},"run_id":{_quoted(frame["run_id"])},'
        f'"run":{int(frame["run"])},"run_number":{int(frame["run_number"])},'
        f'"subagent_run_id":{_quoted(frame["subagent_run_id"])},"origin":{_quoted(frame["origin"])},'
        f'"event":{event}}}'
    )


@dataclass(frozen=True, eq=False)
class EncodedFrame:
    """A timeline frame beside its `event` message text (`event_frame_text`), made the first time a socket needs it
    and then kept, however many sockets send the frame; the frame itself stays exactly what is published."""

    frame: TimelineFrame

    @functools.cached_property
    def text(self) -> str:
        return event_frame_text(self.frame)

    @property
    def position(self) -> int:
        return self.frame["position"]


_EVENTS_MESSAGE = '{{"type":"events","events":[{}]}}'


def message_texts(frames: Sequence[EncodedFrame]) -> list[str]:
    """The texts of the messages that carry `frames`: one `event` message, or `events` messages (`EventsFrame`).

    The events' stored JSON text is spliced in as it is, never decoded; one message holds as many frames as fit in
    a piece, so a long replay is not cut into pieces and rejoined.
    """
    texts = [frame.text for frame in frames]
    if len(texts) == 1:
        return texts
    return [
        _EVENTS_MESSAGE.format(",".join(group)) for group in _fitting(texts, PIECE_CHARS - len(_EVENTS_MESSAGE) + 2)
    ]


def _fitting(texts: list[str], limit: int) -> list[list[str]]:
    """Consecutive runs of `texts` whose joined length stays within `limit` (a longer text goes alone)."""
    groups: list[list[str]] = [[]]
    size = 0
    for text in texts:
        if groups[-1] and size + len(text) + 1 > limit:
            groups.append([])
            size = 0
        groups[-1].append(text)
        size += len(text) + 1
    return groups


@functools.lru_cache(maxsize=1024)
def _quoted(text: str) -> str:
    # A replay repeats the same few run ids in every frame: each is encoded once, not once per frame.
    return json.dumps(text)


# Server frames ----------------------------------------------------------------------------------------------


class EventFrame(_Placed):
    """One stored AG-UI event (by alias, as `ag_ui.core` dumps it) in its lane."""

    type: Literal["event"]
    event: dict[str, Any]


class EventsFrame(TypedDict):
    """Consecutive event frames in order (part of a replay page, a published batch), within `PIECE_CHARS` unless
    one frame alone is larger."""

    type: Literal["events"]
    events: list[EventFrame]


class Tokens(TypedDict):
    input: int
    output: int


class RunSummary(TypedDict):
    """One run of an execution, for its lane head (`event_count` only in the page's config)."""

    pk: int
    run_id: str
    number: int
    reason: str
    status: str
    started_at: str | None
    finished_at: str | None
    attempt: int
    tool_recovery: str
    tokens: Tokens | None
    event_count: NotRequired[int]


class StatusFrame(TypedDict):
    type: Literal["status"]
    execution: int
    status: str
    runs: list[RunSummary]


class ReadyFrame(TypedDict):
    """The replay (timeline: up to `position`) or the current statuses (threads) are out; live from here on."""

    type: Literal["ready"]
    position: NotRequired[int]


class ErrorFrame(TypedDict):
    type: Literal["error"]
    code: ErrorCode
    message: str


class PieceFrame(TypedDict):
    """Part `index` of `count` of the message text `id`; the page joins the `data` of one id in order."""

    type: Literal["piece"]
    id: int
    index: int
    count: int
    data: str


class ThreadStatus(TypedDict):
    """A thread's latest execution and its status (`idle`: none yet); a group message the threads socket
    forwards as it is, and the frames it sends a new subscriber."""

    type: Literal["thread.status"]
    thread: int
    execution: int | None
    status: str


class ApprovalsFrame(TypedDict):
    """The open requests of every thread (pks), for the nav badge and the inbox."""

    type: Literal["approvals"]
    count: int
    requests: list[int]


# Group messages ---------------------------------------------------------------------------------------------


class TimelineAppend(TypedDict):
    type: Literal["timeline.append"]
    frames: list[TimelineFrame]


class ExecutionStatusMessage(TypedDict):
    """An execution's status and runs; the timeline socket sends it as a `StatusFrame`."""

    type: Literal["execution.status"]
    execution: int
    status: str
    runs: list[RunSummary]


class ApprovalsChanged(TypedDict):
    """Something changed the open requests; each socket reads the committed set itself."""

    type: Literal["approvals.changed"]


class SessionEnded(TypedDict):
    """The session logged out: its sockets close with an error frame `session_ended` and 4401."""

    type: Literal["session.ended"]


GroupMessage = TimelineAppend | ExecutionStatusMessage | ThreadStatus | ApprovalsChanged | SessionEnded


def pieces(text: str, message_id: int) -> list[str]:
    """`text` itself if it fits `PIECE_CHARS`, else the `PieceFrame` texts that carry it."""
    if len(text) <= PIECE_CHARS:
        return [text]
    chunks = [text[start : start + PIECE_CHARS] for start in range(0, len(text), PIECE_CHARS)]
    return [
        json.dumps(PieceFrame(type="piece", id=message_id, index=index, count=len(chunks), data=chunk))
        for index, chunk in enumerate(chunks)
    ]


def page_constants() -> dict[str, Any]:
    """What `static/js/socket.js` needs of the protocol, given to every page in its `socket-protocol` json_script
    (the timeline's cursor errors travel in its own `timeline-config`)."""
    return {
        "finalCloseCodes": list(FINAL_CLOSE_CODES),
        "unauthenticated": CLOSE_UNAUTHENTICATED,
    }
