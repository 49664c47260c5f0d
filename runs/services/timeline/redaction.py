"""The redaction boundary: what anyone but the journal sees of a run is masked by its frozen policy version.

The rule, in one place (docs/approvals.md explains it to operators): a value under a key that one of the
version's `redact_patterns` matches (case-insensitive regex search on the key), or under a key longer than
`MAX_KEY_CHARS`, is shown as `[redacted]`.
Keys are recognised in JSON objects and, inside any text, in `key: value` / `key=value` pairs, quoted or not,
including JSON written into a string. A quoted value is masked to its closing quote, an object or list to its
closing bracket, a bare value to the next space or punctuation.

`TimelineRedactor` masks every AG-UI event before it is stored, so the timeline, the raw event pages and
websocket frames (all read from the stored events) never hold a secret. It keeps a little state per run:
streamed deltas are masked with a look-back over the last `STREAM_CONTEXT_CHARS` characters of their
message and a memory of a value still open at a delta's end, so a key and its value split across deltas are
caught, and an oversized CUSTOM event is masked whole, then cut into fragments. `Redactor` masks values shown from other
records (inputs, outputs, deferred requests, decisions). The journal, checkpoints and the tools themselves
keep the real values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal, NamedTuple

from ag_ui.core import BaseEvent, CustomEvent

from observers.agui import FRAGMENT_EVENT_NAME, fragment_custom_event, oversized
from runs.models import HostPolicyVersion

from ..store.policy import parse_redact_patterns

__all__ = (
    "MAX_KEY_CHARS",
    "REDACTED",
    "STREAM_CONTEXT_CHARS",
    "Produced",
    "Redactor",
    "TimelineRedactor",
    "dump_event",
    "redactor_for",
    "redactor_of_all",
    "restore_redacted",
)

REDACTED = "[redacted]"
STREAM_CONTEXT_CHARS = 256
"""How far back a delta's key may start before its value: longer gaps are not recognised across deltas."""
MAX_KEY_CHARS = 256
"""A longer key is judged secret without being searched (see `Redactor.is_secret`)."""

# A key, optionally quoted (also as `\"` inside JSON written into a string), and its separator. A key is the rest
# of a run of key characters (`[\w.-]`) from its first ASCII letter or underscore: so an unquoted key is tried only
# where a run starts, skipping the run's leading characters that cannot start a key (digits, dots, dashes, other
# letters), and no quantifier gives back what it took (a shorter key is followed by a key character, never by a
# separator). Each character is looked at a bounded number of times; searched from every position, a run of
# key characters cost the square of its length.
_KEY = re.compile(
    r"""(?:(?P<q>\\?["'])|(?<![\w.-])(?:[^\W_A-Za-z]|[.-])*+)(?P<key>[A-Za-z_][\w.-]*+)(?(q)(?P=q))\s*+[:=]\s*"""
)
_BARE_END = frozenset(" \t\r\n\f\v,;&\"'\\)]}")

# Fields of an AG-UI event that identify or correlate it; everything else is content and is masked.
_STRUCTURAL_FIELDS = frozenset(
    {
        "type",
        "timestamp",
        "threadId",
        "runId",
        "parentRunId",
        "messageId",
        "parentMessageId",
        "toolCallId",
        "toolCallName",
        "role",
        "name",
        "subagentRunId",
        "stepName",
        "code",
        "usage",
        "subtype",
        "entityId",
        "encryptedValue",  # opaque provider data: nothing to recognise in it
        "protocolVersion",
    }
)
# Correlation of a CUSTOM envelope or a raw event with its source item (observers.agui._envelopes).
_ENVELOPE_KEYS = frozenset({"thread_id", "run_id", "sequence", "occurred_at", "event_kind"})
# Streamed content and the events that end it: (stream family, field naming the stream).
_STREAMED = {
    "TEXT_MESSAGE_CONTENT": ("text", "messageId"),
    "REASONING_MESSAGE_CONTENT": ("reasoning", "messageId"),
    "TOOL_CALL_ARGS": ("args", "toolCallId"),
}
_STREAM_ENDS = {
    "TEXT_MESSAGE_END": ("text", "messageId"),
    "REASONING_MESSAGE_END": ("reasoning", "messageId"),
    "TOOL_CALL_END": ("args", "toolCallId"),
}


def dump_event(event: BaseEvent) -> dict[str, Any]:
    """The standard AG-UI JSON encoding of an event (by alias, without unset optional fields)."""
    return event.model_dump(mode="json", by_alias=True, exclude_none=True)


