"""Teams: each role gets exactly what it may on every URL of the URL confs, and another team's objects are 404.

The surfaces are read from the resolver, so a new URL without an entry in `SURFACES` (a decision about who may
use it) fails `test_every_url_has_a_scoping_decision`. Re-run on PostgreSQL (tests/host/test_postgres.py).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from ag_ui.core import TextMessageContentEvent
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from pydantic_ai.messages import ToolCallPart

from agui_api import issuing
from agui_api.models import ApiToken
from observers.routing import websocket_urlpatterns
from runs.models import AgentProfile, BulkOperation, Execution, HostPolicy, Membership, SavedView, Team, TeamRole
from runs.protocol import CLOSE_NOT_FOUND
from runs.services.lifecycle import executions
from tests.support import factories

pytestmark = pytest.mark.django_db

# Who asks: a role in team A, a member of team B only, a user without teams, a superuser.
ROLES = ("viewer", "operator", "approver", "admin", "outsider", "nobody", "superuser")
TEAM_A_ROLES = {
    "viewer": TeamRole.VIEWER,
    "operator": TeamRole.OPERATOR,
    "approver": TeamRole.APPROVER,
    "admin": TeamRole.ADMIN,
}
MEMBERS = ("viewer", "operator", "approver", "admin", "superuser")


@dataclass
class World:
    team_a: Team
    profile_a: AgentProfile
    # Waiting on two approvals; `questions` waits on a question alone; `running` runs.
    suspended: factories.Suspended
    questions: factories.Suspended
    running: Execution
    run_pk: int
    saved_view_pk: int
    bulk_operation_pk: int


@pytest.fixture
def world(without_default_membership, django_user_model) -> World:
    team_a = Team.objects.get_or_create(name="default")[0]
    team_b = Team.objects.create(name="team-b")
    suspended = factories.suspended_execution()
    questions = factories.suspended_execution(
        approvals=(),
        calls=(ToolCallPart("ask", {"question": "Which account?"}, tool_call_id="call-ask"),),
        questions=("call-ask",),
        title="questions",
    )
    running = factories.make_execution(factories.make_thread("running"))
    run = suspended.run
    factories.append_events(run, [TextMessageContentEvent(message_id="m1", delta="secret of team A")])
    profile_b = AgentProfile.objects.create(name="finance-b", model="demo", team=team_b)
    executions.create_thread(profile_b, title="team B thread")
    owner = django_user_model.objects.create_user("view-owner", password="pw-owner-1")
    view = SavedView.objects.create(user=owner, name="theirs", query="status=waiting")
    operation = BulkOperation.objects.create(user=owner, action="cancel")
    return World(
        team_a, suspended.execution.thread.profile, suspended, questions, running, run.pk, view.pk, operation.pk
    )


@pytest.fixture
def user_of(world, django_user_model) -> Callable[[str], object]:
    def make(role: str):
        if role == "superuser":
            return django_user_model.objects.create_superuser("root", password="pw-root-1")
        if role == "outsider":
            return factories.member(django_user_model, role, Team.objects.get(name="team-b"), TeamRole.ADMIN)
        return factories.member(django_user_model, role, world.team_a, TEAM_A_ROLES.get(role))

    return make


def _names(patterns, prefix: str = "") -> set[str]:
    names: set[str] = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            if pattern.namespace == "admin":
                names.add("admin")
                continue
            namespace = f"{prefix}{pattern.namespace}:" if pattern.namespace else prefix
            names |= _names(pattern.url_patterns, namespace)
        elif isinstance(pattern, URLPattern):
            names.add(f"{prefix}{pattern.name or pattern.pattern}")
    return names


@dataclass(frozen=True)
class Surface:
    """One URL: how to call it on team A's objects, and the status each role gets."""

    method: str
    url: Callable[[World], str]
    expected: dict[str, int]
    data: Callable[[World], dict] = lambda world: {}


def _each(members: int, others: int = 404, **exceptions: int) -> dict[str, int]:
    """`members` for a member of team A and a superuser, `others` for the rest, with exceptions by role."""
    statuses = {role: (members if role in MEMBERS else others) for role in ROLES}
    return {**statuses, **exceptions}


