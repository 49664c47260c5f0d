"""Hostile input at every boundary: each form field, query parameter and socket message gets a clear refusal, never
a 500 and never a change. tests/host/test_postgres.py runs this file against PostgreSQL as well, which refuses
NUL bytes and out-of-range integers that SQLite would store."""

from __future__ import annotations

import itertools
import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from pydantic_ai import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart

from runs.models import AgentProfile, Checkpoint, CheckpointKind, DecisionSubmission, Execution, HostPolicy, Thread
from runs.services.lifecycle import executions
from runs.services.store import checkpoints
from runs.validators import MAX_INPUT_CHARS
from tests.support import factories
from tests.support.agui_http import bearer, run_input
from tests.support.factories import demo_profile, suspended_execution
from tests.support.sockets import as_user

pytestmark = pytest.mark.django_db(transaction=True)

HUGE = 2**70
KEYS = itertools.count()
MEGABYTE = "x" * 1_000_001
HOSTILE_TEXT = {
    "nul": "before\x00after",
    "terminal escape": "title\x1b]0;owned\x07",
    "bell": "ding\x07",
    "one megabyte": MEGABYTE,
}
HOSTILE_LINE = {**HOSTILE_TEXT, "newline": "two\nlines"}


@pytest.fixture(autouse=True)
def in_memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    """Accepted input would enqueue a run after commit; no worker is needed to see what was accepted."""
    monkeypatch.setattr(executions, "enqueue_run", lambda run: None)


@pytest.fixture
def viewer(django_user_model):
    return django_user_model.objects.create_user("hostile", password="pw-hostile-1")


async def refused(user, path: str, frame: str | bytes | None) -> tuple[dict, dict]:
    """Connect, send one frame (text or binary), and return the error frame and the close message."""
    communicator = WebsocketCommunicator(as_user(user), path)
    connected, _ = await communicator.connect()
    assert connected
    if isinstance(frame, bytes):
        await communicator.send_to(bytes_data=frame)
    elif frame is not None:
        await communicator.send_to(text_data=frame)
    error = await communicator.receive_json_from(timeout=5)
    closed = await communicator.receive_output(timeout=5)
    return error, closed


SOCKET_FRAMES = {
    "binary": b'{"type": "subscribe"}',
    "not json": "subscribe me",
    "nul byte": '{"type": "subscribe\\u0000", "after": null}',
    "nested 100k deep": "[" * 100_000 + "]" * 100_000,
    "nested within the size limit": '{"type": "subscribe", "after": ' + "[" * 3000 + "]" * 3000 + "}",
    "huge integer": '{"type": "subscribe", "after": ' + "9" * 4000 + "}",
    "integer above 64 bits": json.dumps({"type": "subscribe", "after": HUGE}),
    "float": '{"type": "subscribe", "after": 1e400}',
    "string": json.dumps({"type": "subscribe", "after": "12"}),
    "bool": json.dumps({"type": "subscribe", "after": True}),
    "negative": json.dumps({"type": "subscribe", "after": -1}),
    "unknown type": json.dumps({"type": "unsubscribe"}),
    "unknown field": json.dumps({"type": "subscribe", "after": None, "admin": True}),
    "list": json.dumps([{"type": "subscribe"}]),
    "execution above 64 bits": json.dumps({"type": "subscribe", "execution": HUGE}),
    "oversized": json.dumps({"type": "subscribe", "pad": "x" * 100_000}),
}


@pytest.mark.parametrize("frame", SOCKET_FRAMES.values(), ids=SOCKET_FRAMES.keys())
async def test_every_malformed_timeline_frame_is_refused_with_4400(viewer, frame):
    execution = await sync_to_async(factories.make_execution)()
    error, closed = await refused(viewer, f"/ws/executions/{execution.pk}/", frame)
    assert error["type"] == "error"
    assert error["code"] in {"bad_request", "bad_cursor", "too_large"}
    assert error["message"]
    assert closed == {"type": "websocket.close", "code": 4400}


THREAD_FRAMES = {
    **{name: frame for name, frame in SOCKET_FRAMES.items() if "after" not in str(frame)},
    "thread pk above 64 bits": json.dumps({"type": "subscribe", "threads": [HUGE]}),
    "thread pk zero": json.dumps({"type": "subscribe", "threads": [0]}),
    "thread pk string": json.dumps({"type": "subscribe", "threads": ["1"]}),
    "threads not a list": json.dumps({"type": "subscribe", "threads": {"1": 1}}),
    "too many threads": json.dumps({"type": "subscribe", "threads": list(range(1, 1000))}),
    "nested threads": json.dumps({"type": "subscribe", "threads": [[1]]}),
}


