"""Usage and cost: prices per model from a date on, the cost of runs summed per execution, thread, profile, user
and day, and the team-scoped /usage/ page with its chart; an unknown price shows as unknown, never as 0."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.models import AgentProfile, ModelPrice, Run, Team, TeamRole
from runs.services.lifecycle import executions
from runs.services.reports import costs, usage_report
from tests.support import factories

pytestmark = pytest.mark.django_db

MODEL = "openai:gpt-test"
USAGE = {"requests": 2, "input_tokens": 1_000_000, "output_tokens": 500_000, "cache_read_tokens": 200_000}


def price(model: str = MODEL, *, days_ago: int = 30, **values: str) -> ModelPrice:
    fields = {"input": "2", "output": "8", "cache_read": "0.5", "cache_write": "3"} | values
    return ModelPrice.objects.create(
        model=model, valid_from=timezone.now() - timedelta(days=days_ago), **{k: Decimal(v) for k, v in fields.items()}
    )


def run_of(execution, *, model: str = MODEL, usage: dict | None = USAGE, status: str = "completed", **fields) -> Run:
    return factories.make_run(
        execution, status=status, usage=usage, profile_snapshot={"name": "writer", "model": model}, **fields
    )


def test_a_run_costs_its_uncached_input_output_and_cache_reads_at_its_model_s_price():
    price()
    run = run_of(factories.make_execution(status="completed"))
    usage = costs.usage_of(Run.objects.filter(pk=run.pk))
    # 800k uncached input at 2, 500k output at 8, 200k cache reads at 0.5, per million.
    assert usage.cost == Decimal("5.7")
    assert str(usage) == "5.7000"


def test_a_run_is_priced_at_the_price_valid_when_it_ran():
    price(days_ago=30, input="1", output="1", cache_read="1")
    price(days_ago=1, input="100", output="100", cache_read="100")
    execution = factories.make_execution(status="completed")
    old = run_of(execution)
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=10))
    assert costs.usage_of(Run.objects.filter(pk=old.pk)).cost == Decimal("1.5")


def test_without_a_price_the_cost_is_unknown_never_zero(client, django_user_model):
    price(model="some-other-model")
    execution = factories.make_execution(status="completed")
    run_of(execution)
    run_of(execution, model="demo", usage={"requests": 0})
    usage = costs.usage_of(execution.runs.all())
    assert usage.cost is None and usage.unknown_runs == 1
    assert str(usage) == "unknown (1 run without a price)"

    client.force_login(django_user_model.objects.create_user("reader"))
    page = client.get(reverse("runs:execution", args=[execution.pk])).content.decode()
    assert "unknown (1 run without a price)" in page
    assert ">0.0000<" not in page


def test_a_run_that_died_before_its_usage_was_recorded_counts_as_unknown():
    price()
    execution = factories.make_execution(status="completed")
    run_of(execution, usage=None, status="abandoned")
    run_of(execution)
    usage = costs.usage_of(execution.runs.all())
    assert (usage.known_cost, usage.unknown_runs) == (Decimal("5.7"), 1)
    assert str(usage) == "5.7000 + unknown (1 run)"


def test_the_thread_and_run_pages_show_their_cost(client, django_user_model):
    price()
    execution = factories.make_execution(status="completed")
    run = run_of(execution)
    run_of(factories.make_execution(execution.thread, status="completed"))
    client.force_login(django_user_model.objects.create_user("reader"))
    assert "11.4000" in client.get(reverse("runs:thread", args=[execution.thread_id])).content.decode()
    assert "5.7000" in client.get(reverse("runs:run", args=[run.pk])).content.decode()


def test_the_usage_page_sums_the_user_s_teams_by_day_profile_user_and_model(client, django_user_model):
    price()
    starter = django_user_model.objects.create_user("starter")
    mine = factories.make_execution(status="completed")
    mine.created_by = starter
    mine.save()
    run_of(mine)
    run_of(mine, usage=USAGE | {"input_tokens": 2_000_000})
    other_team = Team.objects.create(name="team-b")
    theirs = executions.create_thread(AgentProfile.objects.create(name="b-profile", model=MODEL, team=other_team))
    run_of(factories.make_execution(theirs, status="completed"), usage=USAGE | {"output_tokens": 9_000_000})

    client.force_login(starter)
    response = client.get(reverse("runs:usage"), {"days": 7})

    assert response.status_code == 200
    report = response.context["report"]
    assert report.total.cost == Decimal("13.4")
    assert report.total.output_tokens == 1_000_000, "another team's runs are not counted"
    assert [name for name, _ in report.by_user] == ["starter"]
    assert [name for name, _ in report.by_profile] == ["writer"]
    assert report.by_model[0][0] == MODEL
    assert len(report.by_day) == 7 and report.by_day[-1][1].cost == Decimal("13.4")
    page = response.content.decode()
    assert '<svg id="usage-chart"' in page and page.count('<rect class="bar') == 7
    assert "13.4000" in page


def test_the_chart_marks_a_day_with_an_unknown_cost(django_user_model):
    price()
    execution = factories.make_execution(status="completed")
    run_of(execution)
    run_of(execution, model="unpriced")
    user = factories.member(django_user_model, "m", Team.objects.get(name="default"), TeamRole.VIEWER)
    report = usage_report(user, 3)
    assert [bar.partial for bar in report.bars] == [False, False, True]
    assert report.bars[-1].height > 0 and report.measure == "cost"


@pytest.mark.parametrize("days", ["0", "367", "many"])
def test_a_bad_window_is_named_and_the_default_one_is_shown(client, django_user_model, days):
    client.force_login(django_user_model.objects.create_user("reader"))
    response = client.get(reverse("runs:usage"), {"days": days})
    assert response.status_code == 400
    assert response.context["report"].days == 30
    assert "Showing the last 30 days." in response.content.decode()


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("input", "-1", "Ensure this value is greater than or equal to 0."),
        ("output", "5000", "Ensure this value is less than or equal to 1000."),
        ("cache_read", "1e400", "Ensure that there are no more than 12 digits in total."),
        ("cache_write", "NaN", "Enter a number."),
    ],
)
def test_the_price_admin_refuses_negative_and_absurd_prices(admin_client, field, value, error):
    form = {
        "model": MODEL,
        "input": "2",
        "output": "8",
        "cache_read": "0.5",
        "cache_write": "3",
        "valid_from_0": "2026-01-01",
        "valid_from_1": "00:00:00",
        field: value,
    }
    response = admin_client.post(reverse("admin:runs_modelprice_add"), form)
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not ModelPrice.objects.exists()