SEE_ALL = {role: 200 for role in ROLES}
# Actions on a visible object that the role does not allow are a 403; invisible objects are a 404.
OPERATE = _each(400, viewer=403)
DECIDE = _each(400, viewer=403, operator=403)

SURFACES: dict[str, Surface | None] = {
    # Not team data: logging in and out, the health check, the favicon. The admin: test_admin_*.
    "login": None,
    "logout": None,
    "health": None,
    "favicon.ico": None,
    "admin": None,
    "runs:threads": Surface("get", lambda w: reverse("runs:threads"), SEE_ALL),
    "runs:threads_alias": Surface("get", lambda w: reverse("runs:threads_alias"), {role: 302 for role in ROLES}),
    # A profile the user may not start on is an invalid choice, like one that does not exist.
    "runs:create_thread": Surface(
        "post",
        lambda w: reverse("runs:create_thread"),
        _each(302, 400, viewer=400),
        lambda w: {"submission_key": "k-1", "profile": w.profile_a.pk, "title": "new"},
    ),
    "runs:thread": Surface("get", lambda w: reverse("runs:thread", args=[w.suspended.execution.thread_id]), _each(200)),
    "runs:start_execution": Surface(
        "post", lambda w: reverse("runs:start_execution", args=[w.suspended.execution.thread_id]), OPERATE
    ),
    "runs:fork_checkpoint": Surface(
        "post", lambda w: reverse("runs:fork_checkpoint", args=[w.suspended.checkpoint_id]), OPERATE
    ),
    # Lists show each user what they may see, so every role gets the page.
    "runs:executions": Surface("get", lambda w: reverse("runs:executions"), SEE_ALL),
    # Counted under the same scoping as the list (test_lists_show_only_the_users_teams).
    "runs:execution_counts": Surface("get", lambda w: reverse("runs:execution_counts"), SEE_ALL),
    # A saved view is the user's own (a name and a query string), whatever their teams; another's is 404.
    "runs:save_view": Surface(
        "post", lambda w: reverse("runs:save_view"), {role: 302 for role in ROLES}, lambda w: {"name": "mine"}
    ),
    "runs:delete_view": Surface(
        "post", lambda w: reverse("runs:delete_view", args=[w.saved_view_pk]), {role: 404 for role in ROLES}
    ),
    # A bulk action is confirmed over what the user may see: team A's execution is "none selected" (400) for others.
    "runs:bulk_action": Surface(
        "post",
        lambda w: reverse("runs:bulk_action"),
        _each(200, 400),
        lambda w: {"action": "cancel", "scope": "selected", "execution": w.suspended.execution.pk},
    ),
    # An operation is its user's alone.
    "runs:bulk_operation": Surface(
        "get", lambda w: reverse("runs:bulk_operation", args=[w.bulk_operation_pk]), {role: 404 for role in ROLES}
    ),
    "runs:execution": Surface("get", lambda w: reverse("runs:execution", args=[w.suspended.execution.pk]), _each(200)),
    "runs:execution_times": Surface(
        "get", lambda w: reverse("runs:execution_times", args=[w.suspended.execution.pk]), _each(200)
    ),
    # An operator cancels; cancelling an execution that waits on approvals refuses them: an approver's decision.
    "runs:cancel_execution": Surface(
        "post", lambda w: reverse("runs:cancel_execution", args=[w.running.pk]), _each(302, viewer=403)
    ),
    # An operator recovers a failed execution (one that is not failed is left as it is, and the page says so).
    "runs:recover_execution": Surface(
        "post", lambda w: reverse("runs:recover_execution", args=[w.running.pk]), _each(302, viewer=403)
    ),
    # Holds are a team admin's (retention keeps what is held).
    "runs:hold_thread": Surface(
        "post",
        lambda w: reverse("runs:hold_thread", args=[w.running.thread_id]),
        _each(302, viewer=403, operator=403, approver=403),
        lambda w: {"hold": "on"},
    ),
    "runs:hold_execution": Surface(
        "post",
        lambda w: reverse("runs:hold_execution", args=[w.running.pk]),
        _each(302, viewer=403, operator=403, approver=403),
        lambda w: {"hold": "on"},
    ),
    # Any member may download a redacted bundle (this execution still waits, so the export is refused: a redirect).
    "runs:export_bundle": Surface(
        "post", lambda w: reverse("runs:export_bundle", args=[w.suspended.execution.pk]), _each(302)
    ),
    # A what-if is a fork: an operator's; without a change the form is refused (400).
    "runs:what_if": Surface("post", lambda w: reverse("runs:what_if", args=[w.suspended.execution.pk]), OPERATE),
    "runs:event": Surface("get", lambda w: reverse("runs:event", args=[w.suspended.execution.pk, 1]), _each(200)),
    "runs:run": Surface("get", lambda w: reverse("runs:run", args=[w.run_pk]), _each(200)),
    # Two runs of team A, one of them by its run id: another team's user gets the 404 of a run that is not there.
    "runs:compare": Surface(
        "get", lambda w: f"{reverse('runs:compare')}?a={w.run_pk}&b={w.suspended.run.run_id}", _each(200)
    ),
    # Each request of a group is checked alone (refused items are reported), so the post itself is a 200 for all.
    "runs:approval_group": Surface(
        "post",
        lambda w: reverse("runs:approval_group"),
        {role: 302 for role in ROLES},
        lambda w: {"requests": str(w.suspended.requests["call-pay"].pk), "choice": "deny", "submission_key": "k-g"},
    ),
    "runs:approvals": Surface("get", lambda w: reverse("runs:approvals"), SEE_ALL),
    "runs:approval_rows": Surface("get", lambda w: reverse("runs:approval_rows"), SEE_ALL),
    "runs:approval_audit": Surface("get", lambda w: reverse("runs:approval_audit"), SEE_ALL),
    # Sums over the user's teams only (tests/web/test_usage.py).
    "runs:usage": Surface("get", lambda w: reverse("runs:usage"), SEE_ALL),
    "runs:approval_audit_export": Surface("get", lambda w: reverse("runs:approval_audit_export"), SEE_ALL),
    "runs:approval_decide": Surface(
        "post", lambda w: reverse("runs:approval_decide", args=[w.suspended.execution.pk]), DECIDE
    ),
    # Streams close the thread's database connections: test_agui_routes_scope_by_team, on a transactional database.
    "agui:execution-events": None,
    # Past the profile and role checks, a body without a user message is a 400.
    "agui:run": Surface(
        "post",
        lambda w: reverse("agui:run", args=[w.profile_a.name]),
        _each(400, viewer=403),
        lambda w: {"threadId": "thread-x", "runId": "run-x", "state": {}, "messages": [], "tools": [], "context": []},
    ),
}


