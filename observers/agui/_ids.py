"""AG-UI ids that are unique within one run's stream, derived deterministically from the source ids.

Providers choose tool call and message ids, and nothing makes them unique: some OpenAI-compatible servers
number calls `call_0`, `call_1` in every response, and an inline child numbers its calls from its own
history, so it repeats its parent's ids. AG-UI clients key tool calls and messages by id across the whole
run, child lanes included, so the projection maps every source id to an AG-UI id by two rules:

1. Namespacing: an inline child's source ids are prefixed with its run id (`<child run id>/<source id>`);
   the root run keeps its ids, so approvals and the journal refer to the same ids the timeline shows.
2. First use wins: an id already used earlier in the stream gets the first free suffix `~2`, `~3`, ...

Both depend only on the order of the source items, so a projection rebuilt with `resume()` yields the same
ids as the live one.
"""

from __future__ import annotations

__all__ = ("IdClaims", "IdLedger", "scoped_id")

CHILD_SEPARATOR = "/"
REPEAT_SEPARATOR = "~"


def scoped_id(source_id: str, child_run_id: str | None) -> str:
    """Rule 1: the id of a source id before any repeat is resolved."""
    return source_id if child_run_id is None else f"{child_run_id}{CHILD_SEPARATOR}{source_id}"


class IdLedger:
    """The AG-UI ids one run's stream has used so far (root and children: one id space)."""

    __slots__ = ("_repeats", "_used")

    def __init__(self) -> None:
        self._used: set[str] = set()
        # The last suffix given per candidate, so a candidate repeated n times costs O(n), not O(n^2).
        self._repeats: dict[str, int] = {}

    def claims(self) -> IdClaims:
        return IdClaims(self)

    def snapshot(self) -> tuple[list[str], dict[str, int]]:
        """The used ids (sorted) and the last repeat suffix per candidate, for an observer continuation."""
        return sorted(self._used), dict(self._repeats)

    @classmethod
    def from_snapshot(cls, used: list[str], repeats: dict[str, int]) -> IdLedger:
        ledger = cls()
        ledger._used = set(used)
        ledger._repeats = dict(repeats)
        return ledger

    def __contains__(self, agui_id: object) -> bool:
        return agui_id in self._used


class IdClaims:
    """The ids one source item claims; they join the ledger only with `commit()`, after the item succeeded."""

    __slots__ = ("_ledger", "_new", "_repeats")

    def __init__(self, ledger: IdLedger) -> None:
        self._ledger = ledger
        self._new: set[str] = set()
        self._repeats: dict[str, int] = {}

    def claim(self, candidate: str) -> str:
        """Rule 2: `candidate` if unused, else the first unused `candidate~N`."""
        agui_id = candidate
        if self._used(agui_id):
            repeat = self._repeats.get(candidate) or self._ledger._repeats.get(candidate, 1)
            while self._used(agui_id):
                repeat += 1
                agui_id = f"{candidate}{REPEAT_SEPARATOR}{repeat}"
            self._repeats[candidate] = repeat
        self._new.add(agui_id)
        return agui_id

    def commit(self) -> None:
        self._ledger._used.update(self._new)
        self._ledger._repeats.update(self._repeats)
        self._new, self._repeats = set(), {}

    def _used(self, agui_id: str) -> bool:
        return agui_id in self._ledger or agui_id in self._new
