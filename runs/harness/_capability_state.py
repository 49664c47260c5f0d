"""`AgentContextState`: the run-local, lockable view of a Thread's capability namespaces."""

from __future__ import annotations

import asyncio
from typing import TypeVar

import pydantic
from pydantic import BaseModel

from ._errors import StateError
from ._state import AgentContextStateSnapshot, CapabilityState

__all__ = ("AgentContextState",)

ModelT = TypeVar("ModelT", bound=BaseModel)


def _check_key(capability_id: object, version: object) -> None:
    if not isinstance(capability_id, str) or not capability_id.strip():
        raise StateError("a capability id must be a non-blank string", code="capability_state_id_invalid")
    if not isinstance(version, str) or not version.strip():
        raise StateError(
            "a capability state version must be a non-blank string",
            code="capability_state_version_invalid",
            details={"capability_id": capability_id},
        )


class AgentContextState:
    """Capability namespaces during one run.

    Each namespace is owned by one capability, which reads and writes it with an exact version. Namespaces
    nobody touches travel unchanged into every export, so a run never loses data of capabilities it does
    not know.
    """

    def __init__(self, snapshot: AgentContextStateSnapshot | None = None) -> None:
        self._entries: dict[str, CapabilityState] = (snapshot or AgentContextStateSnapshot()).entries
        self._snapshot = snapshot
        self._lock = asyncio.Lock()

    async def read(self, capability_id: str, state_type: type[ModelT], *, version: str) -> ModelT | None:
        """The namespace's value, or `None` if it was never written; a different version is an error."""
        _check_key(capability_id, version)
        async with self._lock:
            entry = self._entries.get(capability_id)
        if entry is None:
            return None
        if entry.version != version:
            raise StateError(
                f"capability state {capability_id!r} has version {entry.version!r}, not {version!r}",
                code="capability_state_version_unsupported",
                details={
                    "capability_id": capability_id,
                    "expected_version": version,
                    "actual_version": entry.version,
                },
            )
        try:
            return state_type.model_validate(entry.data)
        except pydantic.ValidationError as exc:
            raise StateError(
                f"capability state {capability_id!r} does not match {state_type.__name__}",
                code="capability_state_invalid",
                details={"capability_id": capability_id, "version": version},
            ) from exc

    async def write(self, capability_id: str, value: BaseModel, *, version: str) -> None:
        """Replace the whole namespace with `value` under `version`."""
        _check_key(capability_id, version)
        if not isinstance(value, BaseModel):
            raise StateError(
                "capability state values must be pydantic models",
                code="capability_state_invalid",
                details={"capability_id": capability_id},
            )
        try:
            entry = CapabilityState(version=version, data=value.model_dump(mode="json"))
        except pydantic.ValidationError as exc:
            raise StateError(
                f"capability state {capability_id!r} is not finite JSON",
                code="capability_state_invalid",
                details={"capability_id": capability_id},
            ) from exc
        async with self._lock:
            if self._entries.get(capability_id) == entry:
                return
            self._entries[capability_id] = entry
            self._snapshot = None

    async def snapshot(self) -> AgentContextStateSnapshot:
        async with self._lock:
            if self._snapshot is None:
                self._snapshot = AgentContextStateSnapshot(entries=self._entries)
            return self._snapshot
