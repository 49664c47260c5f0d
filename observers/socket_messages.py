"""What browsers may send on the sockets, as frozen pydantic models; anything else is refused with 4400.

Parsing goes through pydantic's JSON parser, which bounds nesting depth, so a hostile frame cannot exhaust the
stack; integers are strict (no bools, floats or numeric strings) and bounded by what the database can store.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from runs.validators import MAX_DB_INTEGER

MAX_MESSAGE_CHARS = 8192
"""A subscription is a few hundred characters; a larger text frame is refused before it is parsed."""

MAX_SUBSCRIBED_THREADS = 500

RecordPk = Annotated[int, Field(strict=True, ge=1, le=MAX_DB_INTEGER)]
Position = Annotated[int, Field(strict=True, ge=0, le=MAX_DB_INTEGER)]


class TimelineSubscribe(BaseModel):
    """`/ws/executions/<pk>/`: start the replay after `after` (null: from the start)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["subscribe"]
    after: Position | None = None
    execution: RecordPk | None = None


class ApprovalsSubscribe(BaseModel):
    """`/ws/approvals/`: send the open requests now, then whenever they change."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["subscribe"]


class ThreadsSubscribe(BaseModel):
    """`/ws/threads/`: send the current status of these threads, then live ones."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["subscribe"]
    threads: Annotated[list[RecordPk], Field(max_length=MAX_SUBSCRIBED_THREADS)]
