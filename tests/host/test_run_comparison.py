"""The compare view: two runs of any executions the user may see, lined up step by step with the first divergence
marked, and what each produced and spent."""

from __future__ import annotations

import contextlib
import io

import pytest
from ag_ui.core import (
    CustomEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from django.core.management import CommandError, call_command
from django.urls import reverse

from runs.demo_profile import ensure_demo_profile
from runs.models import Checkpoint, CheckpointKind, Execution, Run, Team, TeamRole, Thread
from runs.services.lifecycle import executions, forks
from runs.services.reports import run_comparison
from tests.support import factories
from tests.support.bundles import drive
from tests.support.replays import profile_without

pytestmark = pytest.mark.django_db

SECRET = "sk-live-compare-000"


def recorded(prompt: str, thread_title: str = "recorded") -> Execution:
    execution = executions.start_execution(executions.create_thread(ensure_demo_profile(), title=thread_title), prompt)
    drive(execution)
    execution.refresh_from_db()
    assert execution.status == "completed", execution.failure_message
    return execution


def replayed(original: Execution, *args: str) -> Execution:
    # A divergence exits non-zero; the replay is written all the same.
    with contextlib.suppress(CommandError):
        call_command("harness_replay", str(original.pk), *args, stdout=io.StringIO())
    return Execution.objects.get(replay_of=original)


def first_run(execution: Execution) -> Run:
    return execution.runs.order_by("number")[0]


def compare_page(client, a: object, b: object):
    return client.get(reverse("runs:compare"), {"a": str(a), "b": str(b)})


@pytest.fixture
def viewer(client, django_user_model):
    user = django_user_model.objects.create_user("viewer", password="pw-viewer-1")
    client.force_login(user)
    return user


def test_a_replay_that_diverged_at_a_tool_is_compared_with_its_original(client, viewer):
    factories.configure_policy(redact_patterns=["api_key"])
    original = recorded(f"look up REC-7 with api_key={SECRET}")
    copy = replayed(original, "--profile", profile_without("lookup_record"))

    response = compare_page(client, first_run(original).pk, first_run(copy).run_id)

    assert response.status_code == 200
    page = response.content.decode()
    comparison = response.context["comparison"]
    divergence = comparison.alignment.divergence
    # The model's call of lookup_record is the same; the replay, lacking the tool, failed where the original ran it.
    # The same input; then the original's model answered, where the replay, lacking the tool it calls, stopped.
    assert comparison.alignment.rows[0].a.kind == "input" and comparison.alignment.rows[0].difference is None
    assert divergence is not None and divergence.number == 2
    assert (divergence.a.kind, divergence.b.kind, divergence.b.name) == ("reasoning", "error", "replay_diverged")
    assert "expected a tool named lookup_record" in divergence.b.text
    assert page.count('class="badge divergence-badge">first divergence') == 1
    assert "The runs diverge at step 2: reasoning in run A, a failure in run B." in page
    assert all(row.difference.kind == "missing" for row in comparison.alignment.rows[2:])
    assert 'class="differs first-divergence"' in page
    # The summary: outputs, tokens, and costs that stay unknown for a model without a price.
    assert comparison.a.output and comparison.b.output is None
    assert comparison.a.usage.input_tokens > 0 and comparison.a.usage.cost is None
    assert response.context["differences"]["cost"] == "unknown"
    assert "0.0000" not in page and "unknown (1 run without a price)" in page
    assert comparison.a.active is not None and comparison.a.wall >= comparison.a.active
    # Nothing unmasked: the input's secret is masked in every event the steps come from.
    assert SECRET not in page


def test_an_equal_replay_compares_equal_and_the_same_run_twice_is_fine(client, viewer):
    original = recorded("look up REC-7 and search for acme")
    copy = replayed(original)

    equal = compare_page(client, first_run(original).pk, first_run(copy).pk)
    same = compare_page(client, first_run(original).run_id, first_run(original).pk)

    for response in (equal, same):
        assert response.status_code == 200
        assert response.context["comparison"].alignment.equal
        assert (
            "The runs do the same" in response.content.decode() and "first divergence" not in response.content.decode()
        )
    a, b = equal.context["comparison"].a.usage, equal.context["comparison"].b.usage
    # The replay's model counts its own tokens: the summary shows B against A, signed.
    assert equal.context["differences"]["output_tokens"] == (
        f"{b.output_tokens - a.output_tokens:+d}" if b.output_tokens != a.output_tokens else "same"
    )
    assert same.context["differences"] == {
        "input_tokens": "same",
        "output_tokens": "same",
        "requests": "same",
        "cost": "unknown",
        "active": "same",
        "wall": "same",
    }


def test_a_fork_is_compared_with_the_run_it_went_on_from(client, viewer):
    original = recorded("look up REC-7 and search for acme")
    run = first_run(original)
    checkpoint = Checkpoint.objects.filter(run=run, kind=CheckpointKind.BOUNDARY).order_by("pk")[1]
    fork = forks.fork_thread(checkpoint, title="what if")
    forked = executions.start_execution(fork, "now search for globex")
    drive(forked)
    fork_run = first_run(forked)

    response = compare_page(client, run.pk, fork_run.pk)

    assert response.status_code == 200
    alignment = response.context["comparison"].alignment
    shared = [row for row in alignment.rows if row.shared]
    # The origin's steps up to the checkpoint are the fork's history: lined up as shared, beside nothing.
    assert shared and all(row.a is not None and row.b is None for row in shared)
    assert alignment.rows[len(shared)].b == run_comparison.steps_of(fork_run)[0]
    assert alignment.first_divergence is not None and alignment.first_divergence >= len(shared)
    assert "taken over by run B as its history" in response.content.decode()
    # The fork's page offers this comparison.
    fork_page = client.get(reverse("runs:execution", args=[forked.pk])).content.decode()
    link = f"{reverse('runs:compare')}?a={run.pk}&amp;b={fork_run.pk}"
    assert f'<a class="compare-link" href="{link}">the run it was forked from</a>' in fork_page


def test_a_replays_page_and_its_originals_page_link_to_their_comparison(client, viewer):
    original = recorded("look up REC-7")
    copy = replayed(original, "--profile", profile_without("lookup_record"))
    link = f"{reverse('runs:compare')}?a={first_run(original).pk}&amp;b={first_run(copy).pk}"

    replay_page = client.get(reverse("runs:execution", args=[copy.pk])).content.decode()
    original_page = client.get(reverse("runs:execution", args=[original.pk])).content.decode()

    assert f'href="{link}">the original it replayed</a>' in replay_page
    assert f'href="{link}">its replay #{copy.pk}</a>' in original_page
    assert 'action="/compare/"' in original_page


def test_another_teams_run_is_404_on_either_side_like_a_run_that_does_not_exist(client, django_user_model):
    mine = first_run(recorded("look up REC-7"))
    theirs_thread = factories.make_thread("theirs")
    Thread.objects.filter(pk=theirs_thread.pk).update(team=Team.objects.create(name="other"))
    theirs = factories.make_run(factories.make_execution(theirs_thread, status="completed"), status="completed")
    client.force_login(factories.member(django_user_model, "outsider", ensure_demo_profile().team, TeamRole.VIEWER))

    hidden = [compare_page(client, mine.pk, theirs.pk), compare_page(client, theirs.run_id, mine.pk)]
    missing = compare_page(client, mine.pk, theirs.pk + 1000)

    assert [response.status_code for response in (*hidden, missing)] == [404, 404, 404]
    for response in (*hidden, missing):
        assert b"theirs" not in response.content and theirs.run_id.encode() not in response.content


@pytest.mark.parametrize(
    "query",
    [{}, {"a": "1"}, {"a": "1", "b": ""}, {"a": "12x!", "b": "1"}, {"a": "1", "b": "9" * 25}, {"a": "<b>", "b": "1"}],
)
def test_bad_ids_are_a_clear_400(client, viewer, query):
    response = client.get(reverse("runs:compare"), query)

    assert response.status_code == 400
    page = response.content.decode()
    assert "Input refused" in page and "A comparison needs two runs" in page
    assert "<b>" not in page


def test_the_compare_view_needs_a_logged_in_user(client):
    response = client.get(reverse("runs:compare"), {"a": "1", "b": "2"})

    assert response.status_code == 302 and "/login/" in response["Location"]


def test_steps_come_from_the_runs_own_masked_events_whatever_their_shape(client, viewer):
    execution = factories.make_execution(factories.make_thread("shapes"), status="completed")
    run = factories.make_run(execution, status="completed")
    factories.append_events(
        run,
        [
            CustomEvent(name="a13n.input.user", value="plain text, not an envelope"),
            TextMessageStartEvent(message_id="m1", role="assistant"),
            TextMessageContentEvent(message_id="m1", delta="Hello "),
            TextMessageContentEvent(message_id="m1", delta="there"),
            TextMessageEndEvent(message_id="m1"),
            ToolCallStartEvent(tool_call_id="c1", tool_call_name="lookup_record"),
            ToolCallArgsEvent(tool_call_id="c1", delta='{"record_id": '),
            ToolCallArgsEvent(tool_call_id="c1", delta='"REC-7"}'),
            ToolCallEndEvent(tool_call_id="c1"),
            ToolCallResultEvent(message_id="c1:r", tool_call_id="c1", content="REC-7: active"),
            CustomEvent(
                name="a13n.host.decision",
                value={
                    "calls": [
                        {
                            "tool_name": "deploy_release",
                            "verdict": "approved",
                            "edits": [{"path": "version", "change": "changed", "before": "1", "after": "2"}],
                        }
                    ]
                },
            ),
            RunFinishedEvent(thread_id="t", run_id=run.run_id, result={"answer": "done"}),
        ],
    )
    factories.append_events(run, [TextMessageContentEvent(message_id="s1", delta="a subagent's")], subagent_run_id="s")

    steps = run_comparison.steps_of(run)

    assert [(step.kind, step.name, step.args, step.text) for step in steps] == [
        ("input", "user", "", "plain text, not an envelope"),
        ("message", "", "", "Hello there"),
        ("tool_call", "lookup_record", '{"record_id": "REC-7"}', ""),
        ("tool_result", "lookup_record", "", "REC-7: active"),
        ("decision", "deploy_release approved", '[{"after": "2", "change": "changed", "path": "version"}]', ""),
        ("end", "success", "", ""),
    ]
    assert run_comparison.output_of(run) == '{"answer": "done"}'
    assert compare_page(client, run.pk, run.pk).status_code == 200
