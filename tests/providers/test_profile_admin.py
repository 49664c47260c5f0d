"""Admin refuses an agent profile whose model could not run here, saying what is missing, and shows what a
profile's runs will use."""

from __future__ import annotations

import importlib.util

import pytest
from django.urls import reverse

from runs.models import AgentProfile

pytestmark = pytest.mark.django_db

ADD = "admin:runs_agentprofile_add"


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OLLAMA_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def save(admin_client, model: str, base_url: str = ""):
    form = {"name": "p", "model": model, "base_url": base_url, "instructions": "", "enabled_tools": []}
    return admin_client.post(reverse(ADD), form)


def model_errors(response) -> list[str]:
    return list(response.context["adminform"].form.errors.get("model", []))


@pytest.mark.parametrize(
    ("model", "base_url", "expected"),
    [
        ("gpt-4o", "", 'Write the model as "provider:model"'),
        ("openai:", "", 'Write the model as "provider:model"'),
        ("nosuchprovider:model", "", 'Unknown provider "nosuchprovider"'),
        ("openai:gpt-4o", "", "Set OPENAI_API_KEY"),
        ("ollama:llama3.2", "", "OLLAMA_BASE_URL"),
        ("demo", "http://127.0.0.1:11434/v1", "takes no base URL"),
    ],
)
def test_a_model_that_could_not_run_is_a_form_error_naming_what_is_missing(admin_client, model, base_url, expected):
    response = save(admin_client, model, base_url)
    assert response.status_code == 200
    assert any(expected in error for error in model_errors(response)), model_errors(response)
    assert not AgentProfile.objects.exists()


@pytest.mark.skipif(importlib.util.find_spec("anthropic") is not None, reason="the anthropic package is installed")
def test_a_provider_whose_package_is_missing_names_the_extra_to_install(admin_client, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    errors = model_errors(save(admin_client, "anthropic:claude-sonnet-4-5"))
    assert errors == [
        'The "anthropic" package is not installed: install the project with its "anthropic" extra '
        "(pip install -e '.[anthropic]')."
    ]


@pytest.mark.parametrize(
    ("model", "base_url", "env"),
    [
        ("demo", "", {}),
        ("openai:gpt-4o", "", {"OPENAI_API_KEY": "sk-test"}),
        ("openai-chat:llama3.2", "http://127.0.0.1:11434/v1", {}),
        ("ollama:llama3.2", "", {"OLLAMA_BASE_URL": "http://127.0.0.1:11434/v1"}),
    ],
)
def test_a_model_that_can_run_is_saved(admin_client, monkeypatch, model, base_url, env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert save(admin_client, model, base_url).status_code == 302
    assert AgentProfile.objects.get().model == model


def test_the_profile_page_says_which_provider_and_model_a_run_uses(admin_client):
    profile = AgentProfile.objects.create(
        name="local", model="openai-chat:llama3.2", base_url="http://127.0.0.1:11434/v1"
    )
    page = admin_client.get(reverse("admin:runs_agentprofile_change", args=[profile.pk])).content.decode()
    assert "OpenAI-compatible chat completions, model llama3.2, at http://127.0.0.1:11434/v1" in page

    broken = AgentProfile.objects.create(name="broken", model="openai:gpt-4o")
    listing = admin_client.get(reverse("admin:runs_agentprofile_changelist")).content.decode()
    assert "cannot run here: Set OPENAI_API_KEY" in listing
    assert broken.name in listing
