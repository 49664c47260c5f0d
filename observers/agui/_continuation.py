"""`ObserverContinuation`: a compact, JSON-portable copy of an observer's conversion cursors.

A Host that checkpoints display state instead of source history exports the observer at a boundary and later
restores one that continues the conversion exactly where it stopped: the same message and tool call ids, the
same open parts. No events are kept, only what the next item needs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ._conversion import PartCursor, RunConversionState

__all__ = ("ConversionSnapshot", "CursorSnapshot", "ObserverContinuation", "RunSnapshot")


class _Frozen(BaseModel):
    # An instance is validated again too: `model_copy(update=...)` and `model_construct` skip validation.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, revalidate_instances="always")


class CursorSnapshot(_Frozen):
    kind: Literal["text", "thinking", "tool"]
    id: str = Field(min_length=1)
    minted: bool
    source: str = ""
    tool_name: str = ""
    content_emitted: bool = False
    signature_emitted: bool = False

    @classmethod
    def of(cls, cursor: PartCursor) -> CursorSnapshot:
        return cls(
            kind=cursor.kind,
            id=cursor.id,
            minted=cursor.minted,
            source=cursor.source,
            tool_name=cursor.tool_name,
            content_emitted=cursor.content_emitted,
            signature_emitted=cursor.signature_emitted,
        )

    def cursor(self) -> PartCursor:
        return PartCursor(**self.model_dump())


class RunSnapshot(_Frozen):
    """One run's cursors: the model request index, open parts by part index, and re-mapped tool call ids."""

    request_index: int = Field(ge=0)
    cursors: dict[int, CursorSnapshot] = Field(default_factory=dict)
    tool_ids: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def of(cls, state: RunConversionState) -> RunSnapshot:
        return cls(
            request_index=state.request_index,
            cursors={index: CursorSnapshot.of(cursor) for index, cursor in state.cursors.items()},
            tool_ids=dict(state.tool_ids),
        )

    def state(self) -> RunConversionState:
        return RunConversionState(
            request_index=self.request_index,
            cursors={index: cursor.cursor() for index, cursor in self.cursors.items()},
            tool_ids=dict(self.tool_ids),
        )


class ConversionSnapshot(_Frozen):
    """Every run's cursors (the root, and for a stream observer its live children), the thread of each run the
    observer has seen, and the AG-UI ids the stream has used (with the last repeat suffix given per id)."""

    runs: dict[str, RunSnapshot]
    threads: dict[str, str] = Field(default_factory=dict)
    used_ids: list[str] = Field(default_factory=list)
    id_repeats: dict[str, int] = Field(default_factory=dict)


class ObserverContinuation(_Frozen):
    schema_version: Literal["1"] = "1"
    observer: Literal["run", "stream"]
    thread_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    state: ConversionSnapshot