@pytest.mark.parametrize("frame", SOCKET_FRAMES.values(), ids=SOCKET_FRAMES.keys())
async def test_every_malformed_approvals_frame_is_refused_with_4400(viewer, frame):
    error, closed = await refused(viewer, "/ws/approvals/", frame)
    assert error["type"] == "error"
    assert closed == {"type": "websocket.close", "code": 4400}


@pytest.mark.parametrize("frame", THREAD_FRAMES.values(), ids=THREAD_FRAMES.keys())
async def test_every_malformed_threads_frame_is_refused_with_4400(viewer, frame):
    error, closed = await refused(viewer, "/ws/threads/", frame)
    assert error["type"] == "error"
    assert error["code"] in {"bad_request", "too_large"}
    assert closed == {"type": "websocket.close", "code": 4400}


async def test_unknown_thread_pks_are_skipped_and_known_ones_answered(viewer):
    execution = await sync_to_async(factories.make_execution)()
    communicator = WebsocketCommunicator(as_user(viewer), "/ws/threads/")
    assert (await communicator.connect())[0]
    await communicator.send_json_to({"type": "subscribe", "threads": [987654, execution.thread_id, 2**63 - 1]})
    assert (await communicator.receive_json_from())["thread"] == execution.thread_id
    assert await communicator.receive_json_from() == {"type": "ready"}
    await communicator.disconnect()


@pytest.mark.parametrize(
    "path",
    [
        "/ws/executions/-1/",
        "/ws/executions/abc/",
        "/ws/executions/0/",
        f"/ws/executions/{HUGE}/",
        "/ws/executions/987654/",
        "/ws/executions/",
        "/ws/nothing/",
        "/ws/executions/1/%00/",
    ],
)
async def test_unknown_socket_addresses_are_closed_with_4404(viewer, path):
    error, closed = await refused(viewer, path, None)
    assert error["code"] == "not_found"
    assert closed == {"type": "websocket.close", "code": 4404}


# --- pages and forms ---------------------------------------------------------------------------------------


@pytest.fixture
def client_in(viewer) -> Client:
    viewer.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    client = Client()
    client.force_login(viewer)
    return client


@pytest.fixture
def profile() -> AgentProfile:
    return AgentProfile.objects.create(name="hostile", model="demo")


def start_post(**fields) -> dict:
    """A form that starts work, with its one-time submission key."""
    return {"submission_key": f"key-{next(KEYS)}", **fields}


def refused_with_reason(response, field: str) -> None:
    assert response.status_code == 400, response.content[:500]
    assert f'data-field="{field}"'.encode() in response.content


@pytest.mark.parametrize("title", HOSTILE_LINE.values(), ids=HOSTILE_LINE.keys())
def test_a_new_thread_refuses_a_hostile_title(client_in, profile, title):
    response = client_in.post(reverse("runs:create_thread"), start_post(profile=profile.pk, title=title))
    refused_with_reason(response, "title")
    assert not Thread.objects.exists()


@pytest.mark.parametrize("text", HOSTILE_TEXT.values(), ids=HOSTILE_TEXT.keys())
def test_a_new_thread_refuses_a_hostile_first_input(client_in, profile, text):
    response = client_in.post(reverse("runs:create_thread"), start_post(profile=profile.pk, title="t", input=text))
    refused_with_reason(response, "input")
    assert not Thread.objects.exists()


@pytest.mark.parametrize("value", ["abc", "", "-1", "0", str(HUGE), "1\x00", "1.5", "987654"])
def test_a_new_thread_refuses_an_unknown_profile(client_in, profile, value):
    response = client_in.post(reverse("runs:create_thread"), start_post(profile=value, title="t"))
    refused_with_reason(response, "profile")
    assert not Thread.objects.exists()


def test_a_new_thread_keeps_ordinary_unicode_and_line_breaks(client_in, profile):
    response = client_in.post(
        reverse("runs:create_thread"),
        start_post(profile=profile.pk, title="Déploiement ✓ 部署", input="line one\n\tline two"),
    )
    assert response.status_code == 302
    assert Thread.objects.get().title == "Déploiement ✓ 部署"
    assert Execution.objects.get().input == "line one\n\tline two"


