"""Start an execution on a new thread and follow it in the terminal until it ends or waits."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.demo_profile import DEMO_PROFILE, ensure_demo_profile
from runs.models import AgentProfile, Execution, ExecutionStatus, TimelineEvent
from runs.services.lifecycle import executions
from runs.services.store import queueing
from runs.terminal_text import printable

_ENDED = (ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED, ExecutionStatus.WAITING)


class Command(BaseCommand):
    help = 'Start an execution with PROMPT and follow its timeline (e.g. harness_run "look up REC-42").'

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prompt")
        parser.add_argument("--profile", default=DEMO_PROFILE, help="agent profile name (default: the demo)")
        parser.add_argument("--timeout", type=float, default=300, help="stop following after this many seconds")

    def handle(self, *args: Any, prompt: str, profile: str, timeout: float, **options: Any) -> None:
        if profile == DEMO_PROFILE:
            chosen = ensure_demo_profile()
        else:
            found = AgentProfile.objects.filter(name=profile).first()
            if found is None:
                raise CommandError(f"no agent profile named {profile!r}")
            chosen = found
        thread = executions.create_thread(chosen, title=prompt[:80])
        with queueing.reporting() as dispatch:
            execution = executions.start_execution(thread, prompt)
        self.stdout.write(f"thread {thread.thread_id}, execution #{execution.pk} queued (needs a running worker)")
        if dispatch.queue_unreachable:
            self.stderr.write(queueing.UNREACHABLE_NOTICE)
        self._follow(execution, timeout)

    def _follow(self, execution: Execution, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        after = 0
        status = execution.status
        # Streamed deltas continue the current line; the run label starts each new line only.
        at_line_start = True
        while time.monotonic() < deadline:
            for event in TimelineEvent.objects.filter(execution=execution, position__gt=after).select_related("run"):
                after = event.position
                line = printable(describe(event.event) or "")
                if line:
                    prefix = f"[run {event.run.number}] " if at_line_start else ""
                    self.stdout.write(f"{prefix}{line}", ending="")
                    at_line_start = line.endswith("\n")
            execution.refresh_from_db()
            if execution.status != status:
                status = execution.status
                self.stdout.write(f"\n-- execution {status}")
            if status in _ENDED and not TimelineEvent.objects.filter(execution=execution, position__gt=after).exists():
                break
            time.sleep(0.3)
        else:
            self.stdout.write(f"\n-- still {status} after {timeout:g}s; it continues in the background")
            return
        if status == ExecutionStatus.WAITING:
            self.stdout.write("waiting for an operator: answer it on the execution page in the dashboard")
        elif status == ExecutionStatus.FAILED:
            self.stdout.write(printable(f"failed: {execution.failure_code}: {execution.failure_message}"))


def describe(event: dict[str, Any]) -> str | None:
    """One progress line for an AG-UI event, or None for events the terminal view skips."""
    kind = event["type"]
    who = "(subagent) " if event.get("subagentRunId") else ""
    if kind == "RUN_STARTED":
        return f"started {event['runId']}\n"
    if kind == "TEXT_MESSAGE_START":
        return f"{who}assistant: "
    if kind in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
        delta: str = event["delta"]
        return delta
    if kind == "REASONING_MESSAGE_START":
        return f"{who}thinking: "
    if kind in ("TEXT_MESSAGE_END", "REASONING_MESSAGE_END"):
        return "\n"
    if kind == "TOOL_CALL_START":
        return f"{who}tool {event['toolCallName']} called\n"
    if kind == "TOOL_CALL_RESULT":
        return f"{who}tool result: {str(event.get('content'))[:120]}\n"
    if kind == "SUBAGENT_STARTED":
        return f"subagent {event.get('name', '')} started\n"
    if kind == "RUN_FINISHED":
        outcome = event.get("outcome", {}).get("type", "success")
        return f"run finished: {outcome}\n"
    if kind == "RUN_ERROR":
        return f"run error {event.get('code')}: {event.get('message')}\n"
    return None
