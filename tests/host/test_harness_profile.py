"""`manage.py harness_profile`: create or update an agent profile, validated by the admin's form."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.forms import model_to_dict

from runs.models import AgentProfile

pytestmark = pytest.mark.django_db

FIELDS = ["name", "model", "base_url", "instructions", "enabled_tools"]


def harness_profile(*argv: str) -> str:
    out = StringIO()
    call_command("harness_profile", *argv, stdout=out)
    return out.getvalue()


def stored() -> list[dict]:
    return [model_to_dict(profile, fields=FIELDS) for profile in AgentProfile.objects.order_by("name")]


def test_creates_a_profile_then_changes_only_what_is_given(tmp_path):
    said = harness_profile(
        "support", "--model", "demo", "--instructions", "Be brief.", "--tools", "lookup_record, search_records"
    )
    assert said == "Created agent profile 'support': model demo, lookup_record, search_records.\n"

    instructions = tmp_path / "support.md"
    instructions.write_text("Answer in French.\n")
    said = harness_profile("support", "--instructions-file", str(instructions))

    assert said == "Updated agent profile 'support': model demo, lookup_record, search_records.\n"
    assert stored() == [
        {
            "name": "support",
            "model": "demo",
            "base_url": "",
            # Stripped, as the admin's form strips what is typed there.
            "instructions": "Answer in French.",
            "enabled_tools": ["lookup_record", "search_records"],
        }
    ]
    assert harness_profile("support", "--tools", "") == "Updated agent profile 'support': model demo, no tools.\n"
    assert harness_profile("support", "--model", "demo") == "Agent profile 'support' is unchanged.\n"


@pytest.mark.parametrize(
    ("argv", "messages"),
    [
        (["--model", "demo", "--tools", "lookup_record,rm_rf"], ["enabled_tools: Select a valid", "Host tools:"]),
        (["--model", "openai:gpt-4o"], ["model: Set OPENAI_API_KEY"]),
        (["--model", "no-such-provider:x"], ["model: "]),
        (["--model", "demo", "--base-url", "not a url"], ["base_url: Enter a valid URL."]),
    ],
)
def test_bad_input_is_refused_with_the_admin_forms_messages_and_changes_nothing(monkeypatch, argv, messages):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    harness_profile("kept", "--model", "demo", "--tools", "lookup_record")
    before = stored()

    for name in ("kept", "fresh"):
        with pytest.raises(CommandError) as refused:
            harness_profile(name, *argv)
        assert refused.value.returncode == 1
        text = str(refused.value)
        assert text.startswith(f"Agent profile '{name}' was not saved:")
        assert all(message in text for message in messages), text

    assert stored() == before


def test_a_new_profile_needs_a_model():
    with pytest.raises(CommandError, match="model: This field is required"):
        harness_profile("support", "--instructions", "Be brief.")
    assert not AgentProfile.objects.exists()


def test_a_name_that_is_not_a_slug_is_refused():
    with pytest.raises(CommandError, match="name: Enter a valid"):
        harness_profile("two words", "--model", "demo")
    assert not AgentProfile.objects.exists()


def test_unreadable_instructions_change_nothing(tmp_path):
    with pytest.raises(CommandError, match="Cannot read the instructions"):
        harness_profile("support", "--model", "demo", "--instructions-file", str(tmp_path / "missing.md"))
    assert not AgentProfile.objects.exists()
