"""The thread's forms and the threads list (#36): a busy thread's "New execution" is disabled and says why; a
refused one comes back with the text as typed and the reason beside the field; "last activity" is the thread's
last event, not when its execution was created."""

from __future__ import annotations

from datetime import timedelta

import pytest
from ag_ui.core import RunStartedEvent

from runs.services.lifecycle import executions
from runs.services.timeline import read_side
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_in(client, operator_user):
    client.force_login(operator_user)
    return client


def test_a_busy_thread_disables_new_execution_and_says_why(client_in):
    thread = executions.create_thread(factories.make_thread().profile, title="Busy")
    running = factories.make_execution(thread, status="running")
    body = client_in.get(f"/threads/{thread.pk}/").content.decode()
    assert f'data-busy-execution="{running.pk}"' in body
    assert '<button type="submit" disabled aria-describedby="busy-note">Start</button>' in body
    assert "is running: a thread runs one execution at a time" in body

    running.status = "completed"
    running.save()
    body = client_in.get(f"/threads/{thread.pk}/").content.decode()
    assert "data-busy-execution" not in body and "busy-note" not in body


def test_a_refused_new_execution_keeps_what_was_typed_with_the_reason_beside_it(client_in):
    thread = executions.create_thread(factories.make_thread().profile, title="Busy")
    factories.make_execution(thread, status="running")
    typed = "Look up REC-9 & <b>tell me</b>"
    response = client_in.post(f"/threads/{thread.pk}/executions/", {"input": typed, "submission_key": "k-typed"})
    assert response.status_code == 409
    body = response.content.decode()
    assert "Look up REC-9 &amp; &lt;b&gt;tell me&lt;/b&gt;</textarea>" in body
    assert 'id="new-input-errors"' in body and "already has an active execution" in body
    assert thread.executions.count() == 1

    empty = client_in.post(f"/threads/{thread.pk}/executions/", {"input": "", "submission_key": "k-empty"})
    assert empty.status_code == 400
    assert 'data-field="input">Write what the agent should do.' in empty.content.decode()


def test_last_activity_is_the_thread_s_last_event():
    old = factories.make_execution(factories.make_thread("Old but busy"), status="running")
    run = factories.make_run(old)
    factories.append_events(run, [RunStartedEvent(thread_id=old.thread.thread_id, run_id=run.run_id)])
    later = factories.START + timedelta(days=400)
    old.timeline.update(occurred_at=later)
    factories.make_execution(factories.make_thread("Newer, quiet"), status="completed")
    overview = list(read_side.threads_overview())
    assert [thread.title for thread in overview][:1] == ["Old but busy"]
    assert overview[0].activity_at == later
