"""The official `@ag-ui/client` HttpAgent (node) against the live daphne: run, interrupt, resume, question."""

from __future__ import annotations

import json
import subprocess

import pytest

from runs.models import Decision, Execution
from tests.agui_js.client import HERE, require_client
from tests.factories import demo_profile, token_for

pytestmark = pytest.mark.usefixtures("live_stack")


def test_http_agent_runs_is_interrupted_resumes_and_answers_a_question(live_stack, operator_user):
    node = require_client()
    demo_profile()
    token = token_for(operator_user)
    done = subprocess.run(
        [node, str(HERE / "http_agent_flow.mjs"), live_stack.base_url, token, "httpagent_1"],
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