def _answer_question(w: World) -> dict:
    return {
        "checkpoint": w.questions.checkpoint_id,
        "submission_key": "answer-1",
        "decision-0-id": "call-ask",
        "decision-0-choice": "answer",
        "decision-0-answer": "The savings account.",
    }


def _resume(suspended: Callable[[World], factories.Suspended]) -> Callable[[World], dict]:
    """An AG-UI resume of the thread's open set whose payloads do not fit: past the role check, a 400."""

    def data(w: World) -> dict:
        thread = suspended(w).execution.thread
        return {
            "threadId": thread.thread_id,
            "runId": "run-resume",
            "state": {},
            "messages": [{"id": "u1", "role": "user", "content": "pay acme"}],
            "tools": [],
            "context": [],
            "resume": [{"interruptId": call, "status": "resolved", "payload": {}} for call in suspended(w).requests],
        }

    return data


# More cases of the URLs above, each on other objects of team A: the role each action needs depends on them.
VARIANTS: dict[str, tuple[str, Surface]] = {
    "answer a question": (
        "runs:approval_decide",
        Surface(
            "post",
            lambda w: reverse("runs:approval_decide", args=[w.questions.execution.pk]),
            _each(302, viewer=403),
            _answer_question,
        ),
    ),
    "cancel what waits on approvals": (
        "runs:cancel_execution",
        Surface(
            "post",
            lambda w: reverse("runs:cancel_execution", args=[w.suspended.execution.pk]),
            _each(302, viewer=403, operator=403),
        ),
    ),
    "cancel what waits on a question": (
        "runs:cancel_execution",
        Surface(
            "post", lambda w: reverse("runs:cancel_execution", args=[w.questions.execution.pk]), _each(302, viewer=403)
        ),
    ),
    "resume approvals over AG-UI": (
        "agui:run",
        Surface(
            "post",
            lambda w: reverse("agui:run", args=[w.profile_a.name]),
            _each(400, viewer=403, operator=403),
            _resume(lambda w: w.suspended),
        ),
    ),
    "resume a question over AG-UI": (
        "agui:run",
        Surface(
            "post",
            lambda w: reverse("agui:run", args=[w.profile_a.name]),
            _each(400, viewer=403),
            _resume(lambda w: w.questions),
        ),
    ),
}
CASES = {
    **{name: (name, surface) for name, surface in SURFACES.items() if surface is not None},
    **VARIANTS,
}


