"""Admin refuses an agent profile whose model could not run here, saying what is missing, and shows what a
profile's runs will use."""

from __future__ import annotations

import importlib.util

import pytest
from django.urls import reverse

from runs.harness import RunError
from runs.models import AgentProfile
from runs.services.store.providers import ModelChoice, build_model

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


@pytest.mark.parametrize(
    "base_url",
    [
        "http://169.254.169.254/latest/v1",
        "http://models.internal:8000/v1",
        "http://10.0.0.7:11434/v1",
        "ftp://127.0.0.1/v1",
    ],
)
def test_a_base_url_that_is_not_https_nor_on_this_machine_is_refused(admin_client, base_url):
    response = save(admin_client, "openai-chat:llama3.2", base_url)
    assert response.status_code == 200
    [error] = response.context["adminform"].form.errors["base_url"]
    assert "must use https" in error and "HARNESS_MODEL_HOSTS_ALLOWED" in error
    assert not AgentProfile.objects.exists()


@pytest.mark.parametrize(
    "base_url",
    [
        "https://models.example.com/v1",
        "http://localhost:11434/v1",
        "http://127.0.0.2:11434/v1",
        "http://[::1]:11434/v1",
        "http://MODELS.internal:8000/v1",
    ],
)
def test_https_this_machine_and_the_listed_hosts_are_accepted(admin_client, settings, base_url):
    settings.HARNESS_MODEL_HOSTS_ALLOWED = ["models.internal"]
    assert save(admin_client, "openai-chat:llama3.2", base_url).status_code == 302
    assert AgentProfile.objects.get().base_url == base_url


def test_a_name_that_would_read_another_profile_s_key_is_refused(admin_client):
    AgentProfile.objects.create(name="prod-llm", model="openai-chat:llama3.2", base_url="https://models.example/v1")
    form = {"name": "PROD_llm", "model": "demo", "base_url": "", "instructions": "", "enabled_tools": []}
    response = admin_client.post(reverse(ADD), form)
    [error] = response.context["adminform"].form.errors["name"]
    assert '"prod-llm" already reads its key from HARNESS_PROFILE_PROD_LLM_API_KEY' in error
    assert AgentProfile.objects.count() == 1


def test_the_profile_page_names_the_key_a_custom_base_url_gets(admin_client, monkeypatch):
    profile = AgentProfile.objects.create(name="local", model="openai-chat:llama3.2", base_url="http://[::1]:1/v1")
    url = reverse("admin:runs_agentprofile_change", args=[profile.pk])
    assert "no key (HARNESS_PROFILE_LOCAL_API_KEY is unset)" in admin_client.get(url).content.decode()
    monkeypatch.setenv("HARNESS_PROFILE_LOCAL_API_KEY", "sk-local")
    page = admin_client.get(url).content.decode()
    assert "key from HARNESS_PROFILE_LOCAL_API_KEY" in page and "sk-local" not in page


def test_the_worker_refuses_a_stored_profile_whose_base_url_is_not_allowed(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    with pytest.raises(RunError) as refused:
        build_model(ModelChoice("openai-chat:llama3.2", "http://169.254.169.254/v1", "p"))
    assert refused.value.code == "model_provider_not_ready"
    assert "must use https" in str(refused.value)
