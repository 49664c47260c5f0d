"""Timeline frames and status messages reach Channels only after their rows are committed."""

from __future__ import annotations

import pytest

from runs.models import TimelineEvent
from runs.services import leases, publishing
from runs.services.projection import RunProjection
from tests.host import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, dict]]:
    messages: list[tuple[str, dict]] = []
    monkeypatch.setattr(publishing, "_send", lambda group, message: messages.append((group, message)))
    return messages


def test_frames_are_published_after_commit_in_position_order(sent, django_capture_on_commit_callbacks):
    run = builders.queued_run()
    lease = leases.acquire(run.pk)
    run.run_id = builders.RUN_ID
    run.save(update_fields=["run_id"])
    with django_capture_on_commit_callbacks() as callbacks:
        RunProjection(run).record(builders.text_items(run.execution.thread.thread_id), lease=lease)
        assert sent == []
    for callback in callbacks:
        callback()
    (group, message), *_ = sent
    assert group == f"execution-{run.execution_id}" and message["type"] == "timeline.append"
    frames = message["frames"]
    stored = list(TimelineEvent.objects.filter(run=run).order_by("position"))
    assert [frame["position"] for frame in frames] == [event.position for event in stored]
    assert frames[0] == {
        "position": 1,
        "run_id": builders.RUN_ID,
        "run": run.pk,
        "subagent_run_id": "",
        "event": stored[0].event,
    }


def test_a_rolled_back_batch_is_never_published(sent, django_capture_on_commit_callbacks):
    run = builders.queued_run()
    lease = leases.acquire(run.pk)
    items = builders.text_items(run.execution.thread.thread_id)
    with django_capture_on_commit_callbacks() as callbacks:
        RunProjection(run).record(items[:1], lease=lease)
        with pytest.raises(Exception, match="journal gap"):
            RunProjection(run).record(items[2:3], lease=lease)
    assert len(callbacks) == 1
    assert TimelineEvent.objects.filter(run=run).count() == 1


def test_harness_recover_runs_one_sweep(capsys):
    from django.core.management import call_command

    call_command("harness_recover")
    assert "abandoned 0" in capsys.readouterr().out