def test_every_url_has_a_scoping_decision():
    assert _names(get_resolver().url_patterns) == set(SURFACES)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_role_gets_what_its_team_role_allows(client, world, user_of, role, case):
    name, surface = CASES[case]
    client.force_login(user_of(role))
    url = surface.url(world)
    if surface.method == "get":
        response = client.get(url)
    elif name.startswith("agui:"):
        response = client.post(url, json.dumps(surface.data(world)), content_type="application/json")
    else:
        response = client.post(url, surface.data(world))
    assert response.status_code == surface.expected[role], (case, role)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", ROLES)
def test_agui_event_stream_of_another_teams_execution_is_not_found(client, world, user_of, role):
    client.force_login(user_of(role))
    response = client.get(reverse("agui:execution-events", args=[world.suspended.execution.pk]))
    assert response.status_code == _each(200)[role]
    if response.status_code == 404:
        assert json.loads(response.content)["error"] == "not_found"


@pytest.mark.parametrize("role", ROLES)
def test_lists_show_only_the_users_teams(client, world, user_of, role, django_user_model):
    factories.member(django_user_model, "a-member", world.team_a, TeamRole.VIEWER)
    factories.member(django_user_model, "b-member", Team.objects.get(name="team-b"), TeamRole.VIEWER)
    client.force_login(user_of(role))
    threads = client.get(reverse("runs:threads")).content.decode()
    audit = client.get(reverse("runs:approval_audit")).context["filters"]
    assert ("payments" in threads) == (role in MEMBERS)
    assert ("team B thread" in threads) == (role in {"outsider", "superuser"})
    assert ("finance-b" in threads) == (role in {"outsider", "superuser"})
    # The audit's filters name only the threads and people of the viewer's teams.
    usernames = {user.username for user in audit.fields["user"].queryset}
    assert ("b-member" in usernames) == (role in {"outsider", "superuser"})
    assert ("a-member" in usernames) == (role in MEMBERS)
    titles = {thread.title for thread in audit.fields["thread"].queryset}
    assert ("team B thread" in titles) == (role in {"outsider", "superuser"})
    # The executions list, and the profiles and people its filters offer.
    listed = client.get(reverse("runs:executions"))
    assert ("payments #1" in listed.content.decode()) == (role in MEMBERS)
    offered = listed.context["filters"].fields
    assert ("finance-b" in {profile.name for profile in offered["profile"].queryset}) == (
        role in {"outsider", "superuser"}
    )
    assert ("b-member" in {user.username for user in offered["by"].queryset}) == (role in {"outsider", "superuser"})
    # The counts per status count only what the list shows.
    in_a, in_b = (Execution.objects.filter(thread__team__name=name).count() for name in (world.team_a.name, "team-b"))
    assert in_a
    expected = {"outsider": in_b, "nobody": 0, "superuser": Execution.objects.count()}.get(role, in_a)
    assert client.get(reverse("runs:execution_counts")).json()["total"] == expected


