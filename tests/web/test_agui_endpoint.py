"""The AG-UI endpoint over the live daphne, with httpx streaming: runs, interrupts, resumes, auth, bad input."""

from __future__ import annotations

import httpx
import pytest

from agui_api.models import ApiToken, token_digest
from runs.models import Decision, DeferredRequest, Execution, Thread, TimelineEvent
from tests.support.agui_http import PROFILE, TIMEOUT, bearer, parse, post_run, run_input
from tests.support.factories import demo_profile, token_for

pytestmark = pytest.mark.usefixtures("live_stack")


@pytest.fixture
def client(live_stack):
    with httpx.Client(base_url=live_stack.base_url, timeout=TIMEOUT) as http:
        yield http


@pytest.fixture
def token(operator_user) -> str:
    demo_profile()
    return token_for(operator_user)


def stored(execution: Execution, after: int = 0) -> list[dict]:
    rows = TimelineEvent.objects.filter(execution=execution, position__gt=after).order_by("position")
    return [{"position": row.position, "event": row.event} for row in rows]


def test_a_run_an_interrupt_its_resume_and_a_question(client, token, agui_client):
    headers = bearer(token)
    lookup = post_run(client, run_input("agui_thread1", "r1", "look up REC-42"), **headers)
    thread = Thread.objects.get(thread_id="agui_thread1")
    first = thread.executions.get()
    assert first.status == "completed" and first.created_by.username == "op"
    # The stream is the stored timeline of the new execution: same events, ids and order.
    assert [(e.position, e.event) for e in lookup] == [(row["position"], row["event"]) for row in stored(first)]
    assert lookup[0].event["type"] == "RUN_STARTED" and lookup[-1].event["outcome"] == {"type": "success"}
    assert any("REC-42" in str(e.event.get("content", "")) for e in lookup if e.event["type"] == "TOOL_CALL_RESULT")

    history = ["look up REC-42"]
    deploy = post_run(client, run_input("agui_thread1", "r2", *history, "deploy the release"), **headers)
    finished = deploy[-1].event
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    (interrupt,) = finished["outcome"]["interrupts"]
    request = DeferredRequest.objects.get(execution__thread=thread, status="pending")
    assert interrupt["id"] == request.tool_call_id and interrupt["reason"] == "approval"
    assert interrupt["message"] and interrupt["responseSchema"]["required"] == ["approved"]
    starts = {e.event["toolCallId"] for e in deploy if e.event["type"] == "TOOL_CALL_START"}
    assert interrupt["toolCallId"] in starts

    history.append("deploy the release")
    approve = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]
    resumed = post_run(client, run_input("agui_thread1", "r3", *history, resume=approve), **headers)
    assert resumed[0].event["type"] == "RUN_STARTED" and resumed[-1].event["outcome"] == {"type": "success"}
    decision = Decision.objects.get(request=request)
    assert (decision.verdict, decision.decided_by.username) == ("approved", "op")
    second = request.execution
    second.refresh_from_db()
    assert second.status == "completed"
    assert [e.position for e in resumed] == [row["position"] for row in stored(second, deploy[-1].position)][
        -len(resumed) :
    ]

    question = post_run(client, run_input("agui_thread1", "r4", *history, "ask the operator"), **headers)
    (asked,) = question[-1].event["outcome"]["interrupts"]
    assert asked["reason"] == "question" and asked["responseSchema"]["required"] == ["answer"]
    history.append("ask the operator")
    answer = [{"interruptId": asked["id"], "status": "resolved", "payload": {"answer": "production"}}]
    answered = post_run(client, run_input("agui_thread1", "r5", *history, resume=answer), **headers)
    assert answered[-1].event["outcome"] == {"type": "success"}
    assert Decision.objects.get(request__tool_call_id=asked["id"]).result == "production"

    agui_client.assert_verified(
        {
            name: [e.event for e in events]
            for name, events in {
                "lookup": lookup,
                "deploy": deploy,
                "resumed": resumed,
                "question": question,
                "answered": answered,
            }.items()
        }
    )


