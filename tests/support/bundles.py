"""Run bundles in tests: an ended execution tree with a Host-managed child, an approval and a masked secret, and
what its pages are built from, with this database's primary keys left out so two copies compare equal."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from datetime import timedelta
from typing import Any

from ag_ui.core import (
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from django.utils import timezone

from runs.demo_profile import ensure_demo_profile
from runs.models import (
    BundleMode,
    Decision,
    DecisionSubmission,
    DeferredRequest,
    Execution,
    RunStatus,
    Thread,
    Verdict,
)
from runs.protocol import event_frame_text
from runs.services.lifecycle import Answer, bundle_export, executions, pending_requests, submit_decisions
from runs.services.reports import durations, timeline_page
from runs.services.timeline import read_side, redactor_for
from runs.services.worker import runner
from tests.support import factories

SECRET = "hunter2-sk-live-000"
PROMPT = f"child: deploy release 2.0 with api_key={SECRET}"


def drive(execution: Execution) -> None:
    """Run the execution's queued runs in this process until none is queued."""
    while (run := Execution.objects.get(pk=execution.pk).runs.filter(status=RunStatus.QUEUED).first()) is not None:
        runner.execute_run(run.pk)


def ended_tree(user: Any) -> Execution:
    """A completed parent whose child waited for an approval of `deploy_release`, got it, and answered the parent."""
    factories.configure_policy(redact_patterns=["api_key"])
    parent = executions.start_execution(executions.create_thread(ensure_demo_profile(), title="bundled"), PROMPT)
    drive(parent)
    child = Execution.objects.get(parent_request__execution=parent)
    drive(child)
    requests = pending_requests(Execution.objects.get(pk=child.pk))
    submit_decisions(
        child,
        checkpoint_id=requests[0].checkpoint_id,
        key="bundle-approval",
        answers=[Answer(request.tool_call_id, Verdict.APPROVED) for request in requests],
        user=user,
    )
    drive(child)
    drive(parent)
    parent.refresh_from_db()
    assert parent.status == "completed", parent.status
    return parent


def two_lanes() -> Execution:
    """An ended execution of two runs (a crash, then a recovery) that look up the same record and then search for
    different things: lanes, a time axis and a divergence to compare."""
    execution = factories.make_execution(factories.make_thread("Two lanes"), status="completed")
    thread_id = execution.thread.thread_id
    first = factories.make_run(execution, status="failed", failure_code="worker_lost")
    second = factories.make_run(
        execution,
        reason="recovery",
        previous_run=first,
        status="completed",
        started_at=factories.START + timedelta(seconds=6),
    )
    for run, query, end in (
        (first, "acme", RunErrorEvent(code="worker_lost", message="The worker stopped.")),
        (second, "acme corp", RunFinishedEvent(thread_id=thread_id, run_id=second.run_id, outcome={"type": "success"})),
    ):
        calls = [
            ("call-1", "lookup_record", '{"record_id": "REC-7"}'),
            ("call-2", "search_records", json.dumps({"query": query})),
        ]
        events: list[Any] = [RunStartedEvent(thread_id=thread_id, run_id=run.run_id)]
        for call_id, name, args in calls:
            events += [
                ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name),
                ToolCallArgsEvent(tool_call_id=call_id, delta=args),
                ToolCallEndEvent(tool_call_id=call_id),
                ToolCallResultEvent(message_id=f"{call_id}:result", tool_call_id=call_id, content="[]"),
            ]
        factories.append_events(run, [*events, end])
    return execution


def exported(execution: Execution, mode: BundleMode = BundleMode.FULL, **kwargs: Any) -> bytes:
    target = io.BytesIO()
    bundle_export.export_bundle(execution, target, mode=mode, **kwargs)
    return target.getvalue()


def remove(execution: Execution) -> None:
    """Delete the tree, so its ids are free for the import (this database stands in for another Host's)."""
    threads = bundle_export.tree_threads(execution)
    DecisionSubmission.objects.filter(execution__thread__in=threads).delete()
    DeferredRequest.objects.filter(execution__thread__in=threads).delete()
    Thread.objects.filter(pk__in=[thread.pk for thread in threads]).delete()


def tree_of(execution: Execution) -> list[Execution]:
    """The execution's thread's executions, then its children's, in the order the tree was built."""
    threads = bundle_export.tree_threads(execution)
    return list(Execution.objects.filter(thread__in=threads).order_by("thread__thread_id", "number"))


def page_data(execution: Execution) -> dict[str, Any]:
    """What the execution page, its lanes, compare, raw events and time axis are drawn from, without pks."""
    execution = Execution.objects.select_related("thread", "policy_version").get(pk=execution.pk)
    lanes = read_side.lanes_of(execution)
    redactor = redactor_for(execution.policy_version)
    times = durations.execution_times(execution, [lane.run for lane in lanes])
    config = timeline_page.page_config(execution, lanes, times.as_json(timezone.now()))
    frames = []
    for frame in read_side.frames_after(execution.pk, 0, limit=100_000):
        decoded = json.loads(event_frame_text(frame))
        decoded.pop("run")
        frames.append(decoded)
    return {
        "thread": (execution.thread.thread_id, execution.thread.title),
        "execution": (execution.number, execution.status, execution.shown_input, execution.trigger),
        "finished_at": execution.finished_at,
        "runs": [{key: value for key, value in lane.items() if key != "pk"} for lane in config["runs"]],
        "inherited_tools": config["inheritedTools"],
        "frames": frames,
        # Arguments as every page shows them: masked by the execution's policy version.
        "requests": sorted(
            (request.tool_name, request.kind, request.status, redactor.pretty_json(request.args))
            for request in execution.deferred_requests.all()
        ),
        "decisions": sorted(
            (decision.verdict, decision.request.tool_name, str(decision.decided_at))
            for decision in Decision.objects.filter(request__execution=execution).select_related("request")
        ),
        "checkpoints": [
            (checkpoint.kind, checkpoint.journal_index, checkpoint.run.run_id if checkpoint.run else None)
            for checkpoint in execution.thread.checkpoints.select_related("run").order_by("pk")
        ],
    }


def rewritten(bundle: bytes, change: dict[str, bytes | None]) -> bytes:
    """The bundle with members replaced (bytes), removed (None) or added; its manifest and signature kept."""
    source = zipfile.ZipFile(io.BytesIO(bundle))
    target = io.BytesIO()
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            if info.filename not in change:
                out.writestr(info.filename, source.read(info.filename))
        for name, data in change.items():
            if data is not None:
                out.writestr(name, data)
    return target.getvalue()


def member_rows(bundle: bytes, member: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in zipfile.ZipFile(io.BytesIO(bundle)).read(f"{member}.jsonl").splitlines()]


def with_rows(bundle: bytes, member: str, rows: list[dict[str, Any]]) -> bytes:
    """The bundle with `member`'s rows replaced and the manifest's hash of it updated, as someone who changed the
    file would: its hashes hold, its signature no longer does."""
    data = b"".join(json.dumps(row).encode() + b"\n" for row in rows)
    manifest = json.loads(zipfile.ZipFile(io.BytesIO(bundle)).read("manifest.json"))
    manifest["members"][member] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "rows": len(rows)}
    return rewritten(bundle, {f"{member}.jsonl": data, "manifest.json": json.dumps(manifest).encode()})