@pytest.mark.parametrize("role", ROLES)
def test_badge_and_inbox_count_only_what_the_user_may_decide(client, world, user_of, role):
    client.force_login(user_of(role))
    response = client.get(reverse("runs:approvals"))
    # Two approvals for an approver and above, one question for an operator and above.
    expected = {"approver": 3, "admin": 3, "superuser": 3, "operator": 1}.get(role, 0)
    assert response.context["pending_approvals"] == expected
    assert sum(len(group.rows) for group in response.context["groups"]) == expected


def test_the_decide_permission_makes_a_member_an_approver_of_their_teams_only(client, world, django_user_model):
    operator = factories.member(django_user_model, "granted", world.team_a, TeamRole.OPERATOR)
    outsider = factories.member(django_user_model, "granted-b", Team.objects.get(name="team-b"), TeamRole.VIEWER)
    for user in (operator, outsider):
        user.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    url = reverse("runs:approval_decide", args=[world.suspended.execution.pk])
    client.force_login(operator)
    assert client.post(url, {}).status_code == 400
    client.force_login(outsider)
    assert client.post(url, {}).status_code == 404
    assert client.get(reverse("runs:approvals")).context["pending_approvals"] == 0


def _as_user(user):
    router = URLRouter(websocket_urlpatterns)

    async def app(scope, receive, send):
        return await router({**scope, "user": user}, receive, send)

    return app


# Every socket route, and what it gives each role on team A's objects (the matrix below asserts each).
SOCKET_ROUTES = {"ws/executions/<int:pk>/", "ws/threads/", "ws/approvals/", ""}


def test_every_socket_route_is_in_the_matrix():
    assert {str(pattern.pattern) for pattern in websocket_urlpatterns} == SOCKET_ROUTES


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", ROLES)
async def test_sockets_answer_another_teams_execution_as_missing_and_count_only_decidable_requests(
    settings, world, user_of, role
):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    user = await sync_to_async(user_of)(role)
    member = role in MEMBERS
    timeline = WebsocketCommunicator(_as_user(user), f"/ws/executions/{world.suspended.execution.pk}/")
    assert (await timeline.connect())[0]
    if member:
        await timeline.send_json_to({"type": "subscribe", "after": None})
        assert (await timeline.receive_json_from(timeout=5))["type"] == "status"
    else:
        assert (await timeline.receive_json_from(timeout=5))["code"] == "not_found"
        assert (await timeline.receive_output(timeout=5))["code"] == CLOSE_NOT_FOUND
    await timeline.disconnect()
    approvals = WebsocketCommunicator(_as_user(user), "/ws/approvals/")
    assert (await approvals.connect())[0]
    await approvals.send_json_to({"type": "subscribe"})
    frame = await approvals.receive_json_from(timeout=5)
    # Two approvals for an approver and above, the question for an operator and above.
    assert frame["count"] == {"approver": 3, "admin": 3, "superuser": 3, "operator": 1}.get(role, 0)
    await approvals.disconnect()
    threads = WebsocketCommunicator(_as_user(user), "/ws/threads/")
    assert (await threads.connect())[0]
    await threads.send_json_to({"type": "subscribe", "threads": [world.suspended.execution.thread_id]})
    first = await threads.receive_json_from(timeout=5)
    # Another team's thread gets no status: the first frame is already `ready`.
    assert first["type"] == ("thread.status" if member else "ready")
    await threads.disconnect()
    nowhere = WebsocketCommunicator(_as_user(user), "/ws/executions/-1/")
    assert (await nowhere.connect())[0]
    assert (await nowhere.receive_json_from(timeout=5))["code"] == "not_found"
    await nowhere.disconnect()


def _staff(user):
    """The admin lets staff in (Django's own gate); what they find there is their team role's."""
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    return user


# The teams whose profiles and policies each role administers.
ADMINISTERS = {"admin": {"default"}, "outsider": {"team-b"}, "superuser": {"default", "team-b"}}


