"""The policy admin's budget rows: stored as the policy's JSON, shown back as rows, and a bad row refused beside
it with nothing saved."""

from __future__ import annotations

import re

import pytest

from runs.models import HostPolicy, HostPolicyVersion
from runs.services.lifecycle import executions
from tests.support import factories
from tests.support.policy_admin import change_url, policy_form

pytestmark = pytest.mark.django_db

GOOD = {"scope": "profile", "name": "metered", "window": "day", "unit": "tokens", "limit": "5000"}


def default_policy() -> HostPolicy:
    return executions.current_policy_version().policy


def budget_form(*budgets: dict[str, str]) -> dict[str, str]:
    form = policy_form()
    del form["budgets"]
    form["budgets-rows"] = str(len(budgets))
    for index, cells in enumerate(budgets):
        form |= {f"budgets-{index}-{column}": value for column, value in cells.items()}
    return form


def budget_row_errors(page: str) -> dict[int, str]:
    found = {}
    for match in re.finditer(r'<tr class="form-row-item row-invalid" data-row="(\d+)">(.*?)</tr>', page, re.S):
        if f'name="budgets-{match[1]}-' in match[2]:
            found[int(match[1])] = " ".join(re.findall(r"<li>(.*?)</li>", match[2], re.S))
    return found


@pytest.fixture
def metered():
    policy = default_policy()
    return factories.profile(name="metered", model="demo"), policy


def test_budget_rows_are_stored_as_the_policy_json(admin_client, metered, django_user_model):
    _, policy = metered
    django_user_model.objects.create_user("ann")
    blank = dict.fromkeys(GOOD, "")
    each_user = {"scope": "user", "name": "*", "window": "month", "unit": "money", "limit": "12.25"}
    ann = {"scope": "user", "name": "ann", "window": "day", "unit": "money", "limit": "0.5"}

    response = admin_client.post(change_url(policy), budget_form(GOOD, blank, each_user, ann))

    assert response.status_code == 302, response.content.decode()[:3000]
    policy.refresh_from_db()
    assert policy.current_version.budgets == [
        {**GOOD, "limit": 5000},
        {**each_user, "limit": 12.25},
        {**ann, "limit": 0.5},
    ]


def test_the_change_page_shows_each_budget_as_a_row(admin_client, metered):
    factories.configure_policy(budgets=[{**GOOD, "limit": 5000}])

    page = admin_client.get(change_url(default_policy())).content.decode()

    assert 'name="budgets-0-name" value="metered"' in page
    assert 'name="budgets-0-limit" value="5000"' in page
    assert 'name="budgets-1-name" value=""' in page  # one blank row to add to
    assert "Budgets" in page


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ({**GOOD, "name": "nosuch"}, "no profile named"),
        ({**GOOD, "scope": "user", "name": "ghost"}, "no member named"),
        ({**GOOD, "limit": "0"}, "greater than 0"),
        ({**GOOD, "limit": "12.5"}, "whole number"),
        ({**GOOD, "limit": "lots"}, "Invalid budgets"),
        ({**GOOD, "unit": "money", "limit": "1e13"}, "less than or equal"),
        ({**GOOD, "window": ""}, "Invalid budgets"),
    ],
    ids=["unknown-profile", "unknown-user", "zero", "fractional-tokens", "not-a-number", "too-large", "no-window"],
)
def test_a_bad_budget_row_gets_its_error_beside_it_and_nothing_is_saved(admin_client, metered, bad, expected):
    versions = HostPolicyVersion.objects.count()

    response = admin_client.post(change_url(default_policy()), budget_form(GOOD, bad))

    assert response.status_code == 200
    errors = budget_row_errors(response.content.decode())
    assert list(errors) == [1] and expected in errors[1], errors
    assert HostPolicyVersion.objects.count() == versions
