"""Redis dies while operators start work from the UI, and comes back, empty, on the same port (issue 20).

Real processes throughout: redis-server, daphne, two RQ workers and the sweeper; the forms are posted over
HTTP through daphne with a logged-in session and CSRF, each of them twice, as an operator who got no answer
would. Nothing may answer 500, nothing may be created twice, every execution must complete once Redis is
back, and the workers must be the same processes as before the outage.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission

from runs.demo_profile import ensure_demo_profile
from runs.models import (
    DecisionSubmission,
    Execution,
    ExecutionStatus,
    StartSubmission,
    Thread,
)
from runs.services.lifecycle import executions
from tests.support.http_session import HIDDEN_FIELD, HttpSession
from tests.support.outage_stack import Outage, use_short_leases
from tests.support.services import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

NOTICE = "The queue (Redis) cannot be reached right now"
BANNER = 'id="queue-banner"'
WAITING = 'id="queue-wait"'
USER, PASSWORD = "outage-operator", "pw-outage-1"


@pytest.fixture
def outage(settings, django_user_model):
    user = django_user_model.objects.create_user(USER, password=PASSWORD)
    user.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    use_short_leases()
    running = Outage(settings, workers=2)
    try:
        yield running.start()
    finally:
        running.stop()


def post_twice(session: HttpSession, action: str, fields: dict[str, object]) -> tuple:
    return session.post(action, fields), session.post(action, fields)


def approval_fields(session: HttpSession, execution_pk: int) -> dict[str, str]:
    html = session.get(f"/executions/{execution_pk}/").body
    form = re.search(r'<form id="approval-form".*?</form>', html, re.S)
    assert form, "the approval form is shown"
    fields = dict(HIDDEN_FIELD.findall(form.group(0)))
    rows = [name.split("-")[1] for name in fields if re.fullmatch(r"decision-\d+-id", name)]
    return {**fields, **{f"decision-{row}-choice": "approve" for row in rows}}


def status_of(pk: int) -> str:
    return Execution.objects.get(pk=pk).status


def test_work_started_from_the_ui_during_a_redis_outage_completes_once_with_the_same_workers(outage):
    session = HttpSession(outage.daphne.base_url)
    session.log_in(USER, PASSWORD)
    profile = ensure_demo_profile()

    def new_thread(title: str, text: str) -> dict[str, object]:
        fields = session.form("/", "/threads/new/")
        return {**fields, "profile": profile.pk, "title": title, "input": text}

    # Before the outage: one execution waits for an approval, one is busy in a slow tool when Redis dies.
    deploy = session.post("/threads/new/", new_thread("Deploy", "Deploy release 1.4.2 to production."))
    deploy_pk = int(deploy.location.rstrip("/").rsplit("/", 1)[1])
    wait_until(lambda: status_of(deploy_pk) == ExecutionStatus.WAITING, timeout=90, what="the deploy to wait")
    slow = session.post("/threads/new/", new_thread("Slow", "Do the slow 4 second step."))
    slow_pk = int(slow.location.rstrip("/").rsplit("/", 1)[1])
    wait_until(lambda: status_of(slow_pk) == ExecutionStatus.RUNNING, timeout=90, what="the slow run to start")
    idle = executions.create_thread(profile, title="Idle")
    wait_until(lambda: len(outage.registered_worker_pids()) == 2, timeout=30, what="both workers registered")
    worker_pids = {worker.process.pid for worker in outage.workers}
    assert outage.registered_worker_pids() == worker_pids

    outage.redis.kill()
    fields = new_thread("During outage", "Look up REC-77.")
    first = session.post("/threads/new/", fields)
    page = session.get(first.location).body
    assert NOTICE in page and BANNER in page and WAITING in page
    answers = {
        "new thread": (first, session.post("/threads/new/", fields)),
        "new execution": post_twice(
            session,
            f"/threads/{idle.pk}/executions/",
            {**session.form(f"/threads/{idle.pk}/", f"/threads/{idle.pk}/executions/"), "input": "Look up REC-78."},
        ),
        "fork": post_twice(
            session,
            f"/checkpoints/{idle.selected_checkpoint_id}/fork/",
            {
                **session.form(f"/threads/{idle.pk}/", f"/checkpoints/{idle.selected_checkpoint_id}/fork/"),
                "title": "Fork during outage",
            },
        ),
        "approval": post_twice(session, f"/executions/{deploy_pk}/approvals/", approval_fields(session, deploy_pk)),
    }
    statuses = {form: [answer.status for answer in pair] for form, pair in answers.items()}
    assert all(status < 500 for pair in statuses.values() for status in pair), statuses
    for form in ("new thread", "new execution", "fork"):
        first, repeat = answers[form]
        assert first.status == repeat.status == 302 and first.location == repeat.location, (form, statuses)
    assert answers["approval"][0].status == 302 and answers["approval"][1].status == 409, statuses
    # The busy run does not need Redis to finish its work.
    wait_until(lambda: status_of(slow_pk) == ExecutionStatus.COMPLETED, timeout=90, what="the slow run to finish")
    assert all(process.running for process in outage.processes), outage.logs()

    outage.redis.start()
    started = Execution.objects.exclude(pk=slow_pk)
    assert started.count() == 3

    def all_completed() -> bool:
        return set(Execution.objects.values_list("status", flat=True)) == {ExecutionStatus.COMPLETED}

    try:
        wait_until(all_completed, timeout=180, what="every execution to complete", interval=0.5)
        wait_until(
            lambda: outage.registered_worker_pids() == worker_pids, timeout=60, what="the workers to register again"
        )
    except TimeoutError:
        print(list(Execution.objects.values_list("pk", "status")), outage.logs())
        raise

    assert {worker.process.pid for worker in outage.workers} == worker_pids
    assert all(process.running for process in outage.processes), outage.logs()
    titles = list(Thread.objects.values_list("title", flat=True))
    assert sorted(titles) == sorted(["Deploy", "Slow", "Idle", "During outage", "Fork during outage"])
    assert Execution.objects.filter(thread=idle).count() == 1
    assert StartSubmission.objects.count() == 5 and DecisionSubmission.objects.count() == 1
    assert Execution.objects.get(pk=deploy_pk).runs.count() == 2