@pytest.mark.parametrize("text", HOSTILE_TEXT.values(), ids=HOSTILE_TEXT.keys())
def test_a_new_execution_refuses_hostile_input(client_in, profile, text):
    thread = factories.make_thread()
    response = client_in.post(reverse("runs:start_execution", args=[thread.pk]), start_post(input=text))
    refused_with_reason(response, "input")
    assert not Execution.objects.exists()


@pytest.mark.parametrize("title", HOSTILE_LINE.values(), ids=HOSTILE_LINE.keys())
def test_a_fork_refuses_a_hostile_title(client_in, profile, title):
    from runs.services.lifecycle import create_thread

    thread = create_thread(profile, title="origin")
    checkpoint = Checkpoint.objects.get(thread=thread)
    response = client_in.post(reverse("runs:fork_checkpoint", args=[checkpoint.pk]), start_post(title=title))
    refused_with_reason(response, "title")
    assert Thread.objects.count() == 1


THREAD_QUERIES = {
    "nul in search": {"q": "a\x00b"},
    "escape in search": {"q": "\x1b[2J"},
    "one megabyte search": {"q": MEGABYTE},
    "unknown status": {"status": "abc"},
    "nul status": {"status": "\x00"},
}


@pytest.mark.parametrize("query", THREAD_QUERIES.values(), ids=THREAD_QUERIES.keys())
def test_the_thread_list_refuses_hostile_filters_with_400(client_in, query):
    factories.make_thread()
    response = client_in.get(reverse("runs:threads"), query)
    assert response.status_code == 400
    assert b'class="error"' in response.content


AUDIT_QUERIES = {
    "far future": {"date_from": "9999-12-31", "date_to": "9999-12-31"},
    "year one": {"date_from": "0001-01-01"},
    "end before start": {"date_from": "2026-02-01", "date_to": "2026-01-01"},
    "not a date": {"date_to": "tomorrow"},
    "nul date": {"date_from": "2026-01-01\x00"},
    "unknown thread": {"thread": "abc"},
    "thread beyond 64 bits": {"thread": str(HUGE)},
    "nul user": {"user": "1\x00"},
    "negative user": {"user": "-1"},
}


@pytest.mark.parametrize("query", AUDIT_QUERIES.values(), ids=AUDIT_QUERIES.keys())
def test_the_audit_refuses_hostile_filters_with_400(client_in, query):
    response = client_in.get(reverse("runs:approval_audit"), query)
    assert response.status_code == 400
    assert b'class="error"' in response.content


def test_pagination_and_format_parameters_never_fail(client_in):
    execution = factories.make_execution()
    run = factories.make_run(execution)
    factories.append_events(run, factories.text_run_events(run, ["a", "b"]))
    pages = [
        reverse("runs:threads"),
        reverse("runs:thread", args=[execution.thread_id]),
        reverse("runs:run", args=[run.pk]),
        reverse("runs:event", args=[execution.pk, 1]),
        reverse("runs:approvals"),
    ]
    for url in pages:
        for param in ("page", "checkpoints", "format"):
            for value in ("abc", "-1", str(HUGE), "\x00", MEGABYTE, "1e9"):
                assert client_in.get(url, {param: value}).status_code == 200, (url, param, value[:20])


@pytest.mark.parametrize(
    ("name", "method"),
    [
        ("runs:thread", "get"),
        ("runs:start_execution", "post"),
        ("runs:fork_checkpoint", "post"),
        ("runs:execution", "get"),
        ("runs:cancel_execution", "post"),
        ("runs:run", "get"),
        ("runs:approval_decide", "get"),
        ("runs:approval_decide", "post"),
    ],
)
def test_pks_beyond_64_bits_in_addresses_are_404(client_in, name, method):
    url = reverse(name, args=[7]).replace("/7/", f"/{HUGE}/")
    response = getattr(client_in, method)(url, start_post(input="x", title="x"))
    assert response.status_code == 404


def test_an_event_position_beyond_64_bits_is_404(client_in):
    execution = factories.make_execution()
    assert client_in.get(f"/executions/{execution.pk}/events/{HUGE}/").status_code == 404
    assert client_in.get(f"/executions/{HUGE}/events/1/").status_code == 404


# --- the approval form -------------------------------------------------------------------------------------


@pytest.fixture
def suspended(scenario_tools):
    return suspended_execution()