@pytest.mark.parametrize("role", ROLES)
def test_admin_shows_and_changes_only_the_teams_the_user_administers(client, world, user_of, role):
    client.force_login(_staff(user_of(role)))
    profiles = client.get(reverse("admin:runs_agentprofile_changelist"))
    policies = client.get(reverse("admin:runs_hostpolicy_changelist"))
    profile_page = client.get(reverse("admin:runs_agentprofile_change", args=[world.profile_a.pk]))
    policy = executions.current_policy_version(world.team_a).policy
    policy_page = client.get(reverse("admin:runs_hostpolicy_change", args=[policy.pk]))
    if role not in ADMINISTERS:
        assert {profiles.status_code, policies.status_code, profile_page.status_code, policy_page.status_code} == {403}
        assert client.get(reverse("admin:runs_deferredrequest_changelist")).status_code == 403
        return
    teams = ADMINISTERS[role]
    assert {profile.team.name for profile in profiles.context["cl"].result_list} == teams
    assert len(profiles.context["cl"].result_list) == AgentProfile.objects.filter(team__name__in=teams).count()
    assert {policy.team.name for policy in policies.context["cl"].result_list} == teams
    # Another team's profile or policy is the admin's "does not exist": back to the index.
    assert profile_page.status_code == policy_page.status_code == (200 if "default" in teams else 302)
    if policy_page.status_code == 200:
        # The policy page names the profiles it governs.
        assert "approvals-test" in policy_page.content.decode()
    # A new profile goes only to a team the user administers.
    choices = client.get(reverse("admin:runs_agentprofile_add")).context["adminform"].form.fields["team"].queryset
    assert {team.name for team in choices} == teams
    # The records of runs, too: team A's three open requests.
    requests = client.get(reverse("admin:runs_deferredrequest_changelist")).context["cl"].result_list
    assert len(requests) == (3 if "default" in teams else 0)


def test_a_team_admin_edits_their_profile_and_cannot_move_it_to_another_team(client, world, user_of):
    client.force_login(_staff(user_of("admin")))
    form = {"name": "approvals-test", "model": "demo", "instructions": "Be brief.", "base_url": ""}
    team_b = Team.objects.get(name="team-b")
    moved = client.post(
        reverse("admin:runs_agentprofile_change", args=[world.profile_a.pk]), {**form, "team": team_b.pk}
    )
    assert moved.status_code == 200 and "Select a valid choice" in moved.content.decode()
    saved = client.post(
        reverse("admin:runs_agentprofile_change", args=[world.profile_a.pk]), {**form, "team": world.team_a.pk}
    )
    assert saved.status_code == 302
    world.profile_a.refresh_from_db()
    assert (world.profile_a.instructions, world.profile_a.team_id) == ("Be brief.", world.team_a.pk)


@pytest.mark.parametrize("role", ROLES)
def test_roles_are_django_permissions_on_their_teams_objects(world, user_of, role):
    user = user_of(role)
    execution = world.suspended.execution
    rank = {"viewer": 1, "operator": 2, "approver": 3, "admin": 4, "superuser": 4}.get(role, 0)
    assert user.has_perm("runs.view_execution", execution) == (rank >= 1)
    assert user.has_perm("runs.add_execution", execution) == (rank >= 2)
    assert user.has_perm("runs.decide_deferred", execution) == (rank >= 3)
    assert user.has_perm("runs.change_agentprofile", world.profile_a) == (rank >= 4)
    # Without an object only a team admin's admin-site permissions: never a decision in every team.
    assert user.has_perm("runs.decide_deferred") == (role == "superuser")
    assert user.has_perm("runs.change_agentprofile") == (role in ADMINISTERS)