@dataclass
class _Value:
    """A masked value whose end is found incrementally, since its text may arrive in several deltas."""

    kind: Literal["quoted", "escaped", "nested", "bare"]
    opening: str  # shown where the value starts
    closing: str  # shown where it ends
    skip: int  # opening characters (quote, bracket) still to pass
    quote: str = ""
    depth: int = 0
    in_string: bool = False
    escaped: bool = False

    @classmethod
    def starting(cls, char: str, key_quote: str) -> _Value | None:
        """The value beginning with `char` after a key quoted with `key_quote`; None for an empty value."""
        if char in "\"'":
            return cls("quoted", char + REDACTED, char, skip=1, quote=char)
        if char == "\\":
            return cls("escaped", '\\"' + REDACTED, '\\"', skip=2)
        if char in _BARE_END:
            return None
        # An object, list or bare word stands as a string in JSON (when the key was double-quoted).
        wrap = key_quote if key_quote in ('"', '\\"') else ""
        if char in "{[":
            return cls("nested", wrap + REDACTED, wrap, skip=1, depth=1)
        return cls("bare", wrap + REDACTED, wrap, skip=0)

    def end_in(self, text: str, start: int) -> int | None:
        """The index just after this value in `text` (scanned from `start`), or None if it goes on."""
        index = start
        while self.skip and index < len(text):
            self.skip -= 1
            index += 1
        while index < len(text):
            if self._ends_at(text[index]):
                return index if self.kind == "bare" else index + 1
            index += 1
        return None

    def _ends_at(self, char: str) -> bool:
        match self.kind:
            case "bare":
                return char in _BARE_END
            case "quoted" if self.escaped:
                self.escaped = False
            case "quoted":
                self.escaped = char == "\\" and self.quote == '"'
                return char == self.quote
            case "escaped":
                # The value ends at the next `\"`; a backslash may end one text and its quote start the next.
                closing = self.escaped and char == '"'
                self.escaped = char == "\\" and not self.escaped
                return closing
            case "nested" if self.escaped:
                self.escaped = False
            case "nested" if self.in_string:
                self.escaped = char == "\\"
                self.in_string = char != '"'
            case "nested":
                self.in_string = char == '"'
                self.depth += (char in "{[") - (char in "}]")
                return self.depth == 0
        return False


@dataclass(frozen=True)
class _Span:
    start: int
    end: int | None  # None: the value runs past the end of the text
    value: _Value