def decision_post(suspended, **changes: str) -> dict[str, str]:
    """A complete, acceptable decision set for the two requests, with `changes` applied."""
    post = {
        "checkpoint": str(suspended.checkpoint_id),
        "submission_key": "hostile-key",
        "decision-0-id": "call-pay",
        "decision-0-choice": "approve",
        "decision-1-id": "call-del",
        "decision-1-choice": "deny",
        "decision-1-message": "no",
    }
    # Row fields are written decision_0_choice here, since keyword arguments cannot hold dashes.
    post.update({name.replace("_", "-") if name.startswith("decision_") else name: v for name, v in changes.items()})
    return post


HOSTILE_JSON = {
    "nul in a string": '{"amount": 5, "to": "ac\\u0000me"}',
    "nul in a key": '{"amount": 5, "to": "acme", "\\u0000": 1}',
    "lone surrogate": '{"amount": 5, "to": "\\ud800"}',
    "infinite number": '{"amount": 1e400, "to": "acme"}',
    "NaN": '{"amount": NaN, "to": "acme"}',
    "nested 100k deep": "[" * 100_000 + "]" * 100_000,
    "nested 200 deep": '{"amount": 5, "to": "acme", "x": ' + "[" * 200 + "]" * 200 + "}",
    "huge integer": '{"amount": ' + "9" * 5000 + ', "to": "acme"}',
    "one megabyte": json.dumps({"amount": 5, "to": MEGABYTE}),
    "not json": "{amount: 5",
}

DECISION_POSTS = {
    **{
        f"edited args, {name}": {"decision_0_choice": "edit", "decision_0_args": text}
        for name, text in HOSTILE_JSON.items()
    },
    **{f"denial message, {name}": {"decision_1_message": text} for name, text in HOSTILE_TEXT.items()},
    "unknown choice": {"decision_0_choice": "maybe"},
    "nul in the call id": {"decision_0_id": "call-pay\x00"},
    "unknown call id": {"decision_0_id": "call-zzz"},
    "checkpoint not a number": {"checkpoint": "abc"},
    "checkpoint beyond 64 bits": {"checkpoint": str(HUGE)},
    "negative checkpoint": {"checkpoint": "-1"},
    "nul in the submission key": {"submission_key": "key\x00"},
    "one megabyte submission key": {"submission_key": MEGABYTE},
    "row index beyond 64 bits": {f"decision_{HUGE}_id": "call-pay", f"decision_{HUGE}_choice": "approve"},
}


@pytest.mark.parametrize("changes", DECISION_POSTS.values(), ids=DECISION_POSTS.keys())
def test_a_hostile_decision_set_is_refused_whole(client_in, suspended, changes):
    post = decision_post(suspended, **changes)
    response = client_in.post(reverse("runs:approval_decide", args=[suspended.execution.pk]), post)
    assert response.status_code in (400, 409), response.content[:300]
    assert b"Nothing was changed" in response.content
    assert not DecisionSubmission.objects.exists()


def test_a_hostile_answer_to_a_question_is_refused(client_in, scenario_tools):
    question = ToolCallPart("ask_user_question", {"question": "Which region?"}, tool_call_id="q")
    asked = suspended_execution(approvals=(), calls=(question,), questions=("q",))
    call_id = "q"
    for text in HOSTILE_TEXT.values():
        post = {
            "checkpoint": str(asked.checkpoint_id),
            "submission_key": "k",
            "decision-0-id": call_id,
            "decision-0-choice": "answer",
            "decision-0-answer": text,
        }
        response = client_in.post(reverse("runs:approval_decide", args=[asked.execution.pk]), post)
        assert response.status_code == 400
    assert not DecisionSubmission.objects.exists()


@pytest.mark.parametrize("next_url", ["javascript:alert(1)", "//evil.example/", "/\x00/", "\r\nSet-Cookie: a=b"])
def test_a_hostile_next_address_is_never_followed(client_in, suspended, next_url):
    post = decision_post(suspended, next=next_url)
    response = client_in.post(reverse("runs:approval_decide", args=[suspended.execution.pk]), post)
    if "\x00" in next_url:
        assert response.status_code == 400
        assert not DecisionSubmission.objects.exists()
    else:
        assert response.status_code == 302
        assert response["Location"] == reverse("runs:execution", args=[suspended.execution.pk])


# --- the AG-UI endpoint -----------------------------------------------------------------------------------


