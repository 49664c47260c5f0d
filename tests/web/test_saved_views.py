"""Saved views of the executions list: named per user, shown in the nav, replaced by name, refused when bad."""

from __future__ import annotations

import re

import pytest

from runs.models import SavedView
from runs.services.store import saved_views
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_in(client, operator_user):
    client.force_login(operator_user)
    return client


def test_a_saved_view_is_in_the_nav_of_every_page_and_opens_its_filters(client_in):
    failed = factories.make_execution(status="failed")
    factories.make_execution(status="completed")

    response = client_in.post("/executions/views/", {"name": "Failures", "query": "status=failed&after=1-1"})
    assert response.status_code == 302
    # The position in the list is not part of a view.
    assert response["Location"] == "/executions/?status=failed"
    nav = client_in.get("/approvals/").content.decode()
    link = re.search(r'<a href="(/executions/\?[^"]*)" data-saved-view="Failures">Failures</a>', nav)
    assert link is not None
    listed = client_in.get(link[1].replace("&amp;", "&")).content.decode()
    assert re.findall(r'data-execution="(\d+)"', listed) == [str(failed.pk)]

    # The same name again replaces the view.
    client_in.post("/executions/views/", {"name": "Failures", "query": "status=failed&q=deploy"})
    assert list(SavedView.objects.values_list("name", "query")) == [("Failures", "status=failed&q=deploy")]


def test_views_are_their_owners_alone(client, operator_user, django_user_model):
    other = django_user_model.objects.create_user("other", password="pw-other-1")
    mine = saved_views.save_view(operator_user, "Mine", "status=waiting")
    client.force_login(other)
    assert "data-saved-view" not in client.get("/executions/").content.decode()
    assert client.post(f"/executions/views/{mine.pk}/delete/").status_code == 404
    assert SavedView.objects.filter(pk=mine.pk).exists()

    client.force_login(operator_user)
    assert client.post(f"/executions/views/{mine.pk}/delete/").status_code == 302
    assert not SavedView.objects.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "", "query": "status=failed"}, "This field is required"),
        ({"name": "   ", "query": "status=failed"}, "This field is required"),
        ({"name": "x" * 61, "query": ""}, "at most 60 characters"),
        ({"name": "Odd", "query": "status=sleeping"}, "These filters are refused"),
        ({"name": "Odd", "query": "colour=blue"}, "Not a filter of the executions list: colour"),
        ({"name": "Odd", "query": "q=" + "x" * 10_000}, "at most 2000 characters"),
    ],
)
def test_bad_views_are_refused_and_nothing_is_saved(client_in, data, message):
    response = client_in.post("/executions/views/", data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not SavedView.objects.exists()


def test_the_number_of_views_is_capped_with_a_message(client_in, operator_user, monkeypatch):
    monkeypatch.setattr(saved_views, "MAX_SAVED_VIEWS", 2)
    saved_views.save_view(operator_user, "one", "")
    saved_views.save_view(operator_user, "two", "status=failed")
    response = client_in.post("/executions/views/", {"name": "three", "query": ""}, follow=True)
    assert "the most there can be; delete one first" in response.content.decode()
    assert SavedView.objects.count() == 2
    # Replacing one by name is still allowed.
    client_in.post("/executions/views/", {"name": "two", "query": "status=waiting"})
    assert SavedView.objects.get(name="two").query == "status=waiting"