def test_cancelled_resume_entries_deny_the_call(client, token):
    headers = bearer(token)
    post_run(client, run_input("agui_thread2", "r1", "deploy the release"), **headers)
    request = DeferredRequest.objects.get(execution__thread__thread_id="agui_thread2")
    cancel = [{"interruptId": request.tool_call_id, "status": "cancelled"}]
    bad_edit = [
        {
            "interruptId": request.tool_call_id,
            "status": "resolved",
            "payload": {"approved": True, "editedArgs": {"version": ["1"]}},
        }
    ]
    refused = client.post(
        f"/agui/{PROFILE}/",
        json=run_input("agui_thread2", "r2", "deploy the release", resume=bad_edit),
        headers=headers,
    )
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_args"
    assert not Decision.objects.exists()
    body = run_input("agui_thread2", "r3", "deploy the release", resume=cancel)
    resumed = post_run(client, body, **headers)
    assert resumed[-1].event["type"] == "RUN_FINISHED"
    assert Decision.objects.get(request=request).verdict == "denied"
    # The same answer again (a retry, or a stale client) changes nothing.
    again = client.post(f"/agui/{PROFILE}/", json=body, headers=headers)
    assert again.status_code == 409 and Decision.objects.count() == 1


def test_the_events_endpoint_replays_then_follows_and_resumes_from_last_event_id(client, token):
    headers = bearer(token)
    everything = post_run(client, run_input("agui_thread3", "r1", "look up REC-7, then a slow 1 step"), **headers)
    execution = Execution.objects.get(thread__thread_id="agui_thread3")
    url = f"/agui/executions/{execution.pk}/events"
    with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        replay = list(parse(response.iter_lines()))
    assert [e.position for e in replay] == [e.position for e in everything]
    cut = everything[len(everything) // 2].position
    with client.stream("GET", url, headers={**headers, "Last-Event-ID": str(cut)}) as response:
        rest = list(parse(response.iter_lines()))
    assert [e.position for e in rest] == [e.position for e in everything if e.position > cut]
    assert client.get(url, headers={**headers, "Last-Event-ID": "99999"}).status_code == 400
    assert client.get(url, headers={**headers, "Last-Event-ID": "x"}).status_code == 400
    assert client.get("/agui/executions/999999/events", headers=headers).status_code == 404


def test_without_a_valid_token_the_endpoint_answers_401(client, operator_user):
    demo_profile()
    body = run_input("agui_thread4", "r1", "hello")
    assert client.post(f"/agui/{PROFILE}/", json=body).status_code == 401
    assert client.post(f"/agui/{PROFILE}/", json=body, headers=bearer("hh_not-a-token")).status_code == 401
    secret = token_for(operator_user)
    ApiToken.objects.get().revoke()
    refused = client.post(f"/agui/{PROFILE}/", json=body, headers=bearer(secret))
    assert refused.status_code == 401 and refused.json()["error"] == "unauthenticated"
    assert client.get("/agui/executions/1/events").status_code == 401
    assert not Thread.objects.filter(thread_id="agui_thread4").exists()
    kept = ApiToken.objects.get()
    assert kept.digest == token_digest(secret) and secret not in (kept.digest, kept.hint, kept.name)


def test_a_resume_without_the_decide_permission_is_403_and_changes_nothing(client, token, django_user_model):
    post_run(client, run_input("agui_thread5", "r1", "deploy the release"), **bearer(token))
    viewer = django_user_model.objects.create_user("viewer", password="viewer-password-1")
    request = DeferredRequest.objects.get(execution__thread__thread_id="agui_thread5")
    approve = [{"interruptId": request.tool_call_id, "status": "resolved", "payload": {"approved": True}}]
    body = run_input("agui_thread5", "r2", "deploy the release", resume=approve)
    refused = client.post(f"/agui/{PROFILE}/", json=body, headers=bearer(token_for(viewer)))
    assert refused.status_code == 403
    request.refresh_from_db()
    assert request.status == "pending" and not Decision.objects.exists()
    assert request.execution.runs.count() == 1
    busy = client.post(
        f"/agui/{PROFILE}/", json=run_input("agui_thread5", "r3", "deploy the release", "hello"), headers=bearer(token)
    )
    assert busy.status_code == 409 and busy.json()["error"] == "thread_busy"


def test_bad_input_is_refused_with_a_clear_error(client, token):
    headers = bearer(token)
    malformed = client.post(f"/agui/{PROFILE}/", json={"threadId": 7, "messages": "no"}, headers=headers)
    assert malformed.status_code == 400 and malformed.json()["error"] == "invalid_input"
    assert {tuple(error["loc"]) for error in malformed.json()["details"]} >= {("threadId",), ("runId",)}
    oversized = client.post(f"/agui/{PROFILE}/", json=run_input("agui_thread6", "r1", "x" * 1_100_000), headers=headers)
    assert oversized.status_code == 413
    unknown = client.post("/agui/no-such-profile/", json=run_input("t", "r1", "hello"), headers=headers)
    assert unknown.status_code == 404

    post_run(client, run_input("agui_thread7", "r1", "hello there"), **headers)
    forged = client.post(
        f"/agui/{PROFILE}/", json=run_input("agui_thread7", "r2", "something else", "hello again"), headers=headers
    )
    assert forged.status_code == 409 and forged.json()["error"] == "history_mismatch"
    assert "it holds 1 user message before this one, the request sent 1 that differs." in forged.json()["message"]
    assert Execution.objects.filter(thread__thread_id="agui_thread7").count() == 1
    wrong_answer = [{"interruptId": "nope", "status": "resolved", "payload": {"approved": True}}]
    nothing = client.post(
        f"/agui/{PROFILE}/", json=run_input("agui_thread7", "r3", "hello there", resume=wrong_answer), headers=headers
    )
    assert nothing.status_code == 409 and nothing.json()["error"] == "nothing_to_resume"


def test_a_session_needs_the_csrf_token(client, operator_user):
    demo_profile()
    client.get("/login/")
    login = {"username": "op", "password": "op-password-1", "csrfmiddlewaretoken": client.cookies["csrftoken"]}
    assert client.post("/login/", data=login).status_code == 302 and client.cookies.get("sessionid")
    body = run_input("agui_thread8", "r1", "hello there")
    assert client.post(f"/agui/{PROFILE}/", json=body).status_code == 403
    events = post_run(client, body, **{"X-CSRFToken": client.cookies["csrftoken"], "Referer": str(client.base_url)})
    assert events[-1].event["type"] == "RUN_FINISHED"


def test_a_childs_interrupt_is_the_hosts_and_a_resume_answers_only_the_others(client, token):
    headers = bearer(token)
    prompt = "deploy release 3.0 and a child: deploy release 4.0"
    suspended = post_run(client, run_input("agui_thread8", "r1", prompt), **headers)
    approval, child = suspended[-1].event["outcome"]["interrupts"]
    assert (approval["reason"], child["reason"]) == ("approval", "child")
    assert approval["responseSchema"]["required"] == ["approved"]
    # A child's interrupt is answered by the Host when the child ends: it offers no answer schema.
    assert "responseSchema" not in child and child["message"] == "Waiting for a child execution the Host runs."

    approve = {"interruptId": approval["id"], "status": "resolved", "payload": {"approved": True}}
    answer_child = {"interruptId": child["id"], "status": "resolved", "payload": {"result": "done"}}
    refused = client.post(
        f"/agui/{PROFILE}/",
        json=run_input("agui_thread8", "r2", prompt, resume=[approve, answer_child]),
        headers=headers,
    )
    assert refused.status_code == 409 and refused.json()["error"] == "unknown_call"
    assert not Decision.objects.exists()

    post_run(client, run_input("agui_thread8", "r3", prompt, resume=[approve]), **headers)
    parent = Execution.objects.get(thread__thread_id="agui_thread8")
    assert Decision.objects.get(request__execution=parent).request.tool_name == "deploy_release"
    # The set is not whole yet: the parent waits for its child.
    assert parent.status == "waiting" and parent.runs.count() == 1
