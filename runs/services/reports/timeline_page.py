"""What the execution page's script is given (its `timeline-config` json_script): the execution, its lanes,
addresses, labels, and the constants the script would otherwise have to repeat.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse

from observers.agui import FRAGMENT_EVENT_NAME, HARNESS_PREFIX
from runs.models import ACTIVE_EXECUTION_STATUSES, Execution
from runs.protocol import CURSOR_ERRORS

from ..timeline import read_side
from ..timeline.decision_items import DECISION_EVENT_NAME
from ..timeline.read_side import Lane
from . import provenance
from .durations import TimesJson
from .event_labels import EVENT_LABELS

# After a cursor error (runs.protocol.CURSOR_ERRORS) the page starts over from nothing, at most this many times.
MAX_RESETS = 3
# How long one drawing batch may take before the page yields to the browser (ms).
BATCH_BUDGET_MS = 12
# A pause between runs shorter than this is not drawn (ms).
GAP_MIN_MS = 1000
# The time axis: a wait between runs longer than both of these (ms; times all runs together) is drawn shorter
# (logarithmically beyond it) and marked as not to scale; ruler ticks stand at least this far apart (px).
AXIS = {"compressMinMs": 5_000, "compressRatio": 0.5, "tickSpacingPx": 72}
# The kinds of timeline items the page's filter offers: the `item-<kind>` class of each card, and its name.
TIMELINE_KINDS = (
    ("message", "message"),
    ("reasoning", "reasoning"),
    ("tool", "tool call"),
    ("decision", "decision"),
    ("interrupt", "wait"),
    ("error", "failure"),
    ("input", "input"),
    ("subagent", "child run"),
    ("marker", "run started"),
    ("finished", "run finished"),
    ("cancelled", "run cancelled"),
    ("group", "harness events"),
)
# How a decision item names each verdict.
VERDICT_LABELS = {
    "approved": "approved",
    "denied": "denied",
    "expired": "expired",
    "external_result": "result entered",
    "answered": "answered",
    "cancelled": "cancelled",
    "failed": "failed",
}


def page_config(execution: Execution, lanes: list[Lane], times: TimesJson) -> dict[str, Any]:
    return {
        "execution": execution.pk,
        # When each run worked and what each wait was for (durations.py); refetched from `timesUrl` on a status.
        "times": times,
        "takeovers": takeovers(lanes),
        "timesUrl": reverse("runs:execution_times", args=[execution.pk]),
        "status": execution.status,
        "socket": f"/ws/executions/{execution.pk}/",
        "runs": [lane.summary() for lane in lanes],
        # The script substitutes the position / run pk for the trailing 0.
        "eventUrl": reverse("runs:event", args=[execution.pk, 0]),
        "runUrl": reverse("runs:run", args=[0]),
        "executionUrl": reverse("runs:execution", args=[0]),
        "approvalsUrl": reverse("runs:approvals"),
        "eventLabels": EVENT_LABELS,
        "inheritedTools": provenance.inherited_tool_names(execution),
        "timeZone": settings.TIME_ZONE,
        "constants": {
            "batchBudgetMs": BATCH_BUDGET_MS,
            "cursorErrors": [str(code) for code in CURSOR_ERRORS],
            "maxResets": MAX_RESETS,
            "gapMinMs": GAP_MIN_MS,
            "axis": AXIS,
            "fragmentEventName": FRAGMENT_EVENT_NAME,
            "decisionEventName": DECISION_EVENT_NAME,
            "lifecycleEventName": HARNESS_PREFIX + "lifecycle",
            "verdicts": VERDICT_LABELS,
            "activeStatuses": [str(status) for status in ACTIVE_EXECUTION_STATUSES],
        },
    }


def takeovers(lanes: list[Lane]) -> dict[int, dict[str, int]]:
    """For each run that went on from a checkpoint of another run of the execution (a recovery from the dead run's
    last checkpoint, a resume from the suspension), that run and the last timeline position of the prefix taken
    over: a comparison lines the later run up after it, not from the first step."""
    runs = {lane.run.pk: lane.run for lane in lanes}
    found: dict[int, dict[str, int]] = {}
    for run in runs.values():
        start = run.start_checkpoint
        if start is None or start.run_id not in runs or start.run_id == run.pk or start.journal_index is None:
            continue
        if (last := read_side.prefix_end(start.run_id, start.journal_index)) is not None:
            found[run.pk] = {"fromRun": start.run_id, "afterPosition": last}
    return found