@pytest.mark.parametrize("length", ["abc", "-1", "1e9", str(HUGE)])
def test_the_agui_endpoint_refuses_a_hostile_content_length(client_in, length):
    response = client_in.post("/agui/demo/", b"{}", content_type="application/json", headers={"Content-Length": length})
    assert response.status_code in (400, 413)


AGUI_BODIES = {
    "nul in a message": ("t-nul", "hello\x00there"),
    "nul in the thread id": ("t\x00", "hello"),
    "lone surrogate in a message": ("t-surrogate", "\ud800"),
}


@pytest.mark.parametrize(("thread_id", "text"), AGUI_BODIES.values(), ids=AGUI_BODIES.keys())
def test_the_agui_endpoint_refuses_text_no_database_can_store(client_in, thread_id, text):
    demo_profile()
    body = json.dumps(run_input(thread_id, "r1", text))
    response = client_in.post("/agui/demo/", body, content_type="application/json")
    assert response.status_code == 400
    assert json.loads(response.content)["error"] == "invalid_input"
    assert not Thread.objects.exists()


AGUI_PROMPTS = {
    "terminal escape": (HOSTILE_TEXT["terminal escape"], "user_message_control_character"),
    "bell": (HOSTILE_TEXT["bell"], "user_message_control_character"),
    "one character over the forms' limit": ("x" * (MAX_INPUT_CHARS + 1), "user_message_too_long"),
    "one megabyte": (MEGABYTE, "user_message_too_long"),
}


@pytest.mark.parametrize(("text", "code"), AGUI_PROMPTS.values(), ids=AGUI_PROMPTS.keys())
def test_the_agui_endpoint_refuses_a_prompt_the_forms_refuse(client_in, text, code):
    demo_profile()
    response = client_in.post("/agui/demo/", json.dumps(run_input("agui_prompt", "r1", text)), "application/json")
    assert response.status_code == 400
    assert json.loads(response.content)["error"] == code
    assert not Thread.objects.exists()


def test_a_history_mismatch_says_how_the_histories_differ_never_what_the_thread_holds(viewer):
    """Any token holder who knows a threadId may post a made-up history; the thread's prompts are real values."""
    factories.configure_policy(redact_patterns=["password"])
    thread = executions.create_thread(demo_profile(), thread_id="agui_secret")
    held = [ModelRequest(parts=[UserPromptPart("deploy with password=hunter2")]), ModelResponse(parts=[TextPart("ok")])]
    state = checkpoints.load(thread.selected_checkpoint).with_changes(message_history=held)
    thread.selected_checkpoint = checkpoints.create(thread, state, kind=CheckpointKind.FORK)
    thread.save(update_fields=["selected_checkpoint"])

    body = json.dumps(run_input("agui_secret", "r1", "made up", "also made up", "now run this"))
    response = Client().post("/agui/demo/", body, "application/json", headers=bearer(factories.token_for(viewer)))

    assert response.status_code == 409
    refusal = json.loads(response.content)
    assert refusal["error"] == "history_mismatch"
    assert refusal["details"] == [{"threadCount": 1, "sentCount": 2, "firstDifference": 0}]
    assert "hunter2" not in response.content.decode() and "deploy with" not in response.content.decode()
    assert not thread.executions.exists()


def test_a_history_check_cannot_confirm_a_guessed_secret(viewer):
    """Histories are compared masked: a wrong guess of a masked value is answered as the right one would be."""
    factories.configure_policy(redact_patterns=["password"])
    token = factories.token_for(viewer)

    def post(history: str) -> tuple[int, str | None]:
        thread = executions.create_thread(demo_profile())
        held: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("deploy with password=hunter2")]),
            ModelResponse(parts=[TextPart("ok")]),
        ]
        assert thread.selected_checkpoint is not None
        state = checkpoints.load(thread.selected_checkpoint).with_changes(message_history=held)
        thread.selected_checkpoint = checkpoints.create(thread, state, kind=CheckpointKind.FORK)
        thread.save(update_fields=["selected_checkpoint"])
        body = json.dumps(run_input(thread.thread_id, "r1", history, "now run this"))
        response = Client().post("/agui/demo/", body, "application/json", headers=bearer(token))
        return response.status_code, (
            json.loads(response.content).get("error") if response.status_code >= 400 else None
        )

    assert post("deploy with password=wrong-guess") == post("deploy with password=hunter2") == (200, None)
    assert post("deploy without it") == (409, "history_mismatch")


