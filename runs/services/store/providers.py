"""Model providers an agent profile may name: what each needs to run, checked before a run needs it.

A profile's model is "demo" (the offline model the `HARNESS_DEMO_MODEL` setting names: by default the demo
agent's scripted one) or a pydantic-ai model string "provider:model". For the providers below the Host knows the
package that serves them and where their key or server address comes from, so admin can refuse a profile that
could not run, and the worker can fail a run with a clear reason instead of an ImportError deep in pydantic-ai.
Keys are never stored: they come from the process environment.

A key goes only where the operator sent it. A provider's own variable (`OPENAI_API_KEY`, ...) goes to the
provider's default address or to the one in its `*_BASE_URL` variable, both set by the operator, never to a base
URL typed into a profile: staff who edit profiles could otherwise point one at their own server and read the key.
A profile with its own base URL sends the key in `HARNESS_PROFILE_<NAME>_API_KEY`, or none, and that URL must be
https unless its host is this machine or listed in `HARNESS_MODEL_HOSTS_ALLOWED`.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.module_loading import import_string
from pydantic_ai.models import Model, infer_model
from pydantic_ai.providers import Provider, infer_provider, infer_provider_class

from runs.harness import RunError

__all__ = (
    "DEMO_MODEL",
    "PROVIDERS",
    "ModelChoice",
    "ProviderSpec",
    "base_url_problem",
    "build_model",
    "model_problems",
    "profile_key_variable",
)

DEMO_MODEL = "demo"
# pydantic-ai's own offline TestModel (calls every tool once, then answers); used by tests and smoke checks.
TEST_MODEL = "test"
# What an OpenAI-compatible server that ignores keys (Ollama, vLLM, LM Studio) is sent when no key is set.
NO_KEY = "not-needed"
LOOPBACK_NAMES = frozenset({"localhost"})


@dataclass(frozen=True)
class ProviderSpec:
    label: str
    module: str
    extra: str
    key_variables: tuple[str, ...] = ()
    base_url_variable: str | None = None
    # A local server needs an address rather than a key.
    needs_base_url: bool = False

    @property
    def accepts_base_url(self) -> bool:
        return self.base_url_variable is not None


_OPENAI = ProviderSpec("OpenAI", "openai", "openai", ("OPENAI_API_KEY",), "OPENAI_BASE_URL")
PROVIDERS: Mapping[str, ProviderSpec] = {
    "openai": _OPENAI,
    "openai-responses": _OPENAI,
    "openai-chat": ProviderSpec(
        "OpenAI-compatible chat completions", "openai", "openai", ("OPENAI_API_KEY",), "OPENAI_BASE_URL"
    ),
    "anthropic": ProviderSpec("Anthropic", "anthropic", "anthropic", ("ANTHROPIC_API_KEY",)),
    "google": ProviderSpec("Google Gemini", "google.genai", "google", ("GOOGLE_API_KEY", "GEMINI_API_KEY")),
    "ollama": ProviderSpec("Ollama", "openai", "openai", (), "OLLAMA_BASE_URL", needs_base_url=True),
}


def profile_key_variable(profile_name: str) -> str:
    """The environment variable holding the key a profile with its own base URL sends (none when it is unset)."""
    return f"HARNESS_PROFILE_{profile_name.upper().replace('-', '_')}_API_KEY"


def base_url_problem(base_url: str) -> str | None:
    """Why a profile may not send requests to `base_url`, or None: https, or plain http to a trusted host."""
    if not base_url:
        return None
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    if parts.scheme == "https" and host:
        return None
    if parts.scheme == "http" and (_loopback(host) or host in settings.HARNESS_MODEL_HOSTS_ALLOWED):
        return None
    return (
        f"The base URL must use https; plain http is allowed only to this machine (localhost, 127.0.0.1, ::1) "
        f"or to a host listed in HARNESS_MODEL_HOSTS_ALLOWED, and {host or 'this URL'!r} is neither."
    )


def _loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ModelChoice:
    """A profile's model string and server address, parsed, with the profile's name (which names its key)."""

    model: str
    base_url: str = ""
    profile: str = ""

    @property
    def is_demo(self) -> bool:
        return self.model == DEMO_MODEL

    @property
    def is_offline(self) -> bool:
        return self.model in (DEMO_MODEL, TEST_MODEL)

    @property
    def provider_name(self) -> str:
        return self.model.partition(":")[0] if ":" in self.model else ""

    @property
    def model_name(self) -> str:
        return self.model.partition(":")[2]

    @property
    def spec(self) -> ProviderSpec | None:
        return PROVIDERS.get(self.provider_name)

    def effective_base_url(self, environ: Mapping[str, str]) -> str:
        spec = self.spec
        if self.base_url or spec is None or spec.base_url_variable is None:
            return self.base_url
        return environ.get(spec.base_url_variable, "")

    def describe(self, environ: Mapping[str, str] | None = None) -> str:
        """One line for pages: which provider and model a run of this profile will use."""
        if self.is_demo:
            return "the offline demo model (scripted, no provider)"
        if self.is_offline:
            return "pydantic-ai's offline TestModel (no provider)"
        spec = self.spec
        if spec is None:
            return f"{self.model} (unknown provider)"
        environ = os.environ if environ is None else environ
        where = self.effective_base_url(environ)
        described = f"{spec.label}, model {self.model_name}" + (f", at {where}" if where else "")
        if not self.base_url:
            return described
        variable = profile_key_variable(self.profile)
        return described + (f", key from {variable}" if environ.get(variable) else f", no key ({variable} is unset)")

    def api_key(self, environ: Mapping[str, str]) -> str:
        """The key sent to the effective base URL: the profile's own for a profile's URL, else the provider's."""
        if self.base_url:
            return environ.get(profile_key_variable(self.profile)) or NO_KEY
        spec = self.spec
        variables = spec.key_variables if spec is not None else ()
        return next((environ[name] for name in variables if environ.get(name)), NO_KEY)


