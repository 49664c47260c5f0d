"""The "What if…" form of an execution's page: an operator's (CSRF-checked) post forks a checkpoint with one change;
the fork's page says what changed and links the comparison with its original; bad input writes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from runs.demo_profile import ensure_demo_profile
from runs.models import Checkpoint, CheckpointKind, Execution, Team, TeamRole, Thread
from runs.services.lifecycle import executions
from tests.support import factories
from tests.support.bundles import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def original() -> Execution:
    execution = executions.start_execution(executions.create_thread(ensure_demo_profile(), title="original"), "hi")
    drive(execution)
    execution.refresh_from_db()
    assert execution.status == "completed", execution.failure_message
    return execution


def boundary(execution: Execution) -> Checkpoint:
    return Checkpoint.objects.filter(run__execution=execution, kind=CheckpointKind.BOUNDARY).earliest("pk")


def what_if_post(checkpoint: Checkpoint, key: str = "what-if-1", **fields: Any) -> dict[str, Any]:
    return {"submission_key": key, "checkpoint": checkpoint.pk, **fields}


def member_client(django_user_model, name: str, role: TeamRole | None, team: Team | None = None) -> Client:
    team = team or Team.objects.get(name="default")
    client = Client()
    client.force_login(factories.member(django_user_model, name, team, role))
    return client


def test_an_operator_forks_with_new_instructions_and_the_fork_links_its_comparison(client, django_user_model, original):
    operator = member_client(django_user_model, "op-1", TeamRole.OPERATOR)
    page = operator.get(reverse("runs:execution", args=[original.pk])).content.decode()
    assert 'id="what-if"' in page and "promotes the fork" in page

    response = operator.post(
        reverse("runs:what_if", args=[original.pk]),
        what_if_post(boundary(original), kind="instructions", value="Answer in one word."),
    )

    forked = Execution.objects.get(what_if_of=original)
    assert response.status_code == 302 and response["Location"] == reverse("runs:execution", args=[forked.pk])
    assert forked.what_if == {"kind": "instructions", "instructions": "Answer in one word."}
    drive(forked)
    fork_page = operator.get(reverse("runs:execution", args=[forked.pk])).content.decode()
    assert f"what-if of #{original.pk}: instructions changed" in fork_page
    first_run = forked.runs.get()
    compare = f"{reverse('runs:compare')}?a={boundary(original).run_id}&amp;b={first_run.pk}"
    assert f'id="compare-original" class="compare-link" href="{compare}"' in fork_page
    assert "what-if-link" in operator.get(reverse("runs:execution", args=[original.pk])).content.decode()
    audit = operator.get(reverse("runs:approval_audit"), {"thread": original.thread.pk}).content.decode()
    assert f"what-if of #{original.pk}: instructions changed" in audit


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "tool_result", "tool_call_id": "c", "value": "{not json"}, "the tool result is not valid JSON"),
        ({"kind": "arguments", "tool_call_id": "c", "value": '{"version": NaN}'}, "NaN is not JSON"),
        ({"kind": "model", "value": "nowhere:model-9"}, "Unknown provider"),
        ({"kind": "policy_version", "value": "77"}, "has no version 77"),
        ({"kind": "arguments", "tool_call_id": "c", "value": json.dumps({"version": "1"})}, "did not await approval"),
        ({"kind": "approval", "tool_call_id": "c"}, "verdict"),
    ],
)
def test_a_refused_what_if_says_why_and_writes_nothing(django_user_model, original, fields, message):
    operator = member_client(django_user_model, "op-2", TeamRole.OPERATOR)
    threads = Thread.objects.count()

    response = operator.post(reverse("runs:what_if", args=[original.pk]), what_if_post(boundary(original), **fields))

    assert response.status_code == 400
    assert message in response.content.decode() and "Nothing was forked." in response.content.decode()
    assert Thread.objects.count() == threads and not Execution.objects.filter(what_if_of=original).exists()


def test_a_viewer_may_not_fork_and_another_team_sees_nothing(django_user_model, original):
    viewer = member_client(django_user_model, "viewer-1", TeamRole.VIEWER)
    other_team = Team.objects.create(name="elsewhere")
    outsider = member_client(django_user_model, "outsider-1", TeamRole.ADMIN, other_team)
    post = what_if_post(boundary(original), kind="instructions", value="x")
    url = reverse("runs:what_if", args=[original.pk])

    assert 'id="what-if"' not in viewer.get(reverse("runs:execution", args=[original.pk])).content.decode()
    assert viewer.post(url, post).status_code == 403
    assert outsider.post(url, post).status_code == 404
    assert not Execution.objects.filter(what_if_of=original).exists()


def test_a_checkpoint_of_another_execution_is_not_offered(django_user_model, original):
    operator = member_client(django_user_model, "op-3", TeamRole.OPERATOR)
    other = executions.start_execution(executions.create_thread(ensure_demo_profile(), title="other"), "hey")
    drive(other)

    response = operator.post(
        reverse("runs:what_if", args=[original.pk]), what_if_post(boundary(other), kind="instructions", value="x")
    )

    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()


def test_the_what_if_form_needs_post_and_csrf(django_user_model, original):
    user = factories.member(django_user_model, "op-4", Team.objects.get(name="default"), TeamRole.OPERATOR)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    url = reverse("runs:what_if", args=[original.pk])

    assert strict.get(url).status_code == 405
    assert strict.post(url, what_if_post(boundary(original), kind="instructions", value="x")).status_code == 403
    assert not Execution.objects.filter(what_if_of=original).exists()