@pytest.mark.parametrize("cursor", ["abc", "-1", str(HUGE), "1\x00"])
def test_the_agui_event_stream_refuses_a_hostile_cursor(client_in, cursor):
    execution = factories.make_execution()
    response = client_in.get(f"/agui/executions/{execution.pk}/events", headers={"Last-Event-ID": cursor})
    assert response.status_code == 400
    assert client_in.get(f"/agui/executions/{HUGE}/events").status_code == 404


# --- login and admin ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("username", ["op\x00", MEGABYTE, "\x1b[2J"])
def test_the_login_form_refuses_hostile_usernames_without_failing(client, viewer, username):
    response = client.post(reverse("login"), {"username": username, "password": "pw-hostile-1"})
    assert response.status_code in (200, 403, 429)
    assert "_auth_user_id" not in client.session


@pytest.fixture
def admin_client_in(django_user_model) -> Client:
    admin = django_user_model.objects.create_superuser("root", password="pw-root-1")
    client = Client()
    client.force_login(admin)
    return client


ADMIN_PROFILE_POSTS = {
    "nul name": {"name": "a\x00"},
    "nul model": {"model": "demo\x00"},
    "nul instructions": {"instructions": "be\x00good"},
    "one megabyte model": {"model": MEGABYTE},
    "nul tool": {"enabled_tools": "\x00"},
    "unknown tool": {"enabled_tools": "rm_rf"},
    "nul base url": {"base_url": "http://x\x00/"},
}


PROFILE_POST = {"name": "p1", "model": "demo", "instructions": "", "base_url": ""}


def test_the_profile_admin_accepts_the_unchanged_post(admin_client_in):
    response = admin_client_in.post(reverse("admin:runs_agentprofile_add"), PROFILE_POST)
    assert response.status_code == 302, response.content[-2000:]
    assert AgentProfile.objects.filter(name="p1").exists()


@pytest.mark.parametrize("changes", ADMIN_PROFILE_POSTS.values(), ids=ADMIN_PROFILE_POSTS.keys())
def test_the_profile_admin_refuses_hostile_fields(admin_client_in, changes):
    post = {**PROFILE_POST, **changes}
    response = admin_client_in.post(reverse("admin:runs_agentprofile_add"), post)
    assert response.status_code == 200
    assert b"errornote" in response.content or b"errorlist" in response.content
    assert not AgentProfile.objects.exists()


ADMIN_POLICY_POSTS = {
    "nul name": {"name": "p\x00"},
    "nul in a rule": {"approval_rules": '[{"tool": "\\u0000"}]'},
    "nested rules": {"approval_rules": "[" * 5000 + "]" * 5000},
    "nul redaction pattern": {"redact_patterns": '["\\u0000"]'},
    "nul in a budget": {
        "budgets": '[{"scope": "user", "name": "\\u0000", "window": "day", "unit": "tokens", "limit": 9}]'
    },
    "budget beyond a double": {
        "budgets": '[{"scope": "user", "name": "*", "window": "day", "unit": "money", "limit": 1e999}]'
    },
    "nested budgets": {"budgets": "[" * 5000 + "]" * 5000},
    "nul comment": {"comment": "why\x00"},
    "attempts beyond 64 bits": {"max_attempts": str(HUGE)},
    "unknown recovery mode": {"tool_recovery": "sometimes"},
}


def policy_post(**changes: str) -> dict[str, str]:
    return {
        "name": "p1",
        "approval_rules": "[]",
        "tool_recovery": "declared",
        "max_attempts": "3",
        "lease_seconds": "30",
        "approval_timeout_seconds": "0",
        "model_max_retries": "1",
        "redact_patterns": "[]",
        "budgets": "[]",
        "comment": "",
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
        **changes,
    }


def test_the_policy_admin_accepts_the_unchanged_post(admin_client_in):
    response = admin_client_in.post(reverse("admin:runs_hostpolicy_add"), policy_post())
    assert response.status_code == 302, response.content[-2000:]
    assert HostPolicy.objects.filter(name="p1").exists()


@pytest.mark.parametrize("changes", ADMIN_POLICY_POSTS.values(), ids=ADMIN_POLICY_POSTS.keys())
def test_the_policy_admin_refuses_hostile_fields(admin_client_in, changes):
    response = admin_client_in.post(reverse("admin:runs_hostpolicy_add"), policy_post(**changes))
    assert response.status_code == 200
    assert b"errorlist" in response.content or b"errornote" in response.content
    assert not HostPolicy.objects.filter(name="p1").exists()
