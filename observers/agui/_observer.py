"""`HarnessAguiObserver`: the AG-UI projection of one Harness Run, live or rebuilt from its source history."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Mapping
from typing import Any, Literal, Self

from ag_ui.core import BaseEvent, CustomEvent
from pydantic import ValidationError

from runs.harness import HarnessEvent, HarnessRunResultEvent

from ._continuation import ConversionSnapshot, ObserverContinuation, RunSnapshot
from ._conversion import RunConversion, RunConversionState, SourceItem
from ._copies import detached
from ._errors import AguiObservationError
from ._fragments import fragment_custom_event, fragment_id
from ._ids import IdClaims, IdLedger
from ._processor import AguiEventProcessor, apply_processor

__all__ = ("HarnessAguiObserver",)


class HarnessAguiObserver:
    """Projects the source items of exactly one Harness Run into AG-UI events.

    `observe()` converts one item and returns only the events that item produced. `resume()` rebuilds the
    observer of a run that is already under way from its finite source prefix, then live items continue with
    `observe()`. Either fails atomically: a failing item or history leaves the observer as it was.
    State-changing calls must be serialised by the caller; `observe()` is synchronous and `resume()` closes a
    gate for its whole duration, so within one event loop they cannot interleave unnoticed.

    An oversized CUSTOM event comes out as fragments (`fragment_custom_event`). With `fragment=False` it comes out
    whole, for a caller that changes events before sending them: it cuts the changed event itself, with the id
    `fragment_id(item, position)` of its position among the events `observe(item)` returned. The processor
    always sees whole events.
    """

    # Which observer an exported continuation may restore.
    _continuation_kind: Literal["run", "stream"] = "run"

    def __init__(
        self, *, processor: AguiEventProcessor | None = None, retain_events: bool = True, fragment: bool = True
    ) -> None:
        self._processor = processor
        self._retain_events = retain_events
        self._fragment = fragment
        self._thread_id: str | None = None
        self._run_id: str | None = None
        self._state: Any = self._initial_state()
        self._ids = IdLedger()
        self._events: list[BaseEvent] = []
        self._resuming = False
        self._resume_completed = False

    @property
    def thread_id(self) -> str | None:
        return self._thread_id

    @property
    def run_id(self) -> str | None:
        return self._run_id

    @property
    def fragment(self) -> bool:
        """Whether oversized CUSTOM events come out as fragments (else whole)."""
        return self._fragment

    @property
    def event_count(self) -> int:
        return len(self._events)

    def observe(self, item: SourceItem) -> tuple[BaseEvent, ...]:
        """Convert one source item; returns the AG-UI events it produced, detached from the observer."""
        frames = self._observe(item)
        if self._retain_events:
            return tuple(detached(frame) for frame in frames)
        return tuple(frames)

    async def resume(self, history: AsyncIterable[SourceItem]) -> None:
        """Rebuild this fresh observer from the exact source prefix of its run.

        Every historical item goes through `observe()` of a private staging observer, processor included;
        the result is adopted only when `history` is exhausted. Until then, and after any failure or
        cancellation, this observer stays exactly as it was. Returns `None` so the historical events, now
        in `snapshot()`, are not republished by accident.
        """
        if not isinstance(history, AsyncIterable):
            raise TypeError(f"resume() needs an async iterable of source items, not {type(history).__name__}")
        if self._resuming:
            raise AguiObservationError("another resume() of this observer is in progress")
        if self._resume_completed or self._run_id is not None:
            raise AguiObservationError("resume() needs a fresh observer; this one already observed or resumed")
        self._resuming = True
        try:
            staged = self._staging_observer()
            items = aiter(history)
            try:
                async for item in items:
                    staged._observe(item)
            except BaseException:
                # A journal cursor behind an abandoned history should not wait for garbage collection.
                if isinstance(items, AsyncGenerator):
                    await items.aclose()
                raise
            self._thread_id = staged._thread_id
            self._run_id = staged._run_id
            self._state = staged._state
            self._ids = staged._ids
            self._events = staged._events
            self._resume_completed = True
        finally:
            self._resuming = False

    def export(self) -> ObserverContinuation:
        """The conversion cursors and used ids, without events, for `restore()`."""
        if self._resuming:
            raise AguiObservationError("export() is not allowed while resume() is rebuilding this observer")
        if self._thread_id is None or self._run_id is None:
            raise AguiObservationError("export() needs an observer that has observed its run")
        used, repeats = self._ids.snapshot()
        runs, threads = self._exported_runs()
        return ObserverContinuation(
            observer=self._continuation_kind,
            thread_id=self._thread_id,
            run_id=self._run_id,
            state=ConversionSnapshot(runs=runs, threads=threads, used_ids=used, id_repeats=repeats),
        )

    @classmethod
    def restore(
        cls,
        continuation: ObserverContinuation | Mapping[str, Any] | str | bytes,
        *,
        processor: AguiEventProcessor | None = None,
        fragment: bool = True,
    ) -> Self:
        """An observer that continues the exported conversion: it keeps no events and refuses `resume()`.

        A continuation that does not validate (an `ObserverContinuation` instance is validated again), or was
        exported by the other kind of observer, is refused with `AguiObservationError` and nothing is built.
        """
        try:
            if isinstance(continuation, str | bytes):
                continuation = ObserverContinuation.model_validate_json(continuation)
            else:
                continuation = ObserverContinuation.model_validate(continuation)
        except ValidationError as exc:
            raise AguiObservationError(f"not an observer continuation: {exc}") from exc
        observer = cls(processor=processor, retain_events=False, fragment=fragment)
        if continuation.observer != observer._continuation_kind:
            raise AguiObservationError(
                f"a {continuation.observer} observer's continuation cannot restore a "
                f"{observer._continuation_kind} observer"
            )
        snapshot = continuation.state
        observer._state = observer._restored_state(continuation.run_id, continuation.thread_id, snapshot)
        observer._ids = IdLedger.from_snapshot(snapshot.used_ids, snapshot.id_repeats)
        observer._thread_id, observer._run_id = continuation.thread_id, continuation.run_id
        return observer

    def snapshot(self, *, start: int = 0, stop: int | None = None) -> tuple[BaseEvent, ...]:
        """Copies of the accumulated events in `[start, stop)`: historical ones first, then live ones."""
        if not self._retain_events:
            raise AguiObservationError("this observer does not retain events (retain_events=False)")
        count = len(self._events)
        stop = count if stop is None else stop
        if not 0 <= start <= stop <= count:
            raise ValueError(f"snapshot window [{start}, {stop}) is outside [0, {count}]")
        return tuple(detached(event) for event in self._events[start:stop])

    def _staging_observer(self) -> HarnessAguiObserver:
        return type(self)(processor=self._processor, retain_events=self._retain_events, fragment=self._fragment)

    def _observe(self, item: SourceItem) -> list[BaseEvent]:
        """The one path every item takes, live or historical; commits only after everything succeeded."""
        if self._resuming:
            raise AguiObservationError("observe() is not allowed while resume() is rebuilding this observer")
        if not isinstance(item, HarnessEvent | HarnessRunResultEvent):
            raise TypeError(f"observe() needs a HarnessEvent or HarnessRunResultEvent, not {type(item).__name__}")
        self._check_correlation(item)
        claims = self._ids.claims()
        state, events = self._convert(item, claims)
        if self._processor is not None:
            events = apply_processor(self._processor, item, events)
        frames = _fragmented(item, events) if self._fragment else events
        if self._run_id is None:
            self._thread_id, self._run_id = item.thread_id, item.run_id
        self._state = state
        claims.commit()
        if self._retain_events:
            self._events.extend(frames)
        return frames

    def _initial_state(self) -> Any:
        return RunConversionState()

    def _exported_runs(self) -> tuple[dict[str, RunSnapshot], dict[str, str]]:
        assert self._run_id is not None
        return {self._run_id: RunSnapshot.of(self._state)}, {}

    def _restored_state(self, run_id: str, thread_id: str, snapshot: ConversionSnapshot) -> Any:
        if set(snapshot.runs) != {run_id} or snapshot.threads:
            raise AguiObservationError("a run observer's continuation holds exactly the cursors of its own run")
        return snapshot.runs[run_id].state()

    def _check_correlation(self, item: SourceItem) -> None:
        if self._thread_id is not None and item.thread_id != self._thread_id:
            raise AguiObservationError(f"thread correlation changed from {self._thread_id!r} to {item.thread_id!r}")
        if self._run_id is not None and item.run_id != self._run_id:
            raise AguiObservationError(
                f"run correlation changed from {self._run_id!r} to {item.run_id!r}; "
                "a new Harness Run needs a new observer"
            )

    def _convert(self, item: SourceItem, ids: IdClaims) -> tuple[Any, list[BaseEvent]]:
        """The state after `item` and the events it produced; `self._state` is left untouched."""
        events: list[BaseEvent] = []
        conversion = RunConversion(self._state, item, events, ids=ids)
        conversion.convert()
        return conversion.state(), events


def _fragmented(item: SourceItem, events: list[BaseEvent]) -> list[BaseEvent]:
    if not any(isinstance(event, CustomEvent) for event in events):
        return events
    frames: list[BaseEvent] = []
    for position, event in enumerate(events):
        if isinstance(event, CustomEvent):
            frames.extend(fragment_custom_event(event, fragment_id(item, position)))
        else:
            frames.append(event)
    return frames
