"""The demo is a plug-in: settings name the tool sets and the "demo" model, and the real worker runs with them."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from runs.models import ExecutionStatus, RunStatus, ToolDispatch
from runs.services.lifecycle import executions
from runs.services.store import toolbox
from tests.support import factories
from tests.support.services import RedisServer, RQWorker, running, service_env, wait_until

PLUGIN = {
    "HARNESS_TOOLSETS": "tests.support.plugin_tools.toolset",
    "HARNESS_DEMO_MODEL": "tests.support.plugin_tools.model",
}


@pytest.fixture
def plugin_queue(settings):
    """A redis-server of its own, so only the plug-in worker below can take this test's job."""
    server = RedisServer().start()
    settings.REDIS_URL = server.url
    settings.RQ_QUEUES = {"default": {"URL": server.url, "DEFAULT_TIMEOUT": 600}}
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.django_db(transaction=True)
def test_a_second_tool_module_named_by_settings_replaces_the_demo_on_the_real_worker(settings, plugin_queue):
    settings.HARNESS_TOOLSETS = [PLUGIN["HARNESS_TOOLSETS"]]
    settings.HARNESS_DEMO_MODEL = PLUGIN["HARNESS_DEMO_MODEL"]
    assert toolbox.tool_names() == ["count_words"]

    env = service_env(redis_url=plugin_queue.url, database_name=settings.DATABASES["default"]["NAME"]) | PLUGIN
    with running(RQWorker(env)):
        execution = executions.start_execution(factories.thread(model="demo", tools=["count_words"]), "count")

        def settled() -> bool:
            execution.refresh_from_db()
            return execution.status not in (ExecutionStatus.QUEUED, ExecutionStatus.RUNNING)

        wait_until(settled, timeout=60, what="the plug-in's execution settled on the worker")

    run = execution.runs.get()
    assert (execution.status, run.status) == (ExecutionStatus.COMPLETED, RunStatus.COMPLETED)
    assert run.output == "The text has 4 words."
    assert list(ToolDispatch.objects.filter(run=run).values_list("tool_name", flat=True)) == ["count_words"]


def test_the_demo_is_the_default_plug_in():
    assert "deploy_release" in toolbox.tool_names() and "count_words" not in toolbox.tool_names()


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("HARNESS_TOOLSETS", ["tests.no_such_module.toolset"], "cannot be imported"),
        ("HARNESS_TOOLSETS", ["runs.harness.demo.demo_tools"], "not a pydantic-ai FunctionToolset"),
        ("HARNESS_TOOLSETS", ["tests.support.plugin_tools.toolset"] * 2, "offer a tool named 'count_words'"),
        ("HARNESS_DEMO_MODEL", "tests.support.plugin_tools.no_model", "cannot be imported"),
    ],
)
def test_the_system_check_refuses_a_plug_in_that_cannot_serve(settings, name, value, problem):
    setattr(settings, name, value)
    with pytest.raises(SystemCheckError, match=problem):
        call_command("check")