def model_problems(choice: ModelChoice, environ: Mapping[str, str] | None = None) -> list[str]:
    """Why a run of this model could not start in a process with `environ`; empty when it can."""
    environ = os.environ if environ is None else environ
    if choice.is_offline:
        return [] if not choice.base_url else [f'The "{choice.model}" model takes no base URL.']
    if not choice.provider_name or not choice.model_name:
        return [
            f'Write the model as "provider:model" (for example "openai:gpt-4o"), or "{DEMO_MODEL}" for the '
            "offline demo."
        ]
    spec = choice.spec
    if spec is None:
        return [f'Unknown provider "{choice.provider_name}". Known providers: {", ".join(PROVIDERS)}.']
    problems = []
    if choice.base_url and not spec.accepts_base_url:
        problems.append(f"{spec.label} takes no base URL.")
    elif problem := base_url_problem(choice.base_url):
        problems.append(problem)
    if not _importable(spec.module):
        problems.append(
            f'The "{spec.module}" package is not installed: install the project with its "{spec.extra}" extra '
            f"(pip install -e '.[{spec.extra}]')."
        )
    base_url = choice.effective_base_url(environ)
    if spec.needs_base_url and not base_url:
        problems.append(f"Set the server's base URL on the profile or in {spec.base_url_variable}.")
    elif spec.key_variables and not base_url and not any(environ.get(name) for name in spec.key_variables):
        needed = " or ".join(spec.key_variables)
        problems.append(
            f"Set {needed} in the environment of the web and worker processes"
            + (" (or give a base URL for an OpenAI-compatible server)." if spec.accepts_base_url else ".")
        )
    return problems


def build_model(choice: ModelChoice, environ: Mapping[str, str] | None = None) -> Model:
    """The pydantic-ai model a run uses; a model that cannot run fails here, before the run starts."""
    if choice.is_demo:
        demo_model: Model = import_string(settings.HARNESS_DEMO_MODEL)()
        return demo_model
    if choice.model == TEST_MODEL:
        return infer_model(TEST_MODEL)
    environ = os.environ if environ is None else environ
    problems = model_problems(choice, environ)
    if problems:
        raise RunError(f"The model {choice.model!r} cannot run: {' '.join(problems)}", code="model_provider_not_ready")
    base_url = choice.effective_base_url(environ)
    if not base_url:
        return infer_model(choice.model)

    def provider_at_base_url(name: str) -> Provider[Any]:
        if name != choice.provider_name:
            return infer_provider(name)
        # The providers reached here are OpenAI-compatible ones, which take both; `Provider` itself declares neither.
        return infer_provider_class(name)(base_url=base_url, api_key=choice.api_key(environ))  # type: ignore[call-arg]

    return infer_model(choice.model, provider_factory=provider_at_base_url)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False