def test_teams_are_a_superusers_and_a_clashing_policy_name_is_a_clear_error(client, world, user_of):
    client.force_login(_staff(user_of("admin")))
    assert client.get(reverse("admin:runs_team_add")).status_code == 403
    client.force_login(user_of("superuser"))
    clash = client.post(
        reverse("admin:runs_team_add"),
        {"name": "default", "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0"},
    )
    assert clash.status_code == 200
    assert "already exists" in clash.content.decode()
    HostPolicy.objects.filter(team__name="team-b").update(name="finance")
    refused = client.post(
        reverse("admin:runs_team_add"),
        {"name": "finance", "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0"},
    )
    assert "A host policy named &#x27;finance&#x27; already exists (of team team-b)" in refused.content.decode()
    assert not Team.objects.filter(name="finance").exists()
    created = client.post(
        reverse("admin:runs_team_add"),
        {"name": "support", "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0"},
    )
    assert created.status_code == 302
    # The new team's policy exists, named after it, for its admins to edit.
    assert HostPolicy.objects.get(team__name="support").name == "support"


NO_MESSAGE = {"threadId": "thread-x", "runId": "run-x", "state": {}, "messages": [], "tools": [], "context": []}


def _bearer(secret: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


@pytest.mark.django_db(transaction=True)
def test_a_token_narrowed_to_a_team_acts_only_there(client, world, django_user_model):
    team_b = Team.objects.get(name="team-b")
    user = factories.member(django_user_model, "both", world.team_a, TeamRole.OPERATOR)
    Membership.objects.create(user=user, team=team_b, role=TeamRole.OPERATOR)
    narrowed = _bearer(factories.token_for(user, team=team_b))
    wide = _bearer(factories.token_for(user, name="wide"))
    run_a = reverse("agui:run", args=[world.profile_a.name])
    run_b = reverse("agui:run", args=["finance-b"])
    events_a = reverse("agui:execution-events", args=[world.suspended.execution.pk])

    def post(url, headers):
        return client.post(url, json.dumps(NO_MESSAGE), content_type="application/json", **headers)

    # Past the profile and role checks, a body without a user message is a 400; outside the team, no such profile.
    assert (post(run_a, narrowed).status_code, post(run_b, narrowed).status_code) == (404, 400)
    assert post(run_a, wide).status_code == 400
    refused = client.get(events_a, **narrowed)
    assert (refused.status_code, json.loads(refused.content)["error"]) == (404, "not_found")
    assert client.get(events_a, **wide).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_token_of_a_removed_member_acts_nowhere(client, world, django_user_model):
    user = factories.member(django_user_model, "leaver", world.team_a, TeamRole.APPROVER)
    headers = _bearer(factories.token_for(user, team=world.team_a))
    run_a = reverse("agui:run", args=[world.profile_a.name])
    events_a = reverse("agui:execution-events", args=[world.suspended.execution.pk])
    Membership.objects.filter(user=user).delete()
    posted = client.post(run_a, json.dumps(NO_MESSAGE), content_type="application/json", **headers)
    assert (posted.status_code, json.loads(posted.content)["error"]) == (404, "unknown_profile")
    assert client.get(events_a, **headers).status_code == 404


def test_a_token_is_narrowed_only_to_a_team_of_its_user(world, django_user_model, admin_client):
    user = factories.member(django_user_model, "a-only", world.team_a, TeamRole.OPERATOR)
    team_b = Team.objects.get(name="team-b")
    with pytest.raises(ValidationError, match="not a member of team team-b"):
        issuing.issue(ApiToken(user=user, name="x", team=team_b), issuer=None)
    with pytest.raises(CommandError, match="not a member of team team-b"):
        call_command("harness_token", "issue", "a-only", "--name", "x", "--team", "team-b")
    with pytest.raises(CommandError, match="no team 'nope'"):
        call_command("harness_token", "issue", "a-only", "--name", "x", "--team", "nope")
    refused = admin_client.post(
        reverse("admin:agui_api_apitoken_add"),
        {"user": user.pk, "name": "x", "scope": "read", "team": team_b.pk, "expires_at_0": "2099-01-01"},
    )
    assert "not a member of team team-b" in refused.content.decode()
    assert not ApiToken.objects.exists()
    call_command("harness_token", "issue", "a-only", "--name", "x", "--team", "default", stdout=io.StringIO())
    assert ApiToken.objects.get().team == world.team_a
