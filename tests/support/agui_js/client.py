"""Runs the official `@ag-ui/client` scripts of this folder with node (installed by bin/setup).

Tests get it from the `agui_client` fixture, which marks them `services` (node is a process).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import BaseEvent

HERE = Path(__file__).resolve().parent


def wire(event: BaseEvent | Mapping[str, Any]) -> Mapping[str, Any]:
    """An event as it travels (camelCase, no nulls), whether given as a model or as stored JSON."""
    if isinstance(event, BaseEvent):
        return event.model_dump(mode="json", by_alias=True, exclude_none=True)
    return event


def _assert_passed(report: Mapping[str, list[str]]) -> None:
    failing = {name: errors for name, errors in report.items() if errors}
    assert not failing, json.dumps(failing, indent=2)


class AguiClient:
    """The client's scripts, each run by `node` with its input as JSON on stdin."""

    def __init__(self, node: str) -> None:
        self.node = node

    @classmethod
    def required(cls) -> AguiClient:
        """The client, or a skip naming what bin/setup would have installed."""
        node = shutil.which("node")
        if node is None or not (HERE / "node_modules" / "@ag-ui" / "client").is_dir():
            pytest.skip("node and @ag-ui/client are missing; run bin/setup")
        return cls(node)

    def _run(self, script: str, payload: Any) -> dict[str, list[str]]:
        """A script of this folder with `payload` as JSON on stdin; its report (stream name -> errors)."""
        done = subprocess.run(
            [self.node, str(HERE / script)],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        report: dict[str, list[str]] = json.loads(done.stdout)
        return report

    def verify_streams(self, streams: Mapping[str, Sequence[BaseEvent | Mapping[str, Any]]]) -> dict[str, list[str]]:
        """Each stream checked by `verifyEvents` and each event by the @ag-ui/core schema; errors per stream."""
        return self._run("verify.mjs", {name: [wire(event) for event in events] for name, events in streams.items()})

    def assert_verified(self, streams: Mapping[str, Sequence[BaseEvent | Mapping[str, Any]]]) -> None:
        report = self.verify_streams(streams)
        _assert_passed(report)
        assert set(report) == set(streams)

    def assert_socket_verified(self, sockets: Mapping[str, Sequence[str]]) -> set[str]:
        """The messages each execution's websocket sent, read by `verify_socket.mjs` as an AG-UI client would: one
        stream per lane and one for the whole execution, Host items left out, all passing; the streams' names."""
        report = self._run("verify_socket.mjs", sockets)
        _assert_passed(report)
        return set(report)
