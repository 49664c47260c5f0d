"""The official `@ag-ui/client` HttpAgent (node) against the live daphne: run, interrupt, resume, question, and
refusals (a denied approval, a cancelled question) that still answer their calls."""

from __future__ import annotations

import json
import subprocess

import pytest

from runs.models import Decision, Execution
from tests.support.agui_js.client import HERE
from tests.support.factories import demo_profile, token_for

pytestmark = pytest.mark.usefixtures("live_stack")


def test_http_agent_runs_is_interrupted_resumes_and_answers_a_question(live_stack, operator_user, agui_client):
    demo_profile()
    token = token_for(operator_user)
    done = subprocess.run(
        [agui_client.node, str(HERE / "http_agent_flow.mjs"), live_stack.base_url, token, "httpagent_1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    summary = json.loads(done.stdout)
    outcomes = [(run["label"], run["outcome"]) for run in summary["runs"]]
    assert outcomes == [
        ("lookup", "success"),
        ("deploy", "interrupt"),
        ("deploy approved", "success"),
        ("question", "interrupt"),
        ("question answered", "success"),
    ]
    assert all(run["types"][0] == "RUN_STARTED" for run in summary["runs"])

    executions = list(Execution.objects.filter(thread__thread_id="httpagent_1").order_by("number"))
    assert [(e.input, e.status) for e in executions] == [
        ("look up REC-42", "completed"),
        ("deploy the release", "completed"),
        ("ask the operator which environment", "completed"),
    ]
    approval = Decision.objects.get(request__tool_call_id=summary["approval"]["id"])
    assert (approval.verdict, approval.decided_by, approval.request.tool_name) == (
        "approved",
        operator_user,
        "deploy_release",
    )
    answer = Decision.objects.get(request__tool_call_id=summary["question"]["id"])
    assert (answer.verdict, answer.result) == ("answered", "production")


def test_http_agent_gets_a_result_for_a_denied_and_a_cancelled_call(live_stack, operator_user, agui_client):
    demo_profile()
    done = subprocess.run(
        [
            agui_client.node,
            str(HERE / "http_agent_refusals.mjs"),
            live_stack.base_url,
            token_for(operator_user),
            "httpagent_2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    refused = json.loads(done.stdout)["refused"]
    assert [(call["reason"], call["content"]) for call in refused] == [
        ("approval", "Not today."),
        ("question", "Cancelled by the client."),
    ]
    verdicts = Decision.objects.filter(request__tool_call_id__in=[call["toolCallId"] for call in refused])
    assert sorted(verdicts.values_list("request__tool_name", "verdict")) == [
        ("ask_operator", "denied"),
        ("deploy_release", "denied"),
    ]
