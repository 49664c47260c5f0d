"""The redaction rule as migrations 0009 and 0012 apply it: a trimmed, frozen copy of the Host's redaction.

A migration must do today what it did when it was written, whatever the Host's code becomes, so it does not import
the Host's code. Never edit this module: a later migration that needs another rule takes a copy of its own.
(Django loads no migration from a module whose name starts with `_`.)

A value under a key that one of a version's `redact_patterns` matches (case-insensitive regex search on the key)
becomes `[redacted]`: in JSON objects and, inside any text, in `key: value` / `key=value` pairs, quoted or not.
"""

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ag_ui.core import CustomEvent

REDACTED = "[redacted]"
STREAM_CONTEXT_CHARS = 256
FRAGMENT_EVENT_NAME = "a13n.stream.fragment"

# The linear key pattern (#28): it finds the same keys as a search from every position, without its cost on a
# long run of word characters in a stored value.
_KEY = re.compile(
    r"""(?:(?P<q>\\?["'])|(?<![\w.-])(?:[^\W_A-Za-z]|[.-])*+)(?P<key>[A-Za-z_][\w.-]*+)(?(q)(?P=q))\s*+[:=]\s*"""
)
_BARE_END = frozenset(" \t\r\n\f\v,;&\"'\\)]}")
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
        "encryptedValue",
        "protocolVersion",
    }
)
_ENVELOPE_KEYS = frozenset({"thread_id", "run_id", "sequence", "occurred_at", "event_kind"})
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


def redactor_for(version: Any) -> "Redactor":
    """The redactor of a (historical) policy version row or None; its patterns were checked when it was published."""
    patterns = (version.redact_patterns or ()) if version is not None else ()
    return Redactor(re.compile(pattern, re.IGNORECASE) for pattern in patterns)


@dataclass
class _Value:
    """A masked value whose end is found incrementally, since its text may arrive in several deltas."""

    kind: Literal["quoted", "escaped", "nested", "bare"]
    opening: str
    closing: str
    skip: int
    quote: str = ""
    depth: int = 0
    in_string: bool = False
    escaped: bool = False

    @classmethod
    def starting(cls, char: str, key_quote: str) -> "_Value | None":
        if char in "\"'":
            return cls("quoted", char + REDACTED, char, skip=1, quote=char)
        if char == "\\":
            return cls("escaped", '\\"' + REDACTED, '\\"', skip=2)
        if char in _BARE_END:
            return None
        wrap = key_quote if key_quote in ('"', '\\"') else ""
        if char in "{[":
            return cls("nested", wrap + REDACTED, wrap, skip=1, depth=1)
        return cls("bare", wrap + REDACTED, wrap, skip=0)

    def end_in(self, text: str, start: int) -> int | None:
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
    end: int | None
    value: _Value


class Redactor:
    def __init__(self, patterns: Iterable[re.Pattern[str]]) -> None:
        self.patterns = tuple(patterns)

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def is_secret(self, key: str) -> bool:
        return any(pattern.search(key) for pattern in self.patterns)

    def value(self, value: Any, *, keep: frozenset[str] = frozenset()) -> Any:
        if not self.patterns:
            return value
        if isinstance(value, Mapping):
            return {
                key: REDACTED if isinstance(key, str) and key not in keep and self.is_secret(key) else self.value(item)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def text(self, text: str) -> str:
        if not text or not self.patterns:
            return text
        if text.lstrip()[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
            except ValueError:
                pass
            else:
                masked = self.value(parsed)
                return text if masked == parsed else json.dumps(masked, ensure_ascii=False)
        rendered, unfinished = self.render(text, 0)
        return rendered + unfinished.closing if unfinished is not None and unfinished.kind == "bare" else rendered

    def render(self, text: str, offset: int) -> tuple[str, _Value | None]:
        """`text[offset:]` masked, and the value still open at its end; `text[:offset]` was shown already."""
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
        while match := _KEY.search(text, position):
            position = match.end()
            if position >= len(text) or not self.is_secret(match["key"]):
                continue
            value = _Value.starting(text[position], match["q"])
            if value is None:
                continue
            end = value.end_in(text, position)
            yield _Span(position, end, value)
            if end is None:
                return
            position = end


@dataclass
class _Stream:
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
        context = (self.context + "".join(shown))[-STREAM_CONTEXT_CHARS:]
        rendered, self.open = redactor.render(context + rest, len(context))
        shown.append(rendered)
        self.context = (context + rendered)[-STREAM_CONTEXT_CHARS:]
        return "".join(shown)


@dataclass
class TimelineRedactor:
    """Masks the stored AG-UI events of one run, in order (streamed deltas with a look-back)."""

    redactor: Redactor
    _streams: dict[tuple[str, str], _Stream] = field(default_factory=dict)

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

    def remask(self, stored: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Stored events masked (again), as many as given: an oversized CUSTOM keeps its fragment count."""
        masked: list[dict[str, Any]] = []
        group: list[dict[str, Any]] = []
        for event in stored:
            if event["type"] != "CUSTOM" or event.get("name") != FRAGMENT_EVENT_NAME:
                masked.append(self.event(event))
                continue
            group.append(event)
            if len(group) < event["value"]["count"]:
                continue
            text = "".join(piece["value"]["data"] for piece in sorted(group, key=lambda piece: piece["value"]["index"]))
            whole = CustomEvent.model_validate(self.event(json.loads(text))).model_dump_json(by_alias=True)
            size = -(-len(whole) // len(group))
            masked += [
                {**piece, "value": {**piece["value"], "data": whole[index * size : (index + 1) * size]}}
                for index, piece in enumerate(sorted(group, key=lambda piece: piece["value"]["index"]))
            ]
            group = []
        return masked + group