class Redactor:
    """Masks the values under secret keys in JSON values and text (see the module docstring)."""

    def __init__(self, patterns: Iterable[re.Pattern[str]], *, key_pattern: re.Pattern[str] = _KEY) -> None:
        """`key_pattern` finds a key and its separator in text (groups `key`, and `q` for its quote); the default
        looks at each character a bounded number of times, and any pattern that finds the same keys masks alike."""
        self.patterns = tuple(patterns)
        self.key_pattern = key_pattern

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def is_secret(self, key: str) -> bool:
        # A policy's pattern may cost the square of what it searches (`api.*key`), and a key in text is as long as
        # its run of key characters: a longer key than any name is masked without searching it.
        return bool(self.patterns) and (
            len(key) > MAX_KEY_CHARS or any(pattern.search(key) for pattern in self.patterns)
        )

    def value(self, value: Any, *, keep: frozenset[str] = frozenset()) -> Any:
        """A copy of a JSON value with secrets masked; keys in `keep` (at this level only) are not judged."""
        if not self.patterns:
            return value
        try:
            return self._mask(value, keep)
        except RecursionError:
            # Nested deeper than the stack allows: shown as one masked value rather than failing whoever shows it.
            return REDACTED

    def _mask(self, value: Any, keep: frozenset[str] = frozenset()) -> Any:
        if isinstance(value, Mapping):
            return {
                key: REDACTED if isinstance(key, str) and key not in keep and self.is_secret(key) else self._mask(item)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self._mask(item) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def text(self, text: str) -> str:
        if not text or not self.patterns:
            return text
        if text.lstrip()[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
                masked = self._mask(parsed)
                return text if masked == parsed else json.dumps(masked, ensure_ascii=False)
            except (ValueError, RecursionError):
                pass  # not JSON, or nested deeper than the stack allows: masked as text, which finds its keys too
        rendered, unfinished = self.render(text, 0)
        # A bare value at the very end is complete here (no further text will come): close it.
        return rendered + unfinished.closing if unfinished is not None and unfinished.kind == "bare" else rendered

    def pretty_json(self, value: Any) -> str:
        """Indented JSON of the masked value, for pages."""
        return json.dumps(self.value(value), indent=2, ensure_ascii=False)

    def render(self, text: str, offset: int) -> tuple[str, _Value | None]:
        """`text[offset:]` with the values of secret keys masked, and the value still open at its end.

        `text[:offset]` is context already shown: a value that starts there was masked when it was shown.
        """
        pieces: list[str] = []
        cursor = offset
        for span in self._spans(text):
            if span.end is not None and span.end <= offset:
                continue
            if span.start >= offset:
                pieces += [text[cursor : span.start], span.value.opening]
            if span.end is None:
                return "".join(pieces), span.value
            pieces.append(span.value.closing)
            cursor = span.end
        pieces.append(text[cursor:])
        return "".join(pieces), None

    def _spans(self, text: str) -> Iterable[_Span]:
        position = 0
        while match := self.key_pattern.search(text, position):
            # A key that is not secret consumes only itself and its separator, so a pair inside its value
            # (`Config: {"password": ...}`) is still found.
            position = match.end()
            if position >= len(text) or not self.is_secret(match["key"]):
                continue
            value = _Value.starting(text[position], match["q"] or "")
            if value is None:
                continue
            end = value.end_in(text, position)
            yield _Span(position, end, value)
            if end is None:
                return
            position = end


@lru_cache(maxsize=64)
def _redactor(patterns: tuple[str, ...]) -> Redactor:
    return Redactor(parse_redact_patterns(list(patterns)))


def redactor_for(version: HostPolicyVersion | None) -> Redactor:
    """The redactor of a policy version (one that masks nothing when the version redacts nothing)."""
    patterns = tuple(version.redact_patterns or ()) if version is not None else ()
    return _redactor(patterns)


def redactor_of_all(*versions: HostPolicyVersion | None) -> Redactor:
    """One redactor masking what any of the versions masks (a re-mask: an execution's own and the newer one)."""
    patterns = (pattern for version in versions if version is not None for pattern in version.redact_patterns or ())
    return _redactor(tuple(dict.fromkeys(patterns)))


@dataclass
class _Stream:
    """The deltas of one message or tool call so far: what was shown lately, and a value still open."""

    context: str = ""
    open: _Value | None = None

    def feed(self, redactor: Redactor, delta: str) -> str:
        shown: list[str] = []
        rest = delta
        if self.open is not None:
            end = self.open.end_in(delta, 0)
            if end is None:
                return ""
            shown.append(self.open.closing)
            self.open = None
            rest = delta[end:]
        # The context is text already shown (secrets masked), so a value masked earlier stays closed in it.
        context = (self.context + "".join(shown))[-STREAM_CONTEXT_CHARS:]
        rendered, self.open = redactor.render(context + rest, len(context))
        shown.append(rendered)
        self.context = (context + rendered)[-STREAM_CONTEXT_CHARS:]
        return "".join(shown)


class Produced(NamedTuple):
    """An AG-UI event on its way into the timeline: its journal entry (pk; `None` for an item the Host supplies),
    when its item happened, and the id its fragments carry should it be a CUSTOM event too large to go whole
    (`observers.agui.fragment_id` for a run's event)."""

    entry: int | None
    occurred_at: datetime
    event: BaseEvent
    fragment_id: str = ""


Stored = tuple[int | None, datetime, dict[str, Any]]


@dataclass
class TimelineRedactor:
    """Masks the AG-UI events of one run, in order, into the JSON that is stored and published."""

    redactor: Redactor
    _streams: dict[tuple[str, str], _Stream] = field(default_factory=dict)

    @classmethod
    def for_version(cls, version: HostPolicyVersion | None) -> TimelineRedactor:
        return cls(redactor_for(version))

    def events(self, produced: Sequence[Produced]) -> list[Stored]:
        """The stored form of each event, masked; an oversized CUSTOM event is masked whole, then cut into the
        fragments that are stored in its place (so it is cut once, and no fragment is masked without the rest)."""
        stored: list[Stored] = []
        for entry, occurred_at, event, fragment_id in produced:
            if isinstance(event, CustomEvent):
                stored += [(entry, occurred_at, frame) for frame in self._custom(event, fragment_id)]
            elif self.redactor:
                stored.append((entry, occurred_at, self.event(dump_event(event))))
            else:
                stored.append((entry, occurred_at, dump_event(event)))
        return stored

    def event(self, dumped: dict[str, Any]) -> dict[str, Any]:
        event_type = dumped["type"]
        masked = {}
        for name, value in dumped.items():
            if name in _STRUCTURAL_FIELDS:
                masked[name] = value
            elif name == "delta" and event_type in _STREAMED:
                family, id_field = _STREAMED[event_type]
                stream = self._streams.setdefault((family, dumped[id_field]), _Stream())
                masked[name] = stream.feed(self.redactor, value)
            elif name in ("value", "rawEvent"):
                masked[name] = self.redactor.value(value, keep=_ENVELOPE_KEYS)
            else:
                masked[name] = self.redactor.value(value)
        if event_type in _STREAM_ENDS:
            family, id_field = _STREAM_ENDS[event_type]
            self._streams.pop((family, dumped[id_field]), None)
        return masked

    def remask(self, stored: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
        """Stored events of one run, in position order, masked again: the masked form of the first `n` of them, and
        `n`. The fragments of an oversized CUSTOM event are masked as their whole event; a group still incomplete at
        the end is left for the next call, which starts at its first piece. Masking what is masked changes nothing,
        so a re-mask done twice is done once."""
        masked: list[dict[str, Any]] = []
        group: list[dict[str, Any]] = []
        for event in stored:
            if event.get("type") != "CUSTOM" or event.get("name") != FRAGMENT_EVENT_NAME:
                masked += group  # pieces of an event that never came whole: nothing to mask them as
                group = []
                masked.append(self.event(event))
                continue
            group.append(event)
            if len(group) >= event["value"]["count"]:
                masked += self._remask_pieces(group)
                group = []
        return masked, len(masked)

    def _remask_pieces(self, pieces: list[dict[str, Any]]) -> list[dict[str, Any]]:
        in_order = sorted(pieces, key=lambda piece: piece["value"]["index"])
        whole = "".join(piece["value"]["data"] for piece in in_order)
        text = CustomEvent.model_validate(self.event(json.loads(whole))).model_dump_json(by_alias=True)
        if text == whole:
            return pieces
        # Each piece keeps its position and index; the masked text is cut into as many parts.
        size = -(-len(text) // len(in_order))
        data = {piece["value"]["index"]: text[n * size : (n + 1) * size] for n, piece in enumerate(in_order)}
        return [{**piece, "value": {**piece["value"], "data": data[piece["value"]["index"]]}} for piece in pieces]

    def _custom(self, event: CustomEvent, fragment_id: str) -> list[dict[str, Any]]:
        """A CUSTOM event masked, whole when it fits, else as its fragments."""
        if event.name == FRAGMENT_EVENT_NAME:
            # A fragment's data is a piece of JSON text: a value cut in two would be masked in neither piece.
            raise ValueError("the timeline takes CUSTOM events whole and cuts them after masking, not fragments")
        if not self.redactor:
            return [dump_event(frame) for frame in _cut(event, fragment_id)]
        masked = self.event(dump_event(event))
        frames = _cut(CustomEvent.model_validate(masked), fragment_id)
        # One that only masking made too large has always been stored whole (the observer judged the size unmasked).
        if len(frames) == 1 or not oversized(event):
            return [masked]
        return [dump_event(frame) for frame in frames]


def _cut(event: CustomEvent, fragment_id: str) -> list[CustomEvent]:
    frames = fragment_custom_event(event, fragment_id)
    if len(frames) > 1 and not fragment_id:
        raise ValueError(f"a CUSTOM event {event.name} too large to go whole needs the id of its fragments")
    return frames


def restore_redacted(edited: Any, original: Any, redactor: Redactor) -> Any:
    """Edited arguments with every part the approver left as shown (masked) put back to its real value.

    An approver sees arguments masked; approving them unchanged approves the real ones, and editing one
    argument must not turn the others into the literal text `[redacted]`.
    """
    if redactor.value(original) == edited:
        return original
    if isinstance(edited, dict) and isinstance(original, dict):
        shown = redactor.value(original)
        return {
            key: (original[key] if value == shown[key] else restore_redacted(value, original[key], redactor))
            if key in original
            else value
            for key, value in edited.items()
        }
    if isinstance(edited, list) and isinstance(original, list) and len(edited) == len(original):
        return [restore_redacted(value, before, redactor) for value, before in zip(edited, original, strict=True)]
    return edited
