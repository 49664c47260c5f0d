"""Run bundles of what-if forks: the copy keeps its change and its "what-if of #N" (its original comes along), an
older bundle without them still imports, and a tampered change is refused with nothing written."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone
from pydantic_ai import ModelRequest, ToolReturnPart

from runs.demo_profile import ensure_demo_profile
from runs.models import (
    DEFAULT_TEAM,
    BundleDirection,
    BundleMode,
    BundleTransfer,
    Checkpoint,
    Execution,
    ExecutionTombstone,
    Team,
    Thread,
)
from runs.services.lifecycle import bundle_import, executions, what_if
from runs.services.store import checkpoints
from runs.services.store.bundle_format import BundleError
from runs.services.store.what_if import parse_change
from tests.support import factories
from tests.support.bundles import SECRET, drive, exported, member_rows, remove, with_rows

pytestmark = pytest.mark.django_db


def forked_result(result: str = "REC-7: status=retired") -> tuple[Execution, str]:
    """A completed what-if of a recorded lookup whose result of `lookup_record` was changed, and that call's id."""
    original = executions.start_execution(
        executions.create_thread(ensure_demo_profile(), title="original"), "look up REC-7"
    )
    drive(original)
    for checkpoint in Checkpoint.objects.filter(run__execution=original).order_by("pk"):
        last = checkpoints.load(checkpoint).message_history[-1]
        if isinstance(last, ModelRequest):
            calls = [
                p.tool_call_id for p in last.parts if isinstance(p, ToolReturnPart) and p.tool_name == "lookup_record"
            ]
            if calls:
                break
    else:
        raise AssertionError("no checkpoint after the lookup's result")
    fork = what_if.start_what_if(
        checkpoint, parse_change({"kind": "tool_result", "tool_call_id": calls[0], "result": result})
    )
    drive(fork)
    fork.refresh_from_db()
    assert fork.status == "completed", fork.failure_message
    return fork, calls[0]


def imported(bundle: bytes, **options: Any) -> Execution:
    transfer = bundle_import.import_bundle(io.BytesIO(bundle), team=Team.objects.get(name=DEFAULT_TEAM), **options)
    assert transfer.execution_id is not None
    return Execution.objects.select_related("what_if_of__thread", "thread__forked_from").get(pk=transfer.execution_id)


def page(client, django_user_model, execution: Execution) -> str:
    viewer = django_user_model.objects.create_user(f"viewer-{execution.pk}")
    client.force_login(viewer)
    response = client.get(reverse("runs:execution", args=[execution.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_what_if_round_trips_with_its_change_and_its_original(client, django_user_model):
    fork, call = forked_result()
    change, original_input = fork.what_if, fork.what_if_of.input
    bundle = exported(fork)
    remove(fork)
    assert not Execution.objects.exists(), "the original's thread went with the fork's"

    copy = imported(bundle)

    assert copy.what_if == change and copy.what_if_of is not None
    original = copy.what_if_of
    assert original.input == original_input and original.thread.imported_by == copy.thread.imported_by
    assert copy.thread.forked_from is not None and copy.thread.forked_from.thread == original.thread
    assert f"what-if of #{original.pk}: result of call {call} changed" in page(client, django_user_model, copy)
    assert f'href="{reverse("runs:execution", args=[copy.pk])}"' in page(client, django_user_model, original)


def test_a_redacted_bundle_masks_the_changed_value(client, django_user_model):
    factories.configure_policy(redact_patterns=["api_key"])
    fork, _ = forked_result(f"REC-7: api_key={SECRET}")
    bundle = exported(fork, BundleMode.REDACTED)
    with zipfile.ZipFile(io.BytesIO(bundle)) as opened:
        assert SECRET.encode() not in b"".join(opened.read(name) for name in opened.namelist())
    remove(fork)

    copy = imported(bundle)

    assert copy.what_if["kind"] == "tool_result" and SECRET not in str(copy.what_if["result"])
    assert f"what-if of #{copy.what_if_of_id}" in page(client, django_user_model, copy)


def test_a_what_if_of_a_purged_original_comes_without_it(client, django_user_model):
    fork, call = forked_result()
    ExecutionTombstone.objects.create(
        execution=fork.what_if_of, purged_at=timezone.now(), retention_days=1, outcome="completed"
    )
    bundle = exported(fork)
    assert [row["what_if_of"] for row in member_rows(bundle, "executions")] == [None]
    remove(fork)

    copy = imported(bundle)

    assert copy.what_if == fork.what_if and copy.what_if_of is None and copy.thread.forked_from is None
    assert f"what-if of a purged execution: result of call {call} changed" in page(client, django_user_model, copy)


def test_an_older_bundle_without_what_if_fields_imports_as_a_plain_fork():
    fork, _ = forked_result()
    bundle = exported(fork)
    rows = member_rows(bundle, "executions")
    for row in rows:
        del row["what_if"], row["what_if_of"]
    remove(fork)

    copy = imported(with_rows(bundle, "executions", rows), accept_unsigned=True)

    assert copy.what_if is None and copy.what_if_of is None and copy.thread.forked_from is not None


def _second_change(change: dict[str, Any]) -> Any:
    return {**change, "instructions": "Answer in one word."}


TAMPERED = {
    "a second change": ("what_if", _second_change, "exactly one thing"),
    "an unknown kind": ("what_if", lambda change: {**change, "kind": "everything"}, "Choose what the what-if changes"),
    "an empty call id": ("what_if", lambda change: {**change, "tool_call_id": ""}, "tool_call_id"),
    "not an object": ("what_if", lambda change: ["tool_result"], "not a JSON object"),
    "an original but no change": ("what_if", lambda change: None, "holds no change"),
    "an original it does not hold": ("what_if_of", lambda original: 999_999, "does not hold"),
}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_a_tampered_what_if_is_refused_with_nothing_written(case):
    field, change, message = TAMPERED[case]
    fork, _ = forked_result()
    bundle = exported(fork)
    rows = member_rows(bundle, "executions")
    (row,) = [row for row in rows if row["what_if"] is not None]
    row[field] = change(row[field])
    remove(fork)
    before = (Thread.objects.count(), Execution.objects.count(), Checkpoint.objects.count())

    with pytest.raises(BundleError, match=message):
        imported(with_rows(bundle, "executions", rows), accept_unsigned=True)

    assert (Thread.objects.count(), Execution.objects.count(), Checkpoint.objects.count()) == before
    assert not BundleTransfer.objects.filter(direction=BundleDirection.IMPORT).exists()
